// Index branch of the low-precision mode on tensor cores: block maxima of index_q . index_k
// computed tile by tile with mma.sync m16n8k16 (fed by cp.async and ldmatrix), never materializing the token
// scores, and an exp-free top-k with one warp per row. Both are deterministic (no atomics on values).
#include <algorithm>
#include <cmath>

#include "gpu/common/chunk.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

using mma::CopyAsync16;
using mma::CopyAsyncCommit;
using mma::CopyAsyncWait;
using mma::kFullMask;
using mma::LoadMatrixX4;
using mma::Mma16816;

constexpr int kDiPad = 128;              // index dims are zero-padded to this
constexpr int kSmemStride = kDiPad + 8;  // halves per smem row: 272 bytes, ldmatrix conflict-free
constexpr int kKeyTile = 64;             // keys per pipeline stage
constexpr int kStages = 3;
constexpr int kWarps = 4;
static_assert(kDiPad == kBlockMaxDiPad && kKeyTile == kBlockMaxKeyTile,
              "BlockMaxScoresFits (gpu/common/kernel_fits.h)");

// docs:begin gpu-block-max BlockMaxScores: the index branch as a GEMM of the chunk's rows [rows, Di] (row
// (t - t0) * Hidx + r is one index query) against index_k [keys, Di], reduced on the fly. A CTA of 4 warps
// holds kMTiles * 64 rows in registers (A fragments, loaded once), streams 64-key tiles of index_k through a
// 3-stage cp.async pipeline, and each warp multiplies its kMTiles * 16 rows by the tile (ldmatrix B
// fragments). Each thread keeps, per row it owns, the max of its raw dots over the current key block; at the
// block's end 4 lanes combine their maxima and one writes max * scale (scale > 0, and rounding is monotone,
// so this equals the max of the scaled scores). Keys past a row's position are masked only in tiles that
// reach the chunk's diagonal (the causal clamp of the local block). Rows past the chunk and blocks past a
// row's local block are never written. A scaled score that is inf or NaN poisons the row's running
// fma(score, 0, check) sum, which records the row as bad. The CTA covers key blocks
// [blockIdx.y * blocks_per_cta, ...), so short row counts (decode) still fill the machine. A batched chunk: the CTA
// works on sequence blockIdx.z (EnterSequence), its rows at their offset in the block-score buffer.
template <int kLowp, int kMTiles>
__global__ void __launch_bounds__(kWarps * 32)
    BlockMaxScoresKernel(const uint16_t* index_q, const uint16_t* index_k, ChunkGeometry g, float scale,
                         int64_t blocks_per_cta, float* bs, unsigned long long* bad_row) {
  AllowDependents();  // the top-k may launch now; it waits for this grid's end
  constexpr int kCtaRows = kWarps * kMTiles * 16;
  extern __shared__ __align__(16) uint16_t block_max_smem[];
  uint16_t* ks = block_max_smem;                         // [kStages][kKeyTile][kSmemStride]
  uint16_t* qs = ks + kStages * kKeyTile * kSmemStride;  // [kCtaRows][kSmemStride]
  bs += EnterSequence(g, blockIdx.z) * g.max_blocks;
  const int64_t rows = g.nq * g.hidx;
  const int64_t tiles_x = (rows + kCtaRows - 1) / kCtaRows;
  if (blockIdx.x >= tiles_x) return;                           // past a shorter sequence's rows (batched chunks)
  const int64_t row0 = (tiles_x - 1 - blockIdx.x) * kCtaRows;  // the longest rows (latest queries) first
  const int64_t row_last = (row0 + kCtaRows < rows ? row0 + kCtaRows : rows) - 1;
  const int64_t min_pos = g.pos0 + row0 / g.hidx, max_pos = g.pos0 + row_last / g.hidx;
  const int64_t blk_begin = int64_t(blockIdx.y) * blocks_per_cta;
  int64_t blk_end = blk_begin + blocks_per_cta;
  if (blk_end > max_pos / g.bk + 1) blk_end = max_pos / g.bk + 1;
  if (blk_begin >= blk_end) return;
  const int64_t key_first = blk_begin * g.bk;
  int64_t key_end = blk_end * g.bk;
  if (key_end > max_pos + 1) key_end = max_pos + 1;
  const int num_tiles = int((key_end - key_first + kKeyTile - 1) / kKeyTile);
  const int tiles_per_block = g.bk / kKeyTile;
  const int chunks_per_row = g.di / 8;  // 16-byte pieces of one index vector

  // Query rows -> smem (zero beyond di and past the chunk), then to A fragments.
  for (int e = threadIdx.x; e < kCtaRows * (kDiPad / 8); e += blockDim.x) {
    const int rr = e / (kDiPad / 8), piece = e % (kDiPad / 8);
    const int64_t row = row0 + rr;
    const bool valid = row < rows && piece < chunks_per_row;
    CopyAsync16(qs + rr * kSmemStride + piece * 8,
                index_q + (g.t0 * g.hidx + (valid ? row : 0)) * g.di + (valid ? piece * 8 : 0), valid);
  }
  CopyAsyncCommit();
  const auto load_keys = [&](int tile) {
    uint16_t* dst = ks + (tile % kStages) * kKeyTile * kSmemStride;
    const int64_t key0 = key_first + int64_t(tile) * kKeyTile;
    for (int e = threadIdx.x; e < kKeyTile * (kDiPad / 8); e += blockDim.x) {
      const int kk = e / (kDiPad / 8), piece = e % (kDiPad / 8);
      const bool valid = key0 + kk < key_end && piece < chunks_per_row;
      CopyAsync16(dst + kk * kSmemStride + piece * 8,
                  index_k + (g.key_begin + (valid ? key0 + kk : 0)) * g.di + (valid ? piece * 8 : 0), valid);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_keys(s);
    CopyAsyncCommit();
  }
  CopyAsyncWait<kStages - 1>();  // the query group
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  uint32_t a[kMTiles][kDiPad / 16][4];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int k = 0; k < kDiPad / 16; ++k) {
      LoadMatrixX4(a[m][k], qs + ((warp * kMTiles + m) * 16 + lane % 16) * kSmemStride + k * 16 + (lane / 16) * 8);
    }
  }
  // This thread's rows: (m, half) -> chunk row row0 + (warp * kMTiles + m) * 16 + gid + 8 * half.
  int64_t pos[kMTiles][2];
  float best[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + (warp * kMTiles + m) * 16 + gid + 8 * h;
      pos[m][h] = row < rows ? g.pos0 + row / g.hidx : -1;
      best[m][h] = -INFINITY;
    }
  }
  float check[kMTiles][2] = {};
  // ldmatrix lane address inside a 16-key x 16-dim B piece: matrices (keys 0-7, dims 0-7), (0-7, 8-15),
  // (8-15, 0-7), (8-15, 8-15) -> b fragments of two n8 tiles.
  const int b_key = (lane / 16) * 8 + lane % 8, b_dim = ((lane / 8) % 2) * 8;

  for (int tile = 0; tile < num_tiles; ++tile) {
    CopyAsyncWait<kStages - 2>();
    __syncthreads();
    if (tile + kStages - 1 < num_tiles) load_keys(tile + kStages - 1);
    CopyAsyncCommit();
    const uint16_t* kt = ks + (tile % kStages) * kKeyTile * kSmemStride;
    float c[kMTiles][kKeyTile / 8][4];
#pragma unroll
    for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n) c[m][n][0] = c[m][n][1] = c[m][n][2] = c[m][n][3] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kDiPad / 16; ++k) {
#pragma unroll
      for (int np = 0; np < kKeyTile / 16; ++np) {
        uint32_t b[4];
        LoadMatrixX4(b, kt + (np * 16 + b_key) * kSmemStride + k * 16 + b_dim);
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          Mma16816<kLowp>(c[m][2 * np], a[m][k], b[0], b[1]);
          Mma16816<kLowp>(c[m][2 * np + 1], a[m][k], b[2], b[3]);
        }
      }
    }
    const int64_t key0 = key_first + int64_t(tile) * kKeyTile;
    const bool diagonal = key0 + kKeyTile - 1 > min_pos;
