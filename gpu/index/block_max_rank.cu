// BlockMaxRank: the index branch of a short decode step in one launch (index=mma-rank, topk=in-index). Each 16-row
// tile of index rows is one thread block cluster whose CTAs split the tile's key blocks; every CTA loads its keys
// at once and its four warps take 64-key steps in turn (BlockMaxScores' mma.sync dots and reduction, so its block
// scores), the cluster synchronizes, and one warp per row ranks the row's candidates read from the CTAs' shared
// memory (distributed shared memory), RankTopK's selection. No top-k launch and no grid-wide wait between the stages.
#include <cmath>

#include "gpu/common/chunk.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

using mma::CopyAsync16;
using mma::kFullMask;

constexpr int kWarps = 4;
constexpr int kRows = kBlockMaxRankRows;  // index rows per tile: one m16 tile
constexpr int kKeyStep = 64;              // keys per warp step
constexpr int kDiPad = kBlockMaxDiPad;    // index dims zero-padded to this
constexpr int kStride = kDiPad + 8;       // halves per shared row: 272 bytes, ldmatrix conflict-free
constexpr int kKeysPerLane = kBlockMaxRankMaxCandidates / 32;
static_assert(kBlockMaxRankMaxCandidates % 32 == 0 && kKeyStep == kBlockMaxKeyTile, "kernel_fits.h");
static_assert(BlockMaxRankSmemBytes(1, kKeyStep) ==
                  size_t(kRows + kKeyStep) * kStride * 2 + size_t(kRows) * 4 + size_t(kRows) * 4,
              "BlockMaxRankSmemBytes (gpu/common/kernel_fits.h)");

// The CTA's shared memory for `blocks` key blocks of bk keys (BlockMaxRankSmemBytes).
struct RankTileShared {
  uint16_t* qs;      // [kRows][kStride]: the tile's index rows
  uint16_t* ks;      // [blocks * bk][kStride]: the CTA's keys
  float* step_max;   // [blocks * bk / kKeyStep][kRows]: each step's raw maxima
  float* block_max;  // [blocks][kRows]: the CTA's block scores (max * scale; -inf where not visible)
};
__device__ inline RankTileShared CarveRankTileShared(unsigned char* smem, int blocks, int bk) {
  RankTileShared s;
  s.qs = reinterpret_cast<uint16_t*>(smem);
  s.ks = s.qs + kRows * kStride;
  s.step_max = reinterpret_cast<float*>(s.ks + int64_t(blocks) * bk * kStride);
  s.block_max = s.step_max + blocks * (bk / kKeyStep) * kRows;
  return s;
}

