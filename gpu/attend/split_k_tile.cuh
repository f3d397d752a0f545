// The split-k tile of one query (gpu/attend/split_k.cu, gpu/attend/fused_decode.cu): a CTA computes the KV-outer
// partial of one (query, group, selected block), and the (query, group)'s cluster merges its rows. OneQueryTile gives
// AttendTile's bits on eight warps for groups of at most 16 heads; MergeClusterRow gives MergeRow's.
#ifndef MSA_GPU_ATTEND_SPLIT_K_TILE_CUH_
#define MSA_GPU_ATTEND_SPLIT_K_TILE_CUH_

#include "gpu/attend/kv_outer_tile.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu::split_k {

using kv_outer::kDimPad;
using kv_outer::kKeyPad;
using kv_outer::kSmemBytes;
using kv_outer::kStride;
using mma::kFullMask;

constexpr int kRows = 16;  // one m16 row tile: a group of at most 16 heads
// Warps of a split-k CTA: groups of at most 16 heads take OneQueryTile on kOneQueryWarps, larger groups AttendTile
// (kv_outer::kWarps).
constexpr int kOneQueryWarps = 8;
constexpr int kKeyTilesPerWarp = kKeyPad / 16 / kOneQueryWarps;  // 16-key steps of S per warp
constexpr int kDimTilesPerWarp = kDimPad / 16 / kOneQueryWarps;  // 16-dim steps of O per warp

// OneQueryTile's shared memory past the tile's (kSmemBytes): P in fp32 and as A fragments, the warps' row maxima.
// P's rows are kPStride floats apart, so that a warp's float2 accesses (8 rows x 4 threads) hit distinct banks; a
// lane's 4 fragment registers are one 16-byte word.
constexpr int kPStride = kKeyPad + 8;
struct OneQueryShared {
  float* p;         // [kRows][kPStride]
  uint4* pa;        // [kKeyPad / 16][32 lanes]
  float* warp_max;  // [kOneQueryWarps][kRows]
};
constexpr size_t kOneQuerySmemBytes =
    size_t(kRows) * kPStride * 4 + size_t(kKeyPad / 16) * 32 * 16 + size_t(kOneQueryWarps) * kRows * 4;
__device__ inline OneQueryShared CarveOneQueryShared(unsigned char* smem) {
  OneQueryShared x;
  x.p = reinterpret_cast<float*>(smem);
  x.pa = reinterpret_cast<uint4*>(x.p + kRows * kPStride);
  x.warp_max = reinterpret_cast<float*>(x.pa + (kKeyPad / 16) * 32);
  return x;
}

// The Q rows of a one-query tile into s.qs by cp.async, one committed group: the group's heads (query t, group r),
// then zero rows up to kRows. Q is an input of the step, not of the top-k: split-k issues it before it waits.
__device__ inline void LoadGroupQueries(const uint16_t* q, const AttendGeometry& g, int64_t t, int r,
                                        const kv_outer::TileShared& s) {
  const int group = g.hq / g.hkv;
  for (int e = threadIdx.x; e < kRows * (kDimPad / 8); e += blockDim.x) {
    const int row = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = row < group && piece * 8 < g.d;
    mma::CopyAsync16(s.qs + row * kStride + piece * 8, q + (valid ? (t * g.hq + r * group + row) * g.d + piece * 8 : 0),
                     valid);
  }
  mma::CopyAsyncCommit();
}

