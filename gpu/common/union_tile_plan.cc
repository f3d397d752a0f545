#include "gpu/common/union_tile_plan.h"

#include <algorithm>
#include <cmath>

namespace msa::gpu {

int64_t MaxUnionForPathU(const Config& config, int64_t tile_queries, int64_t selected_blocks,
                         const UnionTileCeilings& ceilings) {
  const double heads = double(config.num_q_heads / config.num_kv_heads);
  const double k_bytes = double(selected_blocks) * heads * (2.0 * config.head_dim + 2.0 * (2.0 * config.value_dim + 8));
  const double k_seconds = k_bytes / ceilings.copy_bytes_per_s;
  const double u_flops_per_block =
      double(tile_queries) * heads * config.block_size * (config.head_dim + config.value_dim) * 2.0;
  return int64_t(std::floor(k_seconds * ceilings.gemm_flops_per_s / u_flops_per_block));
}

int64_t UnionTilePlan::u_tiles() const { return std::count(path_u.begin(), path_u.end(), uint8_t{1}); }

void PlanUnionTiles(const Config& config, const Batch& batch, const int32_t* topk_indices,
                    const UnionTileCeilings& ceilings, UnionTilePlan* plan) {
  const int64_t total_q = batch.total_q(), groups = config.num_kv_heads, top_k = config.top_k;
  std::vector<int64_t> tile_first;  // the first query of each tile, in order
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    for (int64_t t = batch.cu_seqlens_q[s]; t < batch.cu_seqlens_q[s + 1]; t += kUnionTileQueries) {
      tile_first.push_back(t);
    }
  }
  tile_first.push_back(total_q);
  plan->num_tiles = int64_t(tile_first.size()) - 1;
  plan->path_u.assign(size_t(groups * plan->num_tiles), 0);
  plan->union_offsets.assign(1, 0);
  plan->union_blocks.clear();
  std::vector<int32_t> blocks;
  for (int64_t r = 0; r < groups; ++r) {
    for (int64_t tile = 0; tile < plan->num_tiles; ++tile) {
      // A tile ends at the next tile's first query or at its sequence's end, whichever comes first.
      const int64_t first = tile_first[tile];
      const int64_t sequence_end =
          *std::upper_bound(batch.cu_seqlens_q.begin(), batch.cu_seqlens_q.end(), int32_t(first));
      const int64_t end = std::min(tile_first[tile + 1], sequence_end);
      blocks.clear();
      for (int64_t t = first; t < end; ++t) {
        const int32_t* row = topk_indices + (r * total_q + t) * top_k;
        for (int64_t k = 0; k < top_k && row[k] >= 0; ++k) blocks.push_back(row[k]);
      }
      const int64_t selected = int64_t(blocks.size());
      std::sort(blocks.begin(), blocks.end());
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      const bool path_u = int64_t(blocks.size()) <= MaxUnionForPathU(config, end - first, selected, ceilings);
      plan->path_u[size_t(r * plan->num_tiles + tile)] = path_u ? 1 : 0;
      if (path_u) plan->union_blocks.insert(plan->union_blocks.end(), blocks.begin(), blocks.end());
      plan->union_offsets.push_back(int64_t(plan->union_blocks.size()));
    }
  }
}

}  // namespace msa::gpu
