// What the two path-U kernels share (gpu/attend/union_tile.cu: UnionTileAttend, one CTA of two warpgroups that load
// and compute in turn; gpu/attend/union_tile_ws.cu: its warp-specialized twin): the tile's shared-memory layout, its
// union of selected blocks, the loads and the online-softmax step, so that both give the same bits. Internal to gpu/.
//
// A union tile: 128 / group consecutive queries t (the batch cut in fixed runs from query 0; a run may span two
// sequences) and one kv group r, i.e. 128 (query, head) rows, row = query slot x group + head; warpgroup w computes
// rows 64w..64w+63. Its union: the ascending distinct global block ids (first_block[t] + id) its rows selected, with
// a bit per query slot that chose each, built in shared memory (O(E^2), E = queries x top_k <= 1024).
// docs:begin gpu-union-tile-math
// Per union block, per warpgroup whose queries chose it:
//   S = Q K^T      8 x wgmma m64n128k16 (Q and K K-major in shared memory, 128-byte swizzle), fp32 accumulators
//   softmax        s = dot itself: Q was scaled once per tile, R(q * scale) in the storage format (SPEC section 5's
//                  order (b); the KV-outer tiles take order (a), R(R(dot) * scale)); -inf past the row's position
//                  and on blocks the row's query did not choose; m' = max(m, row max), alpha = e^(m - m') (exactly 1
//                  where m' = m), p = e^(s - m') (ex2.approx) packed to the storage format, l = alpha l + sum p
//                  (fp32), O = alpha O
//   O += P V       8 x wgmma m64n128k16, P from registers, V MN-major in shared memory
// then out = O / l and lse = m + log l per row, in the outputs' format. A row's bits depend on its own selection only.
// docs:end gpu-union-tile-math
#ifndef MSA_GPU_ATTEND_UNION_TILE_CUH_
#define MSA_GPU_ATTEND_UNION_TILE_CUH_

#include <climits>
#include <cmath>
#include <cstdint>

#include "gpu/common/kernel_fits.h"
#include "gpu/common/main_outputs.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/common/wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu::union_tile {

constexpr int kRows = kUnionTileRows;  // (query, head) rows per tile
constexpr int kWgRows = 64;            // rows per consumer warpgroup: the wgmma M
constexpr int kKeys = 128;             // keys of one block, zero-padded
constexpr int kDims = 128;             // head dims, zero-padded
constexpr int kMaxEntries = kUnionTileMaxEntries;
constexpr uint32_t kRowBytes = 128;
constexpr uint32_t kQHalfBytes = kWgRows * kRowBytes;  // one warpgroup's dims 0-63 (or 64-127): 8 KiB
constexpr uint32_t kQWgBytes = 2 * kQHalfBytes;
constexpr uint32_t kQBytes = 2 * kQWgBytes;
constexpr uint32_t kKvHalfBytes = kKeys * kRowBytes;  // 16 KiB
constexpr uint32_t kKvBytes = 2 * kKvHalfBytes;       // one block of K or V
static_assert(kKeys == kKvOuterKeyPad && kDims == kKvOuterDimPad, "UnionTileFits (gpu/common/kernel_fits.h)");

// The tile's union and its queries, in shared memory after the swizzled tiles: what the loads and the per-block math
// read.
struct UnionTable {
  int32_t block[kMaxEntries];    // union, ascending: global block id
  uint64_t chosen[kMaxEntries];  // bit j: query slot j (< 64) chose the block
  int32_t keys[kMaxEntries];     // the most keys of the block any query of the tile sees
  int64_t kv_row[kMaxEntries];   // the block's first key as a row of k / v
  int64_t pos[kRows];            // per query slot: key position, -1 past total_q
  int32_t first_block[kRows];    // per query slot
  int64_t tile;                  // run * Hkv + group, -1 for none (set by the caller of BuildUnion where it needs it)
  int32_t size;                  // union size
};

// What only the union build reads.
struct UnionScratch {
  int32_t ids[kMaxEntries];       // (query slot, selection slot) -> global block id, INT_MAX for none
  int32_t distinct[kMaxEntries];  // the entry's id where it is the id's first occurrence, else INT_MAX
  int64_t key_begin[kRows];       // per query slot
};

#if defined(MSA_WGMMA_ENABLED)
using mma::kLog2e;
constexpr uint32_t kChunks = kDims / 8;         // 16-byte chunks per row
constexpr uint32_t kAtomBytes = 8 * kRowBytes;  // one 128-byte-swizzle atom: 8 rows (the descriptors' SBO)

