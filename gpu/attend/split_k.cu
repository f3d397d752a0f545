// The main branch split over selection slots (split-K), for decode: one CTA per (query, group, slot) computes the
// KV-outer tile of that one block (the group's heads as rows, one partial per row), then counts itself in the (query,
// group)'s arrival counter; the last of the top_k CTAs to arrive merges the rows' partials (MergeGroup: MergeRow's
// arithmetic, ascending block order) into out and lse and resets the counter. One launch per chunk of queries, no
// lists, no separate merge: the same partials and the same merge as KvOuterAttend, so the same bits. The launch is a
// programmatic dependent of the kernel before it (the top-k): its CTAs wait for the selection with WaitForPrimary, so
// their launch overlaps the top-k's tail.
//
// A group of at most 16 heads fills one m16 row tile, which AttendTile gives to one warp of four; OneQueryTile spreads
// that tile over the four warps with the same bits: S by key quarters (each score is the same dot in the same
// order), the row maxima combined through shared memory (fmaxf is exact), P in shared memory so that one warp sums l
// in AttendTile's order, and O = P V by dim quarters (each output keeps its 16-key order). Larger groups take
// AttendTile.
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
using kv_outer::kWarps;
using mma::kFullMask;

constexpr int kRows = 16;                                // one m16 row tile: a group of at most 16 heads
constexpr int kKeyTilesPerWarp = kKeyPad / 16 / kWarps;  // 16-key steps of S per warp
constexpr int kDimTilesPerWarp = kDimPad / 16 / kWarps;  // 16-dim steps of O per warp

// OneQueryTile's shared memory past the tile's (kSmemBytes): P in fp32 and as A fragments, the warps' row maxima.
struct OneQueryShared {
  float* p;         // [kRows][kKeyPad]
  uint32_t* pa;     // [kKeyPad / 16][32 lanes][4]
  float* warp_max;  // [kWarps][kRows]
};
constexpr size_t kOneQuerySmemBytes =
    size_t(kRows) * kKeyPad * 4 + size_t(kKeyPad / 16) * 32 * 4 * 4 + size_t(kWarps) * kRows * 4;
__device__ inline OneQueryShared CarveOneQueryShared(unsigned char* smem) {
  OneQueryShared x;
  x.p = reinterpret_cast<float*>(smem);
  x.pa = reinterpret_cast<uint32_t*>(x.p + kRows * kKeyPad);
  x.warp_max = reinterpret_cast<float*>(x.pa + (kKeyPad / 16) * 32 * 4);
  return x;
}

// AttendTile's partial for a tile of one query whose group has at most 16 heads (entry 0 the query, the others
// padding), on all four warps; the same preconditions and the same bits.
template <int kLowp>
__device__ inline void OneQueryTile(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int64_t* key_begin,
                                    const AttendGeometry& g, float scale, int64_t t0, int r, int64_t key0,
                                    const kv_outer::TileShared& s, const OneQueryShared& x, float* part_o,
                                    float2* part_ml) {
  using mma::CopyAsync16;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv;
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  const int v_key = ((lane / 8) % 2) * 8 + lane % 8, v_dim = (lane / 16) * 8;
  const int32_t entry = s.tile_entry[0];
  const int64_t t = t0 + entry / g.top_k, pos = s.tile_pos[0], kb = key_begin[t];
  const int nkeys = int(pos - key0 + 1 < g.bk ? pos - key0 + 1 : g.bk);

  for (int e = tid; e < kRows * (kDimPad / 8); e += blockDim.x) {  // Q: the group's heads, then zero rows
    const int row = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = row < group && piece * 8 < g.d;
    CopyAsync16(s.qs + row * kStride + piece * 8, q + (valid ? (t * g.hq + r * group + row) * g.d + piece * 8 : 0),
                valid);
  }
  for (int e = tid; e < kKeyPad * (kDimPad / 8); e += blockDim.x) {
    const int key = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = key < nkeys && piece * 8 < g.d;
    CopyAsync16(s.ks + key * kStride + piece * 8, k + (valid ? ((kb + key0 + key) * g.hkv + r) * g.d + piece * 8 : 0),
                valid);
  }
  mma::CopyAsyncCommit();
  for (int e = tid; e < kKeyPad * (kDimPad / 8); e += blockDim.x) {
    const int key = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = key < nkeys && piece * 8 < g.dv;
    CopyAsync16(s.vs + key * kStride + piece * 8, v + (valid ? ((kb + key0 + key) * g.hkv + r) * g.dv + piece * 8 : 0),
                valid);
  }
  mma::CopyAsyncCommit();
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
    for (int w = 1; w < kWarps; ++w) m_row[h] = fmaxf(m_row[h], x.warp_max[w * kRows + row_h[h]]);
    m_log2[h] = m_row[h] * kv_outer::kLog2e;
  }
