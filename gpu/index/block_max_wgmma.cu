// Index branch block maxima on Hopper warpgroup MMA (sm_90a): the same contract and the same bits as
// BlockMaxScores (gpu/index/index_kernels.cu), only the tile kernel differs (tests/gpu_plans_test.cc compares the
// two bit for bit; docs/gpu-kernels.md has its speed). The kernel's code
// is gpu/index/block_max_wgmma.cuh (BlockMaxCta, shared with BlockMaxFp8Kernel) with the operand policy Lowp16Operands
// and the reduction MaxCheckFold below.
//
// docs:begin gpu-block-max-wgmma
// BlockMaxWgmmaKernel: the index branch as a GEMM of the chunk's rows [rows, Di] (row (t - t0) * Hidx + r is one
// index query) against index_k [keys, Di], reduced to block maxima on the fly, never materializing the scores.
//   CTA        kWgs (2, or 1 for <= 64 rows) warpgroups; warpgroup w owns the CTA's rows 64w..64w+63 (the wgmma M),
//              warp v of the CTA the rows 16v..16v+15. The query rows are loaded once (cp.async into a padded
//              tile, then ldmatrix) into registers: 8 k16 A fragments per thread (dims zero-padded to 128).
//   keys       128-key tiles of index_k stream through a 4-stage ring shared by the warpgroups, each tile
//              [2][128 keys][128 B] (dims 0-63 | 64-127, K-major, 128-byte swizzle, 1024-byte aligned; 32 KiB).
//              kTma (Di = 128, on two warpgroups or a one-warpgroup CTA of at most 32 key blocks: TmaKeyTiles and
//              BulkCopiesPay): thread 0 copies a tile as two bulk tensor copies (one per 64-dim box) completing on
//              the stage's mbarrier; otherwise every thread copies by cp.async. The stages hold the same bytes
//              either way wherever a score is read.
//   S = Q K^T  per tile and warpgroup 8 x wgmma m64n128k16, A from registers, B = the tile (descriptors), fp32
//              accumulators zeroed first, k16 steps in ascending order: as the mma.sync kernel's c = 0,
//              mma(k = 0), ..., mma(k = 7) (in SASS both first steps take the zero register RZ as C), so the
//              same fp32 dot products, bit for bit: HGMMA and HMMA.16816 round a k16 step alike (checked on
//              a device by tests/gpu_plans_test.cc, as for the KV-outer wgmma tiles).
//   overlap    two accumulator sets: the wgmma of tile i + 1 is issued before the reduction of tile i
//              (wgmma.wait_group 1), as FlashAttention-3 overlaps softmax with the next GEMM.
//   reduction  per 64-key half of a tile (block_size is a multiple of 64, so a half never straddles two
//              blocks): each thread folds its 32 scores per row into the row's running max (fmaxf, ALU pipe)
//              and the row's check (FMA pipe, below); keys past the row's position are skipped, only in halves that
//              reach the warp's first position (fmaxf, where BlockMaxScores keeps s > best ? s : best: the two differ
//              only on a -0 / +0 pair, and an accumulator that starts at +0 never holds -0). When a half ends a
//              block (or the CTA's key range), 4 lanes combine their maxima and one writes max * scale to
//              bs[row * max_blocks + blk], for blk <= the row's local block only. scale > 0 and rounding is
//              monotone, so this is the max of the scaled scores.
//   bad rows   a row is bad iff some visible scaled score is not finite: BlockMaxScores' own test, the check
//              c = fmaf(s * scale, 0, c) over the visible scores (0, or NaN from the first non-finite one), on
//              the FMA pipe, so that the max's ALU pipe holds nothing else; for scale <= 1, c = fmaf(s, 0, c)
//              (the same test, one instruction per score); bad rows go to atomicMin(bad_row, t * Hidx + r).
//   grid       grid.x = 128-row tiles, latest rows first; grid.y = spans of key blocks (one wave of CTAs for
//              decode and short chunks, spans whose keys fit the L2 for long ones: gpu/common/block_max_grid.h);
//              grid.z = the sequences of a batched chunk (EnterSequence: the CTA's sequence, its rows at their
//              offset in bs).
// Pipeline of tile i (all threads; the prologue loads Q and tiles 0..2):
//   wait tile i + 1 landed (kTma: its stage's mbarrier phase; else cp.async.wait_group 1 and a proxy fence);
//   barrier (also: tile i - 1's stage is free)
//   tile i + 3 -> the stage of tile i - 1 (kTma: issued by thread 0; else one cp.async group of every thread)
//   zero the free accumulator set; wgmma.fence; issue tile i + 1 (8 wgmma); commit; wgmma.wait_group 1
//   reduce tile i from the other set
// Shared memory: 4 x 32 KiB key stages + 64 * kWgs rows of 272 B (query tile) + 1 KiB alignment slack (163 KiB
// for two warpgroups). ptxas (CUDA 13.0, sm_90a), bf16: 236 registers (247 with the scaled check; kTma 230 and
// 234), no spills,
// no wgmma serialization warning (C7514), no local memory, one barrier, one CTA per multiprocessor.
// docs:end gpu-block-max-wgmma
#include <cmath>
#include <cstdint>

