// KV-outer tile kernel of the low-precision mode on Hopper, warp-specialized (sm_90a): kv-outer-wgmma-p16's tiles,
// lists, math and 16-bit partials (hence its bits; tests/gpu_twins_test.cc and gpu_plans_test.cc compare the two), with
// the loads on a producer thread and two consumer warpgroups taking turns at the tensor pipe.
//
// docs:begin gpu-kv-outer-ws
// KvOuterWsKernel: one CTA per multiprocessor takes a contiguous run of the chunk's tiles (64 (query, head) rows x the
// <= 128 keys of one block of one group, as WgmmaTileKernel). 384 threads = consumer warpgroups 0 and 1 (224
// registers each thread) and a producer warpgroup (56 registers): one producer thread and one builder warp.
//   builder      the run's tiles 32 / qpc at a time, at most 8 (a lane per query slot: their list loads overlap):
//                entries, queries and positions into metadata stage i % 16 once the producer and the tile's consumer
//                have read tile i - 16's (empty barriers); use = how many K / V blocks the run loaded before this
//                tile's (the bucket changes: another block or group)
//   producer     per tile: where the bucket changes, K(use) then V(use) into stage use % 2 once both consumers have
//                released use - 2 there, as two bulk tensor copies of [128 keys][64 dims] each (keys past those the
//                tile's queries see are loaded too, zero past the tensor's end: they are masked out of S and meet
//                p = 0 in P V); Q of the tile into stage i % 4 once its consumer released tile i - 4's, as two bulk
//                tensor copies of [group heads][64 dims] per query slot (padding slots are not loaded: their rows
//                are never written)
//   consumer w   tiles w, w + 2, ...: turn j: wait Q(j), K(j) and V(j - 1); [named barrier: my turn] issue
//                S(j) = Q K^T and O(j - 1) = P(j - 1) V (two commit groups); [the other warpgroup's turn]; wait for
//                both, release the K / V blocks no longer read; write tile j - 1's partials, staged in Q(j)'s stage
//                (S(j) is done with it) and stored as 16-byte chunks of whole rows; release Q(j); softmax(j)
//                (WgmmaTileKernel's roundings and order), P(j) packed. One more turn after the last tile for its P V
// Releases go in order per stage: an arrival for block use u waits until both consumers released u - 2 there, so it
// counts in its own phase whatever the other consumer skipped.
// docs:end gpu-kv-outer-ws
#include <algorithm>
#include <climits>

#include "gpu/attend/kv_outer.h"
#include "gpu/attend/kv_outer_wgmma.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/mbarrier.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/common/tensor_map.h"
#include "gpu/common/wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

using namespace kv_outer_wgmma;  // the tile's geometry and softmax, shared with kv_outer_wgmma.cu

constexpr int kConsumers = 256;  // two warpgroups
constexpr int kThreads = kConsumers + 128;
constexpr int kMaxSlots = 8;  // query slots per tile: 64 / group, group a multiple of 8
constexpr int kQStages = 4;   // tile i -> stage i % 4: two per consumer
constexpr int kKvStages = 2;
constexpr int kMaxPassTiles = 8;  // tiles per pass of the builder warp (8 at qpc 4: 32 lanes)
constexpr int kMetaStages = 2 * kMaxPassTiles;

// What the producer and the consumers need of one tile.
struct TileMeta {
  int64_t pos[kMaxSlots];      // key position of each query slot, -1 for padding
  int64_t query[kMaxSlots];    // the slot's query t, -1 for padding
  int32_t t_local[kMaxSlots];  // t's index in the chunk (list entry / top_k)
  int32_t sel[kMaxSlots];      // the block's slot in that query's selection (list entry % top_k)
  int64_t key0;                // first key of the block inside its sequence: id * block_size
  int64_t kv_row;              // the same key as a row of k / v
  int32_t group;               // kv head
  int32_t use;                 // the run's K / V block count before this tile's block (its stage: use % 2)
};

