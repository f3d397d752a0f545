#include "gpu/common/block_max_grid.h"

#include <algorithm>

namespace msa::gpu {
namespace {

// One key span's share of the L2: the resident CTAs work on two spans at most, leaving half of it to the queries
// and the block scores streaming through.
constexpr int64_t kKeySpansPerL2 = 4;

}  // namespace

BlockMaxGrid PlanBlockMaxGrid(const DeviceCaps& caps, const ChunkGeometry& g, int cta_rows, int ctas_per_sm,
                              int64_t key_bytes) {
  const int64_t rows = g.nq * g.hidx;
  const int64_t tiles_x = (rows + cta_rows - 1) / cta_rows;
  const int64_t num_blocks = (g.pos0 + g.nq - 1) / g.bk + 1;  // of the longest row (batched: of any sequence)
  const int64_t tiles = tiles_x * g.num_sequences;
  int64_t splits = (int64_t(std::max(ctas_per_sm, 1)) * caps.sm_count + tiles - 1) / tiles;
  const int64_t span_bytes = int64_t(g.bk) * key_bytes;
  const int64_t most_blocks_in_l2 = span_bytes > 0 ? caps.l2_bytes / kKeySpansPerL2 / span_bytes : 0;
  if (most_blocks_in_l2 > 0) splits = std::max(splits, (num_blocks + most_blocks_in_l2 - 1) / most_blocks_in_l2);
  splits = std::min<int64_t>({splits, num_blocks, 65535});
  BlockMaxGrid plan;
  plan.blocks_per_cta = (num_blocks + splits - 1) / splits;
  plan.tiles_x = tiles_x;
  plan.splits = (num_blocks + plan.blocks_per_cta - 1) / plan.blocks_per_cta;
  plan.sequences = g.num_sequences;
  return plan;
}

BlockMaxGrid PlanRunningTopKGrid(const DeviceCaps& caps, const ChunkGeometry& g) {
  const int64_t key_bytes = int64_t(g.di) * 2;  // bf16 / fp16
  BlockMaxGrid plan = PlanBlockMaxGrid(caps, g, kRunningTopKCtaRows, /*ctas_per_sm=*/1, key_bytes);
  if (plan.splits > kRunningTopKMaxSplits) {
    const int64_t num_blocks = (g.pos0 + g.nq - 1) / g.bk + 1;
    plan.blocks_per_cta = (num_blocks + kRunningTopKMaxSplits - 1) / kRunningTopKMaxSplits;
    plan.splits = (num_blocks + plan.blocks_per_cta - 1) / plan.blocks_per_cta;
  }
  return plan;
}

int64_t RunningTopKListEntries(const DeviceCaps& caps, const ChunkGeometry& g) {
  return g.nq * g.hidx * PlanRunningTopKGrid(caps, g).splits * RunningTopKListLength(g.top_k);
}

}  // namespace msa::gpu
