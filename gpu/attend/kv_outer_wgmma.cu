// KV-outer main branch of the low-precision mode on Hopper warpgroup MMA (sm_90a): the lists, the plan, the partial
// results and the merge are KvOuterAttend's (gpu/attend/kv_outer_attend.cu, shared through gpu/attend/kv_outer.h);
// only the tile kernel differs, and it gives KvOuterAttend's bits (tests/gpu_plans_test.cc compares the two).
//
// docs:begin gpu-kv-outer-wgmma-tile
// WgmmaTileKernel: one CTA = one warpgroup (4 warps, 128 threads) and one 64-row tile at a time (64 (query, head)
// rows x the <= 128 keys of one block of one group, as TileAttendKernel), two CTAs per multiprocessor so that one's
// softmax overlaps the other's matrix work.
//   S = Q K^T      8 x wgmma m64n128k16, Q and K both K-major in shared memory (descriptors), fp32 accumulators
//                  (64 per thread: row 16w + lane/4 (+8), keys 8j + 2(lane%4) (+1))
//   softmax        on the accumulators, with TileAttendKernel's rounding points: s = R(R(dot) * scale) in the
//                  storage format, keys past the row's position -inf, m = row max (4-lane shuffles),
//                  p = exp2(s log2e - m log2e), l = sum p (fp32), P packed to the storage format
//   O = P V        8 x wgmma m64n128k16, A = P from registers (the accumulator pairs are the A fragment), B = V
//                  MN-major in shared memory (V stored [keys][dims], imm-trans-b = 1), fp32 accumulators
//   partials       (m_b, l_b, O_b) per row to the row's selection slot, as TileAttendKernel writes them (kPartials16:
//                  O_b / l_b in the storage format instead of O_b in fp32)
// Shared memory (1024-byte aligned, 128-byte swizzle, gpu/common/wgmma.cuh): Q in 2 stages of [2][64 rows][128 B]
// (dims 0-63 | 64-127), K and V one stage each of [2][128 keys][128 B]; ~99 KiB per CTA.
// Scheduling: each CTA takes a contiguous run of the chunk's tiles. Tiles of one (sequence, block, group) bucket
// are contiguous in the lists, so K and V stay in shared memory from one tile to the next and are loaded again
// only when the bucket changes (or a tile sees more of the block's keys than were loaded).
// Pipeline (cp.async by all 128 threads; three commit groups per tile, in this order):
//   top of tile i    wait Q(i), K(i); proxy fence; barrier                      (V(i) may still be in flight)
//   issue S(i)       then, while it runs: Q(i+1) -> the other Q stage [group 1]; list entries of tile i+2
//   S(i) done        if tile i+1 needs other K/V: barrier, K(i+1) -> K [group 2]; positions of tile i+2
//   softmax(i)       then, if V(i) was loaded last tile: wait V(i); proxy fence; barrier
//   O(i) = P V(i)    if tile i+1 needs other K/V: barrier, V(i+1) -> V [group 3]
//   write partials   and tile i+2's row data to its metadata stage (3 stages)
// In the steady state of a bucket a tile costs one barrier and one 16 KiB Q load that overlaps S.
// docs:end gpu-kv-outer-wgmma-tile
#include <algorithm>

#include "gpu/attend/kv_outer.h"
#include "gpu/attend/kv_outer_wgmma.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/mma.cuh"
#include "gpu/common/wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using namespace kv_outer_wgmma;  // the tile's geometry and softmax, shared with kv_outer_ws.cu

constexpr int kThreads = 128;  // one warpgroup
constexpr int kCtasPerSm = 2;
constexpr int kQStages = 2;
constexpr int kMetaStages = 3;

// What the tile kernel needs of one tile, staged in shared memory two tiles ahead.
struct TileMeta {
  int64_t pos[kTileRows];      // key position of each query slot (qpc <= 64 used), -1 for padding
  int64_t query[kTileRows];    // the slot's query t, -1 for padding
  int32_t t_local[kTileRows];  // t's index in the chunk (list entry / top_k), -1 for padding
  int32_t sel[kTileRows];      // the block's slot in that query's selection (list entry % top_k)
  int64_t key0;                // first key of the block inside its sequence: id * block_size
  int64_t kv_row;              // the same key as a row of k / v: key_begin + key0
  int32_t group;               // kv head
  int32_t seen[2];             // per warp 0 / 1 (slots 0-31 / 32-63): the most keys of the block any slot sees
};

