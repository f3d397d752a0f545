// Main branch of the low-precision mode on tensor cores, query-outer: one CTA of 4 warps per
// (query, group, 16 heads of the group) over the group's gathered keys, K and V streamed once through a
// cp.async double buffer, the scores kept in shared memory in the storage format. Same rounding points as the
// gathered kernel (GatheredAttend): scores R(R(dot) * scale), P = exp(s - m) / l rounded, O = P V in fp32.
#include <cmath>

#include "gpu/attend/q_outer_layout.h"
#include "gpu/common/device_query.h"
#include "gpu/common/main_outputs.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/sorted_selection.cuh"

namespace msa::gpu {
namespace {

using mma::CopyAsync16;
using mma::CopyAsyncCommit;
using mma::CopyAsyncWait;
using mma::kFullMask;
using mma::LoadMatrixX4;
using mma::LoadMatrixX4Trans;
using mma::Mma16816;

using q_outer::kDimPad;
using q_outer::kKeyTile;
using q_outer::kStride;
using q_outer::kWarps;

// The kernel's shared-memory layout, q_outer::PlanLayout's (gpu/attend/q_outer_layout.h), under the type name the
// kernel's symbol carries.
struct AttendLayout : q_outer::SharedLayout {};

AttendLayout Layout(const AttendGeometry& g) {
  AttendLayout l;
  static_cast<q_outer::SharedLayout&>(l) = q_outer::PlanLayout(g);
  return l;
}

// docs:begin gpu-qouter-attend QOuterAttend: the 16 heads of a (query, group) share the group's selection, so
// they form one 16-row Q tile (A fragments in registers) against the gathered keys (the selected blocks'
// visible keys, ascending). Pass 1 streams K in 64-key tiles; warp w computes S for keys 16w..16w+15 of each
// tile and stores the rounded scores in shared memory. Then the row max m and l = sum exp(s - m) come from
// shared memory in a fixed order. Pass 2 streams V; each warp forms P = exp(s - m) / l for its keys in the
// storage format (A fragments) and accumulates O = P V (ldmatrix.trans B fragments). The 4 warps' partial O
// are summed in warp order (deterministic). K and V are each read once per CTA.
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32)
    QOuterAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                       const int64_t* position, const int64_t* key_begin, AttendGeometry g, float scale,
                       AttendLayout lay, int head_tiles, DeviceAttendOutputs outputs) {
  constexpr uint16_t kNegInf = kLowp == kLowpBF16 ? 0xff80 : 0xfc00;
  extern __shared__ __align__(16) unsigned char attend_smem[];
  int32_t* blocks = reinterpret_cast<int32_t*>(attend_smem);  // [top_k] selected ids, ascending
  int32_t* prefix = blocks + g.top_k;                         // [top_k + 1] gathered keys before each
  int32_t* shared_nb = prefix + g.top_k + 1;
  int32_t* keypos = reinterpret_cast<int32_t*>(attend_smem + lay.keypos);  // [max_keys_pad] key - key_begin
  uint16_t* qs = reinterpret_cast<uint16_t*>(attend_smem + lay.qs);        // [16][kStride]
  uint16_t* kv = reinterpret_cast<uint16_t*>(attend_smem + lay.kv);        // [2][kKeyTile][kStride]
  uint16_t* ss = reinterpret_cast<uint16_t*>(attend_smem + lay.scores);    // [16][s_stride] rounded scores
  float* stats = reinterpret_cast<float*>(kv);  // [kWarps][16] row maxima, then [16] m, [16] l (pass-1 end)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv;
  const int64_t bid = blockIdx.x;
  const int ht = int(bid % head_tiles);
  const int64_t rest = bid / head_tiles;
  const int r = int(rest % g.hkv);
  const int64_t t = rest / g.hkv;
  const int hbase = r * group + ht * 16;
  const int nh = group - ht * 16 < 16 ? group - ht * 16 : 16;
  const int64_t pos = position[t], kb = key_begin[t];

  if (tid == 0) {  // the selection's valid ids sorted ascending, and prefix sums of their visible key counts
    *shared_nb = SortedSelection(topk + (int64_t(r) * g.total_q + t) * g.top_k, g.top_k, g.bk, pos, blocks, prefix);
  }
  for (int e = tid; e < 16 * (kDimPad / 8); e += blockDim.x) {  // Q rows of the head tile, zero padded
    const int hh = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = hh < nh && piece * 8 < g.d;
    CopyAsync16(qs + hh * kStride + piece * 8, q + (valid ? (t * g.hq + hbase + hh) * g.d + piece * 8 : 0), valid);
  }
  CopyAsyncCommit();
  __syncthreads();
  const int nb = *shared_nb;
  const int n = prefix[nb];
  const int tiles = (n + kKeyTile - 1) / kKeyTile;
  for (int j = tid; j < tiles * kKeyTile; j += blockDim.x) {
    keypos[j] = j < n ? int(GatheredKey(j, blocks, prefix, nb, g.bk)) : -1;
  }
  CopyAsyncWait<0>();
  __syncthreads();

  uint32_t a[kDimPad / 16][4];
#pragma unroll
  for (int kk = 0; kk < kDimPad / 16; ++kk) LoadMatrixX4(a[kk], qs + (lane % 16) * kStride + kk * 16 + (lane / 16) * 8);

  // Loads the gathered keys' K (or V) rows of tile `tile` into buffer tile % 2; rows past n are zero.
  const auto load_tile = [&](const uint16_t* src, int dim, int tile) {
    uint16_t* dst = kv + (tile % 2) * kKeyTile * kStride;
    for (int e = tid; e < kKeyTile * (kDimPad / 8); e += blockDim.x) {
      const int jj = e / (kDimPad / 8), piece = e % (kDimPad / 8);
      const int key = keypos[tile * kKeyTile + jj];
      const bool valid = key >= 0 && piece * 8 < dim;
      CopyAsync16(dst + jj * kStride + piece * 8, src + (valid ? ((kb + key) * g.hkv + r) * dim + piece * 8 : 0),
                  valid);
    }
  };
  // ldmatrix lane addresses: K (non-trans) pieces (keys 0-7 | 8-15) x (dims 0-7 | 8-15) -> b of two n8 key
  // tiles; V (trans) pieces (keys 0-7, 8-15) x (dims 0-7, 8-15) -> b of two n8 dim tiles.
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  const int v_key = ((lane / 8) % 2) * 8 + lane % 8, v_dim = (lane / 16) * 8;

  // Pass 1: S = Q K^T, rounded, into shared memory; this thread's row maxima (rows gid, gid + 8).
  float row_max[2] = {-INFINITY, -INFINITY};
  load_tile(k, g.d, 0);
  CopyAsyncCommit();
  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) load_tile(k, g.d, tile + 1);
    CopyAsyncCommit();
    CopyAsyncWait<1>();
    __syncthreads();
    const uint16_t* kt = kv + (tile % 2) * kKeyTile * kStride + warp * 16 * kStride;
    float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kDimPad / 16; ++kk) {
      uint32_t b[4];
      LoadMatrixX4(b, kt + k_key * kStride + kk * 16 + k_dim);
      Mma16816<kLowp>(c[0], a[kk], b[0], b[1]);
      Mma16816<kLowp>(c[1], a[kk], b[2], b[3]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = tile * kKeyTile + warp * 16 + nt * 8 + tig * 2;
        uint16_t s0 = kNegInf, s1 = kNegInf;
        if (j < n) s0 = mma::Score16<kLowp>(c[nt][2 * h], scale);
        if (j + 1 < n) s1 = mma::Score16<kLowp>(c[nt][2 * h + 1], scale);
        *reinterpret_cast<uint32_t*>(ss + (gid + 8 * h) * lay.s_stride + j) = uint32_t(s0) | (uint32_t(s1) << 16);
        row_max[h] = fmaxf(row_max[h], fmaxf(mma::ToFloat<kLowp>(s0), mma::ToFloat<kLowp>(s1)));
      }
    }
    __syncthreads();
  }
  // Row max over the 4 lanes of a row, then over the warps; l = sum exp(s - m) by 8 threads per row.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(kFullMask, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(kFullMask, row_max[h], 2));
    if (tig == 0) stats[warp * 16 + gid + 8 * h] = row_max[h];
  }
  __syncthreads();
  if (tid < 16) {
    stats[kWarps * 16 + tid] = fmaxf(fmaxf(stats[tid], stats[16 + tid]), fmaxf(stats[32 + tid], stats[48 + tid]));
  }
  __syncthreads();
  {
    const int row = tid / 8, part = tid % 8;
    const float m = stats[kWarps * 16 + row];
    float sum = 0.0f;
    for (int j = part; j < n; j += 8) sum += expf(mma::ToFloat<kLowp>(ss[row * lay.s_stride + j]) - m);
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    sum += __shfl_xor_sync(kFullMask, sum, 4);
    if (part == 0) stats[(kWarps + 1) * 16 + row] = sum;
  }
  __syncthreads();
  const float m_row[2] = {stats[kWarps * 16 + gid], stats[kWarps * 16 + gid + 8]};
  const float l_row[2] = {stats[(kWarps + 1) * 16 + gid], stats[(kWarps + 1) * 16 + gid + 8]};
  __syncthreads();  // stats live in the K/V buffer, which pass 2 overwrites

  // Pass 2: O += P V with P = exp(s - m) / l in the storage format.
  float o[kDimPad / 8][4];