// One committed cp.async group: the block's rows of kv head r (keys kb + key0 + i, i < nkeys; `dims` of `row_dims`
// each, in rows of hkv heads) into smem rows of kStride, zeros past nkeys and past dims. Thread tid copies the 16-byte
// piece tid % kPieces of keys tid / kPieces + kKeysPerPass j from one source pointer advanced by a pass's rows: the
// copies are issued back to back (a warp per SM sub-partition here, so every instruction's latency is exposed).
__device__ inline void LoadBlockRows(const uint16_t* src, int64_t kb, int64_t key0, int nkeys, int hkv, int r, int dims,
                                     uint16_t* dst) {
  constexpr int kPieces = kDimPad / 8, kKeysPerPass = kOneQueryWarps * 32 / kPieces;
  static_assert(kOneQueryWarps * 32 % kPieces == 0 && kKeyPad % kKeysPerPass == 0, "whole passes of whole rows");
  const int piece = int(threadIdx.x) % kPieces, first_key = int(threadIdx.x) / kPieces;
  const bool piece_valid = piece * 8 < dims;
  const uint16_t* from = src + ((kb + key0 + first_key) * hkv + r) * dims + piece * 8;
  const int64_t pass_elements = int64_t(kKeysPerPass) * hkv * dims;
  uint16_t* to = dst + first_key * kStride + piece * 8;
#pragma unroll
  for (int pass = 0; pass < kKeyPad / kKeysPerPass; ++pass) {
    const bool valid = piece_valid && first_key + pass * kKeysPerPass < nkeys;
    mma::CopyAsync16(to, valid ? from : src, valid);  // an invalid copy reads nothing and writes zeros
    from += pass_elements;
    to += kKeysPerPass * kStride;
  }
  mma::CopyAsyncCommit();
}

// AttendTile's partial for a tile of one query whose group has at most 16 heads (tile entry `entry`, the query at key
// position pos, its keys from kb), on all kOneQueryWarps warps; the same preconditions and the same bits,
// and Q already issued (LoadGroupQueries).
template <int kLowp>
__device__ inline void OneQueryTile(const uint16_t* k, const uint16_t* v, const AttendGeometry& g, float scale,
                                    int32_t entry, int64_t pos, int64_t kb, int r, int64_t key0,
                                    const kv_outer::TileShared& s, const OneQueryShared& x, float* part_o,
                                    float2* part_ml) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv;
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  const int v_key = ((lane / 8) % 2) * 8 + lane % 8, v_dim = (lane / 16) * 8;
  const int nkeys = int(pos - key0 + 1 < g.bk ? pos - key0 + 1 : g.bk);

  LoadBlockRows(k, kb, key0, nkeys, g.hkv, r, g.d, s.ks);
  LoadBlockRows(v, kb, key0, nkeys, g.hkv, r, g.dv, s.vs);
  mma::CopyAsyncWait<1>();
  __syncthreads();

  const int row_h[2] = {gid, gid + 8};
  int key_limit[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t seen = (row_h[h] < group ? pos : -1) - key0 + 1;
    key_limit[h] = int(seen < nkeys ? (seen < 0 ? 0 : seen) : nkeys);
  }
  // S of this warp's keys: 16-key steps kt = warp * kKeyTilesPerWarp + j.
  float sc[2 * kKeyTilesPerWarp][4];
#pragma unroll
  for (int i = 0; i < 2 * kKeyTilesPerWarp; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kDimPad / 16; ++kk) {
    uint32_t a[4];
    mma::LoadMatrixX4(a, s.qs + (lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
    for (int j = 0; j < kKeyTilesPerWarp; ++j) {
      const int kt = warp * kKeyTilesPerWarp + j;
      if (kt * 16 < nkeys) {
        uint32_t b[4];
        mma::LoadMatrixX4(b, s.ks + (kt * 16 + k_key) * kStride + kk * 16 + k_dim);
        mma::Mma16816<kLowp>(sc[2 * j], a, b[0], b[1]);
        mma::Mma16816<kLowp>(sc[2 * j + 1], a, b[2], b[3]);
      }
    }
  }
  float m_row[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < 2 * kKeyTilesPerWarp; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2, key = (warp * 2 * kKeyTilesPerWarp + n) * 8 + tig * 2 + (e & 1);
      sc[n][e] = key < key_limit[h] ? mma::ToFloat<kLowp>(mma::Score16<kLowp>(sc[n][e], scale)) : -INFINITY;
      m_row[h] = fmaxf(m_row[h], sc[n][e]);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 1));
    m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 2));
    if (tig == 0) x.warp_max[warp * kRows + row_h[h]] = m_row[h];
  }
  __syncthreads();
  float m_log2[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_row[h] = x.warp_max[row_h[h]];
    for (int w = 1; w < kOneQueryWarps; ++w) m_row[h] = fmaxf(m_row[h], x.warp_max[w * kRows + row_h[h]]);
    m_log2[h] = mma::MaxLog2(m_row[h]);
  }
