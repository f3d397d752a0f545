// Low-precision training (SPEC section 8) on tensor cores: bf16 / fp16 inputs (rounded once, as the forward's
// low-precision path rounds them), mma.sync m16n8k16 with fp32 accumulation (gpu/common/mma.cuh fragment layouts) for
// S, dP, dQ, dK, dV, the teacher's scores and dKi; the index scores x and dqi (one row per (t, r)) on CUDA cores in
// fp32. Judged by the oracle's 2x-naive rule (oracle/naive_lowp.h), not by bits. Rounded to the storage format: the
// inputs, P and dS before the dV, dK and dQ products, rho - pbar before the dqi and dki products (as the official
// kernels round it). Scores, softmax statistics, dP, Delta, pbar, rho and the KL terms stay fp32. Deterministic: no
// atomics, every sum in a fixed order (mma tiles in list order, fixed shuffle trees).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "gpu/common/geometry.h"
#include "gpu/common/mma.cuh"
#include "gpu/common/online_max_sum.cuh"
#include "gpu/topk/sorted_selection.cuh"
#include "gpu/training/training_kernels.h"

namespace msa::gpu {
namespace {

using mma::FromFloat;
using mma::kFullMask;
using mma::LseAdd;
using mma::LseMerge;
using mma::OnlineMaxSumTile;
using mma::OnlineSumRows;
using mma::Pack;
using mma::ToFloat;

constexpr int kTransposedStride = 24;  // a transposed tile of 16 columns: 16 entries + 8 padding (conflict-free)
constexpr int kDiPerLane = kLowpMaxDim / 32;

int RoundUp(int x, int to) { return (x + to - 1) / to * to; }
__host__ __device__ inline size_t Align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

template <int kLowp>
__device__ inline float Round16(float x) {
  return ToFloat<kLowp>(FromFloat<kLowp>(x));
}

__device__ inline uint32_t Load32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int kLowp>
__device__ inline void Mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  mma::Mma16816<kLowp>(c, a, b[0], b[1]);
}

// The A fragment of columns k0..k0+15 of a row-major 16-row tile (rows gid, gid + 8).
__device__ inline void LoadA(uint32_t a[4], const uint16_t* tile, int stride, int k0, int gid, int tig) {
  const uint16_t* ra = tile + gid * stride + k0 + tig * 2;
  const uint16_t* rb = ra + 8 * stride;
  a[0] = Load32(ra);
  a[1] = Load32(rb);
  a[2] = Load32(ra + 8);
  a[3] = Load32(rb + 8);
}

// The B fragment of an n8 tile whose column n is row n0 + n of a row-major tile (k along the row): B = tile^T.
__device__ inline void LoadB(uint32_t b[2], const uint16_t* tile, int stride, int n0, int k0, int gid, int tig) {
  const uint16_t* p = tile + (n0 + gid) * stride + k0 + tig * 2;
  b[0] = Load32(p);
  b[1] = Load32(p + 8);
}

// c = A B^T for two row-major 16-row tiles over their first kpad columns (kpad a multiple of 16): c[nt][e] holds row
// gid + 8 * (e / 2) of A against row nt * 8 + 2 * tig + e % 2 of B.
template <int kLowp>
__device__ inline void Product16x16(float c[2][4], const uint16_t* a_tile, const uint16_t* b_tile, int stride, int kpad,
                                    int gid, int tig) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
  for (int k0 = 0; k0 < kpad; k0 += 16) {
    uint32_t a[4];
    LoadA(a, a_tile, stride, k0, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      uint32_t b[2];
      LoadB(b, b_tile, stride, nt * 8, k0, gid, tig);
      Mma<kLowp>(c[nt], a, b);
    }
  }
}

// The A fragment (16 rows x 16 columns) of a 16x16 tile held in Product16x16's c layout, rounded to the format.
template <int kLowp>
__device__ inline void PackA(uint32_t a[4], const float x[2][4]) {
  a[0] = Pack<kLowp>(x[0][0], x[0][1]);
  a[1] = Pack<kLowp>(x[0][2], x[0][3]);
  a[2] = Pack<kLowp>(x[1][0], x[1][1]);
  a[3] = Pack<kLowp>(x[1][2], x[1][3]);
}

// dst[rr][c] (row stride `stride`) = row_of(rr)[c] for rr < rows and c < dim, 0 elsewhere in [tile_rows, pad).
template <typename RowOf>
__device__ inline void LoadRows(uint16_t* dst, int stride, int pad, int dim, int tile_rows, int rows, int lane,
                                RowOf row_of) {
  for (int e = lane; e < tile_rows * pad; e += 32) {
    const int rr = e / pad, c = e % pad;
    dst[rr * stride + c] = (rr < rows && c < dim) ? row_of(rr)[c] : uint16_t(0);
  }
}

