// Main branch of the low-precision mode, KV-outer: the selection is inverted on the device into
// per-(sequence, group, block) lists of the queries that chose the block, so each K/V block is loaded once per
// tile of up to 64 (query, head) rows instead of once per query. Each tile writes a partial result per row
// (m_b, l_b, O_b over that block alone); a merge kernel combines a row's partials with their log-sum-exp in
// ascending block order. Deterministic: a row's partial does not depend on which rows share its tile, and no
// value is accumulated with atomics (atomics only count and place list entries).
//
// Per chunk of queries [t0, t0 + nq):
//   CountPairs      counts[bucket] = queries of the chunk that chose the bucket's block (bucket: sequence,
//                   block, group), then rounded up to whole tiles of `qpc` queries (qpc = 64 / group size)
//   ExclusiveSum    offsets[bucket] = first list entry of the bucket (a multiple of qpc); offsets[buckets] = all
//   FillEntries     entries[offsets[bucket] + i] = (t - t0) * top_k + slot; padding entries stay -1;
//                   tile_block[tile] = (group, block) of each tile
//   TileAttend      per tile: S = Q K^T (scores rounded as LowpAttend does), m_b, l_b = sum exp(s - m_b),
//                   O_b = P V with P = exp(s - m_b) in the storage format, fp32 accumulation
//   Merge           per (query, head): M = max m_b, L = sum l_b e^(m_b - M), out = sum O_b e^(m_b - M) / L,
//                   lse = M + log L, blocks in ascending id order
// When the caller states that every sequence has at most one query (decode; KvOuterPlan::direct_lists), every
// list holds at most one query, so DirectLists replaces CountPairs .. FillEntries: one kernel writes one tile per
// (query, group, selection slot), the same tiles as the general lists in another order (3 launches per chunk).
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>

#include "gpu/attend/kv_outer.h"
#include "gpu/common/device_query.h"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using mma::CopyAsync16;
using mma::CopyAsyncCommit;
using mma::CopyAsyncWait;
using mma::kFullMask;
using mma::LoadMatrixX4;
using mma::LoadMatrixX4Trans;
using mma::Mma16816;

constexpr int kWarps = 4;
constexpr int kTileRows = kWarps * 16;  // (query, head) rows per tile; warp w owns rows 16w..16w+15
constexpr int kKeyPad = 128;            // keys of one block, zero-padded (block_size <= 128)
constexpr int kDimPad = 128;            // head dims, zero-padded
constexpr int kStride = kDimPad + 8;    // halves per smem row: ldmatrix conflict-free
constexpr int kCtasPerSm = 2;
constexpr float kLog2e = 1.4426950408889634f;
constexpr size_t kSmemBytes =
    size_t(kTileRows + 2 * kKeyPad) * kStride * 2 + kTileRows * (sizeof(int32_t) + sizeof(int64_t));

// Queries per tile: the rows of one query are its group's heads.
__host__ __device__ inline int TileQueries(const AttendGeometry& g) { return kTileRows / (g.hq / g.hkv); }

// Whether path U takes query t's rows of group r (route: RouteUnionTiles' [UnionTileCount] tiles, or null: none).
__device__ inline bool RoutedToU(const uint8_t* route, const AttendGeometry& g, int64_t t, int r) {
  return route != nullptr && route[t / (kUnionTileRows / (g.hq / g.hkv)) * g.hkv + r] != 0;
}

// One thread per (chunk query, group, slot) with a valid id on path K: the bucket of (sequence, block, group).
__device__ inline int64_t PairBucket(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                     const AttendGeometry& g, int64_t t0, int64_t i, int32_t* id_out) {
  const int64_t t = t0 + i / (int64_t(g.hkv) * g.top_k);
  const int r = int((i / g.top_k) % g.hkv);
  const int32_t id = topk[(int64_t(r) * g.total_q + t) * g.top_k + i % g.top_k];
  *id_out = id;
  return id < 0 || RoutedToU(route, g, t, r) ? -1 : (int64_t(first_block[t]) + id) * g.hkv + r;
}

__global__ void CountPairsKernel(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                 AttendGeometry g, int64_t t0, int64_t pairs, int32_t* counts) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  int32_t id;
  const int64_t bucket = PairBucket(topk, first_block, route, g, t0, i, &id);
  if (bucket >= 0) atomicAdd(counts + bucket, 1);
}

