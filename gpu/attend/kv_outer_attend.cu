// Main branch of the low-precision mode, KV-outer: the selection is inverted on the device into
// per-(sequence, group, block) lists of the queries that chose the block, so each K/V block is loaded once per
// tile of up to 64 (query, head) rows instead of once per query. Each tile writes a partial result per row
// (m_b, l_b, O_b over that block alone); a merge kernel combines a row's partials with their log-sum-exp in
// ascending block order. Deterministic: a row's partial does not depend on which rows share its tile, and no
// value is accumulated with atomics (atomics only count and place list entries).
//
// Per chunk of queries (nq of them: queries t0 .. t0 + nq - 1, or positions t0 .. of a list of queries,
// ItemList; i below is the query's index in its chunk):
//   CountPairs      counts[bucket] = queries of the chunk that chose the bucket's block (bucket: sequence,
//                   block, group), then rounded up to whole tiles of `qpc` queries (qpc = 64 / group size)
//   ExclusiveSum    offsets[bucket] = first list entry of the bucket (a multiple of qpc); offsets[buckets] = all
//   FillEntries     entries[offsets[bucket] + j] = i * top_k + slot; padding entries stay -1;
//                   tile_block[tile] = (group, block) of each tile
//   TileAttend      per tile: S = Q K^T (scores rounded as LowpAttend does), m_b, l_b = sum exp(s - m_b),
//                   O_b = P V with P = exp(s - m_b) in the storage format, fp32 accumulation
//   Merge           per (query, head): M = max m_b, L = sum l_b e^(m_b - M), out = sum O_b e^(m_b - M) / L,
//                   lse = M + log L, blocks in ascending id order
// When the caller states that every sequence has at most one query (decode; KvOuterPlan::direct_lists), every
// list holds at most one query, so DirectLists replaces CountPairs .. FillEntries: one kernel writes one tile per
// (query, group, selection slot), the same tiles as the general lists in another order (3 launches per chunk).
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>

#include "gpu/attend/kv_outer.h"
#include "gpu/attend/kv_outer_tile.cuh"
#include "gpu/common/device_query.h"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using kv_outer::AttendTile;
using kv_outer::CarveTileShared;
using kv_outer::ChunkQueries;
using kv_outer::kCtasPerSm;
using kv_outer::kDimPad;
using kv_outer::kKeyPad;
using kv_outer::kSmemBytes;
using kv_outer::kTileRows;
using kv_outer::kWarps;
using kv_outer::MergeRow;
using kv_outer::TileQueries;
using kv_outer::TileShared;

// Whether path U takes query t's rows of group r (route: RouteUnionTiles' [UnionTileCount] tiles, or null: none).
__device__ inline bool RoutedToU(const uint8_t* route, const AttendGeometry& g, int64_t t, int r) {
  return route != nullptr && route[t / (kUnionTileRows / (g.hq / g.hkv)) * g.hkv + r] != 0;
}

// One thread per (chunk query, group, slot) with a valid id on path K: the bucket of (sequence, block, group); -1
// where there is none (no id, no query, or the row on path U).
__device__ inline int64_t PairBucket(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                     const AttendGeometry& g, const ChunkQueries& chunk, int64_t i, int32_t* id_out) {
  const int64_t t = chunk[i / (int64_t(g.hkv) * g.top_k)];
  const int r = int((i / g.top_k) % g.hkv);
  const int32_t id = t < 0 ? -1 : topk[(int64_t(r) * g.total_q + t) * g.top_k + i % g.top_k];
  *id_out = id;
  return id < 0 || RoutedToU(route, g, t, r) ? -1 : (int64_t(first_block[t]) + id) * g.hkv + r;
}

__global__ void CountPairsKernel(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                 AttendGeometry g, ChunkQueries chunk, int64_t pairs, int32_t* counts) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  int32_t id;
  const int64_t bucket = PairBucket(topk, first_block, route, g, chunk, i, &id);
  if (bucket >= 0) atomicAdd(counts + bucket, 1);
}