// dst[c][rr] (row stride kTransposedStride) = row_of(rr)[c] for rr < rows and c < dim, 0 elsewhere in [pad, 16).
template <typename RowOf>
__device__ inline void LoadRowsTransposed(uint16_t* dst, int pad, int dim, int rows, int lane, RowOf row_of) {
  for (int e = lane; e < 16 * pad; e += 32) {
    const int rr = e % 16, c = e / 16;
    dst[c * kTransposedStride + rr] = (rr < rows && c < dim) ? row_of(rr)[c] : uint16_t(0);
  }
}

// An index token score dot(index_q row, index_k row) * scale in fp32, index_query as floats [Di].
template <int kLowp>
__device__ inline float IndexScore(const float* index_query, const uint16_t* index_key, int di, float scale) {
  float dot = 0.0f;
  for (int c = 0; c < di; ++c) dot += index_query[c] * ToFloat<kLowp>(index_key[c]);
  return dot * scale;
}

// Shared memory of the kernels that walk a selection row: prefix [top_k + 1] and 32 int64 of tile state, blocks and
// slots [top_k] each, then `floats` floats, aligned to 16 bytes; the 16-bit tiles follow.
__host__ __device__ inline size_t RowHeaderBytes(int top_k, int floats) {
  return Align16(size_t(top_k + 1 + 32) * sizeof(int64_t) + 2 * size_t(top_k) * sizeof(int32_t) +
                 size_t(floats) * sizeof(float));
}