// docs:begin gpu-kv-outer-direct-lists
// DirectLists: the lists of a chunk in which no two queries share a (sequence, block, group) bucket (every
// sequence contributes at most one query: decode), so every bucket holds one query and is one tile. Tile
// i = (t - t0) * Hkv * top_k + group * top_k + slot, for every slot of every (query, group) row:
//   entries[i * qpc]             = (t - t0) * top_k + slot, entries[i * qpc + 1 .. qpc - 1] = -1 (padding)
//   tile_block[i]                = (group, id) for a valid id; for a -1 slot (fewer blocks than top_k) the query's
//                                  own local block position / block_size: a harmless padding tile that reads
//                                  visible keys only and writes the partial of that -1 slot, which no one reads
//   offsets[num_buckets]         = tiles * qpc (the only element of `offsets` the tile kernels read)
// A valid tile is exactly the tile the general lists make for its bucket (the one query in entry 0, qpc - 1
// padding entries), each tile writes only its own rows' selection slots, and the merge reads a row's partials by
// slot in ascending block id order, so out and lse are bit-identical to the general lists' whatever the tile
// order. (The wgmma tiles keep K / V in shared memory across consecutive tiles of the same block and group: here
// two consecutive tiles share them only when one is a padding tile of the other's query, and then both load the
// same keys of the same block, so every valid tile sees the shared memory a fresh load gives.) No atomics, no
// memset, no host sync: one thread per list entry, graph-capturable.
__global__ void DirectListsKernel(const int32_t* topk, const int64_t* position, AttendGeometry g, int64_t t0,
                                  int64_t tiles, int qpc, int32_t* total_entries, int32_t* entries, int2* tile_block) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;  // list entry: tile e / qpc, place e % qpc
  if (e >= tiles * qpc) return;
  if (e == 0) *total_entries = int32_t(tiles * qpc);
  if (e % qpc != 0) {
    entries[e] = -1;
    return;
  }
  const int64_t i = e / qpc, t_local = i / (int64_t(g.hkv) * g.top_k);
  const int r = int((i / g.top_k) % g.hkv), slot = int(i % g.top_k);
  const int64_t t = t0 + t_local;
  const int32_t id = topk[(int64_t(r) * g.total_q + t) * g.top_k + slot];
  entries[e] = int32_t(t_local * g.top_k + slot);
  tile_block[i] = make_int2(r, id >= 0 ? id : int(position[t] / g.bk));
}
// docs:end gpu-kv-outer-direct-lists

__global__ void RoundUpToTilesKernel(int32_t* counts, int64_t n, int qpc) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) counts[i] = (counts[i] + qpc - 1) / qpc * qpc;
}

__global__ void FillEntriesKernel(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                                  AttendGeometry g, int64_t t0, int64_t pairs, int qpc, const int32_t* offsets,
                                  int32_t* cursor, int32_t* entries, int2* tile_block) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  int32_t id;
  const int64_t bucket = PairBucket(topk, first_block, route, g, t0, i, &id);
  if (bucket < 0) return;
  const int32_t at = offsets[bucket] + atomicAdd(cursor + bucket, 1);
  const int64_t t_local = i / (int64_t(g.hkv) * g.top_k);
  entries[at] = int32_t(t_local * g.top_k + i % g.top_k);
  if (at % qpc == 0) tile_block[at / qpc] = make_int2(int(bucket % g.hkv), id);
}

