// One selection row of a chunk as the ranking kernels see it (RankKernel in common_kernels.cu, the RankTopK family
// in index_kernels.cu): where its block scores and its output slots are, and its forced blocks by the one rule of
// include/msa/forced_blocks.h (SPEC section 2: init blocks and the last local_blocks visible blocks). A kernel ranks
// the candidates [forced.init_end, forced.local_begin), writes the best forced.take of them to out[0, take), and
// WriteForcedTail writes the rest of the row.
#ifndef MSA_GPU_RANK_ROW_CUH_
#define MSA_GPU_RANK_ROW_CUH_

#include <cstdint>

#include "gpu/kernels.h"
#include "msa/forced_blocks.h"

namespace msa::gpu {

// A block score and id as one 64-bit key whose unsigned order is the ranking order: score descending (the
// float's bits mapped to an order-preserving unsigned; -0 folded into +0 first), then id ascending.
__device__ inline unsigned long long RankKey(float score, int64_t id) {
  uint32_t bits = __float_as_uint(score + 0.0f);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<unsigned long long>(bits) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}

// The take-th largest (1 <= take <= 32) of the 32 lanes' lane_max, the zeros (lanes without candidates) tying at
// the bottom: the smallest lane_max that fewer than `take` lanes beat (0 when fewer than `take` lanes hold one). When
// lane j's lane_max is the largest of a set of distinct keys, the take-th best of all their keys is >= it. Every lane
// of the warp calls it and gets it.
__device__ inline unsigned long long TakeThLargestOfLanes(unsigned long long lane_max, int take, int lane) {
  constexpr unsigned kAllLanes = 0xffffffffu;
  int above = 0;  // lanes whose maximum beats this lane's (zeros tie)
#pragma unroll
  for (int i = 1; i < 32; ++i) above += __shfl_sync(kAllLanes, lane_max, (lane + i) & 31) > lane_max;
  unsigned long long threshold = above < take ? lane_max : ~0ull;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_xor_sync(kAllLanes, threshold, offset);
    threshold = other < threshold ? other : threshold;
  }
  return threshold;
}

// The block id of a RankKey.
__device__ inline int32_t BlockOfKey(unsigned long long key) {
  return int32_t(0xffffffffu - static_cast<uint32_t>(key));
}

template <typename S>
struct RankRow {
  ForcedBlocks forced;        // of the row's query: visible blocks 0..forced.local
  const S* scores = nullptr;  // [max_blocks] of the row (nullptr where the kernel reads none)
  int32_t* out = nullptr;     // [top_k] of the row in topk [Hidx, total_q, top_k]
};

// Chunk row `row` ((t - t0) * Hidx + r) of `g`; bs: the chunk's block scores [rows, max_blocks], or nullptr.
template <typename S>
__device__ inline RankRow<S> PlaceRankRow(const S* bs, const ChunkGeometry& g, int32_t* topk, int64_t row) {
  RankRow<S> p;
  const int64_t t_local = row / g.hidx, r = row % g.hidx;
  const int64_t visible = (g.pos0 + t_local) / g.bk + 1;
  p.forced = ForcedBlocksOf(visible, g.init_blocks, g.local_blocks, g.top_k);
  p.scores = bs != nullptr ? bs + row * g.max_blocks : nullptr;
  p.out = topk + (r * g.total_q + g.t0 + t_local) * int64_t(g.top_k);
  return p;
}

// The most ranked candidates of any row of the chunk: those of its last query (batched: of the latest query of
// any sequence), whose row sees the most blocks.
inline int64_t MostCandidates(const ChunkGeometry& g) {
  const int64_t visible = (g.pos0 + g.nq - 1) / g.bk + 1;
  return ForcedBlocksOf(visible, g.init_blocks, g.local_blocks, g.top_k).candidates();
}

// Slots [take, top_k) of a row whose first `take` slots hold its ranked candidates: the init blocks ascending,
// the trailing forced blocks ascending (the local block last), then -1 padding. One thread writes. In 32 bits (block
// ids are int32 in topk): kept across the ranking loops, 64-bit bounds cost RankTopKThresholdKernel<16> spills.
__device__ inline void WriteForcedTail(const ForcedBlocks& f, int top_k, int32_t* out) {
  int slot = int(f.take);
  const int32_t init_end = int32_t(f.init_end), local_begin = int32_t(f.local_begin), local = int32_t(f.local);
  for (int32_t b = 0; b < init_end; ++b) out[slot++] = b;
  for (int32_t b = local_begin; b <= local; ++b) out[slot++] = b;
  while (slot < top_k) out[slot++] = -1;
}

}  // namespace msa::gpu

#endif  // MSA_GPU_RANK_ROW_CUH_