// docs:begin gpu-lowp-backward-rows One warp per (query t, group r, 16 heads of the group), the heads' Q and dO rows
// in shared memory, the row's key set gathered in 16-key tiles (ascending key position). Pass 1: S = Q K^T (mma),
// s = dot * scale, the softmax max m and sum l kept online. Pass 2: dP = dO V^T (mma), p = exp(s - m) / l,
// Delta = sum_j p_j dP_j. Pass 3: dS = p * (dP - Delta (+ dlse)), rounded to the format as the A operand of
// dQ += dS K (mma, K transposed in shared memory). dq = scale * dQ; m, l and Delta go to the key pass.
template <int kLowp, int kTiles>
__global__ void __launch_bounds__(32)
    BackwardRowsKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                       const uint16_t* dlse, const int32_t* topk, TrainingLists lists, TrainingGeometry g, int dpad,
                       int dvpad, int head_tiles, float* row_m, float* row_l, float* row_delta, double* dq) {
  extern __shared__ __align__(16) unsigned char rows_smem[];
  int64_t* prefix = reinterpret_cast<int64_t*>(rows_smem);      // [top_k + 1]
  int64_t* key_rows = prefix + g.top_k + 1;                     // [16]: s * Hkv + r
  int32_t* blocks = reinterpret_cast<int32_t*>(key_rows + 32);  // [top_k]
  const int stride = dpad + 8, vstride = dvpad + 8;
  uint16_t* qs = reinterpret_cast<uint16_t*>(rows_smem + RowHeaderBytes(g.top_k, 0));  // [16][stride]
  uint16_t* dos = qs + 16 * stride;                                                    // [16][vstride]
  uint16_t* ks = dos + 16 * vstride;                                                   // [16][stride]
  uint16_t* vs = ks + 16 * stride;                                                     // [16][vstride]
  uint16_t* kt = vs + 16 * vstride;  // [dpad][kTransposedStride]: the key tile transposed

  const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv;
  const float scale = float(g.scale);
  const int64_t bid = blockIdx.x;
  const int ht = int(bid % head_tiles);
  const int64_t rest = bid / head_tiles;
  const int r = int(rest % g.hkv);
  const int64_t t = rest / g.hkv;
  const int nh = group - ht * 16 < 16 ? group - ht * 16 : 16;
  const int64_t row0 = t * g.hq + r * group + ht * 16, kb = lists.key_begin[t];
  int nb = 0;
  if (lane == 0) {
    nb = SortedSelection(topk + (int64_t(r) * g.total_q + t) * g.top_k, g.top_k, g.bk, lists.position[t], blocks,
                         prefix);
  }
  nb = __shfl_sync(kFullMask, nb, 0);
  LoadRows(qs, stride, dpad, g.d, 16, nh, lane, [&](int rr) { return q + (row0 + rr) * g.d; });
  LoadRows(dos, vstride, dvpad, g.dv, 16, nh, lane, [&](int rr) { return dout + (row0 + rr) * g.dv; });
  __syncwarp();
  const int64_t n = prefix[nb];

  // The gathered keys [j0, j0 + cnt): K rows, and V rows and K transposed when asked.
  const auto load_keys = [&](int64_t j0, int cnt, bool with_values, bool transposed) {
    __syncwarp();
    if (lane < cnt) key_rows[lane] = (kb + GatheredKey(j0 + lane, blocks, prefix, nb, g.bk)) * g.hkv + r;
    __syncwarp();
    const auto key_of = [&](int jj) { return k + key_rows[jj] * g.d; };
    LoadRows(ks, stride, dpad, g.d, 16, cnt, lane, key_of);
    if (with_values) LoadRows(vs, vstride, dvpad, g.dv, 16, cnt, lane, [&](int jj) { return v + key_rows[jj] * g.dv; });
    if (transposed) LoadRowsTransposed(kt, dpad, g.d, cnt, lane, key_of);
    __syncwarp();
  };
  // s = dot * scale for the tile, -inf past cnt.
  const auto scores = [&](int cnt, float s[2][4]) {
    Product16x16<kLowp>(s, qs, ks, stride, dpad, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = nt * 8 + tig * 2 + (e & 1) < cnt ? s[nt][e] * scale : -INFINITY;
    }
  };

  // Pass 1: rows gid (a) and gid + 8 (b): m and l online; the 4 threads of a row share m and split l.
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int cnt = int(n - j0 < 16 ? n - j0 : 16);
    load_keys(j0, cnt, false, false);
    float s[2][4];
    scores(cnt, s);
    OnlineMaxSumTile(s, m_a, l_a, m_b, l_b);
  }
  OnlineSumRows(l_a, l_b);
  const auto probability = [&](float s, bool row_b) {
    return s == -INFINITY ? 0.0f : row_b ? expf(s - m_b) / l_b : expf(s - m_a) / l_a;
  };

  // Pass 2: Delta = sum_j p_j dP_j.
  float delta_a = 0.0f, delta_b = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int cnt = int(n - j0 < 16 ? n - j0 : 16);
    load_keys(j0, cnt, true, false);
    float s[2][4], dp[2][4];
    scores(cnt, s);
    Product16x16<kLowp>(dp, dos, vs, vstride, dvpad, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        delta_a += probability(s[nt][e], false) * dp[nt][e];
        delta_b += probability(s[nt][2 + e], true) * dp[nt][2 + e];
      }
    }
  }
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    delta_a += __shfl_xor_sync(kFullMask, delta_a, offset);
    delta_b += __shfl_xor_sync(kFullMask, delta_b, offset);
  }

  // Pass 3: dQ += dS K.
  const float dl_a = dlse != nullptr && gid < nh ? ToFloat<kLowp>(dlse[row0 + gid]) : 0.0f;
  const float dl_b = dlse != nullptr && gid + 8 < nh ? ToFloat<kLowp>(dlse[row0 + gid + 8]) : 0.0f;
  const int d_tiles = dpad / 8;
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int cnt = int(n - j0 < 16 ? n - j0 : 16);
    load_keys(j0, cnt, true, true);
    float s[2][4], dp[2][4], ds[2][4];
    scores(cnt, s);
    Product16x16<kLowp>(dp, dos, vs, vstride, dvpad, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        ds[nt][e] = probability(s[nt][e], false) * (dp[nt][e] - delta_a + dl_a);
        ds[nt][2 + e] = probability(s[nt][2 + e], true) * (dp[nt][2 + e] - delta_b + dl_b);
      }
    }
    uint32_t a[4];
    PackA<kLowp>(a, ds);
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      if (i < d_tiles) {
        uint32_t b[2];
        LoadB(b, kt, kTransposedStride, i * 8, 0, gid, tig);
        Mma<kLowp>(acc[i], a, b);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = i * 8 + tig * 2 + e;
      if (i < d_tiles && c < g.d) {
        if (gid < nh) dq[(row0 + gid) * g.d + c] = double(acc[i][e]) * g.scale;
        if (gid + 8 < nh) dq[(row0 + gid + 8) * g.d + c] = double(acc[i][2 + e]) * g.scale;
      }
    }
  }
  if (tig == 0 && gid < nh) {
    row_m[row0 + gid] = m_a;
    row_l[row0 + gid] = l_a;
    row_delta[row0 + gid] = delta_a;
  }
  if (tig == 0 && gid + 8 < nh) {
    row_m[row0 + gid + 8] = m_b;
    row_l[row0 + gid + 8] = l_b;
    row_delta[row0 + gid + 8] = delta_b;
  }
}
// docs:end gpu-lowp-backward-rows