constexpr size_t kSmemBytes = 1024 /* alignment slack */ + kQStages * kQBytes + 2 * kKvBytes +
                              kMetaStages * sizeof(TileMeta) + kTileRows * sizeof(int32_t) /* row map */;

static_assert(kDims % 64 == 0 && kKeys % 16 == 0, "two 64-element swizzled column blocks per row");
static_assert(kThreads == kTileRows * 2, "threads 0-63 stage the tile metadata, one query slot each");

// The device code proper exists only in the compute_90a pass; the other passes compile an empty kernel.
#if defined(MSA_WGMMA_ENABLED)
constexpr uint32_t kChunks = kDims / 8;  // 16-byte chunks per Q / K / V row

__device__ inline int SeenKeys(const TileMeta& m) { return max(m.seen[0], m.seen[1]); }

// One thread's share of staging a tile's metadata (threads 0-63, slot = tid; warps 0 and 1 take part whole).
struct MetaRegs {
  int32_t entry = -1, t_local = -1;
  int2 group_block = make_int2(0, 0);
  int64_t query = -1, pos = -1, key_begin = 0;
};

__device__ inline void FetchEntry(const kv_outer::TileLists& l, int64_t tile, int qpc, int tid, MetaRegs& m) {
  m.entry = tid < qpc ? l.entries[tile * qpc + tid] : -1;
  m.group_block = l.tile_block[tile];
}

__device__ inline void FetchPosition(const kv_outer::TileLists& l, int tid, MetaRegs& m) {
  m.query = -1;
  m.pos = -1;
  m.key_begin = 0;
  m.t_local = m.entry >= 0 ? m.entry / l.g.top_k : -1;
  if (m.entry >= 0) {
    m.query = l.chunk[m.t_local];
    m.pos = l.position[m.query];
    if (tid == 0) m.key_begin = l.key_begin[m.query];  // entry 0 of a tile is never padding
  }
}

__device__ inline void StoreMeta(const kv_outer::TileLists& l, const MetaRegs& m, int tid, TileMeta& dst) {
  const int64_t key0 = int64_t(m.group_block.y) * l.g.bk;
  const int64_t seen = m.pos - key0 + 1;  // negative for padding (pos -1)
  const int keys = int(seen < 0 ? 0 : (seen > l.g.bk ? l.g.bk : seen));
  const int most = int(__reduce_max_sync(mma::kFullMask, unsigned(keys)));
  dst.pos[tid] = m.pos;
  dst.query[tid] = m.query;
  dst.t_local[tid] = m.t_local;
  dst.sel[tid] = m.entry - m.t_local * l.g.top_k;
  if (tid % 32 == 0) dst.seen[tid / 32] = most;
  if (tid == 0) {
    dst.key0 = key0;
    dst.kv_row = m.key_begin + key0;
    dst.group = m.group_block.x;
  }
}

// Row map of a tile (the same for every tile): row -> query slot (row / group) | head in the group (row % group)
// << 8, or -1 for the rows past qpc * group.
__device__ inline int32_t RowMap(int row, int group, int qpc) {
  return row / group < qpc ? (row / group) | ((row % group) << 8) : -1;
}

// Q rows of a tile -> one Q stage ([2][64][128 B], swizzled); padding rows and dims past D are zero-filled.
// Thread tid copies chunk tid % 16 of rows tid / 16 + 8j, so its swizzle (row % 8 = tid / 16) is fixed.
__device__ inline void LoadQ(uint32_t stage, const kv_outer::TileLists& l, const TileMeta& m, const int32_t* row_map,
                             int group, int tid) {
  const AttendGeometry& g = l.g;
  const int c = tid % kChunks, row0 = tid / kChunks;
  const uint32_t dst0 = stage + (c / 8) * kQHalfBytes + wgmma::SwizzledOffset(row0, c % 8);
  const int head0 = m.group * group;
  const bool dims = c * 8 < g.d;
#pragma unroll
  for (int j = 0; j < kTileRows / 8; ++j) {
    const int32_t map = row_map[row0 + 8 * j];
    const int64_t t = map >= 0 ? m.query[map & 0xff] : -1;
    const bool valid = t >= 0 && dims;
    const int64_t row = t * g.hq + head0 + (map >> 8);
    const uint16_t* src = l.q + (valid ? row * g.d + c * 8 : 0);
    wgmma::CopyAsync16(dst0 + j * kAtomBytes, src, valid);
  }
}