#pragma unroll
    for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const float s = c[m][n][e];
          const bool visible = !diagonal || key0 + n * 8 + tig * 2 + (e & 1) <= pos[m][h];
          if (visible) {
            check[m][h] = fmaf(s * scale, 0.0f, check[m][h]);
            best[m][h] = s > best[m][h] ? s : best[m][h];
          }
        }
      }
    }
    const bool block_done = (tile + 1) % tiles_per_block == 0 || tile + 1 == num_tiles;
    if (block_done) {
      const int64_t blk = blk_begin + tile / tiles_per_block;
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v = best[m][h];
          v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
          v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
          const int64_t row = row0 + (warp * kMTiles + m) * 16 + gid + 8 * h;
          if (tig == 0 && pos[m][h] >= 0 && blk <= pos[m][h] / g.bk) {
            const float value = v * scale;
            bs[row * g.max_blocks + blk] = value;
            if (!isfinite(value)) check[m][h] = NAN;
          }
          best[m][h] = -INFINITY;
        }
      }
    }
  }
  CopyAsyncWait<0>();
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + (warp * kMTiles + m) * 16 + gid + 8 * h;
      if (pos[m][h] >= 0 && !(check[m][h] == 0.0f)) {
        atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + row / g.hidx) * g.hidx + row % g.hidx));
      }
    }
  }
}
// docs:end gpu-block-max

