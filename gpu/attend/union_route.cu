// The main branch on both paths (attend=routed): the device planner RouteUnionTiles decides each union tile's path
// from the selection alone, as the host planner PlanUnionTiles does (gpu/common/union_tile_plan.h); then path K
// (KV-outer lists, wgmma tiles with 16-bit partials, and merge) takes the rows of the tiles routed to K and path U
// (union_tile_ws.cu) the rest, path K on a side stream where the caller gives one. Each path walks a list the route's
// selections make: path K's chunks the queries with a tile on K, path U's CTAs its tiles.
#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include <algorithm>
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
  for (int e = lane; e < entries; e += 32) distinct += FirstOccurrence(tile_ids, e, INT_MAX);
  selected = int(__reduce_add_sync(0xffffffffu, unsigned(selected)));
  distinct = int(__reduce_add_sync(0xffffffffu, unsigned(distinct)));
  if (lane == 0) route[tile] = distinct <= MaxUnionForPathU(routing, queries, selected) ? 1 : 0;
}

// Whether query t has a row on path K: a tile of its run routed to K in some group.
struct OnPathK {
  const uint8_t* route;
  AttendGeometry g;
  __device__ bool operator()(int64_t t) const {
    const int64_t run = t / (kUnionTileRows / (g.hq / g.hkv));
    bool k = false;
    for (int r = 0; r < g.hkv; ++r) k = k || route[run * g.hkv + r] == 0;
    return k;
  }
};

// Whether a tile is routed to path U.
struct OnPathU {
  const uint8_t* route;
  __device__ bool operator()(int64_t tile) const { return route[tile] != 0; }
};

// The items [0, n) that `on_path` takes, ascending, into `list` (-1 after them), and their number into *count.
template <typename OnPath>
cudaError_t ListPath(int64_t n, OnPath on_path, const KvOuterPlan& plan, unsigned char* base, int64_t* list,
                     int64_t* count, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(list, 0xff, size_t(n) * sizeof(int64_t), stream);
  if (err != cudaSuccess) return err;
  size_t bytes = plan.route_select_bytes;
  return cub::DeviceSelect::If(base + plan.route_select, bytes, thrust::counting_iterator<int64_t>(0), list, count, n,
                               on_path, stream);
}

template <typename OnPath>
size_t ListPathBytes(int64_t n) {
  size_t bytes = 0;
  cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<int64_t>(0), static_cast<int64_t*>(nullptr),
                        static_cast<int64_t*>(nullptr), n, OnPath{}, cudaStream_t{});
  return bytes;
}

// Path K's tiles: kv-outer-ws's where they fit (the same bits as kv-outer-wgmma-p16's, faster on prefills:
// docs/performance.md, path K warp-specialized), else kv-outer-wgmma-p16's.
kv_outer::TileLauncher PathKTiles(const AttendGeometry& g) {
  return KvOuterWsFits(g, CurrentDeviceCaps()) ? kv_outer::WsTiles() : kv_outer::WgmmaTiles(kv_outer::kPartials16);
}

}  // namespace

size_t kv_outer::RouteSelectBytes(const AttendGeometry& g) {
  return std::max(ListPathBytes<OnPathK>(g.total_q), ListPathBytes<OnPathU>(UnionTileCount(g)));
}

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
                         const UnionTileRouting& routing, void* workspace, const DeviceAttendOutputs& outputs,
                         cudaStream_t stream, const SideStream& side) {
  if (g.total_q <= 0) return cudaSuccess;
  const DeviceCaps caps = CurrentDeviceCaps();
  if (!KvOuterWgmmaFits(g, caps) || !UnionTileFits(g, caps)) return cudaErrorNotSupported;
  unsigned char* base = static_cast<unsigned char*>(workspace);
  uint8_t* route = base + plan.union_route;
  int64_t* path_k_queries = reinterpret_cast<int64_t*>(base + plan.path_k_queries);
  int64_t* path_u_tiles = reinterpret_cast<int64_t*>(base + plan.path_u_tiles);
  int64_t* route_counts = reinterpret_cast<int64_t*>(base + plan.route_counts);
  int64_t* tile_counter = reinterpret_cast<int64_t*>(base + plan.union_tile_counter);
  const int64_t tiles = UnionTileCount(g);
  cudaError_t err = RouteUnionTiles(topk, first_block, g, routing, route, stream);
  if (err != cudaSuccess) return err;
  if ((err = ListPath(g.total_q, OnPathK{route, g}, plan, base, path_k_queries, route_counts, stream)) != cudaSuccess ||
      (err = ListPath(tiles, OnPathU{route}, plan, base, path_u_tiles, route_counts + 1, stream)) != cudaSuccess) {
    return err;
  }
  // The lists' lengths; while capturing, the most (path U walks its whole list, -1 past the count).
  int64_t counts[2] = {g.total_q, tiles};
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if ((err = cudaStreamIsCapturing(stream, &capture)) != cudaSuccess) return err;
  if (capture == cudaStreamCaptureStatusNone &&
      ((err = cudaMemcpyAsync(counts, route_counts, sizeof counts, cudaMemcpyDeviceToHost, stream)) != cudaSuccess ||
       (err = cudaStreamSynchronize(stream)) != cudaSuccess)) {
    return err;
  }
  // Path K walks its list where that leaves out at least half the queries; otherwise (and while capturing) every
  // query in order, the rows on path U skipped (the list's lookup costs its tile kernel about 3.5%).
  const bool k_list = capture == cudaStreamCaptureStatusNone && counts[0] <= g.total_q / 2;
  const ItemList path_k{k_list ? path_k_queries : nullptr, counts[0]};
  const ItemList path_u{path_u_tiles, counts[1]};
  const bool forked = side.stream != nullptr;
  const cudaStream_t k_stream = forked ? side.stream : stream;
  if (forked && ((err = cudaEventRecord(side.fork, stream)) != cudaSuccess ||
                 (err = cudaStreamWaitEvent(side.stream, side.fork)) != cudaSuccess)) {
    return err;
  }
  err = kv_outer::Run(lowp, q, k, v, total_k, topk, position, key_begin, first_block, g, scale, plan, workspace,
                      outputs, k_stream, PathKTiles(g), route, path_k);
  if (err == cudaSuccess) {
    err = UnionTileWsAttend(lowp, q, k, v, total_k, topk, position, key_begin, first_block, g, scale, path_u,
                            tile_counter, outputs, stream);
  }
  if (forked) {  // joined whatever failed after the fork, so that a capture in progress can still end
    cudaError_t joined = cudaEventRecord(side.join, side.stream);
    if (joined == cudaSuccess) joined = cudaStreamWaitEvent(stream, side.join);
    if (err == cudaSuccess) err = joined;
  }
  return err;
}

}  // namespace msa::gpu