#include "gpu/common/device_query.h"
#include "gpu/common/wgmma.cuh"
#include "gpu/index/block_max_wgmma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

// The reduction of this kernel: per row a running block max (fmaxf, on the ALU pipe) and BlockMaxScores' bad-row
// check over every visible score, check = fmaf(s * scale, 0, check) (on the FMA pipe): 0 while every scaled score is
// finite, NaN from the first that is not (NaN * 0 and inf * 0 are NaN; a finite value times 0 adds a zero).
// kScaled false (the launcher's choice for 0 < scale <= 1): check = fmaf(s, 0, check), one instruction per score, the
// same test, since then |s * scale| <= |s| and s * scale is finite exactly when s is.
template <bool kScaled>
struct MaxCheckFold {
  float best[2];   // max of the raw dots over the current block's visible keys (this thread's columns)
  float check[2];  // 0, or NaN once a visible scaled score was not finite
  float scale;

#if defined(MSA_WGMMA_ENABLED)  // (BlockMaxCta's body, the only user)
  __device__ __forceinline__ void Start(int h, float score_scale) {
    best[h] = -INFINITY;
    check[h] = 0.0f;
    scale = score_scale;
  }

  // Folds the 32 scores of half `kHalf` of a tile (accumulator chunks 8 kHalf .. 8 kHalf + 7) into the rows'
  // running max and check; with kMasked, keys past lim[h] (the row's position minus the half's first key) are
  // skipped.
  template <int kHalf, bool kMasked>
  __device__ __forceinline__ void FoldHalf(const float (&acc)[64], const int (&lim)[2], int tig) {
    float mx[2][2], ck[2][2];  // two partial chains per row, combined at the end (max and the check are order-free)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h][0] = mx[h][1] = best[h];
      ck[h][0] = check[h];
      ck[h][1] = 0.0f;
    }
    block_max::ForEachScoreOfHalf<kHalf, kMasked>(acc, lim, tig, [&](int h, int j, float s, bool visible) {
      // Selects, not branches: an invisible key adds -inf to the max and 0 to the check.
      mx[h][j & 1] = fmaxf(mx[h][j & 1], visible ? s : -INFINITY);
      const float x = visible ? s : 0.0f;
      ck[h][j & 1] = fmaf(kScaled ? x * scale : x, 0.0f, ck[h][j & 1]);
    });
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      best[h] = fmaxf(mx[h][0], mx[h][1]);
      check[h] = ck[h][0] + ck[h][1];
    }
  }

  __device__ __forceinline__ static float Max(float a, float b) { return fmaxf(a, b); }
  __device__ __forceinline__ bool NonFiniteSeen(int h) const { return check[h] != 0.0f; }
#endif  // MSA_WGMMA_ENABLED
};

// bf16 / fp16 operands: 8 k16 steps over the padded dims, query rows of 272 bytes (ldmatrix conflict-free), key
// tiles of two 128-byte column blocks (dims 0-63 | 64-127); batched chunks taken.
template <int kLowp, bool kScaledCheck>
struct Lowp16Operands {
  using Element = uint16_t;
  using Fold = MaxCheckFold<kScaledCheck>;
  static constexpr int kStepK = 16;
  static constexpr int kQStride = block_max::kDiPad + 8;
  static constexpr bool kBatchedChunks = true;
#if defined(MSA_WGMMA_ENABLED)  // (BlockMaxCta's body, the only user)
  __device__ __forceinline__ static void Mma(float (&acc)[64], const uint32_t (&a)[4], uint64_t b_desc) {
    wgmma::MmaRS<kLowp, 0>(acc, a, b_desc, 1);
  }
#endif  // MSA_WGMMA_ENABLED
};

template <int kLowp, bool kScaledCheck, int kWgs, bool kTma, bool kRunning>
__global__ void __launch_bounds__(kWgs * 128, 1)
    BlockMaxWgmmaKernel(const uint16_t* index_q, const uint16_t* index_k, const __grid_constant__ CUtensorMap key_map,
                        ChunkGeometry g, float scale, int64_t blocks_per_cta, float* bs, unsigned long long* lists,
                        unsigned long long* bad_row) {
  block_max::BlockMaxCta<Lowp16Operands<kLowp, kScaledCheck>, kWgs, kTma, kRunning>(
      index_q, index_k, &key_map, g, scale, blocks_per_cta, bs, lists, bad_row);
}