// The warp's best key over the lanes' list heads; the lane holding it (keys are unique) shifts its list.
template <int kCap>
__device__ inline unsigned long long PopWarpMax(unsigned long long (&list)[kCap]) {
  unsigned long long winner = list[0];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_xor_sync(kFullMask, winner, offset);
    winner = other > winner ? other : winner;
  }
  if (list[0] == winner) {
#pragma unroll
    for (int i = 0; i + 1 < kCap; ++i) list[i] = list[i + 1];
    list[kCap - 1] = 0;
  }
  return winner;
}

// The row's `take` pops written as block ids, then its forced blocks and -1 padding (lane 0 writes).
template <int kCap>
__device__ inline void PopAndWriteRow(const RankRow<float>& p, const ChunkGeometry& g, int lane,
                                      unsigned long long (&list)[kCap]) {
  for (int64_t slot = 0; slot < p.forced.take; ++slot) {
    const unsigned long long winner = PopWarpMax(list);
    if (lane == 0) p.out[slot] = BlockOfKey(winner);
  }
  if (lane == 0) WriteForcedTail(p.forced, g.top_k, p.out);
}

// docs:begin gpu-rank-topk RankTopK: one warp per chunk row. Lane j scans the candidates init_end + j,
// init_end + j + 32, ... (coalesced; the candidates [init_end, local_begin) of gpu/topk/rank_row.cuh) and keeps its
// best kCap keys sorted in registers (an unrolled insertion: the array is indexed only by constants). Then `take`
// rounds of a warp-wide max pick the next best key (PopWarpMax); the lane holding it shifts its list. Keys are unique
// (ids differ), so exactly one lane pops per round, and the order is exactly the serial one (score desc, id asc). The
// forced blocks and -1 padding follow (WriteForcedTail). A batched chunk: blockIdx.y is the sequence
// (EnterSequence), its rows at their offset in the block scores.
template <int kCap>
__global__ void RankTopKKernel(const float* bs, ChunkGeometry g, int32_t* topk) {
  AllowDependents();  // a dependent main branch (split-k) may launch now; it waits for this grid's end
  WaitForPrimary();   // launched as a dependent of the index kernel: its block scores complete from here
  bs += EnterSequence(g, blockIdx.y) * g.max_blocks;
  const int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= g.nq * g.hidx) return;
  const RankRow<float> p = PlaceRankRow(bs, g, topk, row);
  unsigned long long list[kCap];