#pragma unroll
  for (int j = 0; j < kKeyTilesPerWarp; ++j) {
    const int kt = warp * kKeyTilesPerWarp + j;
    float p[2][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        p[half][e] = mma::Exp2Approx(fmaf(sc[2 * j + half][e], kv_outer::kLog2e, -m_log2[e / 2]));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        *reinterpret_cast<float2*>(x.p + row_h[h] * kPStride + kt * 16 + half * 8 + tig * 2) =
            make_float2(p[half][2 * h], p[half][2 * h + 1]);
      }
    }
    x.pa[kt * 32 + lane] = make_uint4(mma::Pack<kLowp>(p[0][0], p[0][1]), mma::Pack<kLowp>(p[0][2], p[0][3]),
                                      mma::Pack<kLowp>(p[1][0], p[1][1]), mma::Pack<kLowp>(p[1][2], p[1][3]));
  }
  mma::CopyAsyncWait<0>();
  __syncthreads();  // P complete, V landed

  float l_row[2] = {0.0f, 0.0f};
  if (warp == 0) {  // AttendTile's order: 16-key steps, then halves, then the thread's elements
#pragma unroll
    for (int kt = 0; kt < kKeyPad / 16; ++kt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // elements e = 2 h, 2 h + 1
          const float2 pair =
              *reinterpret_cast<const float2*>(x.p + row_h[h] * kPStride + kt * 16 + half * 8 + tig * 2);
          l_row[h] += pair.x;
          l_row[h] += pair.y;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l_row[h] += __shfl_xor_sync(kFullMask, l_row[h], 1);
      l_row[h] += __shfl_xor_sync(kFullMask, l_row[h], 2);
    }
  }
  // O of this warp's dims: 16-dim steps dp = warp * kDimTilesPerWarp + j, every 16-key step in order.
  float o[2 * kDimTilesPerWarp][4];