// docs:begin gpu-kv-outer-tile TileAttend: one tile = one block of one group and up to 64 / G queries that
// chose it (64 rows: query-major, head-minor). Q rows, K and V of the block's visible keys arrive by cp.async
// (K with Q, V in a second group, so V lands while S is computed). Warp w multiplies its 16 rows by all 128
// keys: S in registers (16 n8 tiles), masked past each row's position, rounded R(R(dot) * scale) as the
// same-precision reference does; the row's block maximum m_b and l_b = sum exp(s - m_b) come from 4-lane
// shuffles. P = exp(s - m_b) is re-packed from the S accumulators straight into A fragments (the m16n8 C layout
// of two adjacent key tiles is the m16k16 A layout), and O_b = P V accumulates in fp32 (ldmatrix.trans B
// fragments). The partial (m_b, l_b, O_b) goes to the row's selection slot; nothing else is shared between rows.
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm)
    TileAttendKernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int64_t* position,
                     const int64_t* key_begin, AttendGeometry g, float scale, int64_t t0, const int32_t* offsets,
                     int64_t num_buckets, const int32_t* entries, const int2* tile_block, float* part_o,
                     float2* part_ml) {
  extern __shared__ __align__(16) unsigned char kv_outer_smem[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(kv_outer_smem);               // [kTileRows][kStride]
  uint16_t* ks = qs + kTileRows * kStride;                                 // [kKeyPad][kStride]
  uint16_t* vs = ks + kKeyPad * kStride;                                   // [kKeyPad][kStride]
  int64_t* tile_pos = reinterpret_cast<int64_t*>(vs + kKeyPad * kStride);  // [qpc] position, -1 for padding
  int32_t* tile_entry = reinterpret_cast<int32_t*>(tile_pos + kTileRows);  // [qpc] list entry, -1 for padding

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv, qpc = TileQueries(g);
  const int64_t total_tiles = offsets[num_buckets] / qpc;
  // ldmatrix lane addresses: K (non-trans) pieces (keys 0-7 | 8-15) x (dims 0-7 | 8-15) -> b of two n8 key
  // tiles; V (trans) pieces (keys 0-7, 8-15) x (dims 0-7, 8-15) -> b of two n8 dim tiles.
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  const int v_key = ((lane / 8) % 2) * 8 + lane % 8, v_dim = (lane / 16) * 8;

  for (int64_t tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const int2 group_block = tile_block[tile];
    const int r = group_block.x;
    const int64_t key0 = int64_t(group_block.y) * g.bk;
    if (tid < qpc) {
      const int32_t e = entries[tile * qpc + tid];
      tile_entry[tid] = e;
      tile_pos[tid] = e < 0 ? -1 : position[t0 + e / g.top_k];
    }
    __syncthreads();
    const int64_t kb = key_begin[t0 + tile_entry[0] / g.top_k];  // entry 0 of a tile is never padding
    int64_t max_pos = -1;
    for (int i = 0; i < qpc; ++i) max_pos = tile_pos[i] > max_pos ? tile_pos[i] : max_pos;
    const int nkeys = int(max_pos - key0 + 1 < g.bk ? max_pos - key0 + 1 : g.bk);  // keys any row can see

    for (int e = tid; e < kTileRows * (kDimPad / 8); e += blockDim.x) {  // Q rows of the tile
      const int row = e / (kDimPad / 8), piece = e % (kDimPad / 8), qi = row / group;
      const bool valid = qi < qpc && tile_entry[qi] >= 0 && piece * 8 < g.d;
      const int64_t t = valid ? t0 + tile_entry[qi] / g.top_k : 0;
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
      float m_log2[2];  // exp(s - m) = exp2(s * log2(e) - m * log2(e)): one fma and one ex2 per score
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 1));
        m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(kFullMask, m_row[h], 2));
        m_log2[h] = m_row[h] * kLog2e;
      }
#pragma unroll
      for (int kt = 0; kt < kKeyPad / 16; ++kt) {
        float p[2][4];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            p[half][e] = exp2f(fmaf(s[2 * kt + half][e], kLog2e, -m_log2[e / 2]));
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
    __syncthreads();  // the next tile overwrites shared memory
  }
}
// docs:end gpu-kv-outer-tile

// docs:begin gpu-kv-outer-merge
// Merge: one warp per (chunk query, head) on path K; the row's partials merged in ascending block order; lane l
// owns value dims 4l..4l+3.
__global__ void MergeKernel(const int32_t* topk, const uint8_t* route, AttendGeometry g, int64_t t0, int64_t nq,
                            const float* part_o, const float2* part_ml, double* out, double* lse) {
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;  // (t - t0) * hq + head
  if (row >= nq * g.hq) return;
  const int64_t t = t0 + row / g.hq;
  const int head = int(row % g.hq), r = head / (g.hq / g.hkv);
  if (RoutedToU(route, g, t, r)) return;
  const int32_t* sel = topk + (int64_t(r) * g.total_q + t) * g.top_k;
  const int32_t id = lane < g.top_k ? sel[lane] : -1;
  const bool valid = id >= 0;
  int rank = 0;  // valid ids are distinct (ValidateSelectionForAttend)
  for (int j = 0; j < g.top_k; ++j) {
    const int32_t other = __shfl_sync(kFullMask, id, j);
    rank += other >= 0 && other < id;
  }
  const int nb = __popc(__ballot_sync(kFullMask, valid));
  const int64_t base = row * g.top_k;
  float m = valid ? part_ml[base + lane].x : -INFINITY;
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const bool owns_dims = lane * 4 < g.dv;
  for (int k = 0; k < nb; ++k) {
    const int slot = __ffs(__ballot_sync(kFullMask, valid && rank == k)) - 1;
    const float2 ml = part_ml[base + slot];
    const float w = expf(ml.x - m);
    l += ml.y * w;
    if (owns_dims) {
      const float4 o = *reinterpret_cast<const float4*>(part_o + (base + slot) * g.dv + lane * 4);
      acc[0] += o.x * w;
      acc[1] += o.y * w;
      acc[2] += o.z * w;
      acc[3] += o.w * w;
    }
  }
  if (owns_dims) {
    double* dst = out + (t * g.hq + head) * g.dv + lane * 4;
    for (int c = 0; c < 4; ++c) dst[c] = double(acc[c] / l);
  }
  if (lane == 0) lse[t * g.hq + head] = double(m + logf(l));
}
// docs:end gpu-kv-outer-merge