// docs:begin gpu-lowp-backward-keys One warp per (key block, group r, 16 keys of the block), the keys' K and V rows in
// shared memory, the block's (t, h) rows (its contributor queries ascending, the group's heads ascending for each)
// in tiles of 16. Per tile: S^T = K Q^T and dP^T = V dO^T (mma), p = exp(s - m) / l with the row pass's m and l (0 for
// a key past the query's position), dS^T = p * (dP - Delta (+ dlse)); then dV += P^T dO and dK += dS^T Q (mma, P and
// dS rounded to the format as A operands, Q and dO transposed in shared memory). dk = scale * dK.
template <int kLowp, int kTiles>
__global__ void __launch_bounds__(32)
    BackwardKeysKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                       const uint16_t* dlse, TrainingLists lists, TrainingGeometry g, int dpad, int dvpad,
                       int key_tiles, const float* row_m, const float* row_l, const float* row_delta, double* dk,
                       double* dv) {
  extern __shared__ __align__(16) unsigned char keys_smem[];
  int64_t* row_index = reinterpret_cast<int64_t*>(keys_smem);  // [16]: t * Hq + h of the tile's rows
  int64_t* row_pos = row_index + 16;                           // [16]: their query's key position
  float* ms = reinterpret_cast<float*>(row_pos + 16);          // [16]
  float* ls = ms + 16;                                         // [16]
  float* deltas = ls + 16;                                     // [16]
  float* dls = deltas + 16;                                    // [16]
  const int stride = dpad + 8, vstride = dvpad + 8;
  uint16_t* ks = reinterpret_cast<uint16_t*>(dls + 16);  // [16][stride]
  uint16_t* vs = ks + 16 * stride;                       // [16][vstride]
  uint16_t* qs = vs + 16 * vstride;                      // [16][stride]
  uint16_t* dos = qs + 16 * stride;                      // [16][vstride]
  uint16_t* qt = dos + 16 * vstride;                     // [dpad][kTransposedStride]
  uint16_t* dot = qt + dpad * kTransposedStride;         // [dvpad][kTransposedStride]

  const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv;
  const float scale = float(g.scale);
  const int64_t bid = blockIdx.x;
  const int tile = int(bid % key_tiles);
  const int64_t rest = bid / key_tiles;
  const int r = int(rest % g.hkv);
  const int64_t b = rest / g.hkv;
  const int in_block = lists.block_keys[b] - tile * 16;
  if (in_block <= 0) return;
  const int nkeys = in_block < 16 ? in_block : 16;
  const int64_t key0 = lists.block_first_key[b] + tile * 16, pos0 = lists.block_first_pos[b] + tile * 16;
  LoadRows(ks, stride, dpad, g.d, 16, nkeys, lane, [&](int jj) { return k + ((key0 + jj) * g.hkv + r) * g.d; });
  LoadRows(vs, vstride, dvpad, g.dv, 16, nkeys, lane, [&](int jj) { return v + ((key0 + jj) * g.hkv + r) * g.dv; });
  const int64_t first = lists.group_offsets[int64_t(r) * g.num_blocks + b];
  const int64_t rows = (lists.group_offsets[int64_t(r) * g.num_blocks + b + 1] - first) * group;
  const int d_tiles = dpad / 8, dv_tiles = dvpad / 8;
  float acc_k[kTiles][4], acc_v[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    acc_k[i][0] = acc_k[i][1] = acc_k[i][2] = acc_k[i][3] = 0.0f;
    acc_v[i][0] = acc_v[i][1] = acc_v[i][2] = acc_v[i][3] = 0.0f;
  }
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int cnt = int(rows - i0 < 16 ? rows - i0 : 16);
    __syncwarp();
    if (lane < cnt) {
      const int64_t i = i0 + lane, t = lists.group_queries[first + i / group];
      const int64_t row = t * g.hq + r * group + i % group;
      row_index[lane] = row;
      row_pos[lane] = lists.position[t];
      ms[lane] = row_m[row];
      ls[lane] = row_l[row];
      deltas[lane] = row_delta[row];
      dls[lane] = dlse != nullptr ? ToFloat<kLowp>(dlse[row]) : 0.0f;
    }
    __syncwarp();
    const auto query_of = [&](int rr) { return q + row_index[rr] * g.d; };
    const auto upstream_of = [&](int rr) { return dout + row_index[rr] * g.dv; };
    LoadRows(qs, stride, dpad, g.d, 16, cnt, lane, query_of);
    LoadRows(dos, vstride, dvpad, g.dv, 16, cnt, lane, upstream_of);
    LoadRowsTransposed(qt, dpad, g.d, cnt, lane, query_of);
    LoadRowsTransposed(dot, dvpad, g.dv, cnt, lane, upstream_of);
    __syncwarp();
    float s[2][4], dp[2][4], p[2][4], ds[2][4];
    Product16x16<kLowp>(s, ks, qs, stride, dpad, gid, tig);
    Product16x16<kLowp>(dp, vs, dos, vstride, dvpad, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = gid + 8 * (e / 2), rr = nt * 8 + tig * 2 + (e & 1);
        const bool valid = key < nkeys && rr < cnt && pos0 + key <= row_pos[rr];
        p[nt][e] = valid ? expf(s[nt][e] * scale - ms[rr]) / ls[rr] : 0.0f;
        ds[nt][e] = valid ? p[nt][e] * (dp[nt][e] - deltas[rr] + dls[rr]) : 0.0f;
      }
    }
    uint32_t pa[4], dsa[4];
    PackA<kLowp>(pa, p);
    PackA<kLowp>(dsa, ds);
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      uint32_t bf[2];
      if (i < dv_tiles) {
        LoadB(bf, dot, kTransposedStride, i * 8, 0, gid, tig);
        Mma<kLowp>(acc_v[i], pa, bf);
      }
      if (i < d_tiles) {
        LoadB(bf, qt, kTransposedStride, i * 8, 0, gid, tig);
        Mma<kLowp>(acc_k[i], dsa, bf);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = i * 8 + tig * 2 + e;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = gid + 8 * half;
        if (key >= nkeys) continue;
        const int64_t key_row = (key0 + key) * g.hkv + r;
        if (i < d_tiles && c < g.d) dk[key_row * g.d + c] = double(acc_k[i][2 * half + e]) * g.scale;
        if (i < dv_tiles && c < g.dv) dv[key_row * g.dv + c] = double(acc_v[i][2 * half + e]);
      }
    }
  }
}
// docs:end gpu-lowp-backward-keys

