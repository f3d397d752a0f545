// The split-K main branch with its tile work ahead of the selection (attend=split-k-ahead). A block's partial
// (m_b, l_b, O_b) is a function of the query, the block and its keys; the selection only decides which partials the
// merge folds. So AheadPartialsKernel computes, before any selection exists, the partial of every block a query sees
// (one CTA per (query, group, block), SplitKAttend's OneQueryTile), and AheadMergeKernel folds each row's selected
// partials in ascending block order (MergeSlotsRow): the same partials and the same merge as SplitKAttend, so its bits.
// StepOnDevice (gpu/common/pipeline.h) runs the partials beside the index branch, so that only the merge follows the
// top-k; the price is the tile work of every block instead of top_k, which pays only while a row has few blocks.
#include "gpu/attend/kv_outer_tile.cuh"
#include "gpu/attend/one_query_tile.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using kv_outer::kSmemBytes;
using kv_outer::kWarps;
using mma::kFullMask;
using one_query::kMaxSlots;
using one_query::kOneQuerySmemBytes;
using one_query::kRows;

// The workspace: part_o [total_q][Hq][max_blocks][Dv] fp32, then part_ml [total_q][Hq][max_blocks] (m_b, l_b).
struct AheadPartials {
  float* part_o;
  float2* part_ml;
};
AheadPartials CarveAheadPartials(void* workspace, const AttendGeometry& g, int64_t max_blocks) {
  float* part_o = static_cast<float*>(workspace);
  return {part_o, reinterpret_cast<float2*>(part_o + g.total_q * g.hq * max_blocks * g.dv)};
}

// CTA i = t * Hkv * max_blocks + group * max_blocks + block computes the partial of (query t, group, block) for each
// head of the group, at (t * Hq + head) * max_blocks + block; a block past the query's position is never selected and
// has none. `blocks` is g with top_k = max_blocks: OneQueryTile's partial index (entry / top_k, entry % top_k) is then
// (query, block).
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32, kv_outer::kCtasPerSm)
    AheadPartialsKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int64_t* position,
                        const int64_t* key_begin, AttendGeometry blocks, float scale, float* part_o, float2* part_ml) {
  extern __shared__ __align__(16) unsigned char ahead_smem[];
  const int i = int(blockIdx.x);  // grid x = total_q * Hkv * max_blocks < 2^31
  const int64_t t = i / (blocks.hkv * blocks.top_k);
  const int r = (i / blocks.top_k) % blocks.hkv, block = i % blocks.top_k;
  const int64_t pos = position[t], key0 = int64_t(block) * blocks.bk;
  if (key0 > pos) return;
  const kv_outer::TileShared s = kv_outer::CarveTileShared(ahead_smem);
  one_query::LoadGroupQueries(q, blocks, t, r, s);
  one_query::OneQueryTile<kLowp>(k, v, blocks, scale, int32_t(t * blocks.top_k + block), pos, key_begin[t], r, key0, s,
                                 one_query::CarveOneQueryShared(ahead_smem + kSmemBytes), part_o, part_ml);
}

// CTA c = t * Hkv + group, one warp per head of the group: warp 0 reads the (query, group)'s selection (the merge's
// order and each slot's block), then warp w merges head row w. Waits for the kernel before it (the top-k, or the
// partials) before it reads anything.
__global__ void __launch_bounds__(kRows * 32)
    AheadMergeKernel(const int32_t* topk, AttendGeometry g, int64_t max_blocks, const float* part_o,
                     const float2* part_ml, double* out, double* lse) {
  __shared__ int32_t order[kMaxSlots];       // the valid slots in ascending block order
  __shared__ int32_t slot_block[kMaxSlots];  // each slot's block (-1: none)
  __shared__ uint32_t valid_mask;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, group = g.hq / g.hkv;
  const int64_t t = blockIdx.x / g.hkv;
  const int r = int(blockIdx.x % g.hkv);
  WaitForPrimary();
  if (warp == 0) {
    const int32_t id = lane < g.top_k ? topk[(int64_t(r) * g.total_q + t) * g.top_k + lane] : -1;
    const int rank = kv_outer::SlotRank(id, g.top_k);
    if (id >= 0) order[rank] = lane;
    if (lane < kMaxSlots) slot_block[lane] = id;
    const uint32_t mask = __ballot_sync(kFullMask, id >= 0);
    if (lane == 0) valid_mask = mask;
  }
  __syncthreads();
  const int head = r * group + warp;  // blockDim = group warps
  one_query::MergeSlotsRow<true>(g, t, head, (t * g.hq + head) * max_blocks, order, slot_block, valid_mask, part_o,
                                 part_ml, out, lse);
}

}  // namespace

cudaError_t SplitKAheadPartials(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                                int64_t max_blocks, void* workspace, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (g.hq / g.hkv > kRows || g.total_q * g.hkv * max_blocks >= (int64_t(1) << 31)) return cudaErrorInvalidValue;
  const auto kernel = lowp == kLowpBF16 ? AheadPartialsKernel<kLowpBF16> : AheadPartialsKernel<kLowpF16>;
  static_assert(kSmemBytes + kOneQuerySmemBytes == kSplitKSmemBytes, "SplitKAheadFits (gpu/common/kernel_fits.h)");
  const size_t smem = kSmemBytes + kOneQuerySmemBytes;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  AttendGeometry blocks = g;
  blocks.top_k = int(max_blocks);
  const AheadPartials parts = CarveAheadPartials(workspace, g, max_blocks);
  kernel<<<unsigned(g.total_q * g.hkv * max_blocks), kWarps * 32, smem, stream>>>(q, k, v, position, key_begin, blocks,
                                                                                  scale, parts.part_o, parts.part_ml);
  return cudaGetLastError();
}

cudaError_t SplitKAheadMerge(const int32_t* topk, const AttendGeometry& g, int64_t max_blocks, const void* workspace,
                             double* out, double* lse, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (g.hq / g.hkv > kRows || g.top_k > kMaxSlots) return cudaErrorInvalidValue;
  const AheadPartials parts = CarveAheadPartials(const_cast<void*>(workspace), g, max_blocks);
  const cudaError_t err = LaunchDependent(
      AheadMergeKernel, dim3{unsigned(g.total_q * g.hkv)}, dim3{unsigned(32 * (g.hq / g.hkv))}, 0, stream, topk, g,
      max_blocks, static_cast<const float*>(parts.part_o), static_cast<const float2*>(parts.part_ml), out, lse);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace msa::gpu