// Keys [0, nkeys) of a block of K or V (rows kv_row.., head `kv_head`, `dim` wide) -> [2][128][128 B], swizzled;
// keys past nkeys and dims past `dim` zero-filled.
__device__ inline void LoadKv(uint32_t dst, const uint16_t* src_base, int dim, int hkv, int64_t kv_row, int kv_head,
                              int nkeys, int tid) {
  const int c = tid % kChunks, key0 = tid / kChunks;
  const uint32_t dst0 = dst + (c / 8) * kKvHalfBytes + wgmma::SwizzledOffset(key0, c % 8);
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j) {
    const int key = key0 + 8 * j;
    const bool valid = key < nkeys && c * 8 < dim;
    const uint16_t* src = src_base + (valid ? ((kv_row + key) * hkv + kv_head) * dim + c * 8 : 0);
    wgmma::CopyAsync16(dst0 + j * kAtomBytes, src, valid);
  }
}

#endif  // MSA_WGMMA_ENABLED

template <int kLowp, kv_outer::PartialsFormat kPartials>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) WgmmaTileKernel(const __grid_constant__ kv_outer::TileLists l) {
#if defined(MSA_WGMMA_ENABLED)
  extern __shared__ __align__(16) unsigned char wgmma_smem[];  // 1024-byte alignment is made below, not assumed
  const uint32_t raw = wgmma::SharedAddress(wgmma_smem);
  const uint32_t pad = wgmma::PadTo1024(raw);           // swizzle atoms start on 1024-byte boundaries
  const uint32_t q_smem = raw + pad;                    // [kQStages][2][64][128 B]
  const uint32_t k_smem = q_smem + kQStages * kQBytes;  // [2][128][128 B]
  const uint32_t v_smem = k_smem + kKvBytes;            // [2][128][128 B]
  TileMeta* meta = reinterpret_cast<TileMeta*>(wgmma_smem + pad + kQStages * kQBytes + 2 * kKvBytes);
  int32_t* row_map = reinterpret_cast<int32_t*>(meta + kMetaStages);  // [64]

  const AttendGeometry& g = l.g;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int group = g.hq / g.hkv, qpc = kTileRows / group;
  const int64_t total_tiles = l.offsets[l.num_buckets] / qpc;
  const int64_t per_cta = (total_tiles + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * per_cta, end = min(begin + per_cta, total_tiles);
  if (begin >= end) return;
  const bool stages_meta = tid < kTileRows;  // warps 0 and 1, whole
  const float scale = l.scale;
  if (stages_meta) row_map[tid] = RowMap(tid, group, qpc);

  // Prologue: metadata of the first two tiles, then Q, K, V of the first (three commit groups, as each tile).
  if (stages_meta) {
    MetaRegs m;
    FetchEntry(l, begin, qpc, tid, m);
    FetchPosition(l, tid, m);
    StoreMeta(l, m, tid, meta[0]);
    if (begin + 1 < end) {
      FetchEntry(l, begin + 1, qpc, tid, m);
      FetchPosition(l, tid, m);
      StoreMeta(l, m, tid, meta[1]);
    }
  }
  __syncthreads();
  int64_t kv_row = meta[0].kv_row;  // the block of K / V in shared memory: first row, head, keys loaded
  int kv_head = meta[0].group, kv_keys = SeenKeys(meta[0]);
  LoadQ(q_smem, l, meta[0], row_map, group, tid);
  wgmma::CopyAsyncCommit();
  LoadKv(k_smem, l.k, g.d, g.hkv, kv_row, kv_head, kv_keys, tid);
  wgmma::CopyAsyncCommit();
  LoadKv(v_smem, l.v, g.dv, g.hkv, kv_row, kv_head, kv_keys, tid);
  wgmma::CopyAsyncCommit();
  bool v_fresh = true;  // V of the current tile was loaded during the previous one (wait before O = P V)

  const uint64_t k_desc = wgmma::MakeDescriptor(k_smem, 16, kAtomBytes);            // K-major, rows = keys
  const uint64_t v_desc = wgmma::MakeDescriptor(v_smem, kKvHalfBytes, kAtomBytes);  // MN-major (dims contiguous)
  int slot_h[2], head_h[2];  // this thread's two accumulator rows 16w + lane/4 (+8): query slot, head in the group
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int32_t map = RowMap(warp * 16 + gid + 8 * h, group, qpc);
    slot_h[h] = map >= 0 ? (map & 0xff) : -1;
    head_h[h] = map >> 8;
  }
  MetaRegs ahead;  // tile i + 2 (threads 0-63)

  for (int64_t i = 0; begin + i < end; ++i) {
    const int64_t tile = begin + i;
    const TileMeta& cur = meta[i % kMetaStages];
    const TileMeta& nxt = meta[(i + 1) % kMetaStages];
    const bool has_next = tile + 1 < end, has_ahead = tile + 2 < end;
    const uint32_t q_cur = q_smem + uint32_t(i % kQStages) * kQBytes;
    const uint32_t q_nxt = q_smem + uint32_t((i + 1) % kQStages) * kQBytes;

    wgmma::CopyAsyncWait<1>();  // Q(i) and K(i) have landed (groups 1 and 2 of the previous tile)
    wgmma::FenceProxyAsyncShared();
    __syncthreads();

    // S = Q K^T
    float s[64];
    const uint64_t q_desc = wgmma::MakeDescriptor(q_cur, 16, kAtomBytes);
    wgmma::Fence();
    wgmma::MmaQKt128<kLowp>(s, q_desc, k_desc, kQHalfBytes, kKvHalfBytes);
    wgmma::CommitGroup();

    // While S runs: Q of the next tile, and the list entries of the tile after it.
    if (has_next) LoadQ(q_nxt, l, nxt, row_map, group, tid);
    wgmma::CopyAsyncCommit();  // group 1
    if (stages_meta && has_ahead) FetchEntry(l, tile + 2, qpc, tid, ahead);

    // This tile's rows: a row sees the block's keys [0, key_limit).
    const int nkeys = SeenKeys(cur);
    const int64_t key0 = cur.key0;
    const int r = cur.group;
    int64_t pos_h[2];
    int key_limit[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      pos_h[h] = slot_h[h] >= 0 ? cur.pos[slot_h[h]] : -1;
      const int64_t seen = pos_h[h] - key0 + 1;
      key_limit[h] = int(seen < nkeys ? (seen < 0 ? 0 : seen) : nkeys);
    }

    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(s);

    // K of the next tile, when it is another block (or sees more keys than are loaded): S(i) is done reading K.
    const int next_keys = has_next ? SeenKeys(nxt) : 0;
    const bool reload = has_next && (nxt.kv_row != kv_row || nxt.group != kv_head || next_keys > kv_keys);
    if (reload) {
      __syncthreads();  // every warp is past its wait on S(i)
      LoadKv(k_smem, l.k, g.d, g.hkv, nxt.kv_row, nxt.group, next_keys, tid);
    }
    wgmma::CopyAsyncCommit();  // group 2
    if (stages_meta && has_ahead) FetchPosition(l, tid, ahead);

    float m_row[2], l_row[2];
    uint32_t pa[kKeys / 16][4];
    TileSoftmax<kLowp>(s, key_limit, scale, tig, m_row, l_row, pa);

    if (v_fresh) {  // V(i) is group 3 of the previous tile; groups 1 and 2 of this tile may still be in flight
      wgmma::CopyAsyncWait<2>();
      wgmma::FenceProxyAsyncShared();
      __syncthreads();
    }

    // O = P V: k-step kk covers keys 16kk..16kk+15 = two 8-key atoms (SBO) of both 64-dim column blocks (LBO).
    float o[64];
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma::MmaRS<kLowp, 1>(o, pa[kk], wgmma::AdvanceDescriptor(v_desc, kk * 2 * kAtomBytes), kk > 0);
    }
    wgmma::CommitGroup();
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(o);

    if (reload) {  // V of the next tile: O(i) is done reading V
      __syncthreads();
      LoadKv(v_smem, l.v, g.dv, g.hkv, nxt.kv_row, nxt.group, next_keys, tid);
      kv_row = nxt.kv_row;
      kv_head = nxt.group;
      kv_keys = next_keys;
    }
    wgmma::CopyAsyncCommit();  // group 3
    v_fresh = reload;

    // Partials of the tile's rows, to each row's selection slot (as TileAttendKernel): O_b in fp32, or O_b / l_b in
    // the storage format (kPartials16; a row that sees a block has l_b at least its maximum's term, 2^r with r the
    // rounding error of R(m_b * log2 e): about 1, unless every score of the row overflowed to -inf: then l_b = 0 and
    // O_b = 0, stored as 0, so that the merge folds 0 with weight 0, not NaN).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (pos_h[h] < 0) continue;  // padding row
      const int64_t part =
          (int64_t(cur.t_local[slot_h[h]]) * g.hq + r * group + head_h[h]) * g.top_k + cur.sel[slot_h[h]];
      if constexpr (kPartials == kv_outer::kPartials16) {
        const float inv_l = l_row[h] > 0.0f ? 1.0f / l_row[h] : 0.0f;
        uint16_t* dst = static_cast<uint16_t*>(l.part_o) + part * g.dv;
#pragma unroll
        for (int j = 0; j < kDims / 8; ++j) {
          if (j * 8 < g.dv) {
            *reinterpret_cast<uint32_t*>(dst + j * 8 + tig * 2) =
                mma::Pack<kLowp>(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
          }
        }
      } else {
        float* dst = static_cast<float*>(l.part_o) + part * g.dv;
#pragma unroll
        for (int j = 0; j < kDims / 8; ++j) {
          if (j * 8 < g.dv) {
            *reinterpret_cast<float2*>(dst + j * 8 + tig * 2) = make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
          }
        }
      }
      if (tig == 0) l.part_ml[part] = make_float2(m_row[h], l_row[h]);
    }
    // Tile i + 2's metadata into the stage tile i - 1 used (published by the next tile's first barrier).
    if (stages_meta && has_ahead) StoreMeta(l, ahead, tid, meta[(i + 2) % kMetaStages]);
  }
  wgmma::CopyAsyncWait<0>();
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

