// Main branch of the low-precision mode, path U (sm_90a), warp-specialized: UnionTileAttend's twin (the same tile,
// union and per-block math, gpu/attend/union_tile.cuh, hence the same bits) with the loads, one warpgroup's softmax
// and the other's matrix work overlapped.
//
// docs:begin gpu-union-tile-ws
// UnionTileWsKernel: 384 threads = consumer warpgroups 0 and 1 (rows 0-63, 64-127, 224 registers each thread) and a
// producer warpgroup (56 registers).
//   union        built in shared memory by all threads, then the roles split (no CTA-wide barrier after)
//   producer     K(b) and V(b) of every union block in order, each into stage b % 2 once the consumers released
//                the stage's previous block (empty barriers, 256 arrivals), by cp.async from 128 threads; a load is
//                published (full barriers, 128 arrivals, after wait_group and the proxy fence) when the next one has
//                been issued, or before the producer blocks
//   consumer w   turn b (b = 0 .. size): wait K(b) and V(b - 1); [named barrier: my turn] issue S(b) = Q K(b)^T if
//                its queries chose block b, and O += P(b - 1) V(b - 1) if they chose b - 1; [the other warpgroup's
//                turn]; wait S(b), release K(b); softmax(b) (while the other warpgroup's matrix work runs); wait
//                P V, release V(b - 1); O *= alpha(b), P(b) packed
// The turns alternate between the warpgroups (FlashAttention-3's ping-pong): warpgroup 1 starts by letting
// warpgroup 0 go first. Each row sees the same operations in the same order as in UnionTileKernel.
// docs:end gpu-union-tile-ws
#include <algorithm>
#include <climits>

#include "gpu/attend/union_tile.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/mbarrier.cuh"

namespace msa::gpu {
namespace {

using namespace union_tile;

constexpr int kConsumers = 256;  // two warpgroups
constexpr int kThreads = kConsumers + 128;
constexpr int kStages = 2;

struct Barriers {
  uint64_t full_k[kStages], full_v[kStages];    // producer -> consumers: the block's K / V has landed
  uint64_t empty_k[kStages], empty_v[kStages];  // consumers -> producer: the stage's K / V has been read
};

constexpr size_t kSmemBytes =
    1024 /* alignment slack */ + kQBytes + 2 * kStages * kKvBytes + sizeof(UnionSmem) + sizeof(Barriers);
static_assert(kSmemBytes == kUnionTileWsSmemBytes, "UnionTileFits (gpu/common/kernel_fits.h)");

#if defined(MSA_WGMMA_ENABLED)
constexpr int kProducers = kThreads - kConsumers;
// Named barriers: 1 = Q has landed (consumers); 2 + w = warpgroup w's turn.
constexpr int kQReady = 1, kTurn0 = 2;
// Registers per thread after the split: 56 x 128 + 224 x 256 = 168 x 384 (the cap at entry).
constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;

// The producer warpgroup (thread p of 128): every union block's K then V, in order (see the top of this file).
__device__ inline void Produce(const UnionSmem& u, const uint16_t* k, const uint16_t* v, const AttendGeometry& g, int r,
                               uint32_t k_smem, uint32_t v_smem, uint32_t bars, int p) {
  const auto full = [&](int load) {  // load = 2 b + (0: K, 1: V)
    return bars + uint32_t((load % 2 == 0 ? offsetof(Barriers, full_k) : offsetof(Barriers, full_v)) +
                           (load / 2) % kStages * 8);
  };
  const auto empty = [&](int load) {
    return bars + uint32_t((load % 2 == 0 ? offsetof(Barriers, empty_k) : offsetof(Barriers, empty_v)) +
                           (load / 2) % kStages * 8);
  };
  int pending = -1;  // the load issued last, not yet published
  const auto publish = [&](bool all) {
    if (all) {
      wgmma::CopyAsyncWait<0>();
    } else {
      wgmma::CopyAsyncWait<1>();
    }
    wgmma::FenceProxyAsyncShared();
    mbarrier::Arrive(full(pending));
  };
  for (int load = 0; load < 2 * u.size; ++load) {
    const int b = load / 2;
    if (b >= kStages) {  // the stage's previous block (b - 2) must be released, phase (b - 2) / 2
      const uint32_t parity = uint32_t((b - kStages) / kStages) & 1u;
      if (!mbarrier::Test(empty(load), parity)) {
        if (pending >= 0) publish(true);
        pending = -1;
        mbarrier::Wait(empty(load), parity);
      }
    }
    const uint32_t stage = uint32_t(b % kStages) * kKvBytes;
    if (load % 2 == 0) {
      LoadKv<kProducers>(k_smem + stage, k, g.d, g.hkv, u.kv_row[b], r, u.keys[b], p);
    } else {
      LoadKv<kProducers>(v_smem + stage, v, g.dv, g.hkv, u.kv_row[b], r, u.keys[b], p);
    }
    wgmma::CopyAsyncCommit();
    if (pending >= 0) publish(false);
    pending = load;
  }
  if (pending >= 0) publish(true);
}

// A consumer warpgroup's turns over the union (see the top of this file), then its rows of out and lse.
template <int kLowp>
__device__ inline void Consume(const UnionSmem& u, Barriers& bar, uint32_t q_smem, uint32_t k_smem, uint32_t v_smem,
                               const AttendGeometry& g, float scale, int64_t t_first, int r, int tid, double* out,
                               double* lse) {
  const int group = g.hq / g.hkv, qpt = kRows / group, size = u.size;
  const int wg = tid / 128, wg_warp = (tid / 32) % 4, lane = tid % 32;
  wgmma::CopyAsyncWait<0>();  // this thread's Q rows
  wgmma::FenceProxyAsyncShared();
  mbarrier::NamedSync(kQReady, kConsumers);
  const RowSlots rows = RowSlotsOf(u, group, qpt, wg, wg_warp, lane);
  const uint64_t q_desc = wgmma::MakeDescriptor(q_smem + uint32_t(wg) * kQWgBytes, 16, kAtomBytes);
  const auto stage_bar = [&](const uint64_t(&b)[kStages], int block) {
    return wgmma::SharedAddress(&b[block % kStages]);
  };
  const auto phase = [](int block) { return uint32_t(block / kStages) & 1u; };
  float o[64];
#pragma unroll
  for (int x = 0; x < 64; ++x) o[x] = 0.0f;
  RowState state;
  float s[64];
  uint32_t pa[kKeys / 16][4];
  bool pv_pending = false;                                 // P of block b - 1 is in pa, its O += P V not yet issued
  if (wg == 1) mbarrier::NamedArrive(kTurn0, kConsumers);  // warpgroup 0 takes the first turn

  for (int b = 0; b <= size; ++b) {
    const bool tail = b == size;
    const bool mine = !tail && (u.chosen[b] & rows.wg_bits) != 0;
    const uint32_t stage = uint32_t(b % kStages) * kKvBytes, prev_stage = uint32_t((b + 1) % kStages) * kKvBytes;
    if (!tail) mbarrier::Wait(stage_bar(bar.full_k, b), phase(b));
    if (pv_pending) mbarrier::Wait(stage_bar(bar.full_v, b - 1), phase(b - 1));
    mbarrier::NamedSync(kTurn0 + wg, kConsumers);
    if (mine) IssueScores<kLowp>(s, q_desc, k_smem + stage);
    if (pv_pending) IssueValues<kLowp>(o, pa, v_smem + prev_stage);
    if (!(wg == 1 && tail)) mbarrier::NamedArrive(kTurn0 + 1 - wg, kConsumers);  // the other's turn
    if (mine) {
      if (pv_pending) {
        wgmma::WaitGroup<1>();
      } else {
        wgmma::WaitGroup<0>();
      }
      wgmma::FenceOperands(s);
    }
    if (!tail) mbarrier::Arrive(stage_bar(bar.empty_k, b));
    float alpha[2];
    if (mine) SoftmaxStep<kLowp>(s, u, b, rows, g.bk, scale, lane % 4, state, alpha);
    if (pv_pending) {
      wgmma::WaitGroup<0>();
      wgmma::FenceOperands(o);
    }
    if (b > 0) {  // V(b - 1) released (waited for first where unused, so the arrival counts in its own phase)
      if (!pv_pending) mbarrier::Wait(stage_bar(bar.full_v, b - 1), phase(b - 1));
      mbarrier::Arrive(stage_bar(bar.empty_v, b - 1));
    }
    if (mine) RescaleAndPack<kLowp>(o, alpha, s, pa);
    pv_pending = mine;
  }
  WriteRows(o, state, rows, g, t_first, r, group, wg, wg_warp, lane, out, lse);
}
#endif  // MSA_WGMMA_ENABLED

template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    UnionTileWsKernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
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
  const uint32_t q_smem = raw + pad;                    // [2 wg][2][64][128 B]
  const uint32_t k_smem = q_smem + kQBytes;             // [2 stages][2][128][128 B]
  const uint32_t v_smem = k_smem + kStages * kKvBytes;  // [2 stages][2][128][128 B]
  unsigned char* after_tiles = union_smem + pad + kQBytes + 2 * kStages * kKvBytes;
  UnionSmem& u = *reinterpret_cast<UnionSmem*>(after_tiles);
  Barriers& bar = *reinterpret_cast<Barriers*>(after_tiles + sizeof(UnionSmem));
  const uint32_t bars = wgmma::SharedAddress(&bar);