struct Barriers {
  uint64_t meta_full[kMetaStages], meta_empty[kMetaStages];  // builder -> the others; producer + consumer -> builder
  uint64_t q_full[kQStages], q_empty[kQStages];              // producer -> the tile's consumer, and back
  uint64_t full_k[kKvStages], full_v[kKvStages];             // producer -> consumers: the block has landed
  uint64_t empty_k[kKvStages], empty_v[kKvStages];           // both consumers -> producer: the block was read
};

constexpr size_t kPartRowsBytes = 2 * kTileRows * sizeof(int64_t);
constexpr size_t kSmemBytes = 1024 /* alignment slack */ + kQStages * kQBytes + 2 * kKvStages * kKvBytes +
                              kPartRowsBytes + kMetaStages * sizeof(TileMeta) + sizeof(Barriers);
static_assert(kSmemBytes == kKvOuterWsSmemBytes, "KvOuterWsFits (gpu/common/kernel_fits.h)");

#if defined(MSA_WGMMA_ENABLED)
// Named barriers: 2 + w = consumer warpgroup w's turn; 4 + w = its partials are staged.
constexpr int kTurn0 = 2, kStaged0 = 4;
constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;  // 56 x 128 + 224 x 256 <= 168 x 384
constexpr int kBuilderWarp = 9;                                   // the producer warpgroup's second warp

struct Smem {
  uint32_t q, k, v;        // [4][2][64][128 B], [2][2][128][128 B] twice
  unsigned char* q_bytes;  // the Q stages again, as a generic pointer (the partials are staged there)
  int64_t* part_rows;      // [2 consumers][64]: where each row of the staged partials goes
  TileMeta* meta;
  Barriers* bar;
};
__device__ inline uint32_t At(const uint64_t& barrier) { return wgmma::SharedAddress(&barrier); }
__device__ inline uint32_t Phase(int64_t use) { return uint32_t(use & 1); }

// The CTA's run of tiles [begin, end) of the chunk's lists.
struct TileRun {
  int64_t begin = 0, end = 0;
  __device__ int64_t count() const { return end - begin; }
};
__device__ inline TileRun RunOf(const kv_outer::TileLists& l, int qpc) {
  const int64_t total_tiles = l.offsets[l.num_buckets] / qpc;
  const int64_t per_cta = (total_tiles + gridDim.x - 1) / gridDim.x;
  TileRun run;
  run.begin = blockIdx.x * per_cta;
  run.end = min(run.begin + per_cta, total_tiles);
  return run;
}

// The builder warp: the run's tiles in passes of kPassTiles(qpc), lane p * qpc + s taking query slot s of the pass's
// tile p, so that the dependent loads of a pass's tiles (entry, query, position, the block's first row) overlap.
// Tile i goes to metadata stage i % kMetaStages; its full barrier takes one arrival per slot.
__device__ inline int PassTiles(int qpc) { return min(kMaxPassTiles, 32 / qpc); }

