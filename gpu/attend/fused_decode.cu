// A decode step in one launch: the index branch's block scores, the top-k and the split-k main branch of each
// (query, group), for short rows. The (query, group)'s top_k CTAs are one thread block cluster, as in split-k:
//   score   CTA c (its rank in the cluster) scores the visible blocks c, c + top_k, ... (at most
//           kFusedDecodeMaxBlocksPerCta): the block's index keys by cp.async into the tile's K / V buffers (two blocks
//           in flight), the index query as row 0 of an m16 tile, each warp 16 keys with mma.sync m16n8k16 over the
//           128 padded dims in ascending 16-dim steps from zero: BlockMaxScores' dot products, so its bits. The block's
//           maximum over its visible keys, times the scale, becomes a RankKey that the CTA stores into every CTA of
//           the cluster (distributed shared memory).
//   rank    after a cluster barrier every CTA holds every visible block's key and ranks the candidates itself: a
//           candidate's slot is the number of candidates above it (keys are unique), then the forced tail
//           (WriteForcedTail). That is RankTopKCta's row entry for entry; CTA 0 writes it to topk.
//   attend  CTA c computes the partial of slot c's block (OneQueryTile) and the cluster merges the group's rows
//           (MergeClusterRow), as SplitKAttendKernel does: the same partials in the same order, so split-k's bits.
// Non-finite scaled scores record the (query, group) in bad_row as BlockMaxScores does (the first bad row by
// atomicMin). Groups of at most 16 heads (one m16 row tile), index dims multiples of 8 up to 128.
#include <cmath>

#include "gpu/attend/split_k_tile.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/kernel_fits.h"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

using kv_outer::kSmemBytes;
using kv_outer::kStride;
using mma::kFullMask;
using split_k::CarveOneQueryShared;
using split_k::ForEachSplitKChunk;
using split_k::kMaxSlots;
using split_k::kOneQueryWarps;
using split_k::kRows;
using split_k::LoadBlockRows;
using split_k::LoadGroupQueries;
using split_k::MergeClusterRow;
using split_k::OneQueryTile;
using split_k::SetSplitKAttributes;

constexpr int kMaxBlocks = kMaxSlots * kFusedDecodeMaxBlocksPerCta;  // visible blocks of a row
constexpr int kIndexDimSteps = kv_outer::kDimPad / 16;               // BlockMaxScores' 16-dim steps (kDiPad = 128)
static_assert(kv_outer::kDimPad == kBlockMaxDiPad, "the index dims are padded as BlockMaxScores pads them");
static_assert(kOneQueryWarps * 16 == kv_outer::kKeyPad, "each warp scores 16 keys of a block of at most 128");

// Issues the index keys of this CTA's j-th block (block slot + top_k j, keys [b bk, b bk + nkeys)) into buffer j % 2
// (the tile's K or V buffer), one committed cp.async group.
__device__ inline void LoadIndexBlock(const FusedDecodeIndex& ix, const AttendGeometry& g, int64_t kb, int64_t pos,
                                      int slot, int j, const kv_outer::TileShared& s) {
  const int64_t key0 = int64_t(slot + g.top_k * j) * g.bk;
  const int nkeys = int(pos - key0 + 1 < g.bk ? pos - key0 + 1 : g.bk);
  LoadBlockRows(ix.index_k, kb, key0, nkeys, /*hkv=*/1, /*r=*/0, ix.di, j % 2 == 0 ? s.ks : s.vs);
}