// docs:begin gpu-lowp-kl-rows One warp per (query t, group r), the group's Q rows in shared memory. Per 16-head tile,
// the softmax max m and sum l over the key set (BackwardRowsKernel's pass 1): the teacher's lse. The student's ilse:
// each lane an online logsumexp over its keys' index scores x (fp32 dots), merged by a fixed shuffle tree. Then per
// 16-key tile: pbar = (sum_h exp(s - m_h) / l_h) / G (S on mma, the column sums over heads by a fixed shuffle tree),
// rho = exp(x - ilse), the KL terms pbar * (log pbar - log rho), and diff = round(rho - pbar), stored for the key pass
// and summed into dqi = index_scale / N * (sum_j diff_j index_k[j]) by the lane of each dim, keys in order.
template <int kLowp>
__global__ void __launch_bounds__(32)
    KlRowsKernel(const uint16_t* q, const uint16_t* k, const uint16_t* index_q, const uint16_t* index_k,
                 const int32_t* topk, TrainingLists lists, TrainingGeometry g, int dpad, int gpad, double* teacher_lse,
                 double* ilse, double* row_kl, uint16_t* diff, double* dqi) {
  extern __shared__ __align__(16) unsigned char kl_rows_smem[];
  int64_t* prefix = reinterpret_cast<int64_t*>(kl_rows_smem);   // [top_k + 1]
  int64_t* key_s = prefix + g.top_k + 1;                        // [16]: the tile's key rows s
  int64_t* key_rows = key_s + 16;                               // [16]: s * Hkv + r
  int32_t* blocks = reinterpret_cast<int32_t*>(key_rows + 16);  // [top_k]
  int32_t* slots = blocks + g.top_k;                            // [top_k]: the selection slot of blocks[i]
  float* hm = reinterpret_cast<float*>(slots + g.top_k);        // [gpad]: the heads' m
  float* hl = hm + gpad;                                        // [gpad]: the heads' l
  float* pbar_tile = hl + gpad;                                 // [16]
  float* diff_tile = pbar_tile + 16;                            // [16]
  float* iq = diff_tile + 16;                                   // [Di]
  const int stride = dpad + 8;
  uint16_t* qs = reinterpret_cast<uint16_t*>(kl_rows_smem + RowHeaderBytes(g.top_k, 2 * gpad + 32 + g.di));
  uint16_t* ks = qs + gpad * stride;  // [16][stride]

  const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv, head_tiles = gpad / 16;
  const float scale = float(g.scale), index_scale = float(g.index_scale);
  const int64_t work = blockIdx.x, t = work / g.hkv;
  const int r = int(work % g.hkv);
  const int64_t kb = lists.key_begin[t], head0 = t * g.hq + r * group;
  const int32_t* sel = topk + (int64_t(r) * g.total_q + t) * g.top_k;
  int nb = 0;
  if (lane == 0) {
    nb = SortedSelection(sel, g.top_k, g.bk, lists.position[t], blocks, prefix);
    for (int i = 0; i < nb; ++i) {
      int slot = 0;
      while (sel[slot] != blocks[i]) ++slot;
      slots[i] = slot;
    }
  }
  nb = __shfl_sync(kFullMask, nb, 0);
  LoadRows(qs, stride, dpad, g.d, gpad, group, lane, [&](int hh) { return q + (head0 + hh) * g.d; });
  for (int c = lane; c < g.di; c += 32) iq[c] = ToFloat<kLowp>(index_q[work * g.di + c]);
  __syncwarp();
  const int64_t n = prefix[nb];
  const auto load_keys = [&](int64_t j0, int cnt) {
    __syncwarp();
    if (lane < cnt) {
      key_s[lane] = kb + GatheredKey(j0 + lane, blocks, prefix, nb, g.bk);
      key_rows[lane] = key_s[lane] * g.hkv + r;
    }
    __syncwarp();
    LoadRows(ks, stride, dpad, g.d, 16, cnt, lane, [&](int jj) { return k + key_rows[jj] * g.d; });
    __syncwarp();
  };

  // The teacher's per-head m and l (rows gid, gid + 8 of each head tile).
  for (int ht = 0; ht < head_tiles; ++ht) {
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      const int cnt = int(n - j0 < 16 ? n - j0 : 16);
      load_keys(j0, cnt);
      float s[2][4];
      Product16x16<kLowp>(s, qs + ht * 16 * stride, ks, stride, dpad, gid, tig);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = nt * 8 + tig * 2 + (e & 1) < cnt ? s[nt][e] * scale : -INFINITY;
          if (x != -INFINITY) {
            if (e < 2) {
              LseAdd(m_a, l_a, x);
            } else {
              LseAdd(m_b, l_b, x);
            }
          }
        }
      }
    }
