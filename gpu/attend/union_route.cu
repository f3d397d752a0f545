// The main branch on both paths (attend=routed): the device planner RouteUnionTiles decides each union tile's path
// from the selection alone, as the host planner PlanUnionTiles does (gpu/common/union_tile_plan.h); then path K
// (KV-outer lists, wgmma tiles with 16-bit partials, and merge) takes the rows of the tiles routed to K and path U
// (union_tile.cu) the rest, path K on a side stream where the caller gives one.
#include <climits>

#include "gpu/attend/kv_outer.h"
#include "gpu/common/device_query.h"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per tile (tile = run * Hkv + group): the tile's (query, slot) pairs as global block ids in shared
// memory, the selected ones counted, the distinct ones counted by first occurrence.
__global__ void RouteUnionTilesKernel(const int32_t* __restrict__ topk, const int32_t* __restrict__ first_block,
                                      AttendGeometry g, UnionTileRouting routing, int64_t tiles,
                                      uint8_t* __restrict__ route) {
  __shared__ int32_t ids[kWarpsPerBlock][kUnionTileMaxEntries];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tile = blockIdx.x * int64_t(kWarpsPerBlock) + warp;
  if (tile >= tiles) return;  // whole warps: only __syncwarp below
  const int group = g.hq / g.hkv, qpt = kUnionTileRows / group, r = int(tile % g.hkv);
  const int64_t t_first = (tile / g.hkv) * qpt;
  const int queries = int(min(int64_t(qpt), g.total_q - t_first)), entries = queries * g.top_k;
  int32_t* tile_ids = ids[warp];
  int selected = 0;
  for (int e = lane; e < entries; e += 32) {
    const int64_t t = t_first + e / g.top_k;
    const int32_t id = topk[(int64_t(r) * g.total_q + t) * g.top_k + e % g.top_k];
    tile_ids[e] = id >= 0 ? first_block[t] + id : INT_MAX;
    selected += id >= 0;
  }
  __syncwarp();
  int distinct = 0;
  for (int e = lane; e < entries; e += 32) {
    const int32_t id = tile_ids[e];
    bool first = id != INT_MAX;
    for (int f = 0; f < e && first; ++f) first = tile_ids[f] != id;
    distinct += first;
  }
  selected = int(__reduce_add_sync(0xffffffffu, unsigned(selected)));
  distinct = int(__reduce_add_sync(0xffffffffu, unsigned(distinct)));
  if (lane == 0) route[tile] = distinct <= MaxUnionForPathU(routing, queries, selected) ? 1 : 0;
}

}  // namespace

cudaError_t RouteUnionTiles(const int32_t* topk, const int32_t* first_block, const AttendGeometry& g,
                            const UnionTileRouting& routing, uint8_t* route, cudaStream_t stream) {
  const int64_t tiles = UnionTileCount(g);
  if (tiles <= 0) return cudaSuccess;
  RouteUnionTilesKernel<<<unsigned((tiles + kWarpsPerBlock - 1) / kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
      topk, first_block, g, routing, tiles, route);
  return cudaGetLastError();
}

cudaError_t RoutedAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                         const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                         const int32_t* first_block, const AttendGeometry& g, float scale, const KvOuterPlan& plan,
                         const UnionTileRouting& routing, void* workspace, double* out, double* lse,
                         cudaStream_t stream, const SideStream& side) {
  if (g.total_q <= 0) return cudaSuccess;
  const DeviceCaps caps = CurrentDeviceCaps();
  if (!KvOuterWgmmaFits(g, caps) || !UnionTileFits(g, caps)) return cudaErrorNotSupported;
  uint8_t* route = static_cast<unsigned char*>(workspace) + plan.union_route;
  cudaError_t err = RouteUnionTiles(topk, first_block, g, routing, route, stream);
  if (err != cudaSuccess) return err;
  const bool forked = side.stream != nullptr;
  const cudaStream_t k_stream = forked ? side.stream : stream;
  if (forked && ((err = cudaEventRecord(side.fork, stream)) != cudaSuccess ||
                 (err = cudaStreamWaitEvent(side.stream, side.fork)) != cudaSuccess)) {
    return err;
  }
  err = kv_outer::Run(lowp, q, k, v, topk, position, key_begin, first_block, g, scale, plan, workspace, out, lse,
                      k_stream, kv_outer::WgmmaTiles(kv_outer::kPartials16), route);
  if (err != cudaSuccess) return err;
  if (forked && (err = cudaEventRecord(side.join, side.stream)) != cudaSuccess) return err;
  err = UnionTileWsAttend(lowp, q, k, v, total_k, topk, position, key_begin, first_block, g, scale, route, out, lse,
                          stream);
  if (err != cudaSuccess) return err;
  return forked ? cudaStreamWaitEvent(stream, side.join) : cudaSuccess;
}

}  // namespace msa::gpu
