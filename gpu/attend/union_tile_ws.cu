// Main branch of the low-precision mode, path U (sm_90a), warp-specialized: UnionTileAttend's twin (the same tile,
// union and per-block math, gpu/attend/union_tile.cuh, hence the same bits) with the loads, one warpgroup's softmax
// and the other's matrix work overlapped.
//
// docs:begin gpu-union-tile-ws
// UnionTileWsKernel: 384 threads = consumer warpgroups 0 and 1 (rows 0-63, 64-127, 224 registers each thread) and a
// producer warpgroup (56 registers).
//   union        built in shared memory by all threads, then the roles split (no CTA-wide barrier after)
//   producer     one thread: K(b) and V(b) of every union block in order, each into stage b % 2 once the consumers
//                released the stage's previous block (empty barriers, 256 arrivals), as two bulk tensor copies of
//                [128 keys][64 dims] (128-byte swizzle) completing on the stage's full barrier. Keys of the block
//                past those its queries see are loaded too (zero past the tensor's end): they are masked out of S
//                and meet p = 0 in P V, so the sums are those of UnionTileKernel's zero-filled tiles
//   consumer w   turn b (b = 0 .. size): wait K(b) and V(b - 1); [named barrier: my turn] issue S(b) = Q K(b)^T if
//                its queries chose block b, and O += P(b - 1) V(b - 1) if they chose b - 1 (two commit groups
//                every turn, empty where nothing is issued); [the other warpgroup's turn]; wait for both, release
//                K(b) and V(b - 1); softmax(b) (while the other warpgroup's matrix work runs), O *= alpha(b), P(b)
//                packed
// The turns alternate between the warpgroups (FlashAttention-3's ping-pong): warpgroup 1 starts by letting
// warpgroup 0 go first. Each row sees the same operations in the same order as in UnionTileKernel.
// docs:end gpu-union-tile-ws
#include <cuda.h>  // CUtensorMap (types only: the encoder comes through the runtime's driver entry point)
#include <cudaTypedefs.h>

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
// Named barriers: 1 = Q has landed (consumers); 2 + w = warpgroup w's turn.
constexpr int kQReady = 1, kTurn0 = 2;
// Registers per thread after the split: 56 x 128 + 224 x 256 = 168 x 384 (the cap at entry).
constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;

// The producer (one thread): every union block's K then V, in order (see the top of this file). k_map and v_map:
// [total_k][Hkv][dims] in boxes of [128 keys][1 head][64 dims].
__device__ inline void Produce(const UnionSmem& u, const CUtensorMap* k_map, const CUtensorMap* v_map, int r,
                               uint32_t k_smem, uint32_t v_smem, Barriers& bar) {
  for (int b = 0; b < u.size; ++b) {
    const uint32_t stage = uint32_t(b % kStages) * kKvBytes;
    const uint32_t released = uint32_t((b - kStages) / kStages) & 1u;  // the phase of block b - 2's release
    const int row = int(u.kv_row[b]);
    const uint32_t full_k = wgmma::SharedAddress(&bar.full_k[b % kStages]);
    const uint32_t full_v = wgmma::SharedAddress(&bar.full_v[b % kStages]);
    if (b >= kStages) mbarrier::Wait(wgmma::SharedAddress(&bar.empty_k[b % kStages]), released);
    mbarrier::ArriveExpectTx(full_k, kKvBytes);
    mbarrier::TensorLoad3d(k_smem + stage, k_map, 0, r, row, full_k);
    mbarrier::TensorLoad3d(k_smem + stage + kKvHalfBytes, k_map, 64, r, row, full_k);
    if (b >= kStages) mbarrier::Wait(wgmma::SharedAddress(&bar.empty_v[b % kStages]), released);
    mbarrier::ArriveExpectTx(full_v, kKvBytes);
    mbarrier::TensorLoad3d(v_smem + stage, v_map, 0, r, row, full_v);
    mbarrier::TensorLoad3d(v_smem + stage + kKvHalfBytes, v_map, 64, r, row, full_v);
  }
}