#pragma unroll
  for (int i = 0; i < 2 * kDimTilesPerWarp; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
#pragma unroll
  for (int kt = 0; kt < kKeyPad / 16; ++kt) {
    if (kt * 16 < nkeys) {
      const uint4 word = x.pa[kt * 32 + lane];
      const uint32_t pa[4] = {word.x, word.y, word.z, word.w};
#pragma unroll
      for (int j = 0; j < kDimTilesPerWarp; ++j) {
        const int dp = warp * kDimTilesPerWarp + j;
        uint32_t b[4];
        mma::LoadMatrixX4Trans(b, s.vs + (kt * 16 + v_key) * kStride + dp * 16 + v_dim);
        mma::Mma16816<kLowp>(o[2 * j], pa, b[0], b[1]);
        mma::Mma16816<kLowp>(o[2 * j + 1], pa, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (row_h[h] >= group) continue;  // padding row
    const int64_t part = ((entry / g.top_k) * int64_t(g.hq) + r * group + row_h[h]) * g.top_k + entry % g.top_k;
    float* dst = part_o + part * g.dv;
#pragma unroll
    for (int j = 0; j < 2 * kDimTilesPerWarp; ++j) {
      const int i = warp * 2 * kDimTilesPerWarp + j;  // 8-dim tile
      if (i * 8 < g.dv) *reinterpret_cast<float2*>(dst + i * 8 + tig * 2) = make_float2(o[j][2 * h], o[j][2 * h + 1]);
    }
    if (warp == 0 && tig == 0) part_ml[part] = make_float2(m_row[h], l_row[h]);
  }
}

// The merge of the (query t, head) row, chunk row `row`, by one warp, with MergeRow's steps (SlotWeight,
// FoldPartial, WriteMergedRow), so its bits: lane j holds slot j's (m_b, l_b) (-inf, 0 for a -1 slot), the row maximum
// is their warp maximum, and the partials fold in ascending block order (`order`: the valid slots in that order; bit j
// of `valid_mask`: slot j is valid). Every partial load is issued before the first fold: one round trip to L2
// (ld.global.cg: never a stale L1 line). top_k <= kMaxSlots.
constexpr int kMaxSlots = kSplitKMaxSlots;
__device__ inline void MergeClusterRow(const AttendGeometry& g, int64_t t, int head, int64_t row, const int32_t* order,
                                       uint32_t valid_mask, const float* part_o, const float2* part_ml,
                                       const DeviceAttendOutputs& outputs) {
  const int lane = threadIdx.x % 32, valid_slots = __popc(valid_mask);
  const int64_t base = row * g.top_k;
  const bool lane_valid = (valid_mask >> lane) & 1u;
  const float2 ml_of_lane = lane_valid ? __ldcg(part_ml + base + lane) : make_float2(-INFINITY, 0.0f);
  const bool owns_dims = lane * 4 < g.dv;
  float4 o[kMaxSlots];
#pragma unroll
  for (int k = 0; k < kMaxSlots; ++k) {
    if (owns_dims && k < valid_slots) {
      o[k] = __ldcg(reinterpret_cast<const float4*>(part_o + (base + order[k]) * g.dv + lane * 4));
    }
  }
  float m = ml_of_lane.x;
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  const float weight_of_lane = kv_outer::SlotWeight(ml_of_lane, m);
  float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < kMaxSlots; ++k) {
    if (k >= valid_slots) break;  // warp-uniform
    kv_outer::FoldPartial(ml_of_lane, weight_of_lane, order[k], o[k], owns_dims, l, acc);
  }
  kv_outer::WriteMergedRow(g, t, head, lane, m, l, acc, outputs);
}

static_assert(kSmemBytes + kOneQuerySmemBytes == kSplitKSmemBytes, "SplitKAttendFits (gpu/common/kernel_fits.h)");

// A split-k kernel's launch attributes: its dynamic shared memory (kSplitKSmemBytes), and clusters past the portable 8
// CTAs.
template <class Kernel>
cudaError_t SetSplitKAttributes(Kernel* kernel) {
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSplitKSmemBytes));
  if (err != cudaSuccess) return err;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

// launch(t0, grid, part_o, part_ml) for each chunk of plan.chunk_q queries from t0 (grid: a CTA per (query, group,
// slot)), with the partial results of PlanKvOuter's layout in `workspace`; the first error, else the launches' error.
template <typename Launch>
cudaError_t ForEachSplitKChunk(const AttendGeometry& g, const KvOuterPlan& plan, void* workspace, Launch&& launch) {
  unsigned char* base = static_cast<unsigned char*>(workspace);
  float* part_o = reinterpret_cast<float*>(base + plan.part_o);
  float2* part_ml = reinterpret_cast<float2*>(base + plan.part_ml);
  for (int64_t t0 = 0; t0 < g.total_q; t0 += plan.chunk_q) {
    const int64_t nq = plan.chunk_q < g.total_q - t0 ? plan.chunk_q : g.total_q - t0;
    const cudaError_t err = launch(t0, dim3{unsigned(nq * g.hkv * g.top_k)}, part_o, part_ml);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

}  // namespace msa::gpu::split_k

#endif  // MSA_GPU_ATTEND_SPLIT_K_TILE_CUH_