__device__ inline void BuildMeta(const Smem& sm, const kv_outer::TileLists& l, const TileRun& run, int qpc, int lane) {
  const AttendGeometry& g = l.g;
  const int pass_tiles = PassTiles(qpc), tile_in_pass = lane / qpc, slot = lane % qpc;
  const bool active = tile_in_pass < pass_tiles;
  int64_t last_row = -1;  // the block and the block use of the run's last tile walked so far
  int last_group = -1, last_use = -1;
  for (int64_t first = 0; first < run.count(); first += pass_tiles) {
    const int64_t i = first + tile_in_pass;
    const bool mine = active && i < run.count();
    const int stage = int(i % kMetaStages);
    if (mine && i >= kMetaStages) mbarrier::Wait(At(sm.bar->meta_empty[stage]), Phase(i / kMetaStages - 1));
    const int64_t tile = run.begin + i;
    const int32_t entry = mine ? l.entries[tile * qpc + slot] : -1;
    const int2 group_block = mine ? l.tile_block[tile] : make_int2(-1, 0);
    const int32_t t_local = entry >= 0 ? entry / g.top_k : -1;
    const int64_t query = entry >= 0 ? l.chunk[t_local] : -1;
    const int64_t pos = query >= 0 ? l.position[query] : -1;
    const int64_t key0 = int64_t(group_block.y) * g.bk;
    // Entry 0 of a tile is never padding: slot 0's query gives the block's first row.
    const int64_t kv_row = slot == 0 && query >= 0 ? l.key_begin[query] + key0 : -1;
    // The pass's block uses: a tile starts a new one where its block differs from the tile before it. Every lane
    // walks the pass's tiles alike, so the running values stay the same in all of them.
    int tile_use = -1;
    for (int p = 0; p < pass_tiles; ++p) {
      const int64_t row_p = __shfl_sync(mma::kFullMask, kv_row, p * qpc);
      const int group_p = __shfl_sync(mma::kFullMask, group_block.x, p * qpc);
      if (first + p >= run.count()) break;
      if (row_p != last_row || group_p != last_group) ++last_use;
      last_row = row_p;
      last_group = group_p;
      if (p == tile_in_pass) tile_use = last_use;
    }
    if (mine) {
      TileMeta& m = sm.meta[stage];
      m.pos[slot] = pos;
      m.query[slot] = query;
      m.t_local[slot] = t_local;
      m.sel[slot] = entry - t_local * g.top_k;
      if (slot == 0) {
        m.key0 = key0;
        m.kv_row = kv_row;
        m.group = group_block.x;
        m.use = tile_use;
      }
      mbarrier::Arrive(At(sm.bar->meta_full[stage]));
    }
  }
}

// The producer thread (see the top of this file). q_map: [total_q][Hq][dims] in boxes of [1 query][group heads][64
// dims]; k_map and v_map: [total_k][Hkv][dims] in boxes of [128 keys][1 head][64 dims].
__device__ inline void Produce(const Smem& sm, const CUtensorMap* q_map, const CUtensorMap* k_map,
                               const CUtensorMap* v_map, const TileRun& run, int group, int qpc) {
  Barriers& bar = *sm.bar;
  int loaded = -1;  // the last block use loaded
  for (int64_t i = 0; i < run.count(); ++i) {
    const int ms = int(i % kMetaStages);
    mbarrier::Wait(At(bar.meta_full[ms]), Phase(i / kMetaStages));
    const TileMeta& m = sm.meta[ms];
    const int use = m.use, r = m.group, row = int(m.kv_row);
    int64_t query[kMaxSlots];
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s) query[s] = s < qpc ? m.query[s] : -1;
    mbarrier::Arrive(At(bar.meta_empty[ms]));
    const int kv = use % kKvStages;
    const uint32_t kv_stage = uint32_t(kv) * kKvBytes, released = Phase(use / kKvStages - 1);
    if (use != loaded) {
      if (use >= kKvStages) mbarrier::Wait(At(bar.empty_k[kv]), released);
      mbarrier::ArriveExpectTx(At(bar.full_k[kv]), kKvBytes);
      mbarrier::TensorLoad3d(sm.k + kv_stage, k_map, 0, r, row, At(bar.full_k[kv]));
      mbarrier::TensorLoad3d(sm.k + kv_stage + kKvHalfBytes, k_map, 64, r, row, At(bar.full_k[kv]));
    }
    const int qs = int(i % kQStages);
    if (i >= kQStages) mbarrier::Wait(At(bar.q_empty[qs]), Phase(i / kQStages - 1));
    int slots = 0;
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s) slots += query[s] >= 0;
    mbarrier::ArriveExpectTx(At(bar.q_full[qs]), uint32_t(slots) * 2 * uint32_t(group) * kRowBytes);
    const uint32_t q_stage = sm.q + uint32_t(qs) * kQBytes;
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s) {
      if (query[s] < 0) continue;
      const uint32_t dst = q_stage + uint32_t(s * group) * kRowBytes;
      mbarrier::TensorLoad3d(dst, q_map, 0, r * group, int(query[s]), At(bar.q_full[qs]));
      mbarrier::TensorLoad3d(dst + kQHalfBytes, q_map, 64, r * group, int(query[s]), At(bar.q_full[qs]));
    }
    if (use != loaded) {
      if (use >= kKvStages) mbarrier::Wait(At(bar.empty_v[kv]), released);
      mbarrier::ArriveExpectTx(At(bar.full_v[kv]), kKvBytes);
      mbarrier::TensorLoad3d(sm.v + kv_stage, v_map, 0, r, row, At(bar.full_v[kv]));
      mbarrier::TensorLoad3d(sm.v + kv_stage + kKvHalfBytes, v_map, 64, r, row, At(bar.full_v[kv]));
      loaded = use;
    }
  }
}