#pragma unroll
  for (int j = 0; j < kKeyTilesPerWarp; ++j) {
    const int kt = warp * kKeyTilesPerWarp + j;
    float p[2][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[half][e] = exp2f(fmaf(sc[2 * j + half][e], kv_outer::kLog2e, -m_log2[e / 2]));
        x.p[row_h[e / 2] * kKeyPad + kt * 16 + half * 8 + tig * 2 + (e & 1)] = p[half][e];
      }
    }
    uint32_t* pa = x.pa + (kt * 32 + lane) * 4;
    pa[0] = mma::Pack<kLowp>(p[0][0], p[0][1]);
    pa[1] = mma::Pack<kLowp>(p[0][2], p[0][3]);
    pa[2] = mma::Pack<kLowp>(p[1][0], p[1][1]);
    pa[3] = mma::Pack<kLowp>(p[1][2], p[1][3]);
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
        for (int e = 0; e < 4; ++e)
          l_row[e / 2] += x.p[row_h[e / 2] * kKeyPad + kt * 16 + half * 8 + tig * 2 + (e & 1)];
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
      const uint32_t* pa_ptr = x.pa + (kt * 32 + lane) * 4;
      const uint32_t pa[4] = {pa_ptr[0], pa_ptr[1], pa_ptr[2], pa_ptr[3]};
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

// The last arriver's merge of the (query t, group r) rows with MergeRow's arithmetic (kv_outer_tile.cuh: the row
// maximum M over its valid slots, then in ascending block order w = e^(m_b - M), l += l_b w, acc += O_b w; out =
// acc / l, lse = M + log l), so the same bits, but for all of the group's rows at once: their partials (contiguous in
// part_o) staged in shared memory by cp.async in passes of kMergeStageBytes, so that a whole pass is in flight
// instead of one row's loads per warp. smem: at least kMergeSmemBytes.
constexpr size_t kMergeStageBytes = 64 * 1024;
constexpr size_t kMergeHeadBytes = 32 * 4 + 16 + 64 * 4 + 64 * 32 * 8;  // order, count, row maxima, (m_b, l_b)
constexpr size_t kMergeSmemBytes = kMergeHeadBytes + kMergeStageBytes;
__device__ inline void MergeGroup(const int32_t* topk, const AttendGeometry& g, int64_t t, int64_t t_local, int r,
                                  const float* part_o, const float2* part_ml, double* out, double* lse,
                                  unsigned char* smem) {
  const int tid = threadIdx.x, lane = tid % 32, group = g.hq / g.hkv, top_k = g.top_k;
  int32_t* order = reinterpret_cast<int32_t*>(smem);                // [32]: slots in ascending block order
  int32_t* count = order + 32;                                      // [4]: count[0] = valid slots
  float* row_max = reinterpret_cast<float*>(count + 4);             // [64]
  float2* ml = reinterpret_cast<float2*>(row_max + 64);             // [group][top_k]
  float* stage = reinterpret_cast<float*>(smem + kMergeHeadBytes);  // [rows of a pass][top_k][dv]
  if (tid < 32) {
    const int32_t id = lane < top_k ? topk[(int64_t(r) * g.total_q + t) * top_k + lane] : -1;
    const bool valid = id >= 0;
    const int rank = kv_outer::SlotRank(id, top_k);
    if (valid) order[rank] = lane;
    const int valid_slots = __popc(__ballot_sync(kFullMask, valid));  // the whole warp takes part
    if (lane == 0) count[0] = valid_slots;
  }
  const int64_t first_row = t_local * g.hq + int64_t(r) * group;  // chunk row of the group's first head
  for (int i = tid; i < group * top_k; i += blockDim.x) ml[i] = __ldcg(part_ml + first_row * top_k + i);
  __syncthreads();
  const int nb = count[0];
  for (int row = tid; row < group; row += blockDim.x) {
    float m = -INFINITY;
    for (int k = 0; k < nb; ++k) m = fmaxf(m, ml[row * top_k + order[k]].x);
    row_max[row] = m;
  }
  const int row_floats = top_k * g.dv, quads = g.dv / 4;
  const int rows_per_pass = int(kMergeStageBytes / (size_t(row_floats) * 4));
  for (int row0 = 0; row0 < group; row0 += rows_per_pass) {
    const int rows = group - row0 < rows_per_pass ? group - row0 : rows_per_pass;
    const float* src = part_o + (first_row + row0) * row_floats;
    for (int i = tid; i < rows * row_floats / 4; i += blockDim.x) mma::CopyAsync16(stage + i * 4, src + i * 4, true);
    mma::CopyAsyncCommit();
    mma::CopyAsyncWait<0>();
    __syncthreads();
    for (int task = tid; task < rows * quads; task += blockDim.x) {
      const int row = row0 + task / quads, quad = task % quads;
      const float m = row_max[row];
      float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int k = 0; k < nb; ++k) {
        const int slot = order[k];
        const float2 m_l = ml[row * top_k + slot];
        const float w = expf(m_l.x - m);
        l += m_l.y * w;
        const float4 o = *reinterpret_cast<const float4*>(stage + ((row - row0) * top_k + slot) * g.dv + quad * 4);
        acc[0] += o.x * w;
        acc[1] += o.y * w;
        acc[2] += o.z * w;
        acc[3] += o.w * w;
      }
      const int head = r * group + row;
      double* dst = out + (t * g.hq + head) * g.dv + quad * 4;
      for (int c = 0; c < 4; ++c) dst[c] = double(acc[c] / l);
      if (quad == 0) lse[t * g.hq + head] = double(m + logf(l));
    }
    __syncthreads();  // the next pass overwrites the stage
  }
}