// docs:begin gpu-kv-outer-direct-lists
// DirectLists: the lists of a chunk in which no two queries share a (sequence, block, group) bucket (every
// sequence contributes at most one query: decode), so every bucket holds one query and is one tile. Tile
// i = (t - t0) * Hkv * top_k + group * top_k + slot, for every slot of every (query, group) row:
//   entries[i * qpc]             = (t - t0) * top_k + slot, entries[i * qpc + 1 .. qpc - 1] = -1 (padding)
//   tile_block[i]                = (group, id) for a valid id; for a -1 slot (fewer blocks than top_k) the query's
//                                  own local block position / block_size: a harmless padding tile that reads
//                                  visible keys only and writes the partial of that -1 slot, which no one reads
//   offsets[num_buckets]         = tiles * qpc (the only element of `offsets` the tile kernels read)
// A valid tile is exactly the tile the general lists make for its bucket (the one query in entry 0, qpc - 1
// padding entries), each tile writes only its own rows' selection slots, and the merge reads a row's partials by
// slot in ascending block id order, so out and lse are bit-identical to the general lists' whatever the tile
// order. (The wgmma tiles keep K / V in shared memory across consecutive tiles of the same block and group: here
// two consecutive tiles share them only when one is a padding tile of the other's query, and then both load the
// same keys of the same block, so every valid tile sees the shared memory a fresh load gives.) No atomics, no
// memset, no host sync: one thread per list entry, graph-capturable.
__global__ void DirectListsKernel(const int32_t* topk, const int64_t* position, AttendGeometry g, int64_t t0,
                                  int64_t tiles, int qpc, int32_t* total_entries, int32_t* entries, int2* tile_block) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;  // list entry: tile e / qpc, place e % qpc
  if (e >= tiles * qpc) return;
  if (e == 0) *total_entries = int32_t(tiles * qpc);
  if (e % qpc != 0) {
    entries[e] = -1;
    return;
  }
  const int64_t i = e / qpc, t_local = i / (int64_t(g.hkv) * g.top_k);
  const int r = int((i / g.top_k) % g.hkv), slot = int(i % g.top_k);
  const int64_t t = t0 + t_local;
  const int32_t id = topk[(int64_t(r) * g.total_q + t) * g.top_k + slot];
  entries[e] = int32_t(t_local * g.top_k + slot);
  tile_block[i] = make_int2(r, id >= 0 ? id : int(position[t] / g.bk));
}
// docs:end gpu-kv-outer-direct-lists

__global__ void RoundUpToTilesKernel(int32_t* counts, int64_t n, int qpc) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) counts[i] = (counts[i] + qpc - 1) / qpc * qpc;
}

__global__ void FillEntriesKernel(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                  AttendGeometry g, ChunkQueries chunk, int64_t pairs, int qpc, const int32_t* offsets,
                                  int32_t* cursor, int32_t* entries, int2* tile_block) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  int32_t id;
  const int64_t bucket = PairBucket(topk, first_block, route, g, chunk, i, &id);
  if (bucket < 0) return;
  const int32_t at = offsets[bucket] + atomicAdd(cursor + bucket, 1);
  const int64_t t_local = i / (int64_t(g.hkv) * g.top_k);
  entries[at] = int32_t(t_local * g.top_k + i % g.top_k);
  if (at % qpc == 0) tile_block[at / qpc] = make_int2(int(bucket % g.hkv), id);
}