#pragma unroll
  for (int i = 0; i < kCap; ++i) list[i] = 0;  // below every real key
  if (p.forced.take > 0) {
    for (int64_t b = p.forced.init_end + lane; b < p.forced.local_begin; b += 32) {
      unsigned long long key = RankKey(p.scores[b], b);
      if (key <= list[kCap - 1]) continue;
#pragma unroll
      for (int i = 0; i < kCap; ++i) {
        if (key > list[i]) {
          const unsigned long long moved = list[i];
          list[i] = key;
          key = moved;
        }
      }
    }
  }
  PopAndWriteRow(p, g, lane, list);
}
// docs:end gpu-rank-topk

// ---- RankTopKThreshold: the same selection as RankTopK, bit for bit, with a threshold filter ----
// docs:begin gpu-rank-topk-threshold
// ThresholdLists: the best `take` (1..kCap) keys of the candidates [begin, end) of one row into the warp's lists
// (lane j: the candidates begin + j, begin + j + 32, ...; each list sorted descending, 0-padded).
// Pass 1: every lane's largest key m_j (0 if it has none). T = the take-th largest of the 32 m_j (the lanes with
// m_j = 0 tie at the bottom; T = 0 when fewer than `take` lanes hold candidates, which happens only when fewer
// than `take` candidates exist, as lane j < n holds candidate j). The `take` lanes ranked at or above T hold
// distinct candidates >= T, so the take-th best candidate is >= T, and so is every key of the best `take`.
// Pass 2: the lanes with m_j >= T (the others hold no key >= T and sit it out) re-read their candidates (from
// L1/L2) and insert the keys >= T: on random scores about take + a few per row, instead of the ~50 per LANE RankTopK
// inserts at 128 candidates per lane (an insertion is about 100 instructions, warp-wide when any lane inserts).
// Each lane keeps its best kCap >= take, so every key of the global best `take` is in some list, and `take`
// PopWarpMax rounds give exactly RankTopK's order. Lanes keeping their top 2 in pass 1 would tighten T (the
// take-th of 64 keys) at the cost of an insertion per candidate in pass 1 and a 64-key selection, to skip fewer
// than one key per lane in pass 2: not worth it.
template <int kCap>
__device__ inline void ThresholdLists(const float* scores, int64_t begin, int64_t end, int take, int lane,
                                      unsigned long long (&list)[kCap]) {
  unsigned long long best = 0;
#pragma unroll 4
  for (int64_t b = begin + lane; b < end; b += 32) {
    const unsigned long long key = RankKey(scores[b], b);
    best = key > best ? key : best;
  }
  const unsigned long long threshold = TakeThLargestOfLanes(best, take, lane);
  // A lane whose maximum is below T holds no key >= T: it sits pass 2 out (its loads and key math predicated off).
  const int64_t end2 = best >= threshold ? end : begin;
#pragma unroll 4
  for (int64_t b = begin + lane; b < end2; b += 32) {
    unsigned long long key = RankKey(scores[b], b);
    if (key < threshold || key <= list[kCap - 1]) continue;
#pragma unroll
    for (int i = 0; i < kCap; ++i) {
      if (key > list[i]) {
        const unsigned long long moved = list[i];
        list[i] = key;
        key = moved;
      }
    }
  }
}

