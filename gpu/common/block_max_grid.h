// The grid of the block-max kernels (BlockMaxScores, BlockMaxScoresWgmma, gpu/kernels.h), as plain data so that it
// is tested on the CPU: x = the chunk's rows in tiles of cta_rows (latest rows first), y = its key blocks in spans of
// blocks_per_cta, z = the sequences of a batched chunk (1 otherwise). The CTAs are issued x fastest, so the CTAs
// resident at one time work on one or two key spans.
//
// The key blocks are split for two reasons, whichever asks for more spans:
// - until one wave of CTAs exists (ctas_per_sm resident CTAs on each SM): decode and short chunks;
// - so that one span's index keys take at most a quarter of the L2 cache (when the device's L2 is known):
//   long chunks. Without it the CTAs of a long chunk, each streaming every key up to its rows, drift apart in phase
//   and the keys they read in one CTA's lifetime outgrow the L2 (the whole chunk's keys: 268 MB at 1M). With it the
//   resident CTAs' keys (two spans at most) stay in the L2: on an H100, the 512K prefill's last index launch went
//   from 94.1% to 99.8% L2 hits and ran 3% shorter (bench/results/index_span_2026-12-06.md).
// In a batched chunk x and y are sized for the longest sequence (the bounding nq and pos0), the waves counted over
// all sequences, and the CTAs past a shorter sequence's rows or blocks exit at once.
#ifndef MSA_GPU_COMMON_BLOCK_MAX_GRID_H_
#define MSA_GPU_COMMON_BLOCK_MAX_GRID_H_

#include <cstdint>

#include "gpu/common/device_caps.h"
#include "gpu/common/geometry.h"
#include "msa/host_device.h"

namespace msa::gpu {

struct BlockMaxGrid {
  int64_t tiles_x = 0, splits = 0, sequences = 0;  // grid x, y, z
  int64_t blocks_per_cta = 0;                      // key blocks of one span (the last span may be shorter)
};

// key_bytes: the bytes of one index key (Di elements).
BlockMaxGrid PlanBlockMaxGrid(const DeviceCaps& caps, const ChunkGeometry& g, int cta_rows, int ctas_per_sm,
                              int64_t key_bytes);

// The running top-k (topk=running, gpu/kernels.h BlockMaxTopKWgmma and MergeRunningTopK): the block-max kernel's
// 128-row CTAs (two warpgroups) keep each row's best candidates of their key span, and the merge takes a row's spans
// with one lane each. So its grid is PlanBlockMaxGrid's for one CTA per SM (the kernel's shared memory leaves room for
// no second), with the spans lengthened where needed to make at most kRunningTopKMaxSplits of them. Its index keys
// are bf16 or fp16 (the running top-k has no e4m3 form): Di * 2 bytes each.
inline constexpr int kRunningTopKCtaRows = 128;
inline constexpr int64_t kRunningTopKMaxSplits = 32;
BlockMaxGrid PlanRunningTopKGrid(const DeviceCaps& caps, const ChunkGeometry& g);
// Entries of one span's list of a row: the most candidates a row ranks, top_k - 1 (its local block is always forced).
MSA_HOST_DEVICE inline int64_t RunningTopKListLength(int top_k) { return top_k > 1 ? top_k - 1 : 0; }
// 64-bit entries of the chunk's lists: [nq * Hidx rows][splits][RunningTopKListLength].
int64_t RunningTopKListEntries(const DeviceCaps& caps, const ChunkGeometry& g);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_BLOCK_MAX_GRID_H_