// Rows [0, 128) of the tile's Q -> [wg][2][64][128 B] swizzled; rows past the tile's queries zero-filled. Called by
// 256 threads: thread tid copies chunk tid % 16 of rows tid / 16 + 16j.
__device__ inline void LoadQ(uint32_t q_smem, const uint16_t* q, const AttendGeometry& g, int64_t t_first, int r,
                             int group, int qpt, int tid) {
  const int c = tid % kChunks, row0 = tid / kChunks;
#pragma unroll
  for (int j = 0; j < kRows / 16; ++j) {
    const int row = row0 + 16 * j, slot = row / group, head = row % group;
    const int64_t t = t_first + slot;
    const bool valid = slot < qpt && t < g.total_q && c * 8 < g.d;
    const uint16_t* src = q + (valid ? (t * g.hq + int64_t(r) * group + head) * g.d + c * 8 : 0);
    const uint32_t dst = q_smem + uint32_t(row / kWgRows) * kQWgBytes + (c / 8) * kQHalfBytes +
                         wgmma::SwizzledOffset(row % kWgRows, c % 8);
    wgmma::CopyAsync16(dst, src, valid);
  }
}

// Q <- R(q * scale) in the storage format, in place, over `bytes` of shared memory from `q_smem` (a layout of whole
// elements: each one is scaled alike wherever the swizzle put it), by `threads` threads: thread `thread` takes the
// 16-byte chunks thread + threads j. The caller makes the writes visible to wgmma (FenceProxyAsyncShared, a barrier).
template <int kLowp>
__device__ inline void ScaleQ(uint32_t q_smem, uint32_t bytes, int thread, int threads, float scale) {
  for (uint32_t chunk = q_smem + 16u * uint32_t(thread); chunk < q_smem + bytes; chunk += 16u * uint32_t(threads)) {
    mma::ScaleSharedChunk<kLowp>(chunk, scale);
  }
}

// Keys [0, nkeys) of one block of K or V (head `r`, `dim` wide) -> [2][128][128 B] swizzled, the rest zero-filled,
// by kThreadsT threads (a multiple of 16 dividing 2048): thread tid copies chunk tid % 16 of keys tid / 16 + step j.
template <int kThreadsT>
__device__ inline void LoadKv(uint32_t dst, const uint16_t* src_base, int dim, int hkv, int64_t kv_row, int r,
                              int nkeys, int tid) {
  constexpr int kKeyStep = kThreadsT / kChunks;
  constexpr int kUnroll = kKeys / kKeyStep < 8 ? kKeys / kKeyStep : 8;  // a producer warp keeps few registers
  static_assert(kThreadsT % kChunks == 0 && kKeys % kKeyStep == 0, "whole keys per step");
  const int c = tid % kChunks, key0 = tid / kChunks;
  const uint32_t dst0 = dst + (c / 8) * kKvHalfBytes;
#pragma unroll kUnroll
  for (int j = 0; j < kKeys / kKeyStep; ++j) {
    const int key = key0 + kKeyStep * j;
    const bool valid = key < nkeys && c * 8 < dim;
    const uint16_t* src = src_base + (valid ? ((kv_row + key) * hkv + r) * dim + c * 8 : 0);
    wgmma::CopyAsync16(dst0 + wgmma::SwizzledOffset(key, c % 8), src, valid);
  }
}

// The tile's queries and the sorted union of their selections into u, by kThreadsT threads tid = 0 .. kThreadsT - 1
// that sync() brings together (a barrier of exactly those threads; BuildUnion ends with one).
template <int kThreadsT, typename SyncT>
__device__ inline void BuildUnion(UnionTable& u, UnionScratch& scratch, const int32_t* topk, const int64_t* position,
                                  const int64_t* key_begin, const int32_t* first_block, const AttendGeometry& g,
                                  int64_t t_first, int r, int qpt, int tid, SyncT sync) {
  static_assert(kThreadsT >= kRows / 2, "a thread per query slot (at most 64: group >= 2)");
  const int entries = qpt * g.top_k;
  const auto selected_id = [&](int e) {  // entry e's block id in its query's selection, -1 for none
    const int64_t t = t_first + e / g.top_k;
    return t < g.total_q ? topk[(int64_t(r) * g.total_q + t) * g.top_k + e % g.top_k] : -1;
  };
  const int32_t own_id = tid < entries ? selected_id(tid) : -1;  // loaded before the barrier: entry tid's
  if (tid < qpt) {
    const int64_t t = t_first + tid;
    const bool valid = t < g.total_q;
    u.pos[tid] = valid ? position[t] : -1;
    scratch.key_begin[tid] = valid ? key_begin[t] : 0;
    u.first_block[tid] = valid ? first_block[t] : 0;
  }
  if (tid == 0) u.size = 0;
  sync();
  for (int e = tid; e < entries; e += kThreadsT) {
    const int32_t id = e == tid ? own_id : selected_id(e);
    scratch.ids[e] = id >= 0 ? u.first_block[e / g.top_k] + id : INT_MAX;
    u.chosen[e] = 0;
    u.keys[e] = 0;
  }
  sync();
  for (int e = tid; e < entries; e += kThreadsT) {
    const bool first = FirstOccurrence(scratch.ids, e, INT_MAX);
    scratch.distinct[e] = first ? scratch.ids[e] : INT_MAX;
    if (first) atomicAdd(&u.size, 1);
  }
  sync();
  for (int e = tid; e < entries; e += kThreadsT) {
    const int32_t id = scratch.ids[e];
    if (id == INT_MAX) continue;
    int rank = 0;
    for (int f = 0; f < entries; ++f) rank += scratch.distinct[f] < id;
    const int slot = e / g.top_k;
    const int64_t key0 = int64_t(id - u.first_block[slot]) * g.bk;
    const int64_t seen = u.pos[slot] - key0 + 1;
    if (scratch.distinct[e] == id) {
      u.block[rank] = id;
      u.kv_row[rank] = scratch.key_begin[slot] + key0;
    }
    atomicOr(reinterpret_cast<unsigned long long*>(&u.chosen[rank]), 1ull << slot);
    atomicMax(&u.keys[rank], int(seen < 0 ? 0 : (seen > g.bk ? g.bk : seen)));
  }
  sync();
}