// CTA i = (t - t0) * Hkv * top_k + group * top_k + slot. arrivals [chunk_q * Hkv]: zero between launches.
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32, kv_outer::kCtasPerSm)
    SplitKAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                       const int64_t* position, const int64_t* key_begin, AttendGeometry g, float scale, int64_t t0,
                       float* part_o, float2* part_ml, int32_t* arrivals, double* out, double* lse) {
  extern __shared__ __align__(16) unsigned char split_k_smem[];
  __shared__ bool last_to_arrive;
  const kv_outer::TileShared s = kv_outer::CarveTileShared(split_k_smem);
  const int tid = threadIdx.x, qpc = kv_outer::TileQueries(g), group = g.hq / g.hkv;
  const int64_t i = blockIdx.x, t_local = i / (int64_t(g.hkv) * g.top_k), t = t0 + t_local;
  const int r = int((i / g.top_k) % g.hkv), slot = int(i % g.top_k);
  WaitForPrimary();
  const int32_t id = topk[(int64_t(r) * g.total_q + t) * g.top_k + slot];
  if (id >= 0) {  // a -1 slot has no partial: the merge reads valid slots only
    if (tid < qpc) {
      s.tile_entry[tid] = tid == 0 ? int32_t(t_local * g.top_k + slot) : -1;
      s.tile_pos[tid] = tid == 0 ? position[t] : -1;
    }
    __syncthreads();
    if (group <= kRows) {
      OneQueryTile<kLowp>(q, k, v, key_begin, g, scale, t0, r, int64_t(id) * g.bk, s,
                          CarveOneQueryShared(split_k_smem + kSmemBytes), part_o, part_ml);
    } else {
      kv_outer::AttendTile<kLowp>(q, k, v, key_begin, g, scale, t0, r, int64_t(id) * g.bk, s, part_o, part_ml);
    }
  }
  __threadfence();  // this CTA's partials before its arrival
  __syncthreads();
  int32_t* arrival = arrivals + t_local * g.hkv + r;
  if (tid == 0) last_to_arrive = atomicAdd(arrival, 1) == g.top_k - 1;
  __syncthreads();
  if (!last_to_arrive) return;
  __threadfence();  // every other CTA's partials before the merge reads them
  MergeGroup(topk, g, t, t_local, r, part_o, part_ml, out, lse, split_k_smem);
  if (tid == 0) *arrival = 0;
}

}  // namespace

cudaError_t SplitKAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                         const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                         const KvOuterPlan& plan, void* workspace, double* out, double* lse, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  const auto kernel = lowp == kLowpBF16 ? SplitKAttendKernel<kLowpBF16> : SplitKAttendKernel<kLowpF16>;
  static_assert(kMergeSmemBytes <= kSmemBytes, "the merge reuses the tile's shared memory");
  static_assert(kSmemBytes + kOneQuerySmemBytes == kSplitKSmemBytes, "SplitKAttendFits (gpu/common/kernel_fits.h)");
  const size_t smem = kSmemBytes + kOneQuerySmemBytes;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  unsigned char* base = static_cast<unsigned char*>(workspace);
  float* part_o = reinterpret_cast<float*>(base + plan.part_o);
  float2* part_ml = reinterpret_cast<float2*>(base + plan.part_ml);
  int32_t* arrivals = reinterpret_cast<int32_t*>(base + plan.arrivals);
  for (int64_t t0 = 0; t0 < g.total_q; t0 += plan.chunk_q) {
    const int64_t nq = std::min(plan.chunk_q, g.total_q - t0);
    const dim3 grid{unsigned(nq * g.hkv * g.top_k)};
    err = LaunchDependent(kernel, grid, dim3{kWarps * 32}, smem, stream, q, k, v, topk, position, key_begin, g, scale,
                          t0, part_o, part_ml, arrivals, out, lse);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

}  // namespace msa::gpu
