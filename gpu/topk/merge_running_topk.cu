// MergeRunningTopK: the selection of each chunk row from the running top-k lists of BlockMaxTopKWgmma (topk=running),
// RankTopK's selection bit for bit without the block scores' round trip through memory.
#include <cstdint>

#include "gpu/common/block_max_grid.h"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

constexpr int kWarpsPerCta = 8;

// docs:begin gpu-merge-running-topk
// MergeRunningTopKKernel: one warp per chunk row. The index kernel's span s of blocks [s * blocks_per_cta, (s + 1) *
// blocks_per_cta) left the row's best `take` candidate keys of that span in lists[(row * splits + s) * list_len, ...),
// descending, 0 past the span's candidates. Lane l takes span first + l, where first..last are the spans that hold
// the row's candidates [init_end, local_begin) (at most kRunningTopKMaxSplits: PlanRunningTopKGrid), and holds its
// list's head. Each of `take` rounds takes the largest head over the warp (keys are distinct, so one lane holds it),
// writes its block to the next slot and moves that lane to its list's next key (loaded one round ahead). The row's
// best `take` keys are among the best `take` of each span, so the slots get them in RankTopK's order (score
// descending, id ascending); then lane 0 writes the forced blocks and -1 padding (WriteForcedTail).
__global__ void __launch_bounds__(kWarpsPerCta * 32)
    MergeRunningTopKKernel(const unsigned long long* lists, ChunkGeometry g, int64_t splits, int64_t blocks_per_cta,
                           int64_t list_len, int32_t* topk) {
  AllowDependents();  // a dependent main branch may launch now; it waits for this grid's end
  WaitForPrimary();   // launched as a dependent of the index kernel: its lists complete from here
  const int64_t rows = g.nq * g.hidx;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= rows) return;  // the whole warp
  const RankRow<float> p = PlaceRankRow<float>(nullptr, g, topk, row);
  const ForcedBlocks& f = p.forced;
  const int take = int(f.take);
  if (take > 0) {  // the same for the whole warp
    const int64_t first = f.init_end / blocks_per_cta, last = (f.local_begin - 1) / blocks_per_cta;
    const bool owns = first + lane <= last;
    const unsigned long long* list = lists + (row * splits + (owns ? first + lane : 0)) * list_len;
    int cursor = 0;
    unsigned long long head = owns ? list[0] : 0, next = owns && take > 1 ? list[1] : 0;
    for (int slot = 0; slot < take; ++slot) {
      unsigned long long best = head;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        const unsigned long long other = __shfl_xor_sync(mma::kFullMask, best, offset);
        best = other > best ? other : best;
      }
      if (best != 0 && head == best) {
        p.out[slot] = BlockOfKey(best);
        ++cursor;
        head = next;
        next = cursor + 1 < take ? list[cursor + 1] : 0;
      }
    }
  }
  if (lane == 0) WriteForcedTail(f, g.top_k, p.out);
}
// docs:end gpu-merge-running-topk

}  // namespace

cudaError_t MergeRunningTopK(const unsigned long long* lists, const ChunkGeometry& g, int32_t* topk,
                             cudaStream_t stream) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  if (g.sequences != nullptr || g.top_k > kRunningTopKMaxTake + 1) return cudaErrorInvalidValue;
  const BlockMaxGrid plan = PlanRunningTopKGrid(CurrentDeviceCaps(), g);  // the index launch's grid
  const int64_t ctas = (rows + kWarpsPerCta - 1) / kWarpsPerCta;
  if (ctas > 2147483647) return cudaErrorInvalidValue;
  return LaunchDependent(MergeRunningTopKKernel, dim3{unsigned(ctas)}, dim3{kWarpsPerCta * 32}, 0, stream, lists, g,
                         plan.splits, plan.blocks_per_cta, RunningTopKListLength(g.top_k), topk);
}

}  // namespace msa::gpu
