// The part of the KV-outer main branch (gpu/attend/kv_outer_attend.cu) that its tile kernels share: the per-chunk list
// building (CountPairs, ExclusiveSum, FillEntries; or DirectLists where KvOuterPlan::direct_lists), the merge, and
// the chunk loop around them, with the tile kernel passed in. KvOuterAttend (mma.sync tiles, kv_outer_attend.cu) and
// KvOuterAttendWgmma (wgmma tiles, kv_outer_wgmma.cu) are both this loop with their own TileLauncher. Internal to
// gpu/; not a public interface.
#ifndef MSA_GPU_KV_OUTER_H_
#define MSA_GPU_KV_OUTER_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/kernels.h"

namespace msa::gpu::kv_outer {

// The partial results' format, a template argument of the tile kernels that write them and of MergeRow
// (kv_outer_tile.cuh): kPartialsFp32 stores O_b in fp32 (every KV-outer tile kernel, split-k); kPartials16 stores
// O_b / l_b rounded to the storage format (kv-outer-wgmma-p16: half the bytes, and within the storage format's range
// whenever v is, O_b / l_b being a weighted mean of v's rows). Both [chunk_q, Hq, top_k, Dv] at KvOuterPlan::part_o.
enum PartialsFormat : int { kPartialsFp32 = 0, kPartials16 = 1 };

// The queries of one chunk, by local index i (the list entries' and the partials' query index): query t0 + i, or
// query_of[t0 + i] where the chunks walk a list of queries (RoutedAttend's path-K queries, ascending; -1 past the
// list's end: no query).
struct ChunkQueries {
  const int64_t* query_of = nullptr;
  int64_t t0 = 0;
  __device__ int64_t operator[](int64_t i) const { return query_of == nullptr ? t0 + i : query_of[t0 + i]; }
};

// One chunk's inputs and lists, as a tile kernel reads them (passed by value to the kernel).
struct TileLists {
  const uint16_t* q = nullptr;         // [total_q, Hq, D]
  const uint16_t* k = nullptr;         // [total_k, Hkv, D]
  const uint16_t* v = nullptr;         // [total_k, Hkv, Dv]
  int64_t total_k = 0;                 // rows of k and v; 0 where the caller does not pass them (WsTiles refuses)
  const int64_t* position = nullptr;   // [total_q]
  const int64_t* key_begin = nullptr;  // [total_q]
  AttendGeometry g;
  float scale = 0;
  ChunkQueries chunk;                // the chunk's queries
  const int32_t* offsets = nullptr;  // [num_buckets + 1]: offsets[num_buckets] / qpc = the chunk's tiles
  int64_t num_buckets = 0;
  const int32_t* entries = nullptr;  // [max_entries]: local query * top_k + slot, -1 for padding
  const int2* tile_block = nullptr;  // [max_tiles]: (group, block id) of each tile
  void* part_o = nullptr;            // [chunk_q, Hq, top_k, Dv] in the tile kernel's PartialsFormat (kv_outer_tile.cuh)
  float2* part_ml = nullptr;         // [chunk_q, Hq, top_k]: (m_b, l_b)
  int64_t max_tiles = 0;             // upper bound on the chunk's tiles (grid sizing): exact with direct lists
};

// A tile kernel: `prepare` runs once per KvOuterAttend call before any launch (kernel attributes), `launch`
// enqueues the tiles of one chunk on `stream`; both return the CUDA error. `partials`: the PartialsFormat it writes
// (kv_outer_tile.cuh), which the merge reads.
struct TileLauncher {
  cudaError_t (*prepare)(int lowp) = nullptr;
  cudaError_t (*launch)(int lowp, const TileLists& lists, cudaStream_t stream) = nullptr;
  PartialsFormat partials = kPartialsFp32;
};

// KvOuterAttend's chunk loop (the contract in gpu/kernels.h) with the given tile kernel, over `queries`; total_k: the
// rows of k and v, 0 where the caller does not know them (only WsTiles reads them). union_route
// (nullable, RouteUnionTiles' [UnionTileCount] tiles): the rows of tiles routed to path U are left out of the lists
// and the merge (untouched; the general lists are built whatever plan.direct_lists says), as are the list's -1
// entries. A query list takes the general lists.
cudaError_t Run(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k, const int32_t* topk,
                const int64_t* position, const int64_t* key_begin, const int32_t* first_block, const AttendGeometry& g,
                float scale, const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                cudaStream_t stream, const TileLauncher& tiles, const uint8_t* union_route, const ItemList& queries);

// The temporary storage in bytes of RoutedAttend's selections of its path-K queries and path-U tiles
// (union_route.cu).
size_t RouteSelectBytes(const AttendGeometry& g);

// The wgmma tile kernel of KvOuterAttendWgmma (kPartialsFp32) and KvOuterAttendWgmmaP16 (kPartials16), in
// kv_outer_wgmma.cu.
TileLauncher WgmmaTiles(PartialsFormat partials);

// The warp-specialized tile kernel of KvOuterAttendWs (kPartials16: WgmmaTiles(kPartials16)'s bits), in
// kv_outer_ws.cu. Its launch returns cudaErrorInvalidValue where TileLists::total_k is unknown (0) or past 32 bits.
TileLauncher WsTiles();

}  // namespace msa::gpu::kv_outer

#endif  // MSA_GPU_KV_OUTER_H_
