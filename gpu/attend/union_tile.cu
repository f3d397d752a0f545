// Main branch of the low-precision mode, path U (sm_90a): one CTA per union tile, UnionTileQueries(g) = 128 / group
// consecutive queries (the batch cut in fixed runs from query 0; a run may span two sequences) and one kv group r:
// 128 (query, head) rows. The CTA builds the sorted union of its queries' selected
// blocks (ascending global block id = first_block[t] + id) with a bit per query that chose each block, then walks
// that union once: every union block's K and V are loaded once for all the tile's rows, and a row that did not
// choose the block sees only -inf scores there, so each row's result is the online softmax over its own blocks in
// ascending order (independent of the other rows of its tile: deterministic). No partial results, no merge.
//
// docs:begin gpu-union-tile
// UnionTileKernel: 256 threads = two consumer warpgroups; warpgroup w holds rows 64w..64w+63 (row = query slot x
// group + head), 1 CTA per multiprocessor.
//   union          ids of the tile's (query, slot) pairs -> first occurrences -> rank among them (O(E^2) in shared
//                  memory, E = queries x top_k <= 1024): block[rank], the bit of each query that chose it, the
//                  most keys any of them sees
//   per block u    K, V of block u+1 -> the other stage (cp.async, all 256 threads) while block u is computed;
//                  a warpgroup none of whose queries chose block u skips it
//   S = Q K^T      8 x wgmma m64n128k16 (Q and K K-major in shared memory, 128-byte swizzle), fp32 accumulators
//   softmax        s = R(R(dot) * scale) in the storage format (as the KV-outer tiles), -inf past the row's position
//                  and on blocks the row's query did not choose; m' = max(m, row max), alpha = e^(m - m'),
//                  p = e^(s - m') packed to the storage format, l = alpha l + sum p (fp32), O = alpha O
//   O += P V       8 x wgmma m64n128k16, P from registers, V MN-major in shared memory
//   output         out = O / l and lse = m + log l per row, widened to FP64
// Shared memory: Q [2 warpgroups][2][64][128 B], two stages of K and V [2][128][128 B] each, the union: ~190 KiB.
// docs:end gpu-union-tile
#include <algorithm>
#include <climits>
#include <cmath>

#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/mma.cuh"
#include "gpu/common/wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kRows = 128;     // (query, head) rows per tile
constexpr int kWgRows = 64;    // rows per warpgroup: the wgmma M
constexpr int kKeys = 128;     // keys of one block, zero-padded
constexpr int kDims = 128;     // head dims, zero-padded
constexpr int kStages = 2;
constexpr int kMaxEntries = kUnionTileMaxEntries;  // tile queries x top_k
constexpr uint32_t kRowBytes = 128;
constexpr uint32_t kQHalfBytes = kWgRows * kRowBytes;  // one warpgroup's dims 0-63 (or 64-127): 8 KiB
constexpr uint32_t kQWgBytes = 2 * kQHalfBytes;
constexpr uint32_t kQBytes = 2 * kQWgBytes;
constexpr uint32_t kKvHalfBytes = kKeys * kRowBytes;  // 16 KiB
constexpr uint32_t kKvBytes = 2 * kKvHalfBytes;
constexpr uint32_t kStageBytes = 2 * kKvBytes;  // K then V

// The tile's union and its queries, in shared memory after the swizzled tiles.
struct UnionSmem {
  int32_t ids[kMaxEntries];      // (query slot, selection slot) -> global block id, INT_MAX for none
  int32_t first[kMaxEntries];    // 1 where the entry is its id's first occurrence
  int32_t block[kMaxEntries];    // union, ascending: global block id
  uint64_t chosen[kMaxEntries];  // bit j: query slot j (< 64) chose the block
  int32_t keys[kMaxEntries];     // the most keys of the block any query of the tile sees
  int64_t kv_row[kMaxEntries];   // the block's first key as a row of k / v
  int64_t pos[kRows];            // per query slot: key position, -1 past total_q
  int64_t key_begin[kRows];      // per query slot
  int32_t first_block[kRows];    // per query slot
  int32_t size;                  // union size
};