  const int tid = threadIdx.x;
  const int group = g.hq / g.hkv, qpt = kRows / group, r = int(tile % g.hkv);
  const int64_t t_first = (tile / g.hkv) * qpt;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier::Init(wgmma::SharedAddress(&bar.full_k[s]), kProducers);
      mbarrier::Init(wgmma::SharedAddress(&bar.full_v[s]), kProducers);
      mbarrier::Init(wgmma::SharedAddress(&bar.empty_k[s]), kConsumers);
      mbarrier::Init(wgmma::SharedAddress(&bar.empty_v[s]), kConsumers);
    }
  }
  if (tid < kConsumers) LoadQ(q_smem, q, g, t_first, r, group, qpt, tid);
  wgmma::CopyAsyncCommit();
  BuildUnion<kThreads>(u, topk, position, key_begin, first_block, g, t_first, r, qpt, tid);  // ends with a barrier
  if (tid >= kConsumers) {                                                                   // the producer warpgroup
    mbarrier::ReleaseRegisters<kProducerRegisters>();
    Produce(u, k, v, g, r, k_smem, v_smem, bars, tid - kConsumers);
  } else {
    mbarrier::TakeRegisters<kConsumerRegisters>();
    Consume<kLowp>(u, bar, q_smem, k_smem, v_smem, g, scale, t_first, r, tid, out, lse);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

}  // namespace

cudaError_t UnionTileWsAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                              const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                              const AttendGeometry& g, float scale, const uint8_t* route, double* out, double* lse,
                              cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!UnionTileFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  const auto kernel = lowp == kLowpBF16 ? UnionTileWsKernel<kLowpBF16> : UnionTileWsKernel<kLowpF16>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  const int64_t tiles = UnionTileCount(g);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  kernel<<<unsigned(tiles), kThreads, kSmemBytes, stream>>>(q, k, v, topk, position, key_begin, first_block, g, scale,
                                                            route, out, lse);
  return cudaGetLastError();
}

}  // namespace msa::gpu