#pragma unroll
  for (int i = 0; i < kDimPad / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  load_tile(v, g.dv, 0);
  CopyAsyncCommit();
  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) load_tile(v, g.dv, tile + 1);
    CopyAsyncCommit();
    CopyAsyncWait<1>();
    __syncthreads();
    const int j0 = tile * kKeyTile + warp * 16;
    float p[2][4];  // [key half (keys 2t, 2t+1 | 2t+8, 2t+9)][row gid pair, row gid + 8 pair]
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t pair =
            *reinterpret_cast<const uint32_t*>(ss + (gid + 8 * h) * lay.s_stride + j0 + kh * 8 + tig * 2);
        p[kh][2 * h] = expf(mma::ToFloat<kLowp>(uint16_t(pair & 0xffff)) - m_row[h]) / l_row[h];
        p[kh][2 * h + 1] = expf(mma::ToFloat<kLowp>(uint16_t(pair >> 16)) - m_row[h]) / l_row[h];
      }
    }
    const uint32_t pa[4] = {mma::Pack<kLowp>(p[0][0], p[0][1]), mma::Pack<kLowp>(p[0][2], p[0][3]),
                            mma::Pack<kLowp>(p[1][0], p[1][1]), mma::Pack<kLowp>(p[1][2], p[1][3])};
    const uint16_t* vt = kv + (tile % 2) * kKeyTile * kStride + warp * 16 * kStride;
