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
#include <algorithm>

#include "gpu/attend/kv_outer_tile.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

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
                                       uint32_t valid_mask, const float* part_o, const float2* part_ml, double* out,
                                       double* lse) {
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
  kv_outer::WriteMergedRow(g, t, head, lane, m, l, acc, out, lse);
}

// CTA i = (t - t0) * Hkv * top_k + group * top_k + slot; the top_k CTAs of a (query, group) form one thread block
// cluster (block rank = slot). Each computes its slot's partials (part_o, part_ml, as KvOuterAttend's tiles do), the
// cluster synchronizes, and CTA c's warp w merges the group's rows c + top_k (w + kCtaWarps i). kCtaWarps:
// kOneQueryWarps for groups of at most 16 heads, kv_outer::kWarps for larger ones.
template <int kLowp, int kCtaWarps>
__global__ void __launch_bounds__(kCtaWarps * 32, kv_outer::kCtasPerSm)
    SplitKAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                       const int64_t* position, const int64_t* key_begin, AttendGeometry g, float scale, int64_t t0,
                       float* part_o, float2* part_ml, double* out, double* lse) {
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
    MergeClusterRow(g, t, r * group + row, t_local * g.hq + r * group + row, order, valid_mask, part_o, part_ml, out,
                    lse);
  }
}

// SplitKAttendKernel's launch attributes: its dynamic shared memory, and clusters past the portable 8 CTAs.
template <class Kernel>
cudaError_t SetSplitKAttributes(Kernel* kernel) {
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes + kOneQuerySmemBytes));
  if (err != cudaSuccess) return err;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

}  // namespace

int SplitKLargestCluster() {
  const auto kernel = SplitKAttendKernel<kLowpBF16, kOneQueryWarps>;
  cudaFuncAttributes binary{};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{unsigned(kMaxSlots)};
  config.blockDim = dim3{kOneQueryWarps * 32};
  config.dynamicSmemBytes = kSmemBytes + kOneQuerySmemBytes;
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
                         const KvOuterPlan& plan, void* workspace, double* out, double* lse, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (g.top_k > kMaxSlots) return cudaErrorInvalidValue;  // SplitKAttendFits
  const bool one_query = g.hq / g.hkv <= kRows;
  const int warps = one_query ? kOneQueryWarps : kv_outer::kWarps;
  const auto kernel = one_query ? (lowp == kLowpBF16 ? SplitKAttendKernel<kLowpBF16, kOneQueryWarps>
                                                     : SplitKAttendKernel<kLowpF16, kOneQueryWarps>)
                                : (lowp == kLowpBF16 ? SplitKAttendKernel<kLowpBF16, kv_outer::kWarps>
                                                     : SplitKAttendKernel<kLowpF16, kv_outer::kWarps>);
  static_assert(kSmemBytes + kOneQuerySmemBytes == kSplitKSmemBytes, "SplitKAttendFits (gpu/common/kernel_fits.h)");
  const size_t smem = kSmemBytes + kOneQuerySmemBytes;
  cudaError_t err = SetSplitKAttributes(kernel);
  if (err != cudaSuccess) return err;
  unsigned char* base = static_cast<unsigned char*>(workspace);
  float* part_o = reinterpret_cast<float*>(base + plan.part_o);
  float2* part_ml = reinterpret_cast<float2*>(base + plan.part_ml);
  for (int64_t t0 = 0; t0 < g.total_q; t0 += plan.chunk_q) {
    const int64_t nq = std::min(plan.chunk_q, g.total_q - t0);
    const dim3 grid{unsigned(nq * g.hkv * g.top_k)};
    err = LaunchDependentCluster(kernel, grid, dim3{unsigned(warps) * 32}, smem, unsigned(g.top_k), stream, q, k, v,
                                 topk, position, key_begin, g, scale, t0, part_o, part_ml, out, lse);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

}  // namespace msa::gpu