// A consumer warpgroup's releases of block uses [from, to) on one of the K / V barrier pairs: each arrival waits for
// the stage's previous use (u - 2) to be released by both consumers, so that it counts in u's own phase.
__device__ inline void ReleaseUses(const uint64_t (&empty)[kKvStages], int from, int to) {
  for (int u = from; u < to; ++u) {
    if (u >= kKvStages) mbarrier::Wait(At(empty[u % kKvStages]), Phase(u / kKvStages - 1));
    mbarrier::Arrive(At(empty[u % kKvStages]));
  }
}

// One thread's two accumulator rows of a tile: where its partials go (-1: a padding row) and the keys they see.
struct TileRows {
  int64_t part[2] = {-1, -1};  // (t_local * Hq + head) * top_k + sel
  int key_limit[2] = {0, 0};
};

__device__ inline TileRows RowsOf(const TileMeta& m, const AttendGeometry& g, const int (&slot_h)[2],
                                  const int (&head_h)[2], int group) {
  TileRows rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t pos = slot_h[h] >= 0 ? m.pos[slot_h[h]] : -1;
    if (pos < 0) continue;
    const int64_t seen = pos - m.key0 + 1;
    rows.key_limit[h] = int(seen < 0 ? 0 : (seen > g.bk ? g.bk : seen));
    rows.part[h] = (int64_t(m.t_local[slot_h[h]]) * g.hq + m.group * group + head_h[h]) * g.top_k + m.sel[slot_h[h]];
  }
  return rows;
}

// Partials of a tile's rows (WgmmaTileKernel's kPartials16 values): O_b / l_b in the storage format, and (m_b, l_b).
// Staged through `stage` (16 KiB of shared memory no other thread uses until this warpgroup's NamedSync(staged) and
// the loads after it are done): [64 rows][256 B], 16-byte chunk c of row r at chunk c ^ (r % 8), so that the 4-byte
// stores of a warp (8 rows, 4 lanes each) fall in 32 banks; then each thread writes 16-byte chunks of whole rows
// (two rows a warp), instead of each of its 32 values on its own.
template <int kLowp>
__device__ inline void WritePartials(const kv_outer::TileLists& l, unsigned char* stage, int64_t* part_rows,
                                     const float (&o)[64], const TileRows& rows, const float (&m_row)[2],
                                     const float (&l_row)[2], int staged, int wg_tid) {
  const int dv = l.g.dv, warp = wg_tid / 32, gid = (wg_tid % 32) / 4, tig = wg_tid % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp * 16 + gid + 8 * h;
    const float inv_l = l_row[h] > 0.0f ? 1.0f / l_row[h] : 0.0f;
    unsigned char* dst = stage + row * 256 + tig * 4;
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dst + ((j ^ gid) * 16)) =
          mma::Pack<kLowp>(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
    }
    if (tig == 0) {
      part_rows[row] = rows.part[h];
      if (rows.part[h] >= 0) l.part_ml[rows.part[h]] = make_float2(m_row[h], l_row[h]);
    }
  }
  mbarrier::NamedSync(staged, 128);
  const int chunk = wg_tid % 16;