// TileAttend: the tiles of one chunk's lists, a CTA taking tiles blockIdx.x, + gridDim.x, ... (AttendTile in
// kv_outer_tile.cuh).
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm)
    TileAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int64_t* position,
                     const int64_t* key_begin, AttendGeometry g, float scale, ChunkQueries chunk,
                     const int32_t* offsets, int64_t num_buckets, const int32_t* entries, const int2* tile_block,
                     float* part_o, float2* part_ml) {
  extern __shared__ __align__(16) unsigned char kv_outer_smem[];
  const TileShared s = CarveTileShared(kv_outer_smem);
  const int tid = threadIdx.x, qpc = TileQueries(g);
  const int64_t total_tiles = offsets[num_buckets] / qpc;
  for (int64_t tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const int2 group_block = tile_block[tile];
    if (tid < qpc) {
      const int32_t e = entries[tile * qpc + tid];
      s.tile_entry[tid] = e;
      s.tile_pos[tid] = e < 0 ? -1 : position[chunk[e / g.top_k]];
    }
    __syncthreads();
    AttendTile<kLowp>(q, k, v, key_begin, g, scale, chunk, group_block.x, int64_t(group_block.y) * g.bk, s, part_o,
                      part_ml);
    __syncthreads();  // the next tile overwrites shared memory
  }
}

// Merge: one warp per (chunk query, head) on path K (MergeRow in kv_outer_tile.cuh), partials in kPartials' format.
template <int kLowp, kv_outer::PartialsFormat kPartials>
__global__ void MergeKernel(const int32_t* topk, const uint8_t* route, AttendGeometry g, ChunkQueries chunk, int64_t nq,
                            const void* part_o, const float2* part_ml, DeviceAttendOutputs outputs) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;  // local query * hq + head
  if (row >= nq * g.hq) return;
  const int64_t t = chunk[row / g.hq];
  const int head = int(row % g.hq);
  if (t < 0 || RoutedToU(route, g, t, head / (g.hq / g.hkv))) return;
  MergeRow<kLowp, kPartials>(topk, g, t, head, row, part_o, part_ml, outputs);
}

// The merge kernel for a tile kernel's partials: fp32 partials are read alike at either storage format.
using MergeFn = void (*)(const int32_t*, const uint8_t*, AttendGeometry, ChunkQueries, int64_t, const void*,
                         const float2*, DeviceAttendOutputs);
MergeFn MergeFor(int lowp, kv_outer::PartialsFormat partials) {
  if (partials == kv_outer::kPartialsFp32) return MergeKernel<kLowpBF16, kv_outer::kPartialsFp32>;
  return lowp == kLowpBF16 ? MergeKernel<kLowpBF16, kv_outer::kPartials16>
                           : MergeKernel<kLowpF16, kv_outer::kPartials16>;
}

size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

static_assert(kSmemBytes == kKvOuterMmaSmemBytes && kTileRows == kKvOuterTileRows && kKeyPad == kKvOuterKeyPad &&
                  kDimPad == kKvOuterDimPad,
              "KvOuterAttendFits (gpu/common/kernel_fits.h)");

KvOuterPlan PlanKvOuter(const AttendGeometry& g, int64_t num_blocks, int64_t budget_bytes,
                        bool one_query_per_sequence) {
  const KvOuterChunks chunks = PlanKvOuterChunks(g, num_blocks, budget_bytes, one_query_per_sequence);
  KvOuterPlan plan;
  plan.ok = chunks.ok;
  plan.qpc = chunks.qpc;
  plan.chunk_q = chunks.chunk_q;
  plan.num_buckets = chunks.num_buckets;
  plan.max_entries = chunks.max_entries;
  plan.max_tiles = chunks.max_tiles;
  plan.direct_lists = chunks.direct_lists;
  plan.direct_max_tiles = chunks.direct_max_tiles;
  size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                plan.num_buckets + 1);
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += Align256(bytes);
    return offset;
  };
  plan.counts = take(size_t(plan.num_buckets + 1) * 4);
  plan.offsets = take(size_t(plan.num_buckets + 1) * 4);
  plan.cursor = take(size_t(plan.num_buckets) * 4);
  plan.entries = take(size_t(std::max(plan.max_entries, plan.direct_max_tiles * plan.qpc)) * 4);
  plan.tile_block = take(size_t(std::max(plan.max_tiles, plan.direct_max_tiles)) * sizeof(int2));
  plan.part_o = take(size_t(plan.chunk_q) * g.hq * g.top_k * g.dv * 4);
  plan.part_ml = take(size_t(plan.chunk_q) * g.hq * g.top_k * sizeof(float2));
  plan.scan_temp = take(scan_bytes);
  plan.union_route = take(size_t(UnionTileCount(g)));
  plan.path_k_queries = take(size_t(g.total_q) * sizeof(int64_t));
  plan.path_u_tiles = take(size_t(UnionTileCount(g)) * sizeof(int64_t));
  plan.route_counts = take(2 * sizeof(int64_t));
  plan.union_tile_counter = take(sizeof(int64_t));
  plan.route_select_bytes = kv_outer::RouteSelectBytes(g);
  plan.route_select = take(plan.route_select_bytes);
  plan.scan_temp_bytes = scan_bytes;
  plan.bytes = at;
  return plan;
}

