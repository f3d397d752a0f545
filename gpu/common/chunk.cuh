// Device side of batched chunks (gpu/kernels.h ChunkGeometry::sequences): a CTA's step from the batch's bounding
// geometry into its own sequence's chunk, after which the one-chunk kernel code runs unchanged.
#ifndef MSA_GPU_CHUNK_CUH_
#define MSA_GPU_CHUNK_CUH_

#include <cstdint>

#include "gpu/kernels.h"

namespace msa::gpu {

// A plain chunk: g unchanged, returns 0. A batched chunk: g becomes sequence `seq`'s chunk (t0, nq, pos0,
// key_begin, k_len; the rest is shared), and the return value is the first row of that sequence in the batch's rows
// ((t - t0) * Hidx + r with the batch's t0): the offset of its rows in the block-score buffer and in any per-row
// workspace.
__device__ inline int64_t EnterSequence(ChunkGeometry& g, int64_t seq) {
  if (g.sequences == nullptr) return 0;
  const SequenceChunk chunk = g.sequences[seq];
  const int64_t first_row = (chunk.t0 - g.t0) * g.hidx;
  g.t0 = chunk.t0;
  g.nq = chunk.nq;
  g.pos0 = chunk.pos0;
  g.key_begin = chunk.key_begin;
  g.k_len = chunk.k_len;
  return first_row;
}

}  // namespace msa::gpu

#endif  // MSA_GPU_CHUNK_CUH_