constexpr size_t kSmemBytes = 1024 /* alignment slack */ + kQBytes + kStages * kStageBytes + sizeof(UnionSmem);
static_assert(kSmemBytes == kUnionTileSmemBytes, "UnionTileFits (gpu/common/kernel_fits.h)");
static_assert(kRows == kUnionTileRows && kKeys == kKvOuterKeyPad && kDims == kKvOuterDimPad, "UnionTileFits");

#if defined(MSA_WGMMA_ENABLED)
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kChunks = kDims / 8;         // 16-byte chunks per row
constexpr uint32_t kAtomBytes = 8 * kRowBytes;  // one 128-byte-swizzle atom: 8 rows (the descriptors' SBO)

// Rows [0, 128) of the tile's Q -> [wg][2][64][128 B] swizzled; rows past the tile's queries zero-filled. Thread
// tid copies chunk tid % 16 of rows tid / 16 + 16j.
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

// Keys [0, nkeys) of one block of K or V (head `r`, `dim` wide) -> [2][128][128 B] swizzled, the rest zero-filled.
__device__ inline void LoadKv(uint32_t dst, const uint16_t* src_base, int dim, int hkv, int64_t kv_row, int r,
                              int nkeys, int tid) {
  const int c = tid % kChunks, key0 = tid / kChunks;
  const uint32_t dst0 = dst + (c / 8) * kKvHalfBytes + wgmma::SwizzledOffset(key0, c % 8);
#pragma unroll
  for (int j = 0; j < kKeys / 16; ++j) {
    const int key = key0 + 16 * j;
    const bool valid = key < nkeys && c * 8 < dim;
    const uint16_t* src = src_base + (valid ? ((kv_row + key) * hkv + r) * dim + c * 8 : 0);
    wgmma::CopyAsync16(dst0 + j * 2 * kAtomBytes, src, valid);
  }
}

// The tile's queries and the sorted union of their selections into u (every thread takes part; ends with a barrier).
__device__ inline void BuildUnion(UnionSmem& u, const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                                  const int32_t* first_block, const AttendGeometry& g, int64_t t_first, int r, int qpt,
                                  int tid) {
  const int entries = qpt * g.top_k;
  if (tid < qpt) {
    const int64_t t = t_first + tid;
    const bool valid = t < g.total_q;
    u.pos[tid] = valid ? position[t] : -1;
    u.key_begin[tid] = valid ? key_begin[t] : 0;
    u.first_block[tid] = valid ? first_block[t] : 0;
  }
  if (tid == 0) u.size = 0;
  __syncthreads();
  for (int e = tid; e < entries; e += kThreads) {
    const int slot = e / g.top_k;
    const int64_t t = t_first + slot;
    const int32_t id = t < g.total_q ? topk[(int64_t(r) * g.total_q + t) * g.top_k + e % g.top_k] : -1;
    u.ids[e] = id >= 0 ? u.first_block[slot] + id : INT_MAX;
    u.chosen[e] = 0;
    u.keys[e] = 0;
  }
  __syncthreads();
  for (int e = tid; e < entries; e += kThreads) {
    const int32_t id = u.ids[e];
    bool first = id != INT_MAX;
    for (int f = 0; f < e && first; ++f) first = u.ids[f] != id;
    u.first[e] = first;
    if (first) atomicAdd(&u.size, 1);
  }
  __syncthreads();
  for (int e = tid; e < entries; e += kThreads) {
    const int32_t id = u.ids[e];
    if (id == INT_MAX) continue;
    int rank = 0;
    for (int f = 0; f < entries; ++f) rank += u.first[f] && u.ids[f] < id;
    const int slot = e / g.top_k;
    const int64_t key0 = int64_t(id - u.first_block[slot]) * g.bk;
    const int64_t seen = u.pos[slot] - key0 + 1;
    if (u.first[e]) {
      u.block[rank] = id;
      u.kv_row[rank] = u.key_begin[slot] + key0;
    }
    atomicOr(reinterpret_cast<unsigned long long*>(&u.chosen[rank]), 1ull << slot);
    atomicMax(&u.keys[rank], int(seen < 0 ? 0 : (seen > g.bk ? g.bk : seen)));
  }
  __syncthreads();
}

template <int kLowp>
__device__ inline uint32_t PackPair(float lo, float hi) {
  return mma::Pack<kLowp>(lo, hi);
}

