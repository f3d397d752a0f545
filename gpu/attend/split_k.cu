// The main branch split over selection slots (split-K), for decode: one CTA per (query, group, slot) computes the
// KV-outer tile of that one block (the group's heads as rows, one partial per row); the top_k CTAs of a (query, group)
// are one thread block cluster, which synchronizes once every partial is written, and then merges the group's rows,
// each by one warp of one of its CTAs (MergeClusterRow: MergeRow's arithmetic, ascending block order). One launch per
// chunk of queries, no lists, no separate merge, no counters: the same partials and the same merge as KvOuterAttend,
// so the same bits. The launch is a programmatic dependent of the kernel before it (the top-k): its CTAs issue their
// Q rows (groups of at most 16 heads; AttendTile loads them after) and read their query's position and first key
// (inputs of the step), then wait for the selection with WaitForPrimary, so their launch overlaps the top-k's tail.
//
// A group of at most 16 heads fills one m16 row tile, which AttendTile gives to one warp of four; OneQueryTile spreads
// that tile over a CTA of eight warps with the same bits: S by key eighths (each score is the same dot in the same
// order), the row maxima combined through shared memory (fmaxf is exact), P in shared memory so that one warp sums l
// in AttendTile's order, and O = P V by dim eighths (each output keeps its 16-key order). Larger groups take
// AttendTile, in a CTA of four warps.
#include "gpu/attend/split_k_tile.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using kv_outer::kSmemBytes;
using mma::kFullMask;
using split_k::CarveOneQueryShared;
using split_k::ForEachSplitKChunk;
using split_k::kMaxSlots;
using split_k::kOneQueryWarps;
using split_k::kRows;
using split_k::LoadGroupQueries;
using split_k::MergeClusterRow;
using split_k::OneQueryTile;
using split_k::SetSplitKAttributes;

// CTA i = (t - t0) * Hkv * top_k + group * top_k + slot; the top_k CTAs of a (query, group) form one thread block
// cluster (block rank = slot). Each computes its slot's partials (part_o, part_ml, as KvOuterAttend's tiles do), the
// cluster synchronizes, and CTA c's warp w merges the group's rows c + top_k (w + kCtaWarps i). kCtaWarps:
// kOneQueryWarps for groups of at most 16 heads, kv_outer::kWarps for larger ones.
template <int kLowp, int kCtaWarps>
__global__ void __launch_bounds__(kCtaWarps * 32, kv_outer::kCtasPerSm)
    SplitKAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                       const int64_t* position, const int64_t* key_begin, AttendGeometry g, float scale, int64_t t0,
                       float* part_o, float2* part_ml, DeviceAttendOutputs outputs) {
  extern __shared__ __align__(16) unsigned char split_k_smem[];
  __shared__ int32_t order[kMaxSlots];  // the (query, group)'s valid slots in ascending block order
  __shared__ uint32_t valid_mask;
  __shared__ int32_t own_id;
  const kv_outer::TileShared s = kv_outer::CarveTileShared(split_k_smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, qpc = kv_outer::TileQueries(g);
  const int group = g.hq / g.hkv;
  constexpr bool kOneQuery = kCtaWarps == kOneQueryWarps;
  const int i = int(blockIdx.x);  // grid x = chunk queries * Hkv * top_k < 2^31
  const int64_t t_local = i / (g.hkv * g.top_k), t = t0 + t_local;
  const int r = (i / g.top_k) % g.hkv, slot = i % g.top_k;
  if (kOneQuery) LoadGroupQueries(q, g, t, r, s);      // before the wait: it overlaps the top-k's tail
  const int64_t pos = position[t], kb = key_begin[t];  // inputs of the step, as Q
  const int32_t entry = int32_t(t_local * g.top_k + slot);
  if (tid < qpc) {  // AttendTile's tile: entry 0 this query, the others padding
    s.tile_entry[tid] = tid == 0 ? entry : -1;
    s.tile_pos[tid] = tid == 0 ? pos : -1;
  }
  WaitForPrimary();
  if (warp == 0) {  // every slot's id: this CTA's own, and the merge's order
    const int32_t id = lane < g.top_k ? topk[(int64_t(r) * g.total_q + t) * g.top_k + lane] : -1;
    const int rank = kv_outer::SlotRank(id, g.top_k);
    if (id >= 0) order[rank] = lane;
    const uint32_t mask = __ballot_sync(kFullMask, id >= 0);
    if (lane == slot) own_id = id;
    if (lane == 0) valid_mask = mask;
  }
  __syncthreads();  // the ids, and the tile's entry and position
  const int32_t id = own_id;
  if (id >= 0) {  // a -1 slot has no partial: the merge reads valid slots only
    if constexpr (kOneQuery) {
      OneQueryTile<kLowp>(k, v, g, scale, entry, pos, kb, r, int64_t(id) * g.bk, s,
                          CarveOneQueryShared(split_k_smem + kSmemBytes), part_o, part_ml);
    } else {
      kv_outer::AttendTile<kLowp>(q, k, v, key_begin, g, scale, kv_outer::ChunkQueries{nullptr, t0}, r,
                                  int64_t(id) * g.bk, s, part_o, part_ml);
    }
  }
  mma::CopyAsyncWait<0>();  // a -1 slot's Q copies land before the CTA exits
  ClusterSync();            // every slot's partials written and visible
  for (int row = slot + g.top_k * warp; row < group; row += g.top_k * kCtaWarps) {
    MergeClusterRow(g, t, r * group + row, t_local * g.hq + r * group + row, order, valid_mask, part_o, part_ml,
                    outputs);
  }
}

}  // namespace

