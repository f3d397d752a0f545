// Main branch of the low-precision mode, path U (sm_90a), warp-specialized and persistent: UnionTileAttend's twin
// (the same tile, union and per-block math, gpu/attend/union_tile.cuh, hence the same bits) with the loads, the next
// tile's union build, one warpgroup's softmax and the other's matrix work overlapped.
//
// docs:begin gpu-union-tile-ws
// UnionTileWsKernel: one CTA per multiprocessor takes tile after tile of its list from a counter in global memory
// (a CTA whose tiles have larger unions takes fewer). 384 threads = consumer warpgroups 0 and 1 (rows 0-63, 64-127,
// 224 registers each thread) and a producer warpgroup (56 registers): one producer thread, 96 builder threads (its
// warps 1-3).
//   builders     take the CTA's tile i and build its union into table i % 2 once the consumers and the producer
//                are done with tile i - 2 (table empty barriers), while the consumers compute tile i - 1; then the
//                table's full barrier. Past the list's end, a table with tile -1 tells the others to stop
//   producer     per tile: K(b) and V(b) of every union block in order, each into stage n % 2 (n counts the CTA's
//                blocks over its tiles) once the consumers released the stage's previous block (empty barriers, 256
//                arrivals), as two bulk tensor copies of [128 keys][64 dims] (128-byte swizzle) completing on the
//                stage's full barrier; after block 0, Q of each consumer warpgroup once it has released the previous
//                tile's (two bulk tensor copies of [64 rows][64 dims] each). Keys of the block past those its queries
//                see are loaded too (zero past the tensor's end): they are masked out of S and meet p = 0 in P V, so
//                the sums are those of UnionTileKernel's zero-filled tiles
//   consumer w   per tile: wait for its Q and scale it in place (ScaleQ, then a named barrier of the warpgroup);
//                turn b (b = 0 .. size): wait K(b) and V(b - 1); [named barrier: my turn] issue S(b) =
//                Q K(b)^T if its queries chose block b, and O += P(b - 1) V(b - 1) if they chose b - 1 (two commit
//                groups every turn, empty where nothing is issued); [the other warpgroup's turn]; wait for both,
//                release K(b) and V(b - 1); softmax(b) (while the other warpgroup's matrix work runs), O *= alpha(b),
//                P(b) packed. After the last turn: release Q and the table; warpgroup 1 lets warpgroup 0 start the
//                next tile; write the rows
// The turns alternate between the warpgroups (FlashAttention-3's ping-pong). Each row sees the same operations in the
// same order as in UnionTileKernel.
// docs:end gpu-union-tile-ws
#include <algorithm>
#include <climits>

#include "gpu/attend/union_tile.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/mbarrier.cuh"
#include "gpu/common/tensor_map.h"

