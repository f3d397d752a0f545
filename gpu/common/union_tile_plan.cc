#include "gpu/common/union_tile_plan.h"

#include <algorithm>

#include "gpu/common/geometry.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/kernel_plan.h"

namespace msa::gpu {

UnionTileRouting UnionTileRoutingOf(const Config& config, const UnionTileCeilings& ceilings) {
  const double heads = double(config.num_q_heads / config.num_kv_heads);
  UnionTileRouting routing;
  routing.k_bytes_per_block = heads * (2.0 * config.head_dim + 2.0 * (2.0 * config.value_dim + 8));
  routing.u_flops_per_block = heads * config.block_size * (config.head_dim + config.value_dim) * 2.0;
  routing.gemm_flops_per_s = ceilings.gemm_flops_per_s;
  routing.copy_bytes_per_s = ceilings.copy_bytes_per_s;
  return routing;
}

int64_t UnionTilePlan::u_tiles() const { return std::count(path_u.begin(), path_u.end(), uint8_t{1}); }

void PlanUnionTiles(const Config& config, const Batch& batch, const int32_t* topk_indices,
                    const UnionTileCeilings& ceilings, UnionTilePlan* plan) {
  const int64_t total_q = batch.total_q(), groups = config.num_kv_heads, top_k = config.top_k;
  const AttendGeometry g = AttendGeometryOf(config, total_q);
  const UnionTileRouting routing = UnionTileRoutingOf(config, ceilings);
  const int64_t qpt = UnionTileQueries(g);
  std::vector<int32_t> first_block(static_cast<size_t>(total_q));  // blocks of the sequences before each query's own
  int64_t blocks_before = 0;
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    for (int64_t t = batch.cu_seqlens_q[s]; t < batch.cu_seqlens_q[s + 1]; ++t) first_block[t] = int32_t(blocks_before);
    blocks_before += (batch.cu_seqlens_k[s + 1] - batch.cu_seqlens_k[s] + config.block_size - 1) / config.block_size;
  }
  plan->num_tiles = (total_q + qpt - 1) / qpt;
  plan->path_u.assign(size_t(groups * plan->num_tiles), 0);
  plan->union_offsets.assign(1, 0);
  plan->union_blocks.clear();
  std::vector<int32_t> blocks;
  for (int64_t run = 0; run < plan->num_tiles; ++run) {
    const int64_t first = run * qpt, end = std::min(first + qpt, total_q);
    for (int64_t r = 0; r < groups; ++r) {
      blocks.clear();
      for (int64_t t = first; t < end; ++t) {
        const int32_t* row = topk_indices + (r * total_q + t) * top_k;
        for (int64_t k = 0; k < top_k && row[k] >= 0; ++k) blocks.push_back(first_block[t] + row[k]);
      }
      const int64_t selected = int64_t(blocks.size());
      std::sort(blocks.begin(), blocks.end());
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      const bool path_u = int64_t(blocks.size()) <= MaxUnionForPathU(routing, end - first, selected);
      plan->path_u[size_t(run * groups + r)] = path_u ? 1 : 0;
      if (path_u) plan->union_blocks.insert(plan->union_blocks.end(), blocks.begin(), blocks.end());
      plan->union_offsets.push_back(int64_t(plan->union_blocks.size()));
    }
  }
}

}  // namespace msa::gpu