// One consumer thread's view of the tile: its two accumulator rows 64 wg + 16 warp + lane / 4 (+8).
struct RowSlots {
  int slot[2];       // query slot, -1 for rows past the tile's queries
  int64_t pos[2];    // the query's key position, -1 for padding
  uint64_t wg_bits;  // the query slots of the thread's warpgroup
};

__device__ inline RowSlots RowSlotsOf(const UnionTable& u, int group, int qpt, int wg, int warp, int lane) {
  RowSlots rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = wg * kWgRows + warp * 16 + lane / 4 + 8 * h;
    rows.slot[h] = row / group < qpt ? row / group : -1;
    rows.pos[h] = rows.slot[h] >= 0 ? u.pos[rows.slot[h]] : -1;
  }
  const int wg_queries = kWgRows / group;  // 64 % group == 0 and group >= 2 (UnionTileFits): at most 32
  rows.wg_bits = ((uint64_t(1) << wg_queries) - 1) << (wg * wg_queries);
  return rows;
}

// S = Q K^T of one warpgroup where `chosen`, issued and committed; the caller waits. The group is committed, empty,
// also where !chosen: a number of groups per turn that depends on the path makes ptxas serialize the kernel's wgmma
// instructions (info C7514/C7515).
template <int kLowp>
__device__ inline void IssueScores(float (&s)[64], uint64_t q_desc, uint32_t k_smem, bool chosen) {
  wgmma::Fence();
  if (chosen) {
    wgmma::MmaQKt128<kLowp>(s, q_desc, wgmma::MakeDescriptor(k_smem, 16, kAtomBytes), kQHalfBytes, kKvHalfBytes);
  }
  wgmma::CommitGroup();
}

// O += P V of one warpgroup where `chosen`, issued and committed (empty where !chosen, as IssueScores); the caller
// waits.
template <int kLowp>
__device__ inline void IssueValues(float (&o)[64], const uint32_t (&pa)[kKeys / 16][4], uint32_t v_smem, bool chosen) {
  const uint64_t v_desc = wgmma::MakeDescriptor(v_smem, kKvHalfBytes, kAtomBytes);
  wgmma::Fence();
  if (chosen) {
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma::MmaRS<kLowp, 1>(o, pa[kk], wgmma::AdvanceDescriptor(v_desc, kk * 2 * kAtomBytes), 1);
    }
  }
  wgmma::CommitGroup();
}

// The online-softmax state of a thread's two rows (l: this thread's columns only, summed over the 4 lanes at the end).
struct RowState {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
};

// Scores of keys at or past key_limit[h] -> -inf (where kMasked), and m[h] = max(m[h], row h's scores of this thread).
// Two running maxima per row halve the dependent chain; max is exact, so the order changes no bit.
template <bool kMasked>
__device__ inline void MaskScoresAndMax(float (&s)[64], const int (&key_limit)[2], int tig, float (&m)[2]) {
  float even[2] = {m[0], m[1]}, odd[2] = {-INFINITY, -INFINITY};
  wgmma::ForEachScorePair(s, tig, [&](int j, int h, int key, float& lo, float& hi) {
    if (kMasked) {
      lo = key < key_limit[h] ? lo : -INFINITY;
      hi = key + 1 < key_limit[h] ? hi : -INFINITY;
    }
    float& running = j % 2 == 0 ? even[h] : odd[h];
    running = fmaxf(fmaxf(running, lo), hi);
  });
  m[0] = fmaxf(even[0], odd[0]);
  m[1] = fmaxf(even[1], odd[1]);
}