size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

static_assert(kSmemBytes == kKvOuterMmaSmemBytes && kTileRows == kKvOuterTileRows && kKeyPad == kKvOuterKeyPad &&
                  kDimPad == kKvOuterDimPad,
              "KvOuterAttendFits (gpu/common/kernel_fits.h)");

KvOuterPlan PlanKvOuter(const AttendGeometry& g, int64_t num_blocks, int64_t budget_bytes,
                        bool one_query_per_sequence) {
  const KvOuterChunks chunks = PlanKvOuterChunks(g, num_blocks, budget_bytes, one_query_per_sequence);
  KvOuterPlan plan;
  plan.ok = chunks.ok;
  plan.qpc = chunks.qpc;
  plan.chunk_q = chunks.chunk_q;
  plan.num_buckets = chunks.num_buckets;
  plan.max_entries = chunks.max_entries;
  plan.max_tiles = chunks.max_tiles;
  plan.direct_lists = chunks.direct_lists;
  plan.direct_max_tiles = chunks.direct_max_tiles;
  size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                plan.num_buckets + 1);
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += Align256(bytes);
    return offset;
  };
  plan.counts = take(size_t(plan.num_buckets + 1) * 4);
  plan.offsets = take(size_t(plan.num_buckets + 1) * 4);
  plan.cursor = take(size_t(plan.num_buckets) * 4);
  plan.entries = take(size_t(std::max(plan.max_entries, plan.direct_max_tiles * plan.qpc)) * 4);
  plan.tile_block = take(size_t(std::max(plan.max_tiles, plan.direct_max_tiles)) * sizeof(int2));
  plan.part_o = take(size_t(plan.chunk_q) * g.hq * g.top_k * g.dv * 4);
  plan.part_ml = take(size_t(plan.chunk_q) * g.hq * g.top_k * sizeof(float2));
  plan.scan_temp = take(scan_bytes);
  plan.union_route = take(size_t(UnionTileCount(g)));
  plan.scan_temp_bytes = scan_bytes;
  plan.bytes = at;
  return plan;
}