#endif  // MSA_WGMMA_ENABLED

// One CTA per (run of qpt queries, group): blockIdx.x = run * hkv + group. `route` (nullable): tiles with
// route[tile] == 0 belong to path K and are skipped.
template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    UnionTileKernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                    const int32_t* __restrict__ topk, const int64_t* __restrict__ position,
                    const int64_t* __restrict__ key_begin, const int32_t* __restrict__ first_block,
                    const AttendGeometry g, float scale, const uint8_t* __restrict__ route, double* __restrict__ out,
                    double* __restrict__ lse) {
#if defined(MSA_WGMMA_ENABLED)
  const int64_t tile = blockIdx.x;
  if (route != nullptr && route[tile] == 0) return;
  extern __shared__ __align__(16) unsigned char union_smem[];  // 1024-byte alignment is made below
  const uint32_t raw = wgmma::SharedAddress(union_smem);
  const uint32_t pad = (1024u - raw % 1024u) % 1024u;
  const uint32_t q_smem = raw + pad;          // [2 wg][2][64][128 B]
  const uint32_t kv_smem = q_smem + kQBytes;  // [2 stages][K, V][2][128][128 B]
  UnionSmem& u = *reinterpret_cast<UnionSmem*>(union_smem + pad + kQBytes + kStages * kStageBytes);

  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv, qpt = kRows / group, r = int(tile % g.hkv);
  const int64_t t_first = (tile / g.hkv) * qpt;
  LoadQ(q_smem, q, g, t_first, r, group, qpt, tid);
  wgmma::CopyAsyncCommit();
  BuildUnion(u, topk, position, key_begin, first_block, g, t_first, r, qpt, tid);
  const int size = u.size;
  if (size > 0) {
    LoadKv(kv_smem, k, g.d, g.hkv, u.kv_row[0], r, u.keys[0], tid);
    LoadKv(kv_smem + kKvBytes, v, g.dv, g.hkv, u.kv_row[0], r, u.keys[0], tid);
  }
  wgmma::CopyAsyncCommit();

  // This thread's two accumulator rows 64 wg + 16 warp + gid (+8): query slot and head.
  int slot_h[2];
  int64_t pos_h[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = wg * kWgRows + warp * 16 + gid + 8 * h;
    slot_h[h] = row / group < qpt ? row / group : -1;
    pos_h[h] = slot_h[h] >= 0 ? u.pos[slot_h[h]] : -1;
  }
  const int wg_queries = kWgRows / group;  // 64 % group == 0 and group >= 2 (UnionTileFits): at most 32
  const uint64_t wg_bits = ((uint64_t(1) << wg_queries) - 1) << (wg * wg_queries);
  const uint64_t q_desc = wgmma::MakeDescriptor(q_smem + uint32_t(wg) * kQWgBytes, 16, kAtomBytes);

  float o[64];
#pragma unroll
  for (int x = 0; x < 64; ++x) o[x] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // l: this thread's columns only

  for (int b = 0; b < size; ++b) {
    const uint32_t stage = kv_smem + uint32_t(b % kStages) * kStageBytes;
    __syncthreads();  // every warpgroup is done with block b - 1: its stage takes block b + 1
    if (b + 1 < size) {
      const uint32_t next = kv_smem + uint32_t((b + 1) % kStages) * kStageBytes;
      LoadKv(next, k, g.d, g.hkv, u.kv_row[b + 1], r, u.keys[b + 1], tid);
      LoadKv(next + kKvBytes, v, g.dv, g.hkv, u.kv_row[b + 1], r, u.keys[b + 1], tid);
    }
    wgmma::CopyAsyncCommit();
    wgmma::CopyAsyncWait<1>();  // Q and block b have landed
    wgmma::FenceProxyAsyncShared();
    __syncthreads();
    const uint64_t chosen = u.chosen[b];
    if ((chosen & wg_bits) == 0) continue;  // none of this warpgroup's queries chose block b

    float s[64];
    const uint64_t k_desc = wgmma::MakeDescriptor(stage, 16, kAtomBytes);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kDims / 16; ++kk) {
      const uint32_t step = (kk % 4) * 32;
      wgmma::MmaSS<kLowp>(s, wgmma::AdvanceDescriptor(q_desc, (kk / 4) * kQHalfBytes + step),
                          wgmma::AdvanceDescriptor(k_desc, (kk / 4) * kKvHalfBytes + step), kk > 0);
    }
    wgmma::CommitGroup();
    const int32_t block = u.block[b];
    int key_limit[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int slot = slot_h[h];
      const bool chose = slot >= 0 && ((chosen >> slot) & 1u) != 0;
      const int64_t seen = chose ? pos_h[h] - int64_t(block - u.first_block[slot]) * g.bk + 1 : 0;
      key_limit[h] = int(seen < 0 ? 0 : (seen > g.bk ? g.bk : seen));
    }
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(s);

    float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, key = j * 8 + tig * 2 + (e & 1);
        float& x = s[4 * j + e];
        x = key < key_limit[h] ? mma::ToFloat<kLowp>(mma::Score16<kLowp>(x, scale)) : -INFINITY;
        m_new[h] = fmaxf(m_new[h], x);
      }
    }
    // alpha is exactly 1 where the maximum did not move (a row that did not choose the block is left bit for bit
    // as it was); a row with no key yet keeps p = 0 (its O and l are 0).
    float m_log2[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(mma::kFullMask, m_new[h], 1));
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(mma::kFullMask, m_new[h], 2));
      m_log2[h] = m_new[h] == -INFINITY ? 0.0f : m_new[h] * kLog2e;
      alpha[h] = m_run[h] == m_new[h] ? 1.0f : exp2f(fmaf(m_run[h], kLog2e, -m_log2[h]));
      m_run[h] = m_new[h];
      l_run[h] *= alpha[h];
    }
    uint32_t pa[kKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      float p[8];
#pragma unroll
      for (int x = 0; x < 8; ++x) {
        p[x] = exp2f(fmaf(s[8 * kk + x], kLog2e, -m_log2[(x % 4) / 2]));
        l_run[(x % 4) / 2] += p[x];
      }
      pa[kk][0] = PackPair<kLowp>(p[0], p[1]);
      pa[kk][1] = PackPair<kLowp>(p[2], p[3]);
      pa[kk][2] = PackPair<kLowp>(p[4], p[5]);
      pa[kk][3] = PackPair<kLowp>(p[6], p[7]);
    }