#pragma unroll
    for (int offset = 1; offset < 4; offset *= 2) {
      LseMerge(m_a, l_a, __shfl_xor_sync(kFullMask, m_a, offset), __shfl_xor_sync(kFullMask, l_a, offset));
      LseMerge(m_b, l_b, __shfl_xor_sync(kFullMask, m_b, offset), __shfl_xor_sync(kFullMask, l_b, offset));
    }
    if (tig == 0) {
      hm[ht * 16 + gid] = m_a;
      hl[ht * 16 + gid] = l_a;
      hm[ht * 16 + gid + 8] = m_b;
      hl[ht * 16 + gid + 8] = l_b;
    }
  }
  __syncwarp();
  if (teacher_lse != nullptr) {
    for (int hh = lane; hh < group; hh += 32) teacher_lse[head0 + hh] = double(hm[hh] + logf(hl[hh]));
  }

  // The student's ilse.
  float xm = -INFINITY, xl = 0.0f;
  for (int64_t j = lane; j < n; j += 32) {
    const int64_t s = kb + GatheredKey(j, blocks, prefix, nb, g.bk);
    LseAdd(xm, xl, IndexScore<kLowp>(iq, index_k + s * g.di, g.di, index_scale));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    LseMerge(xm, xl, __shfl_xor_sync(kFullMask, xm, offset), __shfl_xor_sync(kFullMask, xl, offset));
  }
  const float row_ilse = xm + logf(xl);

  float kl = 0.0f, acc[kDiPerLane];
#pragma unroll
  for (int u = 0; u < kDiPerLane; ++u) acc[u] = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int cnt = int(n - j0 < 16 ? n - j0 : 16);
    load_keys(j0, cnt);
    float pb[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // columns nt * 8 + 2 * tig + e: the heads' probability sums
    for (int ht = 0; ht < head_tiles; ++ht) {
      float s[2][4];
      Product16x16<kLowp>(s, qs + ht * 16 * stride, ks, stride, dpad, gid, tig);
      const int ha = ht * 16 + gid, hb = ha + 8;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool valid = nt * 8 + tig * 2 + e < cnt;
          float sum = (valid && ha < group ? expf(s[nt][e] * scale - hm[ha]) / hl[ha] : 0.0f) +
                      (valid && hb < group ? expf(s[nt][2 + e] * scale - hm[hb]) / hl[hb] : 0.0f);
          sum += __shfl_xor_sync(kFullMask, sum, 4);
          sum += __shfl_xor_sync(kFullMask, sum, 8);
          sum += __shfl_xor_sync(kFullMask, sum, 16);
          pb[nt][e] += sum;
        }
      }
    }
    if (gid == 0) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) pbar_tile[nt * 8 + tig * 2 + e] = pb[nt][e] / float(group);
      }
    }
    __syncwarp();
    if (lane < cnt) {
      const float log_rho = IndexScore<kLowp>(iq, index_k + key_s[lane] * g.di, g.di, index_scale) - row_ilse;
      const float pbar = pbar_tile[lane];
      const uint16_t rounded = FromFloat<kLowp>(expf(log_rho) - pbar);
      if (pbar > 0.0f) kl += pbar * (logf(pbar) - log_rho);
      diff_tile[lane] = ToFloat<kLowp>(rounded);
      const int64_t j = j0 + lane;
      const int i = GatheredBlock(j, prefix, nb);
      diff[((int64_t(r) * g.total_q + t) * g.top_k + slots[i]) * g.bk + (j - prefix[i])] = rounded;
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kDiPerLane; ++u) {
      const int c = lane + 32 * u;
      if (c < g.di) {
        for (int jj = 0; jj < cnt; ++jj) acc[u] += diff_tile[jj] * ToFloat<kLowp>(index_k[key_s[jj] * g.di + c]);
      }
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) kl += __shfl_xor_sync(kFullMask, kl, offset);
  if (lane == 0) {
    row_kl[work] = double(kl);
    ilse[work] = double(row_ilse);
  }
  const double factor = g.index_scale / g.rows_n;