// lists null: the block maxima into bs; else the running top-k (two warpgroups) into lists, and into bs where it is
// not null.
template <int kLowp, bool kScaledCheck>
cudaError_t BlockMaxWgmmaFor(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g, float scale,
                             float* bs, unsigned long long* lists, unsigned long long* bad_row, cudaStream_t stream) {
  using Ops = Lowp16Operands<kLowp, kScaledCheck>;
  if (lists != nullptr) {
    const auto pick = [](int, bool tma) {
      return tma ? BlockMaxWgmmaKernel<kLowp, kScaledCheck, 2, true, true>
                 : BlockMaxWgmmaKernel<kLowp, kScaledCheck, 2, false, true>;
    };
    return block_max::LaunchBlockMax<Ops>(pick, index_q, index_k, g, scale, bs, lists, bad_row, stream);
  }
  const auto pick = [](int wgs, bool tma) {
    if (wgs == 1)
      return tma ? BlockMaxWgmmaKernel<kLowp, kScaledCheck, 1, true, false>
                 : BlockMaxWgmmaKernel<kLowp, kScaledCheck, 1, false, false>;
    return tma ? BlockMaxWgmmaKernel<kLowp, kScaledCheck, 2, true, false>
               : BlockMaxWgmmaKernel<kLowp, kScaledCheck, 2, false, false>;
  };
  return block_max::LaunchBlockMax<Ops>(pick, index_q, index_k, g, scale, bs, nullptr, bad_row, stream);
}

// The kernel for this precision and scale (MaxCheckFold: the unscaled check where scale <= 1).
template <int kLowp>
cudaError_t BlockMaxWgmmaForScale(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g, float scale,
                                  float* bs, unsigned long long* lists, unsigned long long* bad_row,
                                  cudaStream_t stream) {
  if (scale <= 1.0f) return BlockMaxWgmmaFor<kLowp, false>(index_q, index_k, g, scale, bs, lists, bad_row, stream);
  return BlockMaxWgmmaFor<kLowp, true>(index_q, index_k, g, scale, bs, lists, bad_row, stream);
}

}  // namespace

static_assert(block_max::SmemBytes<Lowp16Operands<kLowpBF16, false>>(2) == kBlockMaxWgmmaSmemBytes &&
                  block_max::SmemBytes<Lowp16Operands<kLowpF16, true>>(2) == kBlockMaxWgmmaSmemBytes,
              "BlockMaxScoresWgmmaFits (gpu/common/kernel_fits.h)");
static_assert(block_max::SmemBytes<Lowp16Operands<kLowpBF16, false>>(2, true) == kBlockMaxTopKWgmmaSmemBytes &&
                  kRunningTopKCtaRows == 2 * 64,
              "BlockMaxTopKWgmmaFits (gpu/common/kernel_fits.h), PlanRunningTopKGrid (gpu/common/block_max_grid.h)");

cudaError_t BlockMaxScoresWgmma(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                                float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (!BlockMaxScoresWgmmaFits(g.di, g.bk, scale, CurrentDeviceCaps())) return cudaErrorNotSupported;
  // The kernel's 32-bit geometry (rows, key positions, block ends): past it (a 2^31-key sequence), the mma.sync
  // kernel, which computes the same bits.
  constexpr int64_t kInt32Max = 2147483647;
  if (g.nq * g.hidx > kInt32Max - 256 || g.pos0 + g.nq + g.bk > kInt32Max) {
    return BlockMaxScores(lowp, index_q, index_k, g, scale, bs, bad_row, stream);
  }
  if (lowp == kLowpBF16) {
    return BlockMaxWgmmaForScale<kLowpBF16>(index_q, index_k, g, scale, bs, nullptr, bad_row, stream);
  }
  return BlockMaxWgmmaForScale<kLowpF16>(index_q, index_k, g, scale, bs, nullptr, bad_row, stream);
}

cudaError_t BlockMaxTopKWgmma(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                              float scale, float* bs, unsigned long long* lists, unsigned long long* bad_row,
                              cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (lists == nullptr || g.sequences != nullptr ||
      !BlockMaxTopKWgmmaFits(g.di, g.bk, scale, g.top_k, CurrentDeviceCaps()) ||
      !BlockMaxGeometryFits32(g.nq * g.hidx, g.pos0 + g.nq - 1, g.bk)) {
    return cudaErrorNotSupported;
  }
  if (lowp == kLowpBF16) {
    return BlockMaxWgmmaForScale<kLowpBF16>(index_q, index_k, g, scale, bs, lists, bad_row, stream);
  }
  return BlockMaxWgmmaForScale<kLowpF16>(index_q, index_k, g, scale, bs, lists, bad_row, stream);
}

}  // namespace msa::gpu