// A consumer warpgroup's turns over the union (see the top of this file), then its rows of out and lse.
template <int kLowp>
__device__ inline void Consume(const UnionSmem& u, Barriers& bar, uint32_t q_smem, uint32_t k_smem, uint32_t v_smem,
                               const AttendGeometry& g, float scale, int64_t t_first, int r, int tid, double* out,
                               double* lse) {
  // Warp-uniform values come through a shuffle from lane 0: ptxas takes a branch on a value it cannot prove uniform
  // (one read from shared memory, or derived from threadIdx) as divergent, and serializes the wgmma instructions
  // around it (info C7518).
  const int group = g.hq / g.hkv, qpt = kRows / group, size = __shfl_sync(mma::kFullMask, u.size, 0);
  const int wg = __shfl_sync(mma::kFullMask, tid / 128, 0), wg_warp = (tid / 32) % 4, lane = tid % 32;
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
    const bool mine = __shfl_sync(mma::kFullMask, int(!tail && (u.chosen[b] & rows.wg_bits) != 0), 0) != 0;
    const uint32_t stage = uint32_t(b % kStages) * kKvBytes, prev_stage = uint32_t((b + 1) % kStages) * kKvBytes;
    if (!tail) mbarrier::Wait(stage_bar(bar.full_k, b), phase(b));
    if (pv_pending) mbarrier::Wait(stage_bar(bar.full_v, b - 1), phase(b - 1));
    mbarrier::NamedSync(kTurn0 + wg, kConsumers);
    IssueScores<kLowp>(s, q_desc, k_smem + stage, mine);                         // empty where !mine
    IssueValues<kLowp>(o, pa, v_smem + prev_stage, pv_pending);                  // empty where !pv_pending
    if (!(wg == 1 && tail)) mbarrier::NamedArrive(kTurn0 + 1 - wg, kConsumers);  // the other's turn
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(s);
    wgmma::FenceOperands(o);
    if (!tail) mbarrier::Arrive(stage_bar(bar.empty_k, b));
    if (b > 0) {  // V(b - 1) released (waited for first where unused, so the arrival counts in its own phase)
      if (!pv_pending) mbarrier::Wait(stage_bar(bar.full_v, b - 1), phase(b - 1));
      mbarrier::Arrive(stage_bar(bar.empty_v, b - 1));
    }
    if (mine) {
      float alpha[2];
      SoftmaxStep<kLowp>(s, u, b, rows, g.bk, scale, lane % 4, state, alpha);
      RescaleAndPack<kLowp>(o, alpha, s, pa);
    }
    pv_pending = mine;
  }
  WriteRows(o, state, rows, g, t_first, r, group, wg, wg_warp, lane, out, lse);
}
#endif  // MSA_WGMMA_ENABLED