#pragma unroll
  for (int i = 0; i < kTileRows / 8; ++i) {
    const int row = wg_tid / 16 + 8 * i;
    const int64_t part = part_rows[row];
    if (part < 0 || chunk * 8 >= dv) continue;
    const uint4 value = *reinterpret_cast<const uint4*>(stage + row * 256 + ((chunk ^ (row % 8)) * 16));
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(l.part_o) + part * dv + chunk * 8) = value;
  }
}

// A consumer warpgroup's tiles (see the top of this file). Warp-uniform values come through a shuffle from lane 0:
// ptxas takes a branch on a value it cannot prove uniform as divergent and serializes the wgmma instructions around
// it (info C7518).
template <int kLowp>
__device__ inline void Consume(const Smem& sm, const kv_outer::TileLists& l, const TileRun& run, int group, int qpc,
                               int tid) {
  const AttendGeometry& g = l.g;
  Barriers& bar = *sm.bar;
  const int wg = __shfl_sync(mma::kFullMask, tid / 128, 0);
  const int warp = (tid / 32) % 4, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int64_t count = __shfl_sync(mma::kFullMask, run.count(), 0);
  const int64_t mine = count > wg ? (count - wg + 1) / 2 : 0;  // tiles wg, wg + 2, ...
  const int64_t theirs = count - mine;
  int slot_h[2], head_h[2];  // this thread's two accumulator rows 16 warp + lane / 4 (+ 8): query slot, head
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp * 16 + gid + 8 * h;
    slot_h[h] = row / group < qpc ? row / group : -1;
    head_h[h] = row % group;
  }
  const uint64_t k_desc0 = wgmma::MakeDescriptor(sm.k, 16, kAtomBytes);
  const uint64_t v_desc0 = wgmma::MakeDescriptor(sm.v, kKvHalfBytes, kAtomBytes);
  float s[64], o[64];
  uint32_t pa[kKeys / 16][4];
  float m_prev[2], l_prev[2];
  TileRows prev;
  int prev_use = -1, k_released = 0, v_released = 0;
  if (wg == 1) mbarrier::NamedArrive(kTurn0, kConsumers);  // warpgroup 0 takes the first turn
  for (int64_t j = 0; j <= mine; ++j) {
    const bool tail = __shfl_sync(mma::kFullMask, int(j == mine), 0) != 0;
    const bool pending = __shfl_sync(mma::kFullMask, int(j > 0), 0) != 0;  // O(j - 1) to issue
    const int64_t i = wg + 2 * j;                                          // the run's tile
    TileRows cur;
    int use = prev_use;
    if (!tail) {
      const int ms = int(i % kMetaStages);
      mbarrier::Wait(At(bar.meta_full[ms]), Phase(i / kMetaStages));
      use = __shfl_sync(mma::kFullMask, sm.meta[ms].use, 0);
      cur = RowsOf(sm.meta[ms], g, slot_h, head_h, group);
      mbarrier::Arrive(At(bar.meta_empty[ms]));
      ReleaseUses(bar.empty_k, k_released, use);  // S(j - 1) was the last to read them
      k_released = max(k_released, use);
      mbarrier::Wait(At(bar.q_full[i % kQStages]), Phase(i / kQStages));
      mbarrier::Wait(At(bar.full_k[use % kKvStages]), Phase(use / kKvStages));
    }
    if (pending) mbarrier::Wait(At(bar.full_v[prev_use % kKvStages]), Phase(prev_use / kKvStages));
    mbarrier::NamedSync(kTurn0 + wg, kConsumers);
    wgmma::Fence();
    if (!tail) {
      const uint64_t q_desc = wgmma::MakeDescriptor(sm.q + uint32_t(i % kQStages) * kQBytes, 16, kAtomBytes);
      const uint64_t k_desc = wgmma::AdvanceDescriptor(k_desc0, uint32_t(use % kKvStages) * kKvBytes);
      wgmma::MmaQKt128<kLowp>(s, q_desc, k_desc, kQHalfBytes, kKvHalfBytes);
    }
    wgmma::CommitGroup();
    wgmma::Fence();
    if (pending) {
      const uint64_t v_desc = wgmma::AdvanceDescriptor(v_desc0, uint32_t(prev_use % kKvStages) * kKvBytes);
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        wgmma::MmaRS<kLowp, 1>(o, pa[kk], wgmma::AdvanceDescriptor(v_desc, kk * 2 * kAtomBytes), kk > 0);
      }
    }
    wgmma::CommitGroup();
    // The other warpgroup's turn, where it has one left: warpgroup 0's turn j is followed by 1's turn j, 1's by
    // 0's turn j + 1.
    if (wg == 0 ? j <= theirs : j < theirs) {
      mbarrier::NamedArrive(kTurn0 + 1 - wg, kConsumers);
    }
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(s);
    wgmma::FenceOperands(o);
    // V of the blocks before this tile's: O(j - 1) was the last to read them. After the last tile, every block of
    // the run, those this warpgroup skipped included.
    if (tail) {
      const int ms = int((count - 1) % kMetaStages);  // the run's last tile: its use is the run's last block
      mbarrier::Wait(At(bar.meta_full[ms]), Phase((count - 1) / kMetaStages));
      const int last = __shfl_sync(mma::kFullMask, sm.meta[ms].use, 0) + 1;
      ReleaseUses(bar.empty_k, k_released, last);
      ReleaseUses(bar.empty_v, v_released, last);
    } else {
      ReleaseUses(bar.empty_v, v_released, use);
      v_released = max(v_released, use);
    }
    // Tile j - 1's partials, staged in tile j's Q stage, which S(j) is done with (in the tail, the stage of the tile
    // past this warpgroup's last: no copy lands there again); then that stage goes back to the producer.
    if (pending) {
      unsigned char* stage = sm.q_bytes + (i % kQStages) * kQBytes;
      WritePartials<kLowp>(l, stage, sm.part_rows + wg * kTileRows, o, prev, m_prev, l_prev, kStaged0 + wg, tid % 128);
      wgmma::FenceProxyAsyncShared();  // the next bulk copies into the stage come after these accesses
    }
    if (!tail) mbarrier::Arrive(At(bar.q_empty[i % kQStages]));
    if (!tail) TileSoftmax<kLowp>(s, cur.key_limit, l.scale, tig, m_prev, l_prev, pa);
    prev = cur;
    prev_use = use;
  }
}
#endif  // MSA_WGMMA_ENABLED

