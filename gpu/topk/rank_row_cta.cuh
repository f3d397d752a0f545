// One selection row ranked by one CTA (RankTopKCta's row, rank_topk_cta.cu): shared by RankTopKCta and BlockMaxRank
// (block_max_rank.cu), which give RankTopK's selection.
#ifndef MSA_GPU_TOPK_RANK_ROW_CTA_CUH_
#define MSA_GPU_TOPK_RANK_ROW_CTA_CUH_

#include <cstdint>

#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {

// The CTA's shared scratch for RankRowCta: survivors [the row's candidates], the 32 group maxima, the threshold and
// the survivor count.
struct RankRowCtaShared {
  unsigned long long* survivors;
  unsigned long long* group_max;  // [32]
  unsigned long long* threshold;
  int* survivor_count;
};

// The score of candidate b of the row: kFromL2 reads it with ld.global.cg (written by other CTAs of the same grid,
// never a stale L1 line), else with a plain load (written by an earlier grid).
template <bool kFromL2>
__device__ inline float CandidateScore(const float* scores, int64_t b) {
  if constexpr (kFromL2) {
    return __ldcg(scores + b);
  } else {
    return scores[b];
  }
}

// docs:begin gpu-rank-topk-cta
// RankRowCta: row p ranked by the whole CTA (every thread calls it; its scratch free on entry and again on return).
// Thread i takes the candidates init_end + i, init_end + i + blockDim.x, ... (coalesced; blockDim.x a multiple of 32),
// so the candidates fall into 32 groups by lane (group l: the candidates init_end + l + 32 j).
//   threshold  each group's largest key (RankKey; shared atomicMax, order-free) and T = the take-th largest of the 32
//              group maxima (TakeThLargestOfLanes; take <= 32, since top_k <= 33 and the local block is always
//              forced). The take groups ranked at or above T hold distinct keys >= T, so every key of the row's best
//              take is >= T.
//   survivors  each thread re-reads its candidates and appends its keys >= T to shared memory at an atomic slot
//              (any order): on random scores about take + a few, at most the row's candidates.
//   rank       a survivor's rank is the number of survivors above it (keys are unique, so ranks are distinct): the
//              survivors of rank < take are the row's best take in RankTopK's order (score desc, id asc), each
//              written by its thread to out[rank]. The survivors' order in shared memory changes no rank: the
//              output is deterministic.
// Then thread 0 writes the forced blocks and -1 padding (WriteForcedTail).
template <bool kFromL2>
__device__ inline void RankRowCta(const RankRow<float>& p, int top_k, const RankRowCtaShared& s) {
  const ForcedBlocks& f = p.forced;
  const int take = int(f.take), lane = int(threadIdx.x % 32);
  if (threadIdx.x < 32) s.group_max[threadIdx.x] = 0;  // 0: below every real key
  if (threadIdx.x == 0) *s.survivor_count = 0;
  if (take > 0) {  // the same for the whole CTA
    unsigned long long best = 0;
    for (int64_t b = f.init_end + threadIdx.x; b < f.local_begin; b += blockDim.x) {
      const unsigned long long key = RankKey(CandidateScore<kFromL2>(p.scores, b), b);
      best = key > best ? key : best;
    }
    __syncthreads();  // group_max zeroed
    if (best != 0) atomicMax(&s.group_max[lane], best);
    __syncthreads();
    if (threadIdx.x < 32) {
      const unsigned long long t = TakeThLargestOfLanes(s.group_max[lane], take, lane);
      if (lane == 0) *s.threshold = t;
    }
    __syncthreads();
    const unsigned long long t = *s.threshold;
    for (int64_t b = f.init_end + threadIdx.x; b < f.local_begin; b += blockDim.x) {
      const unsigned long long key = RankKey(CandidateScore<kFromL2>(p.scores, b), b);
      if (key >= t) s.survivors[atomicAdd(s.survivor_count, 1)] = key;
    }
    __syncthreads();
    const int count = *s.survivor_count;
    for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) {
      const unsigned long long key = s.survivors[i];
      int rank = 0;
      for (int j = 0; j < count; ++j) rank += s.survivors[j] > key;  // every lane reads survivors[j]: a broadcast
      if (rank < take) p.out[rank] = BlockOfKey(key);
    }
  }
  if (threadIdx.x == 0) WriteForcedTail(f, top_k, p.out);
  __syncthreads();  // the scratch free again
}
// docs:end gpu-rank-topk-cta

}  // namespace msa::gpu

#endif  // MSA_GPU_TOPK_RANK_ROW_CTA_CUH_
