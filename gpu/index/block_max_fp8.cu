// Index branch block maxima on e4m3 (fp8) inputs with Hopper warpgroup MMA (sm_90a): BlockMaxScoresWgmma's
// contract (gpu/index/block_max_wgmma.cu: entries written, causal clamp, bad rows, grid plan) on index_q / index_k
// stored as OCP E4M3FN bytes, at twice the bf16 tensor-core rate. Not the same bits as the bf16 kernels: Hopper's fp8
// MMA adds with less than fp32 precision (kFp8IndexRelBound in gpu/common/geometry.h states the bound; the measured
// errors are in docs/gpu-kernels.md).
//
// docs:begin gpu-block-max-fp8
// BlockMaxFp8Kernel: BlockMaxWgmmaKernel's code (BlockMaxCta, gpu/index/block_max_wgmma.cuh) with 8-bit operands
// (E4M3Operands) and a one-chain reduction (NanMaxFold).
//   CTA        kWgs (2, or 1 for <= 64 rows) warpgroups; warpgroup w owns the CTA's rows 64w..64w+63, warp v the
//              rows 16v..16v+15. The query rows are loaded once (cp.async into a padded tile of 144-byte rows, then
//              ldmatrix .b16: the 8-bit k32 A fragment is the 16-bit k16 one byte for byte) into registers: 4 k32 A
//              fragments per thread (dims zero-padded to 128).
//   keys       128-key tiles of index_k through a 4-stage cp.async ring, each tile [128 keys][128 B]: one key is one
//              128-byte swizzle row (K-major, as fp8 wgmma requires; 1024-byte aligned; 16 KiB per stage).
//   S = Q K^T  per tile and warpgroup 4 x wgmma m64n128k32 .e4m3, A from registers, B = the tile, fp32 accumulators
//              zeroed first; two accumulator sets, the wgmma of tile i + 1 issued before the reduction of tile i.
//   reduction  per 64-key half of a tile (block_size is a multiple of 64): each thread folds its 32 scores per row
//              into the row's running max with max.NaN (NaN sticky); keys past the row's position are skipped in
//              halves that reach the warp's first position. When a half ends a block (or the CTA's key range),
//              4 lanes combine their maxima and one writes max * scale to bs[row * max_blocks + blk], for
//              blk <= the row's local block only. scale > 0 and rounding is monotone: the max of the scaled scores.
//   bad rows   a row is bad iff some visible scaled score is not finite. e4m3 has no infinities and
//              BlockMaxScoresFp8Fits bounds scale so that no dot can overflow (|dot| <= Di * 448^2, times scale,
//              with a factor 2 to spare, below FLT_MAX): only a NaN input makes a score non-finite, and the
//              NaN-sticky max carries it into a written block max. This replaces BlockMaxWgmmaKernel's second
//              (running min) chain: one max.NaN per score. The entries of a bad row are unspecified.
// Pipeline and barriers: BlockMaxWgmmaKernel's (cp.async groups Q, tiles 0..2, then one per tile; wait tile i + 1,
// proxy fence, barrier, load tile i + 3 into the stage of tile i - 1, issue tile i + 1, wait for tile i, reduce it).
// Shared memory: 4 x 16 KiB key stages + 64 * kWgs query rows of 144 B + 1 KiB alignment slack (83 KiB for two
// warpgroups). ptxas (CUDA 13.0, sm_90a): 192 registers, no spills.
// docs:end gpu-block-max-fp8
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "gpu/common/device_query.h"
#include "gpu/common/wgmma.cuh"
#include "gpu/index/block_max_wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

// The reduction of this kernel: per row one running block max, NaN sticky (max.NaN), which carries any
// non-finite score into a written block max (no second chain: see "bad rows" above).
struct NanMaxFold {
  float best[2];  // max of the raw dots over the current block's visible keys (this thread's columns), NaN sticky

#if defined(MSA_WGMMA_ENABLED)  // (BlockMaxCta's body, the only user)
  __device__ __forceinline__ void Start(int h, float) { best[h] = -INFINITY; }

