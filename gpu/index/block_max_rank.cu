// BlockMaxRank: the index branch of a short decode step in one launch. BlockMaxScores' CTAs of a row tile, split over
// the key blocks, form one thread block cluster; once every CTA has written its block maxima the cluster synchronizes,
// and its CTAs rank the tile's rows with RankTopKCta's row ranking. The same block scores as BlockMaxScores and the
// same selection as RankTopK, without the top-k's own launch and its wait for the index grid.
#include <algorithm>

#include "gpu/common/chunk.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/index/block_max_tile.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row_cta.cuh"

namespace msa::gpu {
namespace {

using block_max::kWarps;
constexpr int kTileRows = kWarps * 16;  // BlockMaxTile with one m16 tile per warp
constexpr size_t kTileSmemBytes = block_max::BlockMaxTileSmemBytes<1>();
static_assert(kTileSmemBytes == kBlockMaxRankTileSmemBytes, "BlockMaxRankFits (gpu/common/kernel_fits.h)");

// CTA (x, y, z) = key split x of row tile y of sequence z (a batched chunk; else z = 0); the gridDim.x splits of a row
// tile are one cluster and cover every key block its rows see. Each CTA computes its split's block maxima
// (BlockMaxTile), the cluster synchronizes (release and acquire: the maxima are visible to the whole cluster, read
// from L2), then CTA x ranks the tile's rows x, x + gridDim.x, ... (RankRowCta, its survivors in the shared memory the
// key stages used). A programmatic dependent launch: the kernel before it on the stream may still read bs and topk,
// so it waits for that kernel first.
template <int kLowp>
__global__ void __launch_bounds__(kWarps * 32)
    BlockMaxRankKernel(const uint16_t* index_q, const uint16_t* index_k, ChunkGeometry g, float scale,
                       int64_t blocks_per_cta, float* bs, unsigned long long* bad_row, int32_t* topk) {
  extern __shared__ __align__(16) unsigned char block_max_rank_smem[];
  __shared__ unsigned long long group_max[32];
  __shared__ unsigned long long threshold;
  __shared__ int survivor_count;
  AllowDependents();  // the main branch may launch now; it waits for this grid's end
  WaitForPrimary();
  bs += EnterSequence(g, blockIdx.z) * g.max_blocks;
  block_max::BlockMaxTile<kLowp, 1>(index_q, index_k, g, scale, blockIdx.y, int64_t(blockIdx.x) * blocks_per_cta,
                                    blocks_per_cta, bs, bad_row, reinterpret_cast<uint16_t*>(block_max_rank_smem));
  ClusterSync();  // every block maximum of the tile's rows written and visible; the key stages free
  const int64_t rows = g.nq * g.hidx;
  const int64_t tiles_y = (rows + kTileRows - 1) / kTileRows;
  if (blockIdx.y >= tiles_y) return;  // past a shorter sequence's rows (batched chunks)
  const int64_t row0 = (tiles_y - 1 - blockIdx.y) * kTileRows;
  const int64_t row_end = row0 + kTileRows < rows ? row0 + kTileRows : rows;
  const RankRowCtaShared s{reinterpret_cast<unsigned long long*>(block_max_rank_smem), group_max, &threshold,
                           &survivor_count};
  for (int64_t row = row0 + blockIdx.x; row < row_end; row += gridDim.x) {
    RankRowCta</*kFromL2=*/true>(PlaceRankRow(bs, g, topk, row), g.top_k, s);
  }
}

// The kernel's dynamic shared memory for rows of at most `candidates` ranked candidates.
size_t SmemBytes(int64_t candidates) {
  return std::max(kTileSmemBytes, size_t(std::max<int64_t>(candidates, 1)) * kRankTopKCtaBytesPerCandidate);
}

template <class Kernel>
cudaError_t SetAttributes(Kernel* kernel, size_t smem) {
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

}  // namespace

int BlockMaxRankLargestCluster() {
  const auto kernel = BlockMaxRankKernel<kLowpBF16>;
  cudaFuncAttributes binary{};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3{unsigned(kBlockMaxRankMaxCluster)};
  config.blockDim = dim3{kWarps * 32};
  config.dynamicSmemBytes = kTileSmemBytes;
  int size = 0;
  if (cudaFuncGetAttributes(&binary, kernel) != cudaSuccess || binary.binaryVersion < 90 ||
      SetAttributes(kernel, kTileSmemBytes) != cudaSuccess ||
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
  const int64_t candidates = MostCandidates(g);
  if (!BlockMaxRankFits(g.di, g.bk, scale, g.top_k, num_blocks, candidates, CurrentDeviceCaps())) {
    return cudaErrorInvalidValue;
  }
  const BlockMaxRankSplit split = BlockMaxRankSplitOf(num_blocks);
  const size_t smem = SmemBytes(candidates);
  const auto kernel = lowp == kLowpBF16 ? BlockMaxRankKernel<kLowpBF16> : BlockMaxRankKernel<kLowpF16>;
  const cudaError_t err = SetAttributes(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid{unsigned(split.splits), unsigned((rows + kTileRows - 1) / kTileRows), unsigned(g.num_sequences)};
  return LaunchDependentCluster(kernel, grid, dim3{kWarps * 32}, smem, unsigned(split.splits), stream, index_q, index_k,
                                g, scale, split.blocks_per_cta, bs, bad_row, topk);
}

}  // namespace msa::gpu