template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    UnionTileWsKernel(const uint16_t* __restrict__ q, const __grid_constant__ CUtensorMap k_map,
                      const __grid_constant__ CUtensorMap v_map, const int32_t* __restrict__ topk,
                      const int64_t* __restrict__ position, const int64_t* __restrict__ key_begin,
                      const int32_t* __restrict__ first_block, const AttendGeometry g, float scale,
                      const int64_t* __restrict__ tiles, double* __restrict__ out, double* __restrict__ lse) {
#if defined(MSA_WGMMA_ENABLED)
  const int64_t tile = tiles != nullptr ? tiles[blockIdx.x] : int64_t(blockIdx.x);
  if (tile < 0) return;
  extern __shared__ __align__(16) unsigned char union_smem[];  // 1024-byte alignment is made below
  const uint32_t raw = wgmma::SharedAddress(union_smem);
  const uint32_t pad = wgmma::PadTo1024(raw);
  const uint32_t q_smem = raw + pad;                    // [2 wg][2][64][128 B]
  const uint32_t k_smem = q_smem + kQBytes;             // [2 stages][2][128][128 B]
  const uint32_t v_smem = k_smem + kStages * kKvBytes;  // [2 stages][2][128][128 B]
  unsigned char* after_tiles = union_smem + pad + kQBytes + 2 * kStages * kKvBytes;
  UnionSmem& u = *reinterpret_cast<UnionSmem*>(after_tiles);
  Barriers& bar = *reinterpret_cast<Barriers*>(after_tiles + sizeof(UnionSmem));

  const int tid = threadIdx.x;
  const int group = g.hq / g.hkv, qpt = kRows / group, r = int(tile % g.hkv);
  const int64_t t_first = (tile / g.hkv) * qpt;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier::Init(wgmma::SharedAddress(&bar.full_k[s]), 1);
      mbarrier::Init(wgmma::SharedAddress(&bar.full_v[s]), 1);
      mbarrier::Init(wgmma::SharedAddress(&bar.empty_k[s]), kConsumers);
      mbarrier::Init(wgmma::SharedAddress(&bar.empty_v[s]), kConsumers);
    }
  }
  if (tid < kConsumers) LoadQ(q_smem, q, g, t_first, r, group, qpt, tid);
  wgmma::CopyAsyncCommit();
  BuildUnion<kThreads>(u, topk, position, key_begin, first_block, g, t_first, r, qpt, tid);  // ends with a barrier
  if (tid >= kConsumers) {                                                                   // the producer warpgroup
    mbarrier::ReleaseRegisters<kProducerRegisters>();
    if (tid == kConsumers) Produce(u, &k_map, &v_map, r, k_smem, v_smem, bar);
  } else {
    mbarrier::TakeRegisters<kConsumerRegisters>();
    Consume<kLowp>(u, bar, q_smem, k_smem, v_smem, g, scale, t_first, r, tid, out, lse);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

}  // namespace

namespace {

// A [rows][heads][dims] tensor of 16-bit values as a tensor map of [128 rows][1 head][64 dims] boxes, 128-byte
// swizzle, zero fill past its bounds (cuTensorMapEncodeTiled, through the runtime's driver entry point).
cudaError_t EncodeKvMap(const uint16_t* base, int64_t rows, int heads, int dims, CUtensorMap* map) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult found;
    const cudaError_t err = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000, cudaEnableDefault, &found);
    if (err != cudaSuccess) return err;
    if (found != cudaDriverEntryPointSuccess || encode == nullptr) return cudaErrorNotSupported;
  }
  const cuuint64_t dim[3] = {cuuint64_t(dims), cuuint64_t(heads), cuuint64_t(rows)};
  const cuuint64_t stride[2] = {cuuint64_t(dims) * 2, cuuint64_t(dims) * heads * 2};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 1, uint32_t(kKeys)}, element_stride[3] = {1, 1, 1};
  const CUresult result = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<uint16_t*>(base), dim, stride, box,
                                 element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

cudaError_t UnionTileWsAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                              const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                              const int32_t* first_block, const AttendGeometry& g, float scale, const ItemList& tiles,
                              double* out, double* lse, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!UnionTileFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  if (total_k <= 0 || total_k > INT_MAX) return cudaErrorInvalidValue;  // copy coordinates are 32-bit
  CUtensorMap k_map, v_map;
  cudaError_t map_err = EncodeKvMap(k, total_k, g.hkv, g.d, &k_map);
  if (map_err == cudaSuccess) map_err = EncodeKvMap(v, total_k, g.hkv, g.dv, &v_map);
  if (map_err != cudaSuccess) return map_err;
  const auto kernel = lowp == kLowpBF16 ? UnionTileWsKernel<kLowpBF16> : UnionTileWsKernel<kLowpF16>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  const int64_t ctas = tiles.items != nullptr ? tiles.count : UnionTileCount(g);
  if (ctas <= 0) return cudaSuccess;
  if (ctas > INT_MAX) return cudaErrorInvalidValue;
  kernel<<<unsigned(ctas), kThreads, kSmemBytes, stream>>>(q, k_map, v_map, topk, position, key_begin, first_block, g,
                                                           scale, tiles.items, out, lse);
  return cudaGetLastError();
}

}  // namespace msa::gpu