namespace {

cudaError_t PrepareMmaTiles(int lowp) {
  const auto tile_kernel = lowp == kLowpBF16 ? TileAttendKernel<kLowpBF16> : TileAttendKernel<kLowpF16>;
  return cudaFuncSetAttribute(tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
}

cudaError_t LaunchMmaTiles(int lowp, const kv_outer::TileLists& l, cudaStream_t stream) {
  const auto tile_kernel = lowp == kLowpBF16 ? TileAttendKernel<kLowpBF16> : TileAttendKernel<kLowpF16>;
  const unsigned grid = unsigned(std::min<int64_t>(l.max_tiles, int64_t(SmCount()) * kCtasPerSm));
  tile_kernel<<<grid, kWarps * 32, kSmemBytes, stream>>>(l.q, l.k, l.v, l.position, l.key_begin, l.g, l.scale, l.chunk,
                                                         l.offsets, l.num_buckets, l.entries, l.tile_block,
                                                         static_cast<float*>(l.part_o), l.part_ml);
  return cudaGetLastError();
}

// The general lists of one chunk (any number of queries per sequence): counts, round-up to whole tiles,
// exclusive sum into offsets, then entries and tile_block (see the top of this file).
cudaError_t BuildGeneralLists(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                              const AttendGeometry& g, const ChunkQueries& chunk, int64_t pairs,
                              const KvOuterPlan& plan, unsigned char* base, cudaStream_t stream) {
  int32_t* counts = reinterpret_cast<int32_t*>(base + plan.counts);
  int32_t* offsets = reinterpret_cast<int32_t*>(base + plan.offsets);
  int32_t* cursor = reinterpret_cast<int32_t*>(base + plan.cursor);
  int32_t* entries = reinterpret_cast<int32_t*>(base + plan.entries);
  int2* tile_block = reinterpret_cast<int2*>(base + plan.tile_block);
  const unsigned pair_grid = unsigned((pairs + 255) / 256);
  cudaError_t err;
  if ((err = cudaMemsetAsync(counts, 0, size_t(plan.num_buckets + 1) * 4, stream)) != cudaSuccess) return err;
  if ((err = cudaMemsetAsync(cursor, 0, size_t(plan.num_buckets) * 4, stream)) != cudaSuccess) return err;
  if ((err = cudaMemsetAsync(entries, 0xff, size_t(plan.max_entries) * 4, stream)) != cudaSuccess) return err;
  CountPairsKernel<<<pair_grid, 256, 0, stream>>>(topk, first_block, route, g, chunk, pairs, counts);
  const unsigned bucket_grid = unsigned((plan.num_buckets + 255) / 256);
  RoundUpToTilesKernel<<<bucket_grid, 256, 0, stream>>>(counts, plan.num_buckets, plan.qpc);
  size_t scan_bytes = plan.scan_temp_bytes;
  if ((err = cub::DeviceScan::ExclusiveSum(base + plan.scan_temp, scan_bytes, counts, offsets, plan.num_buckets + 1,
                                           stream)) != cudaSuccess) {
    return err;
  }
  FillEntriesKernel<<<pair_grid, 256, 0, stream>>>(topk, first_block, route, g, chunk, pairs, plan.qpc, offsets, cursor,
                                                   entries, tile_block);
  return cudaGetLastError();
}

}  // namespace

cudaError_t kv_outer::Run(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                          const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                          const int32_t* first_block, const AttendGeometry& g, float scale, const KvOuterPlan& plan,
                          void* workspace, const DeviceAttendOutputs& outputs, cudaStream_t stream,
                          const TileLauncher& tiles, const uint8_t* union_route, const ItemList& queries) {
  if (g.total_q <= 0) return cudaSuccess;
  unsigned char* base = static_cast<unsigned char*>(workspace);
  int32_t* offsets = reinterpret_cast<int32_t*>(base + plan.offsets);
  int32_t* entries = reinterpret_cast<int32_t*>(base + plan.entries);
  int2* tile_block = reinterpret_cast<int2*>(base + plan.tile_block);
  void* part_o = base + plan.part_o;
  float2* part_ml = reinterpret_cast<float2*>(base + plan.part_ml);
  const MergeFn merge = MergeFor(lowp, tiles.partials);
  cudaError_t err = tiles.prepare(lowp);
  if (err != cudaSuccess) return err;
  TileLists lists;
  lists.q = q;
  lists.k = k;
  lists.v = v;
  lists.total_k = total_k;
  lists.position = position;
  lists.key_begin = key_begin;
  lists.g = g;
  lists.scale = scale;
  lists.offsets = offsets;
  lists.num_buckets = plan.num_buckets;
  lists.entries = entries;
  lists.tile_block = tile_block;
  lists.part_o = part_o;
  lists.part_ml = part_ml;
  lists.chunk.query_of = queries.items;
  const int64_t walked = queries.items != nullptr ? queries.count : g.total_q;
  for (int64_t t0 = 0; t0 < walked; t0 += plan.chunk_q) {
    const int64_t nq = std::min(plan.chunk_q, walked - t0);
    const int64_t pairs = nq * g.hkv * g.top_k;
    lists.chunk.t0 = t0;
    if (plan.direct_lists && union_route == nullptr && queries.items == nullptr &&
        pairs <= plan.direct_max_tiles) {  // a tile per (t, r, slot)
      const int64_t list_entries = pairs * plan.qpc;
      DirectListsKernel<<<unsigned((list_entries + 255) / 256), 256, 0, stream>>>(
          topk, position, g, t0, pairs, plan.qpc, offsets + plan.num_buckets, entries, tile_block);
      if ((err = cudaGetLastError()) != cudaSuccess) return err;
      lists.max_tiles = pairs;
    } else {
      if ((err = BuildGeneralLists(topk, first_block, union_route, g, lists.chunk, pairs, plan, base, stream)) !=
          cudaSuccess) {
        return err;
      }
      lists.max_tiles = plan.max_tiles;
    }
    if ((err = tiles.launch(lowp, lists, stream)) != cudaSuccess) return err;
    const int64_t rows = nq * g.hq;
    merge<<<unsigned((rows + 7) / 8), 256, 0, stream>>>(topk, union_route, g, lists.chunk, nq, part_o, part_ml,
                                                        outputs);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t KvOuterAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                          const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                          const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace,
                          const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  return kv_outer::Run(lowp, q, k, v, /*total_k=*/0, topk, position, key_begin, first_block, g, scale, plan, workspace,
                       outputs, stream,
                       kv_outer::TileLauncher{PrepareMmaTiles, LaunchMmaTiles, kv_outer::kPartialsFp32},
                       /*union_route=*/nullptr, ItemList{});
}

}  // namespace msa::gpu