// The tile kernel of one storage format and partials format.
template <kv_outer::PartialsFormat kPartials>
auto WgmmaTileKernelFor(int lowp) {
  return lowp == kLowpBF16 ? WgmmaTileKernel<kLowpBF16, kPartials> : WgmmaTileKernel<kLowpF16, kPartials>;
}

template <kv_outer::PartialsFormat kPartials>
cudaError_t PrepareWgmmaTiles(int lowp) {
  const auto kernel = WgmmaTileKernelFor<kPartials>(lowp);
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  // Two CTAs of ~100 KiB need the largest shared-memory carveout (a hint; the driver may pick it anyway).
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
}

template <kv_outer::PartialsFormat kPartials>
cudaError_t LaunchWgmmaTiles(int lowp, const kv_outer::TileLists& lists, cudaStream_t stream) {
  const auto kernel = WgmmaTileKernelFor<kPartials>(lowp);
  const unsigned grid = unsigned(std::min<int64_t>(lists.max_tiles, int64_t(SmCount()) * kCtasPerSm));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(lists);
  return cudaGetLastError();
}

template <kv_outer::PartialsFormat kPartials>
kv_outer::TileLauncher WgmmaTilesOf() {
  return kv_outer::TileLauncher{PrepareWgmmaTiles<kPartials>, LaunchWgmmaTiles<kPartials>, kPartials};
}

}  // namespace