namespace {

cudaError_t PrepareMmaTiles(int lowp) {
  const auto tile_kernel = lowp == kLowpBF16 ? TileAttendKernel<kLowpBF16> : TileAttendKernel<kLowpF16>;
  return cudaFuncSetAttribute(tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
}

cudaError_t LaunchMmaTiles(int lowp, const kv_outer::TileLists& l, cudaStream_t stream) {
  const auto tile_kernel = lowp == kLowpBF16 ? TileAttendKernel<kLowpBF16> : TileAttendKernel<kLowpF16>;
  const unsigned grid = unsigned(std::min<int64_t>(l.max_tiles, int64_t(SmCount()) * kCtasPerSm));
  tile_kernel<<<grid, kWarps * 32, kSmemBytes, stream>>>(l.q, l.k, l.v, l.position, l.key_begin, l.g, l.scale, l.t0,
                                                         l.offsets, l.num_buckets, l.entries, l.tile_block, l.part_o,
                                                         l.part_ml);
  return cudaGetLastError();
}

// The general lists of one chunk (any number of queries per sequence): counts, round-up to whole tiles,
// exclusive sum into offsets, then entries and tile_block (see the top of this file).
cudaError_t BuildGeneralLists(const int32_t* topk, const int32_t* first_block, const uint8_t* route,
                              const AttendGeometry& g, int64_t t0, int64_t pairs, const KvOuterPlan& plan,
                              unsigned char* base, cudaStream_t stream) {
  int32_t* counts = reinterpret_cast<int32_t*>(base + plan.counts);
  int32_t* offsets = reinterpret_cast<int32_t*>(base + plan.offsets);
  int32_t* cursor = reinterpret_cast<int32_t*>(base + plan.cursor);
  int32_t* entries = reinterpret_cast<int32_t*>(base + plan.entries);
  int2* tile_block = reinterpret_cast<int2*>(base + plan.tile_block);
  const unsigned pair_grid = unsigned((pairs + 255) / 256);
  cudaError_t err;
  if ((err = cudaMemsetAsync(counts, 0, size_t(plan.num_buckets + 1) * 4, stream)) != cudaSuccess) return err;
  if ((err = cudaMemsetAsync(cursor, 0, size_t(plan.num_buckets) * 4, stream)) != cudaSuccess) return err;
  if ((err = cudaMemsetAsync(entries, 0xff, size_t(plan.max_entries) * 4, stream)) != cudaSuccess) return err;
  CountPairsKernel<<<pair_grid, 256, 0, stream>>>(topk, first_block, route, g, t0, pairs, counts);
  const unsigned bucket_grid = unsigned((plan.num_buckets + 255) / 256);
  RoundUpToTilesKernel<<<bucket_grid, 256, 0, stream>>>(counts, plan.num_buckets, plan.qpc);
  size_t scan_bytes = plan.scan_temp_bytes;
  if ((err = cub::DeviceScan::ExclusiveSum(base + plan.scan_temp, scan_bytes, counts, offsets, plan.num_buckets + 1,
                                           stream)) != cudaSuccess) {
    return err;
  }
  FillEntriesKernel<<<pair_grid, 256, 0, stream>>>(topk, first_block, route, g, t0, pairs, plan.qpc, offsets, cursor,
                                                   entries, tile_block);
  return cudaGetLastError();
}

}  // namespace

cudaError_t kv_outer::Run(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                          const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                          const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace, double* out,
                          double* lse, cudaStream_t stream, const TileLauncher& tiles, const uint8_t* union_route) {
  if (g.total_q <= 0) return cudaSuccess;
  unsigned char* base = static_cast<unsigned char*>(workspace);
  int32_t* offsets = reinterpret_cast<int32_t*>(base + plan.offsets);
  int32_t* entries = reinterpret_cast<int32_t*>(base + plan.entries);
  int2* tile_block = reinterpret_cast<int2*>(base + plan.tile_block);
  float* part_o = reinterpret_cast<float*>(base + plan.part_o);
  float2* part_ml = reinterpret_cast<float2*>(base + plan.part_ml);
  cudaError_t err = tiles.prepare(lowp);
  if (err != cudaSuccess) return err;
  TileLists lists;
  lists.q = q;
  lists.k = k;
  lists.v = v;
  lists.position = position;
  lists.key_begin = key_begin;
  lists.g = g;
  lists.scale = scale;
  lists.offsets = offsets;
  lists.num_buckets = plan.num_buckets;
  lists.entries = entries;
  lists.tile_block = tile_block;
  lists.part_o = part_o;
  lists.part_ml = part_ml;
  for (int64_t t0 = 0; t0 < g.total_q; t0 += plan.chunk_q) {
    const int64_t nq = std::min(plan.chunk_q, g.total_q - t0);
    const int64_t pairs = nq * g.hkv * g.top_k;
    lists.t0 = t0;
    if (plan.direct_lists && union_route == nullptr && pairs <= plan.direct_max_tiles) {  // a tile per (t, r, slot)
      const int64_t list_entries = pairs * plan.qpc;
      DirectListsKernel<<<unsigned((list_entries + 255) / 256), 256, 0, stream>>>(
          topk, position, g, t0, pairs, plan.qpc, offsets + plan.num_buckets, entries, tile_block);
      if ((err = cudaGetLastError()) != cudaSuccess) return err;
      lists.max_tiles = pairs;
    } else {
      if ((err = BuildGeneralLists(topk, first_block, union_route, g, t0, pairs, plan, base, stream)) != cudaSuccess) {
        return err;
      }
      lists.max_tiles = plan.max_tiles;
    }
    if ((err = tiles.launch(lowp, lists, stream)) != cudaSuccess) return err;
    const int64_t rows = nq * g.hq;
    MergeKernel<<<unsigned((rows + 7) / 8), 256, 0, stream>>>(topk, union_route, g, t0, nq, part_o, part_ml, out, lse);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t KvOuterAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                          const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                          const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace, double* out,
                          double* lse, cudaStream_t stream) {
  return kv_outer::Run(lowp, q, k, v, topk, position, key_begin, first_block, g, scale, plan, workspace, out, lse,
                       stream, kv_outer::TileLauncher{PrepareMmaTiles, LaunchMmaTiles}, /*union_route=*/nullptr);
}

}  // namespace msa::gpu