int SplitKLargestCluster() {
  const auto kernel = SplitKAttendKernel<kLowpBF16, kOneQueryWarps>;
  cudaFuncAttributes binary{};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{unsigned(kMaxSlots)};
  config.blockDim = dim3{kOneQueryWarps * 32};
  config.dynamicSmemBytes = kSplitKSmemBytes;
  int size = 0;
  if (cudaFuncGetAttributes(&binary, kernel) != cudaSuccess || binary.binaryVersion < 90 ||
      SetSplitKAttributes(kernel) != cudaSuccess ||
      cudaOccupancyMaxPotentialClusterSize(&size, kernel, &config) != cudaSuccess) {
    cudaGetLastError();  // no sm_90 code for this device, or no device: no clusters
    return 0;
  }
  return size;
}

cudaError_t SplitKAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                         const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                         const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                         cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (g.top_k > kMaxSlots) return cudaErrorInvalidValue;  // SplitKAttendFits
  const bool one_query = g.hq / g.hkv <= kRows;
  const int warps = one_query ? kOneQueryWarps : kv_outer::kWarps;
  const auto kernel = one_query ? (lowp == kLowpBF16 ? SplitKAttendKernel<kLowpBF16, kOneQueryWarps>
                                                     : SplitKAttendKernel<kLowpF16, kOneQueryWarps>)
                                : (lowp == kLowpBF16 ? SplitKAttendKernel<kLowpBF16, kv_outer::kWarps>
                                                     : SplitKAttendKernel<kLowpF16, kv_outer::kWarps>);
  const cudaError_t err = SetSplitKAttributes(kernel);
  if (err != cudaSuccess) return err;
  return ForEachSplitKChunk(g, plan, workspace, [&](int64_t t0, dim3 grid, float* part_o, float2* part_ml) {
    return LaunchDependentCluster(kernel, grid, dim3{unsigned(warps) * 32}, kSplitKSmemBytes, unsigned(g.top_k), stream,
                                  q, k, v, topk, position, key_begin, g, scale, t0, part_o, part_ml, outputs);
  });
}

}  // namespace msa::gpu