// docs:begin gpu-block-max-rank
// BlockMaxRankKernel: CTA (x, y, z) = key split x of row tile y of sequence z (a batched chunk; else z = 0). The
// gridDim.x splits of a tile are one cluster (block rank x) and cover its rows' key blocks, blocks_per_cta each.
//   scores   the CTA's 16 rows and keys by cp.async, all at once; warp w takes the 64-key steps w, w + 4, ...: 8 k16
//            mma.sync steps from zeroed accumulators (BlockMaxScores' dots, bit for bit), keys past a row's position
//            skipped, the row's max by s > best (ALU) and its check fmaf(s * scale, 0, c) (a NaN or inf score makes it
//            NaN), 4 lanes combined by fmaxf. No maximum holds -0 (accumulators start at +0) or NaN (s > best skips
//            it), so the max of the steps' maxima is BlockMaxScores' block max in any order: block_max and bs get
//            max * scale, for
//            blocks up to the row's local block only; a row whose check or block score is not finite goes to
//            atomicMin(bad_row, t * Hidx + r), as in BlockMaxScores.
//   rank     after the cluster's barrier, warp 0 of CTA x ranks the tile's rows x, x + gridDim.x, ...: lane l holds
//            the candidates init_end + l + 32 j (RankKey of the score read from the owning CTA's block_max), each
//            key's rank is the number of the row's keys above it (keys are unique), and the key of rank < take goes
//            to out[rank]: RankTopK's order (score desc, id asc); lane 0 then writes the forced tail.
//   exit     a second cluster barrier, so that no CTA leaves while another reads its block_max.
// A programmatic dependent launch: the kernel before it on the stream may still read bs and topk, so it waits first.
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32)
    BlockMaxRankKernel(const uint16_t* index_q, const uint16_t* index_k, ChunkGeometry g, float scale,
                       int blocks_per_cta, float* bs, unsigned long long* bad_row, int32_t* topk) {
  extern __shared__ __align__(16) unsigned char block_max_rank_smem[];
  const RankTileShared s = CarveRankTileShared(block_max_rank_smem, blocks_per_cta, g.bk);
  AllowDependents();  // the main branch may launch now; it waits for this grid's end
  WaitForPrimary();
  bs += EnterSequence(g, blockIdx.z) * g.max_blocks;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int steps_per_block = g.bk / kKeyStep;
  const int64_t rows = g.nq * g.hidx, tiles_y = (rows + kRows - 1) / kRows;
  const bool tile_valid = blockIdx.y < tiles_y;  // else past a shorter sequence's rows (batched chunks)
  const int64_t row0 = tile_valid ? (tiles_y - 1 - blockIdx.y) * kRows : 0;  // the latest rows first
  const int64_t row_end = row0 + kRows < rows ? row0 + kRows : rows;
  const int64_t min_pos = g.pos0 + row0 / g.hidx, max_pos = g.pos0 + (row_end - 1) / g.hidx;
  const int64_t blk_begin = int64_t(blockIdx.x) * blocks_per_cta;
  const int64_t blk_end =
      blk_begin + blocks_per_cta < max_pos / g.bk + 1 ? blk_begin + blocks_per_cta : max_pos / g.bk + 1;
  for (int i = tid; i < blocks_per_cta * kRows; i += blockDim.x) s.block_max[i] = -INFINITY;
  if (tile_valid && blk_begin < blk_end) {
    const int64_t key_first = blk_begin * g.bk, key_end = blk_end * g.bk < max_pos + 1 ? blk_end * g.bk : max_pos + 1;
    const int keys = int(key_end - key_first), steps = (keys + kKeyStep - 1) / kKeyStep;
    const int pieces = g.di / 8;  // 16-byte pieces of one index vector
    for (int e = tid; e < kRows * (kDiPad / 8); e += blockDim.x) {
      const int rr = e / (kDiPad / 8), piece = e % (kDiPad / 8);
      const bool valid = row0 + rr < row_end && piece < pieces;
      CopyAsync16(s.qs + rr * kStride + piece * 8,
                  index_q + (g.t0 * g.hidx + (valid ? row0 + rr : 0)) * g.di + (valid ? piece * 8 : 0), valid);
    }
    for (int e = tid; e < steps * kKeyStep * (kDiPad / 8); e += blockDim.x) {
      const int kk = e / (kDiPad / 8), piece = e % (kDiPad / 8);
      const bool valid = kk < keys && piece < pieces;
      CopyAsync16(s.ks + kk * kStride + piece * 8,
                  index_k + (g.key_begin + key_first + (valid ? kk : 0)) * g.di + (valid ? piece * 8 : 0), valid);
    }
    mma::CopyAsyncCommit();
    mma::CopyAsyncWait<0>();
    __syncthreads();
    uint32_t a[kDiPad / 16][4];
#pragma unroll
    for (int k = 0; k < kDiPad / 16; ++k) {
      mma::LoadMatrixX4(a[k], s.qs + (lane % 16) * kStride + k * 16 + (lane / 16) * 8);
    }
    int64_t pos[2];  // this thread's rows row0 + gid (+ 8): their key positions, -1 past the tile
#pragma unroll
    for (int h = 0; h < 2; ++h) pos[h] = row0 + gid + 8 * h < row_end ? g.pos0 + (row0 + gid + 8 * h) / g.hidx : -1;
    float check[2] = {0.0f, 0.0f};
    const int b_key = (lane / 16) * 8 + lane % 8, b_dim = ((lane / 8) % 2) * 8;
    for (int step = warp; step < steps; step += kWarps) {
      float c[kKeyStep / 8][4];
#pragma unroll
      for (int n = 0; n < kKeyStep / 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
#pragma unroll
      for (int k = 0; k < kDiPad / 16; ++k) {
#pragma unroll
        for (int np = 0; np < kKeyStep / 16; ++np) {
          uint32_t b[4];
          mma::LoadMatrixX4(b, s.ks + (step * kKeyStep + np * 16 + b_key) * kStride + k * 16 + b_dim);
          mma::Mma16816<kLowp>(c[2 * np], a[k], b[0], b[1]);
          mma::Mma16816<kLowp>(c[2 * np + 1], a[k], b[2], b[3]);
        }
      }
      const int64_t key0 = key_first + int64_t(step) * kKeyStep;
      const bool diagonal = key0 + kKeyStep - 1 > min_pos;
      float best[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kKeyStep / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const float sc = c[n][e];
          if (!diagonal || key0 + n * 8 + tig * 2 + (e & 1) <= pos[h]) {
            check[h] = fmaf(sc * scale, 0.0f, check[h]);
            best[h] = sc > best[h] ? sc : best[h];
          }
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v = best[h];
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
        if (tig == 0) s.step_max[step * kRows + gid + 8 * h] = v;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + gid + 8 * h;
      if (pos[h] >= 0 && !(check[h] == 0.0f)) {
        atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + row / g.hidx) * g.hidx + row % g.hidx));
      }
    }
    __syncthreads();  // every step's maxima
    const int blocks = int(blk_end - blk_begin);
    for (int i = tid; i < blocks * kRows; i += blockDim.x) {
      const int local = i / kRows, rr = i % kRows;
      const int64_t row = row0 + rr, blk = blk_begin + local;
      if (row >= row_end || blk > (g.pos0 + row / g.hidx) / g.bk) continue;  // past the tile, or not visible
      float v = -INFINITY;
      const int step_end = (local + 1) * steps_per_block < steps ? (local + 1) * steps_per_block : steps;
      for (int step = local * steps_per_block; step < step_end; ++step) {
        v = fmaxf(v, s.step_max[step * kRows + rr]);
      }
      const float value = v * scale;
      bs[row * g.max_blocks + blk] = value;
      s.block_max[i] = value;
      if (!isfinite(value)) {
        atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + row / g.hidx) * g.hidx + row % g.hidx));
      }
    }
  }
  ClusterSync();  // every CTA's block scores written and visible to the cluster
  if (tile_valid && warp == 0) {
    for (int64_t row = row0 + blockIdx.x; row < row_end; row += gridDim.x) {
      const int rr = int(row - row0);
      const RankRow<float> p = PlaceRankRow<float>(nullptr, g, topk, row);
      const ForcedBlocks& f = p.forced;
      const int take = int(f.take);
      unsigned long long key[kKeysPerLane];
#pragma unroll
      for (int j = 0; j < kKeysPerLane; ++j) {
        const int64_t b = f.init_end + lane + 32 * j;
        key[j] = 0;  // no candidate
        if (b < f.local_begin) {
          const float* owner = ClusterPeer(s.block_max, int(b / blocks_per_cta));
          key[j] = RankKey(owner[(b % blocks_per_cta) * kRows + rr], b);
        }
      }
      int rank[kKeysPerLane] = {};
#pragma unroll
      for (int j = 0; j < kKeysPerLane; ++j) {
        for (int src = 0; src < 32; ++src) {
          const unsigned long long other = __shfl_sync(kFullMask, key[j], src);
#pragma unroll
          for (int i = 0; i < kKeysPerLane; ++i) rank[i] += other > key[i];
        }
      }
#pragma unroll
      for (int j = 0; j < kKeysPerLane; ++j) {
        if (key[j] != 0 && rank[j] < take) p.out[rank[j]] = BlockOfKey(key[j]);
      }
      if (lane == 0) WriteForcedTail(f, g.top_k, p.out);
    }
  }
  ClusterSync();  // no CTA leaves while another reads its block_max
}
// docs:end gpu-block-max-rank