#pragma unroll
  for (int u = 0; u < kDiPerLane; ++u) {
    const int c = lane + 32 * u;
    if (c < g.di) dqi[work * g.di + c] = double(acc[u]) * factor;
  }
}
// docs:end gpu-lowp-kl-rows

// docs:begin gpu-lowp-kl-keys One warp per (key block, 16 keys of the block): the block's (t, r) rows ascending, in
// tiles of 16; diff^T (the row pass's rounded rho - pbar, 0 for a key past the query's position) as the A operand,
// index_q transposed in shared memory as B: dKi += diff^T index_q (mma). dki = index_scale / N * dKi.
template <int kLowp, int kTiles>
__global__ void __launch_bounds__(32) KlKeysKernel(const uint16_t* index_q, const uint16_t* diff, TrainingLists lists,
                                                   TrainingGeometry g, int dipad, int key_tiles, double* dki) {
  extern __shared__ __align__(16) unsigned char kl_keys_smem[];
  int64_t* row_index = reinterpret_cast<int64_t*>(kl_keys_smem);  // [16]: t * Hidx + r of the tile's rows
  int64_t* row_pos = row_index + 16;                              // [16]: their query's key position
  int64_t* diff_base = row_pos + 16;                              // [16]: where their block's diff entries start
  uint16_t* gs = reinterpret_cast<uint16_t*>(diff_base + 16);     // [16 keys][kTransposedStride]
  uint16_t* iqt = gs + 16 * kTransposedStride;                    // [dipad][kTransposedStride]

  const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
  const int64_t bid = blockIdx.x;
  const int tile = int(bid % key_tiles);
  const int64_t b = bid / key_tiles;
  const int in_block = lists.block_keys[b] - tile * 16;
  if (in_block <= 0) return;
  const int nkeys = in_block < 16 ? in_block : 16;
  const int64_t key0 = lists.block_first_key[b] + tile * 16, pos0 = lists.block_first_pos[b] + tile * 16;
  const int64_t first = lists.block_offsets[b], count = lists.block_offsets[b + 1] - first;
  const int di_tiles = dipad / 8;
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  for (int64_t p0 = 0; p0 < count; p0 += 16) {
    const int cnt = int(count - p0 < 16 ? count - p0 : 16);
    __syncwarp();
    if (lane < cnt) {
      const int64_t row = lists.block_rows[first + p0 + lane], t = row / g.hkv, r = row % g.hkv;
      row_index[lane] = row;
      row_pos[lane] = lists.position[t];
      diff_base[lane] = ((r * g.total_q + t) * g.top_k + lists.block_slots[first + p0 + lane]) * g.bk + tile * 16;
    }
    __syncwarp();
    for (int e = lane; e < 16 * 16; e += 32) {
      const int key = e / 16, pr = e % 16;
      const bool valid = key < nkeys && pr < cnt && pos0 + key <= row_pos[pr];
      gs[key * kTransposedStride + pr] = valid ? diff[diff_base[pr] + key] : uint16_t(0);
    }
    LoadRowsTransposed(iqt, dipad, g.di, cnt, lane, [&](int pr) { return index_q + row_index[pr] * g.di; });
    __syncwarp();
    uint32_t a[4];
    LoadA(a, gs, kTransposedStride, 0, gid, tig);
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      if (i < di_tiles) {
        uint32_t bf[2];
        LoadB(bf, iqt, kTransposedStride, i * 8, 0, gid, tig);
        Mma<kLowp>(acc[i], a, bf);
      }
    }
  }
  const double factor = g.index_scale / g.rows_n;
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = i * 8 + tig * 2 + e;
      if (i >= di_tiles || c >= g.di) continue;
      if (gid < nkeys) dki[(key0 + gid) * g.di + c] = double(acc[i][e]) * factor;
      if (gid + 8 < nkeys) dki[(key0 + gid + 8) * g.di + c] = double(acc[i][2 + e]) * factor;
    }
  }
}
// docs:end gpu-lowp-kl-keys

