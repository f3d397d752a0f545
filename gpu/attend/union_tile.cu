// Main branch of the low-precision mode, path U (sm_90a), the plain kernel: one CTA of two warpgroups per union tile
// (gpu/attend/union_tile.cuh: the tile, its union, the per-block math), loading and computing in turn.
//
// docs:begin gpu-union-tile
// UnionTileKernel: 256 threads = two warpgroups, each computing 64 of the tile's 128 rows; 1 CTA per multiprocessor.
//   union        built in shared memory by all threads (union_tile.cuh BuildUnion)
//   per block b  barrier; K and V of block b + 1 -> the other stage (cp.async by all 256 threads); wait for block
//                b; barrier; each warpgroup whose queries chose block b: S = Q K^T, softmax, O = alpha O + P V
//   output       out = O / l, lse = m + log l (FP64)
// Shared memory: Q [2 warpgroups][2][64][128 B], two stages of K and V [2][128][128 B] each, the union: ~196 KiB.
// The warp-specialized twin (union_tile_ws.cu) overlaps the loads, one warpgroup's softmax and the other's matrix work.
// docs:end gpu-union-tile
#include <algorithm>
#include <climits>

#include "gpu/attend/union_tile.cuh"
#include "gpu/common/device_query.h"

namespace msa::gpu {
namespace {

using namespace union_tile;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kStages = 2;
constexpr uint32_t kStageBytes = 2 * kKvBytes;  // K then V
constexpr size_t kSmemBytes =
    1024 /* alignment slack */ + kQBytes + kStages * kStageBytes + sizeof(UnionTable) + sizeof(UnionScratch);
static_assert(kSmemBytes == kUnionTileSmemBytes, "UnionTileFits (gpu/common/kernel_fits.h)");

// One CTA per (run of qpt queries, group): blockIdx.x = run * hkv + group. `route` (nullable): tiles with
// route[tile] == 0 belong to path K and are skipped.
template <int kLowp>
__global__ void __launch_bounds__(kThreads, 1)
    UnionTileKernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                    const int32_t* __restrict__ topk, const int64_t* __restrict__ position,
                    const int64_t* __restrict__ key_begin, const int32_t* __restrict__ first_block,
                    const AttendGeometry g, float scale, const uint8_t* __restrict__ route,
                    DeviceAttendOutputs outputs) {
#if defined(MSA_WGMMA_ENABLED)
  const int64_t tile = blockIdx.x;
  if (route != nullptr && route[tile] == 0) return;
  extern __shared__ __align__(16) unsigned char union_smem[];  // 1024-byte alignment is made below
  const uint32_t raw = wgmma::SharedAddress(union_smem);
  const uint32_t pad = wgmma::PadTo1024(raw);
  const uint32_t q_smem = raw + pad;          // [2 wg][2][64][128 B]
  const uint32_t kv_smem = q_smem + kQBytes;  // [2 stages][K, V][2][128][128 B]
  unsigned char* after_tiles = union_smem + pad + kQBytes + kStages * kStageBytes;
  UnionTable& u = *reinterpret_cast<UnionTable*>(after_tiles);
  UnionScratch& scratch = *reinterpret_cast<UnionScratch*>(after_tiles + sizeof(UnionTable));

  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int group = g.hq / g.hkv, qpt = kRows / group, r = int(tile % g.hkv);
  const int64_t t_first = (tile / g.hkv) * qpt;
  LoadQ(q_smem, q, g, t_first, r, group, qpt, tid);
  wgmma::CopyAsyncCommit();
  BuildUnion<kThreads>(u, scratch, topk, position, key_begin, first_block, g, t_first, r, qpt, tid,
                       [] { __syncthreads(); });
  const int size = u.size;
  if (size > 0) {
    LoadKv<kThreads>(kv_smem, k, g.d, g.hkv, u.kv_row[0], r, u.keys[0], tid);
    LoadKv<kThreads>(kv_smem + kKvBytes, v, g.dv, g.hkv, u.kv_row[0], r, u.keys[0], tid);
  }
  wgmma::CopyAsyncCommit();

  wgmma::CopyAsyncWait<1>();  // Q has landed (block 0 may not have)
  __syncthreads();
  ScaleQ<kLowp>(q_smem, kQBytes, tid, kThreads, scale);  // made visible to wgmma at block 0's fence and barrier
  const RowSlots rows = RowSlotsOf(u, group, qpt, wg, warp, lane);
  const uint64_t q_desc = wgmma::MakeDescriptor(q_smem + uint32_t(wg) * kQWgBytes, 16, kAtomBytes);
  float o[64];
#pragma unroll
  for (int x = 0; x < 64; ++x) o[x] = 0.0f;
  RowState state;

  for (int b = 0; b < size; ++b) {
    const uint32_t stage = kv_smem + uint32_t(b % kStages) * kStageBytes;
    __syncthreads();  // every warpgroup is done with block b - 1: its stage takes block b + 1
    if (b + 1 < size) {
      const uint32_t next = kv_smem + uint32_t((b + 1) % kStages) * kStageBytes;
      LoadKv<kThreads>(next, k, g.d, g.hkv, u.kv_row[b + 1], r, u.keys[b + 1], tid);
      LoadKv<kThreads>(next + kKvBytes, v, g.dv, g.hkv, u.kv_row[b + 1], r, u.keys[b + 1], tid);
    }
    wgmma::CopyAsyncCommit();
    wgmma::CopyAsyncWait<1>();  // Q and block b have landed
    wgmma::FenceProxyAsyncShared();
    __syncthreads();
    if ((u.chosen[b] & rows.wg_bits) == 0) continue;  // none of this warpgroup's queries chose block b

    float s[64];
    IssueScores<kLowp>(s, q_desc, stage, true);
    const KeyLimits keys = KeyLimitsOf(u, b, rows, g.bk);
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(s);
    float alpha[2];
    SoftmaxStep(s, keys, lane % 4, state, alpha);
    uint32_t pa[kKeys / 16][4];
    RescaleAndPack<kLowp>(o, alpha, s, pa);
    IssueValues<kLowp>(o, pa, stage + kKvBytes, true);
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(o);
  }
  wgmma::CopyAsyncWait<0>();
  WriteRows(o, state, rows, g, t_first, r, group, wg, warp, lane, outputs);
#elif defined(__CUDA_ARCH__)
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

}  // namespace

cudaError_t UnionTileAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                            const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                            const AttendGeometry& g, float scale, const uint8_t* route,
                            const DeviceAttendOutputs& outputs, cudaStream_t stream) {
  if (g.total_q <= 0) return cudaSuccess;
  if (!UnionTileFits(g, CurrentDeviceCaps())) return cudaErrorNotSupported;
  const auto kernel = lowp == kLowpBF16 ? UnionTileKernel<kLowpBF16> : UnionTileKernel<kLowpF16>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (err != cudaSuccess) return err;
  const int64_t tiles = UnionTileCount(g);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  kernel<<<unsigned(tiles), kThreads, kSmemBytes, stream>>>(q, k, v, topk, position, key_begin, first_block, g, scale,
                                                            route, outputs);
  return cudaGetLastError();
}

}  // namespace msa::gpu
