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
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

constexpr int kMaxThreads = 1024;

// docs:begin gpu-rank-topk-cta
// RankTopKCtaKernel: one CTA per chunk row, latest rows first. Thread i takes the candidates init_end + i,
// init_end + i + blockDim.x, ... (coalesced; blockDim.x a multiple of 32), so the candidates fall into 32 groups by
// lane (group l: the candidates init_end + l + 32 j).
//   threshold  each group's largest key (RankKey; shared atomicMax, order-free) and T = the take-th largest of the 32
//              group maxima (TakeThLargestOfLanes; take <= 32, since top_k <= 33 and the local block is always
//              forced). The take groups ranked at or above T hold distinct keys >= T, so every key of the row's best
//              take is >= T.
//   survivors  each thread re-reads its candidates (L1) and appends its keys >= T to shared memory at an atomic slot
//              (any order): on random scores about take + a few, at most the row's candidates.
//   rank       a survivor's rank is the number of survivors above it (keys are unique, so ranks are distinct): the
//              survivors of rank < take are the row's best take in RankTopK's order (score desc, id asc), each
//              written by its thread to out[rank]. The survivors' order in shared memory changes no rank: the
//              output is deterministic.
// Then thread 0 writes the forced blocks and -1 padding (WriteForcedTail). A batched chunk: blockIdx.y is the sequence
// (EnterSequence), its rows at their offset in the block scores. Dynamic shared memory: 8 bytes per candidate of the
// chunk's longest row.
__global__ void __launch_bounds__(kMaxThreads) RankTopKCtaKernel(const float* bs, ChunkGeometry g, int32_t* topk) {
  extern __shared__ unsigned long long survivors[];
  __shared__ unsigned long long group_max[32];
  __shared__ unsigned long long threshold;
  __shared__ int survivor_count;
  if (threadIdx.x < 32) group_max[threadIdx.x] = 0;  // 0: below every real key
  if (threadIdx.x == 0) survivor_count = 0;
  AllowDependents();  // a dependent main branch (split-k) may launch now; it waits for this grid's end
  WaitForPrimary();   // launched as a dependent of the index kernel: its block scores complete from here
  bs += EnterSequence(g, blockIdx.y) * g.max_blocks;
  const int64_t rows = g.nq * g.hidx;
  if (blockIdx.x >= rows) return;  // the whole CTA (a batched chunk's shorter sequence)
  const RankRow<float> p = PlaceRankRow(bs, g, topk, rows - 1 - int64_t(blockIdx.x));
  const ForcedBlocks& f = p.forced;
  const int take = int(f.take), lane = int(threadIdx.x % 32);
  if (take > 0) {  // the same for the whole CTA
    unsigned long long best = 0;
    for (int64_t b = f.init_end + threadIdx.x; b < f.local_begin; b += blockDim.x) {
      const unsigned long long key = RankKey(p.scores[b], b);
      best = key > best ? key : best;
    }
    __syncthreads();  // group_max zeroed
    if (best != 0) atomicMax(&group_max[lane], best);
    __syncthreads();
    if (threadIdx.x < 32) {
      const unsigned long long t = TakeThLargestOfLanes(group_max[lane], take, lane);
      if (lane == 0) threshold = t;
    }
    __syncthreads();
    const unsigned long long t = threshold;
    for (int64_t b = f.init_end + threadIdx.x; b < f.local_begin; b += blockDim.x) {
      const unsigned long long key = RankKey(p.scores[b], b);
      if (key >= t) survivors[atomicAdd(&survivor_count, 1)] = key;
    }
    __syncthreads();
    const int count = survivor_count;
    for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) {
      const unsigned long long key = survivors[i];
      int rank = 0;
      for (int j = 0; j < count; ++j) rank += survivors[j] > key;  // every lane reads survivors[j]: a broadcast
      if (rank < take) p.out[rank] = BlockOfKey(key);
    }
  }
  if (threadIdx.x == 0) WriteForcedTail(f, g.top_k, p.out);
}
// docs:end gpu-rank-topk-cta

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
