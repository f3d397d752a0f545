// The KV-outer tile on mma.sync and the merge of one row's partials: KvOuterAttend's kernels (kv_outer_attend.cu: the
// list-driven tiles and the merge kernel) run them, and SplitKAttend (split_k.cu) runs AttendTile for groups past 16
// heads, reproduces its arithmetic in OneQueryTile, and merges with MergeRow's steps (FoldPartial, WriteMergedRow),
// so that all give the same bits.
// Internal to gpu/; not a public interface.
#ifndef MSA_GPU_ATTEND_KV_OUTER_TILE_CUH_
#define MSA_GPU_ATTEND_KV_OUTER_TILE_CUH_

#include <cstdint>
#include <type_traits>

#include "gpu/attend/kv_outer.h"
#include "gpu/common/main_outputs.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu::kv_outer {

constexpr int kWarps = 4;
constexpr int kTileRows = kWarps * 16;  // (query, head) rows per tile; warp w owns rows 16w..16w+15
constexpr int kKeyPad = 128;            // keys of one block, zero-padded (block_size <= 128)
constexpr int kDimPad = 128;            // head dims, zero-padded
constexpr int kStride = kDimPad + 8;    // halves per smem row: ldmatrix conflict-free
constexpr int kCtasPerSm = 2;
using mma::kLog2e;
constexpr size_t kSmemBytes =
    size_t(kTileRows + 2 * kKeyPad) * kStride * 2 + kTileRows * (sizeof(int32_t) + sizeof(int64_t));

// Queries per tile: the rows of one query are its group's heads.
__host__ __device__ inline int TileQueries(const AttendGeometry& g) { return kTileRows / (g.hq / g.hkv); }

// The tile's shared memory (kSmemBytes from the dynamic shared memory's start).
struct TileShared {
  uint16_t* qs;         // [kTileRows][kStride]
  uint16_t* ks;         // [kKeyPad][kStride]
  uint16_t* vs;         // [kKeyPad][kStride]
  int64_t* tile_pos;    // [qpc] position, -1 for padding
  int32_t* tile_entry;  // [qpc] list entry: query index in the chunk * top_k + slot, -1 for padding
};
__device__ inline TileShared CarveTileShared(unsigned char* smem) {
  TileShared s;
  s.qs = reinterpret_cast<uint16_t*>(smem);
  s.ks = s.qs + kTileRows * kStride;
  s.vs = s.ks + kKeyPad * kStride;
  s.tile_pos = reinterpret_cast<int64_t*>(s.vs + kKeyPad * kStride);
  s.tile_entry = reinterpret_cast<int32_t*>(s.tile_pos + kTileRows);
  return s;
}

// The rank of this lane's selected id among the row's valid ids (ascending block order; valid ids are distinct,
// ValidateSelectionForAttend); the whole warp calls it, lane j holding slot j's id (-1: none).
__device__ inline int SlotRank(int32_t id, int top_k) {
  int rank = 0;
  for (int j = 0; j < top_k; ++j) {
    const int32_t other = __shfl_sync(mma::kFullMask, id, j);
    rank += other >= 0 && other < id;
  }
  return rank;
}

