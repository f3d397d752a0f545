// The main branch's route per tile, decided from the selection alone (so it is deterministic): a tile is
// UnionTileQueries consecutive queries (the batch cut in fixed runs from query 0, gpu/common/kernel_fits.h) and one
// kv group. Path U (attend=union-tile) walks the ascending union of the tile's selected blocks (global block ids:
// first_block + id, so a run spanning two sequences unites their blocks apart) once for all its queries and heads,
// masking per query; path K (KV-outer) visits each (query, block) pair through per-block query lists and merges
// partials. U pays for the blocks a query did not select (computed, then masked), K for the partials' traffic, so U
// wins on coherent selections and K on random ones. The threshold (MaxUnionForPathU) is one function for the host
// planner here (plain C++, tested on the CPU) and the device planner (RouteUnionTiles, gpu/kernels.h), which must
// route every tile alike.
#ifndef MSA_GPU_COMMON_UNION_TILE_PLAN_H_
#define MSA_GPU_COMMON_UNION_TILE_PLAN_H_

#include <cstdint>
#include <vector>

#include "gpu/common/union_route.h"
#include "msa/msa.h"

namespace msa::gpu {

UnionTileRouting UnionTileRoutingOf(const Config& config, const UnionTileCeilings& ceilings);

struct UnionTilePlan {
  int64_t num_tiles = 0;               // per kv group: runs of UnionTileQueries queries
  std::vector<uint8_t> path_u;         // [tile = run * Hkv + group]: 1 = path U, 0 = path K (RouteUnionTiles' layout)
  std::vector<int64_t> union_offsets;  // [Hkv * num_tiles + 1]: each tile's range of union_blocks (empty for K)
  std::vector<int32_t> union_blocks;   // each U tile's union, ascending global block ids
  int64_t u_tiles() const;
};

// Routes every tile of a selection [Hidx, total_q, top_k] (-1 padded rows).
void PlanUnionTiles(const Config& config, const Batch& batch, const int32_t* topk_indices,
                    const UnionTileCeilings& ceilings, UnionTilePlan* plan);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_UNION_TILE_PLAN_H_