// CTA i = (t - t0) * Hkv * top_k + group * top_k + slot, in clusters of top_k (block rank = slot), as
// SplitKAttendKernel. Needs SplitKAttendFits and FusedDecodeShapeFits (kernel_fits.h).
template <int kLowp>
__global__ void __launch_bounds__(kOneQueryWarps * 32, kv_outer::kCtasPerSm)
    FusedDecodeKernel(FusedDecodeIndex ix, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                      const int64_t* position, const int64_t* key_begin, AttendGeometry g, float scale, int64_t t0,
                      float* part_o, float2* part_ml, DeviceAttendOutputs outputs) {
  extern __shared__ __align__(16) unsigned char fused_smem[];
  __shared__ unsigned long long keys[kMaxBlocks];  // per visible block: its RankKey, stored by the CTA that scored it
  __shared__ int32_t selection[kMaxSlots];         // the (query, group)'s row, RankTopKCta's
  __shared__ int32_t order[kMaxSlots];             // its valid slots in ascending block order
  __shared__ uint32_t valid_mask;
  __shared__ float warp_max[kOneQueryWarps];
  ClusterArrive();
  WaitForPrimary();  // the step's inputs may come from the kernel before it
  const kv_outer::TileShared s = kv_outer::CarveTileShared(fused_smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = g.hq / g.hkv;
  const int i = int(blockIdx.x);  // grid x = chunk queries * Hkv * top_k < 2^31
  const int64_t t_local = i / (g.hkv * g.top_k), t = t0 + t_local;
  const int r = (i / g.top_k) % g.hkv, slot = i % g.top_k;
  LoadGroupQueries(q, g, t, r, s);  // the main branch's Q rows: s.qs rows [0, kRows)
  const int64_t pos = position[t], kb = key_begin[t];
  const int64_t visible = pos / g.bk + 1;

  // The index query as row 0 of an m16 tile in s.qs rows [kRows, 2 kRows), the other rows zero.
  uint16_t* const index_rows = s.qs + kRows * kStride;
  for (int e = tid; e < kRows * (kv_outer::kDimPad / 8); e += blockDim.x) {
    const int row = e / (kv_outer::kDimPad / 8), piece = e % (kv_outer::kDimPad / 8);
    const bool valid = row == 0 && piece * 8 < ix.di;
    mma::CopyAsync16(index_rows + row * kStride + piece * 8,
                     ix.index_q + (valid ? (t * g.hkv + r) * ix.di + piece * 8 : 0), valid);
  }
  mma::CopyAsyncCommit();
  const int my_blocks = visible > slot ? int((visible - 1 - slot) / g.top_k) + 1 : 0;
  for (int j = 0; j < 2 && j < my_blocks; ++j) LoadIndexBlock(ix, g, kb, pos, slot, j, s);
  ClusterWait();  // every CTA of the cluster has started

  const int gid = lane / 4, tig = lane % 4;
  const int b_key = (lane / 16) * 8 + lane % 8, b_dim = ((lane / 8) % 2) * 8;  // BlockMaxScores' B fragments
  uint32_t a[kIndexDimSteps][4];
  bool bad = false;
  for (int j = 0; j < my_blocks; ++j) {
    if (j + 1 < my_blocks) {
      mma::CopyAsyncWait<1>();
    } else {
      mma::CopyAsyncWait<0>();
    }
    __syncthreads();  // block j's keys (and, for j = 0, the index query) landed
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < kIndexDimSteps; ++kk) {
        mma::LoadMatrixX4(a[kk], index_rows + (lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
      }
    }
    const int64_t b = slot + int64_t(g.top_k) * j, key0 = b * g.bk;
    const int nkeys = int(pos - key0 + 1 < g.bk ? pos - key0 + 1 : g.bk);
    const uint16_t* block_keys = j % 2 == 0 ? s.ks : s.vs;
    float best = -INFINITY;
    if (warp * 16 < nkeys) {  // warp-uniform
      float c[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int kk = 0; kk < kIndexDimSteps; ++kk) {
        uint32_t bf[4];
        mma::LoadMatrixX4(bf, block_keys + (warp * 16 + b_key) * kStride + kk * 16 + b_dim);
        mma::Mma16816<kLowp>(c[0], a[kk], bf[0], bf[1]);
        mma::Mma16816<kLowp>(c[1], a[kk], bf[2], bf[3]);
      }
      if (gid == 0) {  // row 0: the index query
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float score = c[n][e];
            if (warp * 16 + n * 8 + tig * 2 + e < nkeys) {
              bad = bad || !isfinite(score * ix.scale);
              best = score > best ? score : best;
            }
          }
        }
      }
    }
    best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 1));
    best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 2));
    if (lane == 0) warp_max[warp] = best;
    __syncthreads();  // the warps' maxima; every read of buffer j % 2 done
    if (j + 2 < my_blocks) LoadIndexBlock(ix, g, kb, pos, slot, j + 2, s);
    if (warp == 0) {
      float block_max = warp_max[0];
      for (int w = 1; w < kOneQueryWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
      const float value = block_max * ix.scale;
      bad = bad || !isfinite(value);
      if (lane < g.top_k) StoreToClusterCta(&keys[b], unsigned(lane), RankKey(value, b));
    }
    __syncthreads();  // warp_max is read before the next block writes it
  }
  if (__syncthreads_or(bad) && tid == 0) atomicMin(ix.bad_row, static_cast<unsigned long long>(t * g.hkv + r));
  ClusterSync();  // every visible block's key in every CTA

  const ForcedBlocks forced = ForcedBlocksOf(visible, ix.init_blocks, ix.local_blocks, g.top_k);
  const int64_t take = forced.take;
  for (int64_t b = forced.init_end + tid; b < forced.local_begin; b += blockDim.x) {
    const unsigned long long key = keys[b];
    int64_t rank = 0;
    for (int64_t other = forced.init_end; other < forced.local_begin; ++other) rank += keys[other] > key;
    if (rank < take) selection[rank] = int32_t(b);
  }
  if (tid == 0) WriteForcedTail(forced, g.top_k, selection);
  __syncthreads();
  if (slot == 0 && tid < g.top_k) ix.topk[(int64_t(r) * g.total_q + t) * g.top_k + tid] = selection[tid];

  if (warp == 0) {  // as SplitKAttendKernel, from the row in shared memory
    const int32_t id = lane < g.top_k ? selection[lane] : -1;
    const int rank = kv_outer::SlotRank(id, g.top_k);
    if (id >= 0) order[rank] = lane;
    const uint32_t mask = __ballot_sync(kFullMask, id >= 0);
    if (lane == 0) valid_mask = mask;
  }
  __syncthreads();
  const int32_t id = selection[slot];
  if (id >= 0) {
    OneQueryTile<kLowp>(k, v, g, scale, int32_t(t_local * g.top_k + slot), pos, kb, r, int64_t(id) * g.bk, s,
                        CarveOneQueryShared(fused_smem + kSmemBytes), part_o, part_ml);
  }
  mma::CopyAsyncWait<0>();  // a -1 slot's Q copies land before the CTA exits
  ClusterSync();            // every slot's partials written and visible
  for (int row = slot + g.top_k * warp; row < group; row += g.top_k * kOneQueryWarps) {
    MergeClusterRow(g, t, r * group + row, t_local * g.hq + r * group + row, order, valid_mask, part_o, part_ml,
                    outputs);
  }
}

}  // namespace

cudaError_t FusedDecodeStep(int lowp, const FusedDecodeIndex& index, const uint16_t* q, const uint16_t* k,
                            const uint16_t* v, const int64_t* position, const int64_t* key_begin,
                            const AttendGeometry& g, int64_t longest_visible_blocks, float scale,
                            const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                            cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!FusedDecodeShapeFits(g, index.di, longest_visible_blocks)) return cudaErrorInvalidValue;
  const auto kernel = lowp == kLowpBF16 ? FusedDecodeKernel<kLowpBF16> : FusedDecodeKernel<kLowpF16>;
  const cudaError_t err = SetSplitKAttributes(kernel);
  if (err != cudaSuccess) return err;
  return ForEachSplitKChunk(g, plan, workspace, [&](int64_t t0, dim3 grid, float* part_o, float2* part_ml) {
    return LaunchDependentCluster(kernel, grid, dim3{unsigned(kOneQueryWarps) * 32}, kSplitKSmemBytes,
                                  unsigned(g.top_k), stream, index, q, k, v, position, key_begin, g, scale, t0, part_o,
                                  part_ml, outputs);
  });
}

}  // namespace msa::gpu