static_assert(kSmemBytes == kKvOuterWgmmaSmemBytes && kTileRows == kKvOuterTileRows && kKeys == kKvOuterKeyPad &&
                  kDims == kKvOuterDimPad,
              "KvOuterWgmmaFits (gpu/common/kernel_fits.h)");

namespace {

// KvOuterAttendWgmma and KvOuterAttendWgmmaP16: the chunk loop with the wgmma tiles writing `partials`.
cudaError_t RunWgmmaTiles(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                          const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                          const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace,
                          const DeviceAttendOutputs& outputs, cudaStream_t stream, kv_outer::PartialsFormat partials) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!KvOuterWgmmaFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  return kv_outer::Run(lowp, q, k, v, /*total_k=*/0, topk, position, key_begin, first_block, g, scale, plan, workspace,
                       outputs, stream, kv_outer::WgmmaTiles(partials), /*union_route=*/nullptr, ItemList{});
}

}  // namespace

cudaError_t KvOuterAttendWgmma(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                               const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                               const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace,
                               const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  return RunWgmmaTiles(lowp, q, k, v, topk, position, key_begin, first_block, g, scale, plan, workspace, outputs,
                       stream, kv_outer::kPartialsFp32);
}

cudaError_t KvOuterAttendWgmmaP16(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                                  const int32_t* first_block, const AttendGeometry& g, float scale,
                                  const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                                  cudaStream_t stream) {
  return RunWgmmaTiles(lowp, q, k, v, topk, position, key_begin, first_block, g, scale, plan, workspace, outputs,
                       stream, kv_outer::kPartials16);
}

kv_outer::TileLauncher kv_outer::WgmmaTiles(PartialsFormat partials) {
  return partials == kPartials16 ? WgmmaTilesOf<kPartials16>() : WgmmaTilesOf<kPartialsFp32>();
}

}  // namespace msa::gpu
