// The route threshold of the main branch's two paths (gpu/common/union_tile_plan.h has the model and the host
// planner): plain C++17 without the library's headers, so that the device planner (RouteUnionTiles,
// gpu/attend/union_route.cu) compiles the same function.
#ifndef MSA_GPU_COMMON_UNION_ROUTE_H_
#define MSA_GPU_COMMON_UNION_ROUTE_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MSA_UNION_ROUTE_FN __host__ __device__ inline
#else
#define MSA_UNION_ROUTE_FN inline
#endif

namespace msa::gpu {

// Measured ceilings of the device (bench/gpu_bench.py measures both in every run).
struct UnionTileCeilings {
  double gemm_flops_per_s = 0;  // bf16 dense GEMM
  double copy_bytes_per_s = 0;  // device-to-device copy, bytes read + written
};
// The H200's, measured in bench/results/gpu_selection_bench_2026-12-02: what the gpu pipeline routes by (the route
// decides speed only; both paths compute the same function).
inline constexpr UnionTileCeilings kH200Ceilings{773.0e12, 4253.0e9};

// What the threshold needs of the config and the ceilings (UnionTileRoutingOf, gpu/common/union_tile_plan.h).
struct UnionTileRouting {
  double k_bytes_per_block = 0;  // K's traffic per selected (query, block): heads x (2 D + 2 (2 Dv + 8)) bytes
  double u_flops_per_block = 0;  // U's FLOPs per union block and tile query: heads x Bk x (D + Dv) x 2
  double gemm_flops_per_s = 0, copy_bytes_per_s = 0;
};

// The largest union (in blocks) for which a tile of `tile_queries` queries whose rows hold `selected_blocks` blocks
// in all is faster on U than on K at their floors (bench/main_branch_roofline.py's model, bf16 inputs and partials):
//   U: tile_queries * union * u_flops_per_block at the GEMM ceiling (K and V from L2);
//   K: selected_blocks * k_bytes_per_block at the copy ceiling (the query row, and a partial written and read back).
// Products and quotients only (no a * b + c to contract), so host and device round alike.
MSA_UNION_ROUTE_FN int64_t MaxUnionForPathU(const UnionTileRouting& routing, int64_t tile_queries,
                                            int64_t selected_blocks) {
  const double k_seconds = double(selected_blocks) * routing.k_bytes_per_block / routing.copy_bytes_per_s;
  return int64_t(floor(k_seconds * routing.gemm_flops_per_s / (double(tile_queries) * routing.u_flops_per_block)));
}

// Whether entry e of ids (a tile's (query, slot) pairs as global block ids, `none` for an empty slot) holds a block
// that no earlier entry holds: how both the device planner and path U's union builder count distinct blocks. The
// scan has no data-dependent exit, so its loads pipeline.
MSA_UNION_ROUTE_FN bool FirstOccurrence(const int32_t* ids, int e, int32_t none) {
  const int32_t id = ids[e];
  int seen_before = 0;
  for (int f = 0; f < e; ++f) seen_before |= ids[f] == id;
  return id != none && !seen_before;
}

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_UNION_ROUTE_H_