#pragma unroll
    for (int dp = 0; dp < kDimPad / 16; ++dp) {
      uint32_t b[4];
      LoadMatrixX4Trans(b, vt + v_key * kStride + dp * 16 + v_dim);
      Mma16816<kLowp>(o[2 * dp], pa, b[0], b[1]);
      Mma16816<kLowp>(o[2 * dp + 1], pa, b[2], b[3]);
    }
    __syncthreads();
  }
  CopyAsyncWait<0>();
  // The warps' partial O (each over its own keys) -> shared memory, summed in warp order.
  float* partial = reinterpret_cast<float*>(ss);  // [kWarps][16][kDimPad] (the scores are no longer needed)
#pragma unroll
  for (int i = 0; i < kDimPad / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      partial[(warp * 16 + gid + 8 * (e / 2)) * kDimPad + i * 8 + tig * 2 + (e & 1)] = o[i][e];
    }
  }
  __syncthreads();
  for (int e = tid; e < 16 * kDimPad; e += blockDim.x) {
    const int hh = e / kDimPad, c = e % kDimPad;
    if (hh < nh && c < g.dv) {
      const float sum =
          ((partial[hh * kDimPad + c] + partial[(16 + hh) * kDimPad + c]) + partial[(32 + hh) * kDimPad + c]) +
          partial[(48 + hh) * kDimPad + c];
      StoreOut(outputs, (t * g.hq + hbase + hh) * g.dv + c, sum);
    }
  }
  if (warp == 0 && tig == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (gid + 8 * h < nh) StoreLse(outputs, t * g.hq + hbase + gid + 8 * h, m_row[h] + logf(l_row[h]));
    }
  }
}
// docs:end gpu-qouter-attend

}  // namespace

cudaError_t QOuterAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                         const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                         const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!QOuterAttendFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  const AttendLayout lay = Layout(g);
  const int group = g.hq / g.hkv, head_tiles = (group + 15) / 16;
  const unsigned blocks = unsigned(g.total_q * g.hkv * head_tiles);
  const auto kernel = lowp == kLowpBF16 ? QOuterAttendKernel<kLowpBF16> : QOuterAttendKernel<kLowpF16>;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(lay.bytes));
  if (err != cudaSuccess) return err;
  kernel<<<blocks, kWarps * 32, lay.bytes, stream>>>(q, k, v, topk, position, key_begin, g, scale, lay, head_tiles,
                                                     outputs);
  return cudaGetLastError();
}

}  // namespace msa::gpu