// docs:begin gpu-kv-outer-tile AttendTile: one tile = one block of one group and up to 64 / G queries that
// chose it (64 rows: query-major, head-minor). Q rows, K and V of the block's visible keys arrive by cp.async
// (K with Q, V in a second group, so V lands while S is computed). Warp w multiplies its 16 rows by all 128
// keys: S in registers (16 n8 tiles), masked past each row's position, rounded R(R(dot) * scale) as the
// same-precision reference does; the row's block maximum m_b and l_b = sum exp(s - m_b) come from 4-lane
// shuffles. P = exp(s - m_b) is re-packed from the S accumulators straight into A fragments (the m16n8 C layout
// of two adjacent key tiles is the m16k16 A layout), and O_b = P V accumulates in fp32 (ldmatrix.trans B
// fragments). The partial (m_b, l_b, O_b) goes to the row's selection slot; nothing else is shared between rows.
// Preconditions: s.tile_entry and s.tile_pos hold the tile's qpc entries (padding last, entry 0 valid) and the
// CTA has synchronized since writing them; r, key0: the tile's group and first key (block id * block_size). The
// caller synchronizes before shared memory is written again.
template <int kLowp>
__device__ inline void AttendTile(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int64_t* key_begin,
                                  const AttendGeometry& g, float scale, const ChunkQueries& chunk, int r, int64_t key0,
                                  const TileShared& s, float* part_o, float2* part_ml) {
  using mma::CopyAsync16;
  using mma::CopyAsyncCommit;
  using mma::CopyAsyncWait;
  using mma::kFullMask;
  using mma::LoadMatrixX4;
  using mma::LoadMatrixX4Trans;
  using mma::Mma16816;
  uint16_t* const qs = s.qs;
  uint16_t* const ks = s.ks;
  uint16_t* const vs = s.vs;
  const int64_t* const tile_pos = s.tile_pos;
  const int32_t* const tile_entry = s.tile_entry;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv, qpc = TileQueries(g);
  // ldmatrix lane addresses: K (non-trans) pieces (keys 0-7 | 8-15) x (dims 0-7 | 8-15) -> b of two n8 key
  // tiles; V (trans) pieces (keys 0-7, 8-15) x (dims 0-7, 8-15) -> b of two n8 dim tiles.
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  const int v_key = ((lane / 8) % 2) * 8 + lane % 8, v_dim = (lane / 16) * 8;

  const int64_t kb = key_begin[chunk[tile_entry[0] / g.top_k]];  // entry 0 of a tile is never padding
  int64_t max_pos = -1;
  for (int i = 0; i < qpc; ++i) max_pos = tile_pos[i] > max_pos ? tile_pos[i] : max_pos;
  const int nkeys = int(max_pos - key0 + 1 < g.bk ? max_pos - key0 + 1 : g.bk);  // keys any row can see

  for (int e = tid; e < kTileRows * (kDimPad / 8); e += blockDim.x) {  // Q rows of the tile
    const int row = e / (kDimPad / 8), piece = e % (kDimPad / 8), qi = row / group;
    const bool valid = qi < qpc && tile_entry[qi] >= 0 && piece * 8 < g.d;
    const int64_t t = valid ? chunk[tile_entry[qi] / g.top_k] : 0;
    CopyAsync16(qs + row * kStride + piece * 8,
                q + (valid ? (t * g.hq + r * group + row % group) * g.d + piece * 8 : 0), valid);
  }
  for (int e = tid; e < kKeyPad * (kDimPad / 8); e += blockDim.x) {  // K of the block's visible keys
    const int key = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = key < nkeys && piece * 8 < g.d;
    CopyAsync16(ks + key * kStride + piece * 8, k + (valid ? ((kb + key0 + key) * g.hkv + r) * g.d + piece * 8 : 0),
                valid);
  }
  CopyAsyncCommit();
  for (int e = tid; e < kKeyPad * (kDimPad / 8); e += blockDim.x) {  // V, landing during S = Q K^T
    const int key = e / (kDimPad / 8), piece = e % (kDimPad / 8);
    const bool valid = key < nkeys && piece * 8 < g.dv;
    CopyAsync16(vs + key * kStride + piece * 8, v + (valid ? ((kb + key0 + key) * g.hkv + r) * g.dv + piece * 8 : 0),
                valid);
  }
  CopyAsyncCommit();
  CopyAsyncWait<1>();
  __syncthreads();

  // Rows gid and gid + 8 of this warp; padding entries come last, so a warp whose first row is padding has
  // no valid row.
  const int row_h[2] = {warp * 16 + gid, warp * 16 + gid + 8};
  const bool warp_active = (warp * 16) / group < qpc && tile_entry[(warp * 16) / group] >= 0;
  int64_t pos_h[2];
  int key_limit[2];  // a row sees the block's keys [0, key_limit): up to its position, at most nkeys
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    pos_h[h] = row_h[h] / group < qpc ? tile_pos[row_h[h] / group] : -1;
    const int64_t seen = pos_h[h] - key0 + 1;
    key_limit[h] = int(seen < nkeys ? (seen < 0 ? 0 : seen) : nkeys);
  }

  uint32_t pa[kKeyPad / 16][4];  // P in the storage format, A fragments per 16-key step
  float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.0f, 0.0f};
  if (warp_active) {
    float s[kKeyPad / 8][4];
#pragma unroll
    for (int i = 0; i < kKeyPad / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDimPad / 16; ++kk) {
      uint32_t a[4];
      LoadMatrixX4(a, qs + (warp * 16 + lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int kt = 0; kt < kKeyPad / 16; ++kt) {
        if (kt * 16 < nkeys) {
          uint32_t b[4];
          LoadMatrixX4(b, ks + (kt * 16 + k_key) * kStride + kk * 16 + k_dim);
          Mma16816<kLowp>(s[2 * kt], a, b[0], b[1]);
          Mma16816<kLowp>(s[2 * kt + 1], a, b[2], b[3]);
        }
      }
    }
    // Scores, masked past each row's position (and past the block), and the row maxima.
#pragma unroll
    for (int nt = 0; nt < kKeyPad / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, key = nt * 8 + tig * 2 + (e & 1);
        s[nt][e] = key < key_limit[h] ? mma::ToFloat<kLowp>(mma::Score16<kLowp>(s[nt][e], scale)) : -INFINITY;
        m_row[h] = fmaxf(m_row[h], s[nt][e]);
      }
    }
    // exp(s - m) = exp2(s * log2(e) - m * log2(e)): one fma and one ex2 per score. A row whose every score is -inf
    // gets p = 0 (MaxLog2), so l_b = 0 and O_b = 0: a partial of weight 0.
    float m_log2[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 1));
      m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 2));
      m_log2[h] = mma::MaxLog2(m_row[h]);
    }