// Launches `kernel` on `blocks` single-warp blocks with `smem` bytes of dynamic shared memory (opted in past 48 KiB).
template <typename Kernel, typename... Args>
cudaError_t Launch(Kernel kernel, int64_t blocks, size_t smem, Args... args) {
  if (blocks <= 0) return cudaSuccess;
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
  }
  kernel<<<unsigned(blocks), 32, smem>>>(args...);
  return cudaGetLastError();
}

// Calls f(std::integral_constant<int, kLowp>) for the storage format `lowp`.
template <typename F>
cudaError_t WithFormat(int lowp, F f) {
  if (lowp == kLowpBF16) return f(std::integral_constant<int, kLowpBF16>{});
  return f(std::integral_constant<int, kLowpF16>{});
}

// Calls f(std::integral_constant<int, kTiles>) with the accumulator tiles (of 8 columns) a kernel instance holds for
// `columns` padded columns: 4, 16 or 32.
template <typename F>
cudaError_t WithTiles(int columns, F f) {
  if (columns <= 32) return f(std::integral_constant<int, 4>{});
  if (columns <= 128) return f(std::integral_constant<int, 16>{});
  return f(std::integral_constant<int, 32>{});
}

}  // namespace

cudaError_t LowpBackwardRows(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                             const uint16_t* dlse, const int32_t* topk, const TrainingLists& lists,
                             const TrainingGeometry& g, float* row_m, float* row_l, float* row_delta, double* dq) {
  const int dpad = RoundUp(g.d, 16), dvpad = RoundUp(g.dv, 16), head_tiles = (g.hq / g.hkv + 15) / 16;
  const size_t smem = RowHeaderBytes(g.top_k, 0) +
                      size_t(32 * (dpad + 8) + 32 * (dvpad + 8) + dpad * kTransposedStride) * sizeof(uint16_t);
  return WithFormat(lowp, [&](auto format) {
    return WithTiles(dpad, [&](auto tiles) {
      return Launch(BackwardRowsKernel<decltype(format)::value, decltype(tiles)::value>, g.total_q * g.hkv * head_tiles,
                    smem, q, k, v, dout, dlse, topk, lists, g, dpad, dvpad, head_tiles, row_m, row_l, row_delta, dq);
    });
  });
}

cudaError_t LowpBackwardKeys(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                             const uint16_t* dlse, const TrainingLists& lists, const TrainingGeometry& g,
                             const float* row_m, const float* row_l, const float* row_delta, double* dk, double* dv) {
  const int dpad = RoundUp(g.d, 16), dvpad = RoundUp(g.dv, 16), key_tiles = (g.bk + 15) / 16;
  const size_t smem =
      32 * sizeof(int64_t) + 64 * sizeof(float) +
      size_t(32 * (dpad + 8) + 32 * (dvpad + 8) + (dpad + dvpad) * kTransposedStride) * sizeof(uint16_t);
  return WithFormat(lowp, [&](auto format) {
    return WithTiles(dpad > dvpad ? dpad : dvpad, [&](auto tiles) {
      return Launch(BackwardKeysKernel<decltype(format)::value, decltype(tiles)::value>,
                    g.num_blocks * g.hkv * key_tiles, smem, q, k, v, dout, dlse, lists, g, dpad, dvpad, key_tiles,
                    row_m, row_l, row_delta, dk, dv);
    });
  });
}

cudaError_t LowpKlRows(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* index_q, const uint16_t* index_k,
                       const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g, double* teacher_lse,
                       double* ilse, double* row_kl, uint16_t* diff, double* dqi) {
  const int dpad = RoundUp(g.d, 16), gpad = RoundUp(g.hq / g.hkv, 16);
  const size_t smem =
      RowHeaderBytes(g.top_k, 2 * gpad + 32 + g.di) + size_t((gpad + 16) * (dpad + 8)) * sizeof(uint16_t);
  return WithFormat(lowp, [&](auto format) {
    return Launch(KlRowsKernel<decltype(format)::value>, g.total_q * g.hkv, smem, q, k, index_q, index_k, topk, lists,
                  g, dpad, gpad, teacher_lse, ilse, row_kl, diff, dqi);
  });
}

cudaError_t LowpKlKeys(int lowp, const uint16_t* index_q, const uint16_t* diff, const TrainingLists& lists,
                       const TrainingGeometry& g, double* dki) {
  const int dipad = RoundUp(g.di, 16), key_tiles = (g.bk + 15) / 16;
  const size_t smem = 48 * sizeof(int64_t) + size_t(16 + dipad) * kTransposedStride * sizeof(uint16_t);
  return WithFormat(lowp, [&](auto format) {
    return WithTiles(dipad, [&](auto tiles) {
      return Launch(KlKeysKernel<decltype(format)::value, decltype(tiles)::value>, g.num_blocks * key_tiles, smem,
                    index_q, diff, lists, g, dipad, key_tiles, dki);
    });
  });
}

}  // namespace msa::gpu
