// BlockMaxScores' CTA (index_kernels.cu): one row tile's block maxima over a range of key blocks, on mma.sync. Shared
// by BlockMaxScores and BlockMaxRank (block_max_rank.cu), which give the same block scores.
#ifndef MSA_GPU_INDEX_BLOCK_MAX_TILE_CUH_
#define MSA_GPU_INDEX_BLOCK_MAX_TILE_CUH_

#include <cmath>
#include <cstdint>

#include "gpu/common/kernel_fits.h"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

namespace msa::gpu::block_max {

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
// fma(score, 0, check) sum, which records the row as bad. BlockMaxTile is one CTA's work: the row tile tile_x
// (of g, a chunk of one sequence: EnterSequence first) over the key blocks [blk_begin, blk_begin + blocks_per_cta),
// bs and bad_row as BlockMaxScores takes them (bs at the sequence's rows); smem: BlockMaxTileSmemBytes. It returns
// at once where the tile or the blocks lie past the chunk's rows or keys (a CTA-uniform exit).
template <int kLowp, int kMTiles>
__device__ inline void BlockMaxTile(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                                    float scale, int64_t tile_x, int64_t blk_begin, int64_t blocks_per_cta, float* bs,
                                    unsigned long long* bad_row, uint16_t* smem) {
  constexpr int kCtaRows = kWarps * kMTiles * 16;
  uint16_t* ks = smem;                                   // [kStages][kKeyTile][kSmemStride]
  uint16_t* qs = ks + kStages * kKeyTile * kSmemStride;  // [kCtaRows][kSmemStride]
  const int64_t rows = g.nq * g.hidx;
  const int64_t tiles_x = (rows + kCtaRows - 1) / kCtaRows;
  if (tile_x >= tiles_x) return;                           // past a shorter sequence's rows (batched chunks)
  const int64_t row0 = (tiles_x - 1 - tile_x) * kCtaRows;  // the longest rows (latest queries) first
  const int64_t row_last = (row0 + kCtaRows < rows ? row0 + kCtaRows : rows) - 1;
  const int64_t min_pos = g.pos0 + row0 / g.hidx, max_pos = g.pos0 + row_last / g.hidx;
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

// BlockMaxTile's shared memory: the key stages and the query rows.
template <int kMTiles>
constexpr size_t BlockMaxTileSmemBytes() {
  return size_t(kStages * kKeyTile + kWarps * kMTiles * 16) * kSmemStride * 2;
}

}  // namespace msa::gpu::block_max

#endif  // MSA_GPU_INDEX_BLOCK_MAX_TILE_CUH_