template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    KvOuterWsKernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                    const __grid_constant__ CUtensorMap v_map, const __grid_constant__ kv_outer::TileLists l) {
#if defined(MSA_WGMMA_ENABLED)
  extern __shared__ __align__(16) unsigned char kv_ws_smem[];  // 1024-byte alignment is made below
  const uint32_t raw = wgmma::SharedAddress(kv_ws_smem);
  const uint32_t pad = wgmma::PadTo1024(raw);
  unsigned char* after_tiles = kv_ws_smem + pad + kQStages * kQBytes + 2 * kKvStages * kKvBytes;
  Smem sm;
  sm.q = raw + pad;
  sm.k = sm.q + kQStages * kQBytes;
  sm.v = sm.k + kKvStages * kKvBytes;
  sm.q_bytes = kv_ws_smem + pad;
  sm.part_rows = reinterpret_cast<int64_t*>(after_tiles);
  sm.meta = reinterpret_cast<TileMeta*>(after_tiles + kPartRowsBytes);
  sm.bar = reinterpret_cast<Barriers*>(after_tiles + kPartRowsBytes + kMetaStages * sizeof(TileMeta));

  const int group = l.g.hq / l.g.hkv, qpc = kTileRows / group;
  const TileRun run = RunOf(l, qpc);
  if (run.count() <= 0) return;
  const int tid = threadIdx.x;
  if (tid == 0) {
    Barriers& bar = *sm.bar;
    for (int s = 0; s < kMetaStages; ++s) {
      mbarrier::Init(At(bar.meta_full[s]), qpc);
      mbarrier::Init(At(bar.meta_empty[s]), 128 + 1);
    }
    for (int s = 0; s < kQStages; ++s) {
      mbarrier::Init(At(bar.q_full[s]), 1);
      mbarrier::Init(At(bar.q_empty[s]), 128);
    }
    for (int s = 0; s < kKvStages; ++s) {
      mbarrier::Init(At(bar.full_k[s]), 1);
      mbarrier::Init(At(bar.full_v[s]), 1);
      mbarrier::Init(At(bar.empty_k[s]), kConsumers);
      mbarrier::Init(At(bar.empty_v[s]), kConsumers);
    }
    mbarrier::FenceInit();
  }
  __syncthreads();
  if (tid >= kConsumers) {  // the producer warpgroup
    mbarrier::ReleaseRegisters<kProducerRegisters>();
    if (tid == kConsumers) Produce(sm, &q_map, &k_map, &v_map, run, group, qpc);
    if (tid / 32 == kBuilderWarp) BuildMeta(sm, l, run, qpc, tid % 32);
  } else {
    mbarrier::TakeRegisters<kConsumerRegisters>();
    Consume<kLowp>(sm, l, run, group, qpc, tid);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

auto KvOuterWsKernelFor(int lowp) { return lowp == kLowpBF16 ? KvOuterWsKernel<kLowpBF16> : KvOuterWsKernel<kLowpF16>; }

cudaError_t PrepareWsTiles(int lowp) {
  return cudaFuncSetAttribute(KvOuterWsKernelFor(lowp), cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
}

cudaError_t LaunchWsTiles(int lowp, const kv_outer::TileLists& lists, cudaStream_t stream) {
  const AttendGeometry& g = lists.g;
  // Copy coordinates are 32-bit.
  if (lists.total_k <= 0 || lists.total_k > INT_MAX || g.total_q > INT_MAX) return cudaErrorInvalidValue;
  const int group = g.hq / g.hkv;
  CUtensorMap q_map, k_map, v_map;
  cudaError_t err = EncodeBoxMap(lists.q, 2, g.total_q, g.hq, g.d, 1, group, &q_map);
  if (err == cudaSuccess) err = EncodeBoxMap(lists.k, 2, lists.total_k, g.hkv, g.d, kKeys, 1, &k_map);
  if (err == cudaSuccess) err = EncodeBoxMap(lists.v, 2, lists.total_k, g.hkv, g.dv, kKeys, 1, &v_map);
  if (err != cudaSuccess) return err;
  const unsigned grid = unsigned(std::min<int64_t>(lists.max_tiles, SmCount()));  // one CTA per multiprocessor
  KvOuterWsKernelFor(lowp)<<<grid, kThreads, kSmemBytes, stream>>>(q_map, k_map, v_map, lists);
  return cudaGetLastError();
}

}  // namespace

kv_outer::TileLauncher kv_outer::WsTiles() {
  return kv_outer::TileLauncher{PrepareWsTiles, LaunchWsTiles, kv_outer::kPartials16};
}

cudaError_t KvOuterAttendWs(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                            const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                            const int32_t* first_block, const AttendGeometry& g, float scale, const KvOuterPlan& plan,
                            void* workspace, const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!KvOuterWsFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  return kv_outer::Run(lowp, q, k, v, total_k, topk, position, key_begin, first_block, g, scale, plan, workspace,
                       outputs, stream, kv_outer::WsTiles(), /*union_route=*/nullptr, ItemList{});
}

}  // namespace msa::gpu