// RankTopKThresholdKernel: one warp per (row, split). splits == 1: the warp ranks the whole row with
// ThresholdLists and writes it as RankTopK does. splits > 1 (few rows, many candidates: decode): split s takes
// the candidates [init_end + s * per_split, init_end + (s + 1) * per_split) clipped to local_begin (the row's
// candidates, gpu/topk/rank_row.cuh), and writes its best `take` keys, sorted descending and 0-padded (0 is below every
// real key), to ws [rows, splits, top_k] (slots >= take unwritten); RankTopKMergeKernel finishes the row. A batched
// chunk: blockIdx.y is the sequence (EnterSequence), its rows at their offset in the block scores and in ws.
// Registers: 76 at kCap 16 (3 CTAs of 8 warps per SM; 64 would spill), 128 at kCap 32 (sm_90a, no spills).
template <int kCap>
__global__ void __launch_bounds__(256, kCap <= 16 ? 3 : 2)
    RankTopKThresholdKernel(const float* bs, ChunkGeometry g, int splits, int64_t per_split, int32_t* topk,
                            unsigned long long* ws) {
  AllowDependents();
  WaitForPrimary();
  const int64_t first_row = EnterSequence(g, blockIdx.y);
  bs += first_row * g.max_blocks;
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t rows = g.nq * g.hidx;
  if (warp / splits >= rows) return;                                    // whole warps
  const int64_t row = rows - 1 - warp / splits, split = warp % splits;  // the longest rows (latest queries) first
  const RankRow<float> p = PlaceRankRow(bs, g, topk, row);
  const ForcedBlocks& f = p.forced;
  unsigned long long list[kCap];
#pragma unroll
  for (int i = 0; i < kCap; ++i) list[i] = 0;
  if (f.take > 0) {
    const int64_t begin = splits == 1 ? f.init_end : f.init_end + split * per_split;
    int64_t end = splits == 1 ? f.local_begin : begin + per_split;
    if (end > f.local_begin) end = f.local_begin;
    ThresholdLists(p.scores, begin, end, int(f.take), lane, list);
  }
  if (splits == 1) {
    PopAndWriteRow(p, g, lane, list);
    return;
  }
  unsigned long long* dst = ws + ((first_row + row) * splits + split) * int64_t(g.top_k);
  for (int64_t slot = 0; slot < f.take; ++slot) {
    const unsigned long long winner = PopWarpMax(list);
    if (lane == 0) dst[slot] = winner;
  }
}

// RankTopKMergeKernel: one warp per row; lane s < splits loads split s's sorted list as its own list (already
// in order: no insertion), then `take` PopWarpMax rounds and the forced tail (PopAndWriteRow). The union of the
// splits' best `take` holds the row's best `take` (each of those is among its own split's best take), so the order
// is RankTopK's. A batched chunk: blockIdx.y is the sequence, as in RankTopKThresholdKernel.
template <int kCap>
__global__ void __launch_bounds__(256, kCap <= 16 ? 4 : 2)
    RankTopKMergeKernel(ChunkGeometry g, int splits, const unsigned long long* ws, int32_t* topk) {
  AllowDependents();
  const int64_t first_row = EnterSequence(g, blockIdx.y);
  const int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= g.nq * g.hidx) return;
  const RankRow<float> p = PlaceRankRow<float>(nullptr, g, topk, row);
  unsigned long long list[kCap];
  const unsigned long long* src = ws + ((first_row + row) * splits + lane) * int64_t(g.top_k);
#pragma unroll
  for (int i = 0; i < kCap; ++i) list[i] = lane < splits && i < p.forced.take ? src[i] : 0;
  PopAndWriteRow(p, g, lane, list);
}
// docs:end gpu-rank-topk-threshold

constexpr int kTopKThreads = 256;
constexpr int kMinPerSplit = 256;  // candidates per split warp at least (8 per lane)
constexpr int kMaxSplits = 32;     // one merge lane per split

// Warps that fill the device: about 2 waves of 8-warp CTAs, one per SM each.
int TopKTargetWarps() { return 16 * SmCount(); }

template <int kLowp, int kMTiles>
cudaError_t LaunchBlockMax(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g, float scale,
                           float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  constexpr int kCtaRows = kWarps * kMTiles * 16;
  const size_t smem = size_t(kStages * kKeyTile + kCtaRows) * kSmemStride * 2;
  const auto kernel = BlockMaxScoresKernel<kLowp, kMTiles>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  int ctas_per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, kernel, kWarps * 32, smem);
  if (err != cudaSuccess) return err;
  const BlockMaxGrid plan =
      PlanBlockMaxGrid(CurrentDeviceCaps(), g, kCtaRows, ctas_per_sm, int64_t(g.di) * int64_t(sizeof(uint16_t)));
  kernel<<<GridOf(plan), kWarps * 32, smem, stream>>>(index_q, index_k, g, scale, plan.blocks_per_cta, bs, bad_row);
  return cudaGetLastError();
}