#pragma unroll
    for (int x = 0; x < 64; ++x) o[x] *= alpha[(x % 4) / 2];

    const uint64_t v_desc = wgmma::MakeDescriptor(stage + kKvBytes, kKvHalfBytes, kAtomBytes);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma::MmaRS<kLowp, 1>(o, pa[kk], wgmma::AdvanceDescriptor(v_desc, kk * 2 * kAtomBytes), 1);
    }
    wgmma::CommitGroup();
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(o);
  }
  wgmma::CopyAsyncWait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(mma::kFullMask, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(mma::kFullMask, l_run[h], 2);
    if (pos_h[h] < 0) continue;  // padding row
    const int row = wg * kWgRows + warp * 16 + gid + 8 * h;
    const int64_t out_row = (t_first + slot_h[h]) * g.hq + int64_t(r) * group + row % group;
    double* dst = out + out_row * g.dv;
#pragma unroll
    for (int j = 0; j < kDims / 8; ++j) {
      if (j * 8 < g.dv) {
        *reinterpret_cast<double2*>(dst + j * 8 + tig * 2) =
            make_double2(double(o[4 * j + 2 * h] / l_run[h]), double(o[4 * j + 2 * h + 1] / l_run[h]));
      }
    }
    if (tig == 0) lse[out_row] = double(m_run[h] + logf(l_run[h]));
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

}  // namespace

cudaError_t UnionTileAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                            const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                            const AttendGeometry& g, float scale, const uint8_t* route, double* out, double* lse,
                            cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!UnionTileFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  const auto kernel = lowp == kLowpBF16 ? UnionTileKernel<kLowpBF16> : UnionTileKernel<kLowpF16>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  const int64_t tiles = UnionTileCount(g);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  kernel<<<unsigned(tiles), kThreads, kSmemBytes, stream>>>(q, k, v, topk, position, key_begin, first_block, g, scale,
                                                            route, out, lse);
  return cudaGetLastError();
}

}  // namespace msa::gpu
