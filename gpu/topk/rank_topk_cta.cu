// RankTopKCta: the selection of each chunk row from fp32 block scores with one CTA per row, RankTopK's selection bit
// for bit, for chunks of few rows with many candidates (decode), where RankTopK's one warp per row and
// RankTopKThreshold's split rows spend their time in dependent warp-wide rounds (one per selected block).
#include <algorithm>
#include <cstdint>

#include "gpu/common/chunk.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row_cta.cuh"

namespace msa::gpu {
namespace {

constexpr int kMaxThreads = 1024;

// RankTopKCtaKernel: one CTA per chunk row (RankRowCta, rank_row_cta.cuh), latest rows first. A batched chunk:
// blockIdx.y is the sequence (EnterSequence), its rows at their offset in the block scores. Dynamic shared memory: 8
// bytes per candidate of the chunk's longest row.
__global__ void __launch_bounds__(kMaxThreads) RankTopKCtaKernel(const float* bs, ChunkGeometry g, int32_t* topk) {
  extern __shared__ unsigned long long survivors[];
  __shared__ unsigned long long group_max[32];
  __shared__ unsigned long long threshold;
  __shared__ int survivor_count;
  AllowDependents();  // a dependent main branch (split-k) may launch now; it waits for this grid's end
  WaitForPrimary();   // launched as a dependent of the index kernel: its block scores complete from here
  bs += EnterSequence(g, blockIdx.y) * g.max_blocks;
  const int64_t rows = g.nq * g.hidx;
  if (blockIdx.x >= rows) return;  // the whole CTA (a batched chunk's shorter sequence)
  const RankRow<float> p = PlaceRankRow(bs, g, topk, rows - 1 - int64_t(blockIdx.x));
  RankRowCta</*kFromL2=*/false>(p, g.top_k, RankRowCtaShared{survivors, group_max, &threshold, &survivor_count});
}

}  // namespace

cudaError_t RankTopKCta(const float* bs, const ChunkGeometry& g, int32_t* topk, cudaStream_t stream) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  const int64_t candidates = MostCandidates(g);
  if (!RankTopKCtaFits(g.top_k, candidates, CurrentDeviceCaps()) || rows > 2147483647) return cudaErrorInvalidValue;
  const int threads = int(std::clamp<int64_t>((candidates + 31) / 32 * 32, 32, kMaxThreads));
  const size_t smem = size_t(std::max<int64_t>(candidates, 1)) * kRankTopKCtaBytesPerCandidate;
  const cudaError_t err =
      cudaFuncSetAttribute(RankTopKCtaKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid{unsigned(rows), unsigned(g.num_sequences)};
  return LaunchDependent(RankTopKCtaKernel, grid, dim3{unsigned(threads)}, smem, stream, bs, g, topk);
}

}  // namespace msa::gpu