#pragma unroll
    for (int kt = 0; kt < kKeyPad / 16; ++kt) {
      float p[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[half][e] = mma::Exp2Approx(fmaf(s[2 * kt + half][e], kLog2e, -m_log2[e / 2]));
          l_row[e / 2] += p[half][e];
        }
      }
      pa[kt][0] = mma::Pack<kLowp>(p[0][0], p[0][1]);
      pa[kt][1] = mma::Pack<kLowp>(p[0][2], p[0][3]);
      pa[kt][2] = mma::Pack<kLowp>(p[1][0], p[1][1]);
      pa[kt][3] = mma::Pack<kLowp>(p[1][2], p[1][3]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l_row[h] += __shfl_xor_sync(kFullMask, l_row[h], 1);
      l_row[h] += __shfl_xor_sync(kFullMask, l_row[h], 2);
    }
  }
  CopyAsyncWait<0>();
  __syncthreads();  // V has landed

  if (warp_active) {
    float o[kDimPad / 8][4];
#pragma unroll
    for (int i = 0; i < kDimPad / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
#pragma unroll
    for (int kt = 0; kt < kKeyPad / 16; ++kt) {
      if (kt * 16 < nkeys) {
#pragma unroll
        for (int dp = 0; dp < kDimPad / 16; ++dp) {
          uint32_t b[4];
          LoadMatrixX4Trans(b, vs + (kt * 16 + v_key) * kStride + dp * 16 + v_dim);
          Mma16816<kLowp>(o[2 * dp], pa[kt], b[0], b[1]);
          Mma16816<kLowp>(o[2 * dp + 1], pa[kt], b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (pos_h[h] < 0) continue;  // padding row
      const int32_t e = tile_entry[row_h[h] / group];
      const int64_t part = ((e / g.top_k) * int64_t(g.hq) + r * group + row_h[h] % group) * g.top_k + e % g.top_k;
      float* dst = part_o + part * g.dv;
#pragma unroll
      for (int i = 0; i < kDimPad / 8; ++i) {
        if (i * 8 < g.dv) {
          *reinterpret_cast<float2*>(dst + i * 8 + tig * 2) = make_float2(o[i][2 * h], o[i][2 * h + 1]);
        }
      }
      if (tig == 0) part_ml[part] = make_float2(m_row[h], l_row[h]);
    }
  }
}
// docs:end gpu-kv-outer-tile

// docs:begin gpu-kv-outer-merge
// A row's merge, one warp per row: lane j holds slot j's (m_b, l_b) in ml_of_lane ((-inf, 0) for a -1 slot) and its
// weight against the row maximum m, SlotWeight: w_b = e^(m_b - m), every slot's at once, off the folds' chain.
__device__ inline float SlotWeight(float2 ml_of_lane, float m) { return expf(ml_of_lane.x - m); }

// One step of a row's merge: the partial of slot `slot`, the row's next block in ascending block order, with O_b (this
// lane's 4 dims): l += l_b w_b, acc += O_b w_b. kNormalized: `o` holds O_b / l_b (16-bit partials), and
// acc += (O_b / l_b) (l_b w_b).
template <bool kNormalized = false>
__device__ inline void FoldPartial(float2 ml_of_lane, float weight_of_lane, int slot, float4 o, bool owns_dims,
                                   float& l, float (&acc)[4]) {
  const float l_b = __shfl_sync(mma::kFullMask, ml_of_lane.y, slot);
  const float w = __shfl_sync(mma::kFullMask, weight_of_lane, slot);
  const float lw = l_b * w;
  l += lw;
  const float o_weight = kNormalized ? lw : w;
  if (owns_dims) {
    acc[0] += o.x * o_weight;
    acc[1] += o.y * o_weight;
    acc[2] += o.z * o_weight;
    acc[3] += o.w * o_weight;
  }
}

// This lane's 4 dims of a partial as loaded: float4 (fp32 partials) or uint2 (four 16-bit values, widened only when
// folded, so that a batch of loads in flight takes two registers each).
template <PartialsFormat kPartials>
using PartialWord = std::conditional_t<kPartials == kPartials16, uint2, float4>;

// This lane's 4 dims of the partial at element `at` of part_o (ld.global.cg: from L2, never a stale L1 line).
template <PartialsFormat kPartials>
__device__ inline PartialWord<kPartials> LoadPartial(const void* part_o, int64_t at) {
  if constexpr (kPartials == kPartials16) {
    return __ldcg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(part_o) + at));
  } else {
    return __ldcg(reinterpret_cast<const float4*>(static_cast<const float*>(part_o) + at));
  }
}

template <int kLowp>
__device__ inline float4 Widen(float4 o) {
  return o;
}
template <int kLowp>
__device__ inline float4 Widen(uint2 bits) {
  return make_float4(mma::ToFloat<kLowp>(uint16_t(bits.x & 0xffffu)), mma::ToFloat<kLowp>(uint16_t(bits.x >> 16)),
                     mma::ToFloat<kLowp>(uint16_t(bits.y & 0xffffu)), mma::ToFloat<kLowp>(uint16_t(bits.y >> 16)));
}

// The merged (query t, head) row: out = acc / l (lane owns value dims 4 lane..4 lane + 3), lse = m + log l (lane 0).
__device__ inline void WriteMergedRow(const AttendGeometry& g, int64_t t, int head, int lane, float m, float l,
                                      const float (&acc)[4], const DeviceAttendOutputs& outputs) {
  if (lane * 4 < g.dv) {
    const float row[4] = {acc[0] / l, acc[1] / l, acc[2] / l, acc[3] / l};
    StoreOutQuad(outputs, (t * g.hq + head) * g.dv + lane * 4, row);
  }
  if (lane == 0) StoreLse(outputs, t * g.hq + head, m + logf(l));
}

// MergeRow: one warp merges the partials of one (query t, head) row, chunk row `row` (t's index in the chunk * Hq +
// head), in ascending block order; lane l owns value dims 4l..4l+3. The partials are read from L2 (ld.global.cg),
// never from a possibly stale L1 line. part_o: in the format kPartials (fp32, or kLowp's storage format).
template <int kLowp, PartialsFormat kPartials>
__device__ inline void MergeRow(const int32_t* topk, const AttendGeometry& g, int64_t t, int head, int64_t row,
                                const void* part_o, const float2* part_ml, const DeviceAttendOutputs& outputs) {
  using mma::kFullMask;
  const int lane = threadIdx.x % 32, r = head / (g.hq / g.hkv);
  const int32_t* sel = topk + (int64_t(r) * g.total_q + t) * g.top_k;
  const int32_t id = lane < g.top_k ? sel[lane] : -1;
  const bool valid = id >= 0;
  const int rank = SlotRank(id, g.top_k);
  const int nb = __popc(__ballot_sync(kFullMask, valid));
  const int64_t base = row * g.top_k;
  const float2 ml_of_lane = valid ? __ldcg(part_ml + base + lane) : make_float2(-INFINITY, 0.0f);  // lane = slot
  float m = ml_of_lane.x;
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  const float weight_of_lane = SlotWeight(ml_of_lane, m);
  float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const bool owns_dims = lane * 4 < g.dv;
  // Batches of kMergeBatch partials: their loads issued together, then folded in ascending block order. 16-bit
  // partials take half the registers and need twice the loads in flight to keep the same bytes in flight.
  constexpr int kMergeBatch = kPartials == kPartials16 ? 16 : 8;
  for (int k0 = 0; k0 < nb; k0 += kMergeBatch) {
    int slot[kMergeBatch];
    PartialWord<kPartials> o[kMergeBatch];
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      slot[j] = __ffs(__ballot_sync(kFullMask, valid && rank == k0 + j)) - 1;  // -1 past the last
      if (owns_dims && slot[j] >= 0) {
        o[j] = LoadPartial<kPartials>(part_o, (base + slot[j]) * g.dv + lane * 4);
      }
    }
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      if (slot[j] < 0) break;  // warp-uniform
      FoldPartial<kPartials == kPartials16>(ml_of_lane, weight_of_lane, slot[j], Widen<kLowp>(o[j]), owns_dims, l, acc);
    }
  }
  WriteMergedRow(g, t, head, lane, m, l, acc, outputs);
}
// docs:end gpu-kv-outer-merge

}  // namespace msa::gpu::kv_outer

#endif  // MSA_GPU_ATTEND_KV_OUTER_TILE_CUH_