template <int kLowp>
cudaError_t BlockMaxFor(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g, float scale,
                        float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 256) return LaunchBlockMax<kLowp, 1>(index_q, index_k, g, scale, bs, bad_row, stream);
  return LaunchBlockMax<kLowp, 2>(index_q, index_k, g, scale, bs, bad_row, stream);
}

}  // namespace

cudaError_t BlockMaxScores(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                           float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (lowp == kLowpBF16) return BlockMaxFor<kLowpBF16>(index_q, index_k, g, scale, bs, bad_row, stream);
  return BlockMaxFor<kLowpF16>(index_q, index_k, g, scale, bs, bad_row, stream);
}

cudaError_t RankTopK(const float* bs, const ChunkGeometry& g, int32_t* topk, cudaStream_t stream) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const dim3 grid{unsigned((rows * 32 + kThreads - 1) / kThreads), unsigned(g.num_sequences)};
  if (g.top_k <= 17) {
    return LaunchDependent(RankTopKKernel<16>, grid, dim3{kThreads}, 0, stream, bs, g, topk);
  }
  return LaunchDependent(RankTopKKernel<32>, grid, dim3{kThreads}, 0, stream, bs, g, topk);
}

size_t RankTopKThresholdWorkspaceBytes(int64_t max_rows, int top_k) {
  if (max_rows <= 0 || top_k <= 0) return 0;
  const int64_t target = TopKTargetWarps();
  // Split only below `target` rows, with splits <= min(32, ceil(target / rows)): rows * splits < 2 * target.
  const int64_t lists = std::min<int64_t>(max_rows * kMaxSplits, 2 * target);
  return size_t(lists) * size_t(top_k) * sizeof(unsigned long long);
}

int RankTopKThresholdSplits(const ChunkGeometry& g, size_t workspace_bytes) {
  const int64_t rows = g.num_sequences * g.nq * g.hidx;  // at most this many (batched chunks)
  const int64_t target = TopKTargetWarps();
  if (rows <= 0 || rows >= target || g.top_k <= 0) return 1;
  const int64_t n = MostCandidates(g);
  int64_t splits = std::min<int64_t>({kMaxSplits, (target + rows - 1) / rows, (n + kMinPerSplit - 1) / kMinPerSplit});
  const int64_t fit = int64_t(workspace_bytes / (size_t(rows) * size_t(g.top_k) * sizeof(unsigned long long)));
  splits = std::min(splits, fit);
  return splits > 1 ? int(splits) : 1;
}

cudaError_t RankTopKThreshold(const float* bs, const ChunkGeometry& g, void* workspace, size_t workspace_bytes,
                              int32_t* topk, cudaStream_t stream) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  if (!RankTopKFits(g.top_k)) return cudaErrorInvalidValue;
  const int splits = workspace != nullptr ? RankTopKThresholdSplits(g, workspace_bytes) : 1;
  int64_t per_split = 0;
  if (splits > 1) {
    const int64_t n = MostCandidates(g);
    per_split = (n + splits - 1) / splits;
  }
  auto* ws = static_cast<unsigned long long*>(workspace);
  const unsigned sequences = unsigned(g.num_sequences);
  const dim3 grid{unsigned((rows * splits * 32 + kTopKThreads - 1) / kTopKThreads), sequences};
  const dim3 merge_grid{unsigned((rows * 32 + kTopKThreads - 1) / kTopKThreads), sequences};
  const auto rank = g.top_k <= 17 ? RankTopKThresholdKernel<16> : RankTopKThresholdKernel<32>;
  const auto merge = g.top_k <= 17 ? RankTopKMergeKernel<16> : RankTopKMergeKernel<32>;
  const cudaError_t err =
      LaunchDependent(rank, grid, dim3{kTopKThreads}, 0, stream, bs, g, splits, per_split, topk, ws);
  if (err != cudaSuccess) return err;
  if (splits > 1) merge<<<merge_grid, kTopKThreads, 0, stream>>>(g, splits, ws, topk);
  return cudaGetLastError();
}

}  // namespace msa::gpu
