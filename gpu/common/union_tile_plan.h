// The main branch's route per tile, decided from the selection alone (so it is deterministic): a tile is
// kUnionTileQueries consecutive queries of one sequence and one index group. Path U walks the sorted union of the
// tile's rows once for all its queries and heads, masking per query; path K (KV-outer) visits each (query, block)
// pair through per-block query lists and merges partials. U pays for the blocks a query did not select (computed,
// then masked), K for the partials' traffic, so U wins on coherent selections and K on random ones. This is the
// host planner (plain C++, tested on the CPU); a device planner must route every tile alike.
#ifndef MSA_GPU_COMMON_UNION_TILE_PLAN_H_
#define MSA_GPU_COMMON_UNION_TILE_PLAN_H_

#include <cstdint>
#include <vector>

#include "msa/msa.h"

namespace msa::gpu {

inline constexpr int kUnionTileQueries = 8;

// Measured ceilings of the device (bench/gpu_bench.py measures both in every run).
struct UnionTileCeilings {
  double gemm_flops_per_s = 0;  // bf16 dense GEMM
  double copy_bytes_per_s = 0;  // device-to-device copy, bytes read + written
};

// The largest union (in blocks) for which a tile whose rows hold `selected_blocks` blocks in all is faster on U
// than on K at their floors (bench/main_branch_roofline.py's model, bf16 inputs and partials):
//   U: tile_queries * union * heads_per_group * Bk * (D + Dv) * 2 FLOPs at the GEMM ceiling (K and V from L2);
//   K: selected_blocks * heads_per_group * (2 D + 2 (2 Dv + 8)) bytes at the copy ceiling (the query row, and a
//      partial written and read back by the merge).
int64_t MaxUnionForPathU(const Config& config, int64_t tile_queries, int64_t selected_blocks,
                         const UnionTileCeilings& ceilings);

struct UnionTilePlan {
  int64_t num_tiles = 0;               // per index group
  std::vector<uint8_t> path_u;         // [Hidx, num_tiles]: 1 = path U, 0 = path K
  std::vector<int64_t> union_offsets;  // [Hidx * num_tiles + 1]: each tile's range of union_blocks (empty for K)
  std::vector<int32_t> union_blocks;   // each U tile's union, ascending
  int64_t u_tiles() const;
};

// Routes every tile of a selection [Hidx, total_q, top_k] (-1 padded rows; tiles never cross sequences, so a
// sequence's last tile may be shorter).
void PlanUnionTiles(const Config& config, const Batch& batch, const int32_t* topk_indices,
                    const UnionTileCeilings& ceilings, UnionTilePlan* plan);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_UNION_TILE_PLAN_H_