  // Folds the 32 scores of half `kHalf` of a tile (accumulator chunks 8 kHalf .. 8 kHalf + 7) into the rows'
  // running maxima; with kMasked, keys past lim[h] (the row's position minus the half's first key) are skipped.
  template <int kHalf, bool kMasked>
  __device__ __forceinline__ void FoldHalf(const float (&acc)[64], const int (&lim)[2], int tig) {
    float mx[2][4];  // four partial chains per row, combined at the end (max is order-free)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h][0] = best[h];
      mx[h][1] = mx[h][2] = mx[h][3] = -INFINITY;
    }
    block_max::ForEachScoreOfHalf<kHalf, kMasked>(acc, lim, tig, [&](int h, int j, float s, bool visible) {
      mx[h][j & 3] = block_max::MaxNaN(mx[h][j & 3], visible ? s : -INFINITY);  // a select, not a branch
    });
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      best[h] = block_max::MaxNaN(block_max::MaxNaN(mx[h][0], mx[h][1]), block_max::MaxNaN(mx[h][2], mx[h][3]));
    }
  }

  __device__ __forceinline__ static float Max(float a, float b) { return block_max::MaxNaN(a, b); }
  __device__ __forceinline__ bool NonFiniteSeen(int) const { return false; }  // a written max says it
#endif                                                                        // MSA_WGMMA_ENABLED
};

// e4m3 operands: 4 k32 steps over the padded dims, query rows of 144 bytes (ldmatrix .b16 conflict-free: the 8-bit
// k32 A fragment is the 16-bit k16 one byte for byte), key tiles of one 128-byte column block (one key = one
// swizzled row, K-major as fp8 wgmma requires); one sequence per launch.
struct E4M3Operands {
  using Element = uint8_t;
  using Fold = NanMaxFold;
  static constexpr int kStepK = 32;
  static constexpr int kQStride = block_max::kDiPad + 16;
  static constexpr bool kBatchedChunks = false;
#if defined(MSA_WGMMA_ENABLED)  // (BlockMaxCta's body, the only user)
  __device__ __forceinline__ static void Mma(float (&acc)[64], const uint32_t (&a)[4], uint64_t b_desc) {
    wgmma::MmaRSE4M3(acc, a, b_desc, 1);
  }
#endif  // MSA_WGMMA_ENABLED
};

template <int kWgs, bool kTma>
__global__ void __launch_bounds__(kWgs * 128, 1)
    BlockMaxFp8Kernel(const uint8_t* index_q, const uint8_t* index_k, const __grid_constant__ CUtensorMap key_map,
                      ChunkGeometry g, float scale, int64_t blocks_per_cta, float* bs, unsigned long long* lists,
                      unsigned long long* bad_row) {
  block_max::BlockMaxCta<E4M3Operands, kWgs, kTma, /*kRunning=*/false>(index_q, index_k, &key_map, g, scale,
                                                                       blocks_per_cta, bs, lists, bad_row);
}

}  // namespace

static_assert(block_max::SmemBytes<E4M3Operands>(2) == kBlockMaxFp8SmemBytes && block_max::kDiPad == kBlockMaxDiPad &&
                  block_max::kHalfKeys == kBlockMaxKeyTile,
              "BlockMaxScoresFp8Fits (gpu/common/kernel_fits.h)");

cudaError_t BlockMaxScoresFp8(const uint8_t* index_q, const uint8_t* index_k, const ChunkGeometry& g, float scale,
                              float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (!BlockMaxScoresFp8Fits(g.di, g.bk, scale, CurrentDeviceCaps())) return cudaErrorNotSupported;
  // The kernel's 32-bit geometry (rows, key positions, block ends); no other kernel takes e4m3 inputs.
  constexpr int64_t kInt32Max = 2147483647;
  if (g.nq * g.hidx > kInt32Max - 256 || g.pos0 + g.nq + g.bk > kInt32Max) return cudaErrorNotSupported;
  // A batched chunk: cudaErrorNotSupported (E4M3Operands::kBatchedChunks is false).
  const auto pick = [](int wgs, bool tma) {
    if (wgs == 1) return tma ? BlockMaxFp8Kernel<1, true> : BlockMaxFp8Kernel<1, false>;
    return tma ? BlockMaxFp8Kernel<2, true> : BlockMaxFp8Kernel<2, false>;
  };
  return block_max::LaunchBlockMax<E4M3Operands>(pick, index_q, index_k, g, scale, bs, /*lists=*/nullptr, bad_row,
                                                 stream);
}

}  // namespace msa::gpu