template <class Kernel>
cudaError_t SetAttributes(Kernel* kernel, size_t smem) {
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

}  // namespace

int BlockMaxRankLargestCluster() {
  const auto kernel = BlockMaxRankKernel<kLowpBF16>;
  const size_t smem = BlockMaxRankSmemBytes(kBlockMaxRankMaxBlocksPerCta, 128);
  cudaFuncAttributes binary{};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{unsigned(kBlockMaxRankMaxCluster)};
  config.blockDim = dim3{kWarps * 32};
  config.dynamicSmemBytes = smem;
  int size = 0;
  if (cudaFuncGetAttributes(&binary, kernel) != cudaSuccess || binary.binaryVersion < 90 ||
      SetAttributes(kernel, smem) != cudaSuccess ||
      cudaOccupancyMaxPotentialClusterSize(&size, kernel, &config) != cudaSuccess) {
    cudaGetLastError();  // no sm_90 code for this device, or no device: no clusters
    return 0;
  }
  return size;
}

cudaError_t BlockMaxRank(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                         float scale, float* bs, unsigned long long* bad_row, int32_t* topk, cudaStream_t stream) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  const int64_t num_blocks = (g.pos0 + g.nq - 1) / g.bk + 1;  // of the longest row (batched: of any sequence)
  if (!BlockMaxRankFits(g.di, g.bk, scale, num_blocks, CurrentDeviceCaps()) || (rows + kRows - 1) / kRows > 65535) {
    return cudaErrorInvalidValue;
  }
  const BlockMaxRankSplit split = BlockMaxRankSplitOf(num_blocks);
  const size_t smem = BlockMaxRankSmemBytes(int(split.blocks_per_cta), g.bk);
  const auto kernel = lowp == kLowpBF16 ? BlockMaxRankKernel<kLowpBF16> : BlockMaxRankKernel<kLowpF16>;
  const cudaError_t err = SetAttributes(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid{unsigned(split.splits), unsigned((rows + kRows - 1) / kRows), unsigned(g.num_sequences)};
  return LaunchDependentCluster(kernel, grid, dim3{kWarps * 32}, smem, unsigned(split.splits), stream, index_q, index_k,
                                g, scale, int(split.blocks_per_cta), bs, bad_row, topk);
}

}  // namespace msa::gpu