namespace msa::gpu {
namespace {

using namespace union_tile;

constexpr int kConsumers = 256;  // two warpgroups
constexpr int kThreads = kConsumers + 128;
constexpr int kStages = 2;
constexpr int kTables = 2;

struct Barriers {
  uint64_t full_k[kStages], full_v[kStages];    // producer -> consumers: the block's K / V has landed
  uint64_t empty_k[kStages], empty_v[kStages];  // consumers -> producer: the stage's K / V has been read
  uint64_t q_full[2], q_empty[2];               // per consumer warpgroup: its Q has landed / has been read
  uint64_t table_full[kTables];                 // builders -> the others: the table holds the next tile
  uint64_t table_empty[kTables];                // consumers and producer -> builders: done with the table's tile
};

constexpr size_t kSmemBytes = 1024 /* alignment slack */ + kQBytes + 2 * kStages * kKvBytes +
                              kTables * sizeof(UnionTable) + sizeof(UnionScratch) + sizeof(Barriers);
static_assert(kSmemBytes == kUnionTileWsSmemBytes, "UnionTileFits (gpu/common/kernel_fits.h)");

#if defined(MSA_WGMMA_ENABLED)
// Named barriers: 1 = a step of the builders; 2 + w = warpgroup w's turn; 4 + w = warpgroup w has scaled its Q.
constexpr int kBuildStep = 1, kTurn0 = 2, kQScaled0 = 4;
constexpr int kBuilders = 96;  // the producer warpgroup's warps 1-3
// Registers per thread after the split: 56 x 128 + 224 x 256 = 168 x 384 (the cap at entry).
constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;

// The shared-memory addresses of the CTA's Q, K and V stages, tables, build scratch and barriers.
struct Smem {
  uint32_t q, k, v;  // [2 wg][2][64][128 B], [2 stages][2][128][128 B] twice
  UnionTable* tables;
  UnionScratch* scratch;
  Barriers* bar;
};
__device__ inline uint32_t At(const uint64_t& barrier) { return wgmma::SharedAddress(&barrier); }
__device__ inline uint32_t Phase(int64_t use) { return uint32_t(use & 1); }

// The builders (tid 0 .. 95): the CTA's i-th tile into table i % 2, then a table with tile -1. The tile is the list
// entry the CTA takes from tile_counter; the list ends at its count or at its first -1.
__device__ inline void BuildTiles(const Smem& sm, const int64_t* tiles, int64_t count, unsigned long long* tile_counter,
                                  const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                                  const int32_t* first_block, const AttendGeometry& g, int tid) {
  const int group = g.hq / g.hkv, qpt = kRows / group;
  for (int64_t i = 0;; ++i) {
    UnionTable& u = sm.tables[i % kTables];
    if (i >= kTables) mbarrier::Wait(At(sm.bar->table_empty[i % kTables]), Phase(i / kTables - 1));
    if (tid == 0) {
      const int64_t entry = int64_t(atomicAdd(tile_counter, 1ull));
      u.tile = entry >= count ? -1 : (tiles != nullptr ? tiles[entry] : entry);
    }
    mbarrier::NamedSync(kBuildStep, kBuilders);
    const int64_t tile = u.tile;
    if (tile >= 0) {
      BuildUnion<kBuilders>(u, *sm.scratch, topk, position, key_begin, first_block, g, (tile / g.hkv) * qpt,
                            int(tile % g.hkv), qpt, tid, [] { mbarrier::NamedSync(kBuildStep, kBuilders); });
    }
    mbarrier::Arrive(At(sm.bar->table_full[i % kTables]));
    if (tile < 0) return;
  }
}

// The producer (one thread): per tile, K(0) and V(0), then Q, then the other union blocks' K then V, in order (see the
// top of this file).
// q_map: [total_q][Hq][dims] in boxes of [64 / group queries][group heads][64 dims]; k_map and v_map: [total_k][Hkv]
// [dims] in boxes of [128 keys][1 head][64 dims].
__device__ inline void Produce(const Smem& sm, const CUtensorMap* q_map, const CUtensorMap* k_map,
                               const CUtensorMap* v_map, const AttendGeometry& g) {
  const int group = g.hq / g.hkv, qpt = kRows / group;
  Barriers& bar = *sm.bar;
  int64_t n = 0;  // the CTA's blocks before this tile's
  for (int64_t i = 0;; ++i) {
    const UnionTable& u = sm.tables[i % kTables];
    mbarrier::Wait(At(bar.table_full[i % kTables]), Phase(i / kTables));
    const int64_t tile = u.tile;
    if (tile < 0) return;
    const int r = int(tile % g.hkv), t_first = int((tile / g.hkv) * qpt);
    const auto load_block = [&](int b) {  // K and V of union block b: the CTA's block n + b
      const int64_t block = n + b;
      const int s = int(block % kStages);
      const uint32_t stage = uint32_t(s) * kKvBytes, released = Phase(block / kStages - 1);  // block - 2's release
      const int row = int(u.kv_row[b]);
      if (block >= kStages) mbarrier::Wait(At(bar.empty_k[s]), released);
      mbarrier::ArriveExpectTx(At(bar.full_k[s]), kKvBytes);
      mbarrier::TensorLoad3d(sm.k + stage, k_map, 0, r, row, At(bar.full_k[s]));
      mbarrier::TensorLoad3d(sm.k + stage + kKvHalfBytes, k_map, 64, r, row, At(bar.full_k[s]));
      if (block >= kStages) mbarrier::Wait(At(bar.empty_v[s]), released);
      mbarrier::ArriveExpectTx(At(bar.full_v[s]), kKvBytes);
      mbarrier::TensorLoad3d(sm.v + stage, v_map, 0, r, row, At(bar.full_v[s]));
      mbarrier::TensorLoad3d(sm.v + stage + kKvHalfBytes, v_map, 64, r, row, At(bar.full_v[s]));
    };
    // Block 0 first: its stage was released before the previous tile's last turn, Q only at that turn.
    const int size = u.size;
    if (size > 0) load_block(0);
    for (int wg = 0; wg < 2; ++wg) {
      if (i > 0) mbarrier::Wait(At(bar.q_empty[wg]), Phase(i - 1));
      const uint32_t dst = sm.q + uint32_t(wg) * kQWgBytes;
      mbarrier::ArriveExpectTx(At(bar.q_full[wg]), kQWgBytes);
      const int t0 = t_first + wg * (qpt / 2);
      mbarrier::TensorLoad3d(dst, q_map, 0, r * group, t0, At(bar.q_full[wg]));
      mbarrier::TensorLoad3d(dst + kQHalfBytes, q_map, 64, r * group, t0, At(bar.q_full[wg]));
    }
    for (int b = 1; b < size; ++b) load_block(b);
    n += size;
    mbarrier::Arrive(At(bar.table_empty[i % kTables]));
  }
}

// A consumer warpgroup's tiles: per tile its turns over the union (see the top of this file), then its rows of out
// and lse.
template <int kLowp>
__device__ inline void Consume(const Smem& sm, const AttendGeometry& g, float scale, int tid,
                               const DeviceAttendOutputs& outputs) {
  // Warp-uniform values come through a shuffle from lane 0: ptxas takes a branch on a value it cannot prove uniform
  // (one read from shared memory, or derived from threadIdx) as divergent, and serializes the wgmma instructions
  // around it (info C7518).
  const int group = g.hq / g.hkv, qpt = kRows / group;
  const int wg = __shfl_sync(mma::kFullMask, tid / 128, 0), wg_warp = (tid / 32) % 4, lane = tid % 32;
  Barriers& bar = *sm.bar;
  const uint64_t q_desc = wgmma::MakeDescriptor(sm.q + uint32_t(wg) * kQWgBytes, 16, kAtomBytes);
  const auto stage_of = [](int64_t block) { return int(block % kStages); };
  const auto phase_of = [](int64_t block) { return Phase(block / kStages); };
  // Waits for table i % 2 to hold the CTA's i-th tile and returns it (-1 past the last); warpgroup 1 then lets
  // warpgroup 0 take the tile's first turn.
  const auto next_tile = [&](int64_t i) {
    mbarrier::Wait(At(bar.table_full[i % kTables]), Phase(i / kTables));
    const int64_t tile = __shfl_sync(mma::kFullMask, sm.tables[i % kTables].tile, 0);
    if (wg == 1 && tile >= 0) mbarrier::NamedArrive(kTurn0, kConsumers);
    return tile;
  };
  int64_t n = 0;  // the CTA's blocks before this tile's
  int64_t tile = next_tile(0);
  for (int64_t i = 0; tile >= 0; ++i) {
    const UnionTable& u = sm.tables[i % kTables];
    const int size = __shfl_sync(mma::kFullMask, u.size, 0);
    const int r = int(tile % g.hkv);
    const int64_t t_first = (tile / g.hkv) * qpt;
    const RowSlots rows = RowSlotsOf(u, group, qpt, wg, wg_warp, lane);
    mbarrier::Wait(At(bar.q_full[wg]), Phase(i));
    ScaleQ<kLowp>(sm.q + uint32_t(wg) * kQWgBytes, kQWgBytes, tid % 128, 128, scale);
    wgmma::FenceProxyAsyncShared();
    mbarrier::NamedSync(kQScaled0 + wg, 128);
    float o[64];
#pragma unroll
    for (int x = 0; x < 64; ++x) o[x] = 0.0f;
    RowState state;
    float s[64];
    uint32_t pa[kKeys / 16][4];
    bool pv_pending = false;  // P of block b - 1 is in pa, its O += P V not yet issued

    for (int b = 0; b <= size; ++b) {
      const bool tail = b == size;
      const bool mine = __shfl_sync(mma::kFullMask, int(!tail && (u.chosen[b] & rows.wg_bits) != 0), 0) != 0;
      const int64_t block = n + b;  // the CTA's count of block b
      const uint32_t stage = uint32_t(stage_of(block)) * kKvBytes,
                     prev_stage = uint32_t(stage_of(block + 1)) * kKvBytes;
      if (!tail) mbarrier::Wait(At(bar.full_k[stage_of(block)]), phase_of(block));
      if (pv_pending) mbarrier::Wait(At(bar.full_v[stage_of(block - 1)]), phase_of(block - 1));
      mbarrier::NamedSync(kTurn0 + wg, kConsumers);
      IssueScores<kLowp>(s, q_desc, sm.k + stage, mine);                           // empty where !mine
      IssueValues<kLowp>(o, pa, sm.v + prev_stage, pv_pending);                    // empty where !pv_pending
      if (!(wg == 1 && tail)) mbarrier::NamedArrive(kTurn0 + 1 - wg, kConsumers);  // the other's turn
      const KeyLimits keys = mine ? KeyLimitsOf(u, b, rows, g.bk) : KeyLimits{};   // while the matrix work runs
      wgmma::WaitGroup<0>();
      wgmma::FenceOperands(s);
      wgmma::FenceOperands(o);
      if (!tail) mbarrier::Arrive(At(bar.empty_k[stage_of(block)]));
      if (b > 0) {  // V(b - 1) released (waited for first where unused, so the arrival counts in its own phase)
        if (!pv_pending) mbarrier::Wait(At(bar.full_v[stage_of(block - 1)]), phase_of(block - 1));
        mbarrier::Arrive(At(bar.empty_v[stage_of(block - 1)]));
      }
      if (mine) {
        float alpha[2];
        SoftmaxStep(s, keys, lane % 4, state, alpha);
        RescaleAndPack<kLowp>(o, alpha, s, pa);
      }
      pv_pending = mine;
    }
    mbarrier::Arrive(At(bar.q_empty[wg]));  // this warpgroup's matrix work of the tile is done
    mbarrier::Arrive(At(bar.table_empty[i % kTables]));
    n += size;
    const int64_t following = next_tile(i + 1);  // the other warpgroup may start it while this one writes its rows
    WriteRows(o, state, rows, g, t_first, r, group, wg, wg_warp, lane, outputs);
    tile = following;
  }
}
#endif  // MSA_WGMMA_ENABLED

// tiles (nullable: every tile of the batch): [count] tiles, ascending, -1 past the last.
template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    UnionTileWsKernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                      const __grid_constant__ CUtensorMap v_map, const int32_t* __restrict__ topk,
                      const int64_t* __restrict__ position, const int64_t* __restrict__ key_begin,
                      const int32_t* __restrict__ first_block, const AttendGeometry g, float scale,
                      const int64_t* __restrict__ tiles, int64_t count, unsigned long long* __restrict__ tile_counter,
                      DeviceAttendOutputs outputs) {
#if defined(MSA_WGMMA_ENABLED)
  extern __shared__ __align__(16) unsigned char union_smem[];  // 1024-byte alignment is made below
  const uint32_t raw = wgmma::SharedAddress(union_smem);
  const uint32_t pad = wgmma::PadTo1024(raw);
  unsigned char* after_tiles = union_smem + pad + kQBytes + 2 * kStages * kKvBytes;
  Smem sm;
  sm.q = raw + pad;
  sm.k = sm.q + kQBytes;
  sm.v = sm.k + kStages * kKvBytes;
  sm.tables = reinterpret_cast<UnionTable*>(after_tiles);
  sm.scratch = reinterpret_cast<UnionScratch*>(after_tiles + kTables * sizeof(UnionTable));
  sm.bar = reinterpret_cast<Barriers*>(after_tiles + kTables * sizeof(UnionTable) + sizeof(UnionScratch));

  const int tid = threadIdx.x;
  if (tid == 0) {
    Barriers& bar = *sm.bar;
    for (int s = 0; s < kStages; ++s) {
      mbarrier::Init(At(bar.full_k[s]), 1);
      mbarrier::Init(At(bar.full_v[s]), 1);
      mbarrier::Init(At(bar.empty_k[s]), kConsumers);
      mbarrier::Init(At(bar.empty_v[s]), kConsumers);
    }
    for (int wg = 0; wg < 2; ++wg) {
      mbarrier::Init(At(bar.q_full[wg]), 1);
      mbarrier::Init(At(bar.q_empty[wg]), 128);
    }
    for (int t = 0; t < kTables; ++t) {
      mbarrier::Init(At(bar.table_full[t]), kBuilders);
      mbarrier::Init(At(bar.table_empty[t]), kConsumers + 1);
    }
    mbarrier::FenceInit();
  }
  __syncthreads();
  if (tid >= kConsumers) {  // the producer warpgroup
    mbarrier::ReleaseRegisters<kProducerRegisters>();
    if (tid == kConsumers) Produce(sm, &q_map, &k_map, &v_map, g);
    if (tid >= kConsumers + 32) {
      BuildTiles(sm, tiles, count, tile_counter, topk, position, key_begin, first_block, g, tid - kConsumers - 32);
    }
  } else {
    mbarrier::TakeRegisters<kConsumerRegisters>();
    Consume<kLowp>(sm, g, scale, tid, outputs);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

}  // namespace

cudaError_t UnionTileWsAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                              const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                              const int32_t* first_block, const AttendGeometry& g, float scale, const ItemList& tiles,
                              int64_t* tile_counter, const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  const DeviceCaps& caps = CurrentDeviceCaps();
  if (!UnionTileFits(g, caps)) return cudaErrorNotSupported;
  // Copy coordinates are 32-bit.
  if (total_k <= 0 || total_k > INT_MAX || g.total_q + kRows > INT_MAX) return cudaErrorInvalidValue;
  const int64_t count = tiles.items != nullptr ? tiles.count : UnionTileCount(g);
  if (count <= 0) return cudaSuccess;
  const int group = g.hq / g.hkv;
  CUtensorMap q_map, k_map, v_map;
  cudaError_t err = EncodeBoxMap(q, 2, g.total_q, g.hq, g.d, kWgRows / group, group, &q_map);
  if (err == cudaSuccess) err = EncodeBoxMap(k, 2, total_k, g.hkv, g.d, kKeys, 1, &k_map);
  if (err == cudaSuccess) err = EncodeBoxMap(v, 2, total_k, g.hkv, g.dv, kKeys, 1, &v_map);
  if (err != cudaSuccess) return err;
  const auto kernel = lowp == kLowpBF16 ? UnionTileWsKernel<kLowpBF16> : UnionTileWsKernel<kLowpF16>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  if ((err = cudaMemsetAsync(tile_counter, 0, sizeof(int64_t), stream)) != cudaSuccess) return err;
  const unsigned ctas = unsigned(std::min<int64_t>(count, caps.sm_count));  // one per multiprocessor, persistent
  kernel<<<ctas, kThreads, kSmemBytes, stream>>>(q_map, k_map, v_map, topk, position, key_begin, first_block, g, scale,
                                                 tiles.items, count,
                                                 reinterpret_cast<unsigned long long*>(tile_counter), outputs);
  return cudaGetLastError();
}

}  // namespace msa::gpu