// Keys of union block `b` that row h of this thread sees: 0 where its query did not choose the block, else up to
// and including its position (at most bk). Needs only the table, so the consumers compute it while their matrix
// work runs.
struct KeyLimits {
  int limit[2];
};
__device__ inline KeyLimits KeyLimitsOf(const UnionTable& u, int b, const RowSlots& rows, int bk) {
  const uint64_t chosen = u.chosen[b];
  const int32_t block = u.block[b];
  KeyLimits keys;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int slot = rows.slot[h];
    const bool chose = slot >= 0 && ((chosen >> slot) & 1u) != 0;
    const int64_t seen = chose ? rows.pos[h] - int64_t(block - u.first_block[slot]) * bk + 1 : 0;
    keys.limit[h] = int(seen < 0 ? 0 : (seen > bk ? bk : seen));
  }
  return keys;
}

// The softmax of a union block on the finished scores s (masked to `keys`, exponentiated in place: s holds p after),
// updating m and l; returns alpha per row (by which O must be scaled before P V of this block is added).
__device__ inline void SoftmaxStep(float (&s)[64], const KeyLimits& keys, int tig, RowState& state, float (&alpha)[2]) {
  const int(&key_limit)[2] = keys.limit;
  float m_new[2] = {state.m[0], state.m[1]};
  if (key_limit[0] == kKeys && key_limit[1] == kKeys) {
    MaskScoresAndMax<false>(s, key_limit, tig, m_new);
  } else {
    MaskScoresAndMax<true>(s, key_limit, tig, m_new);
  }
  float m_log2[2];  // a row with no key yet keeps p = 0 (its O and l are 0)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(mma::kFullMask, m_new[h], 1));
    m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(mma::kFullMask, m_new[h], 2));
    m_log2[h] = mma::MaxLog2(m_new[h]);
    alpha[h] = state.m[h] == m_new[h] ? 1.0f : mma::Exp2Approx(fmaf(state.m[h], kLog2e, -m_log2[h]));
    state.m[h] = m_new[h];
    // Rounded on its own, never fused with the first l += p below: whether ptxas fuses them depends on the kernel
    // around this code, and union-tile and union-tile-ws must give the same bits.
    state.l[h] = __fmul_rn(state.l[h], alpha[h]);
  }
#pragma unroll
  for (int x = 0; x < 64; ++x) {
    s[x] = mma::Exp2Approx(fmaf(s[x], kLog2e, -m_log2[(x % 4) / 2]));
    state.l[(x % 4) / 2] += s[x];
  }
}

// O *= alpha, and P (the exponentiated s) packed to the storage format as the A fragments of O += P V: keys
// 16kk..16kk+15 are accumulator chunks 2kk, 2kk + 1.
template <int kLowp>
__device__ inline void RescaleAndPack(float (&o)[64], const float (&alpha)[2], const float (&p)[64],
                                      uint32_t (&pa)[kKeys / 16][4]) {
  if (alpha[0] != 1.0f || alpha[1] != 1.0f) {  // the row maxima moved (x 1 leaves O as it is)
#pragma unroll
    for (int x = 0; x < 64; ++x) o[x] *= alpha[(x % 4) / 2];
  }
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) pa[kk][i] = mma::Pack<kLowp>(p[8 * kk + 2 * i], p[8 * kk + 2 * i + 1]);
  }
}

// out = O / l and lse = m + log l of the thread's rows, in the outputs' format (padding rows skipped).
__device__ inline void WriteRows(const float (&o)[64], RowState& state, const RowSlots& rows, const AttendGeometry& g,
                                 int64_t t_first, int r, int group, int wg, int warp, int lane,
                                 const DeviceAttendOutputs& outputs) {
  const int tig = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    state.l[h] += __shfl_xor_sync(mma::kFullMask, state.l[h], 1);
    state.l[h] += __shfl_xor_sync(mma::kFullMask, state.l[h], 2);
    if (rows.pos[h] < 0) continue;  // padding row
    const int row = wg * kWgRows + warp * 16 + lane / 4 + 8 * h;
    const int64_t out_row = (t_first + rows.slot[h]) * g.hq + int64_t(r) * group + row % group;
#pragma unroll
    for (int j = 0; j < kDims / 8; ++j) {
      if (j * 8 < g.dv) {
        StoreOutPair(outputs, out_row * g.dv + j * 8 + tig * 2, o[4 * j + 2 * h] / state.l[h],
                     o[4 * j + 2 * h + 1] / state.l[h]);
      }
    }
    if (tig == 0) StoreLse(outputs, out_row, state.m[h] + logf(state.l[h]));
  }
}
#endif  // MSA_WGMMA_ENABLED

}  // namespace msa::gpu::union_tile

#endif  // MSA_GPU_ATTEND_UNION_TILE_CUH_
