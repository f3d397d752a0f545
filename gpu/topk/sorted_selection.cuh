// The gathered keys of one selection row, shared by the main-branch, lowp index and training kernels.
#ifndef MSA_GPU_SORTED_SELECTION_CUH_
#define MSA_GPU_SORTED_SELECTION_CUH_

#include <cstdint>

namespace msa::gpu {

// Run by one thread: the row's valid ids sel[0..) (until -1 or top_k) sorted ascending into blocks[top_k], and
// prefix[i] = the visible keys (those <= pos) of blocks[0..i), prefix[top_k + 1]. Returns the number of blocks.
template <typename Count>
__device__ inline int SortedSelection(const int32_t* sel, int top_k, int64_t bk, int64_t pos, int32_t* blocks,
                                      Count* prefix) {
  int nb = 0;
  for (int slot = 0; slot < top_k && sel[slot] != -1; ++slot) {
    const int32_t id = sel[slot];
    int at = nb++;
    while (at > 0 && blocks[at - 1] > id) {
      blocks[at] = blocks[at - 1];
      --at;
    }
    blocks[at] = id;
  }
  prefix[0] = 0;
  for (int i = 0; i < nb; ++i) {
    const int64_t first = int64_t(blocks[i]) * bk;
    prefix[i + 1] = prefix[i] + Count(pos + 1 - first < bk ? pos + 1 - first : bk);
  }
  return nb;
}

// The sorted block (an index into blocks[nb]) holding gathered key j, 0 <= j < prefix[nb]: the last i with
// prefix[i] <= j. The gathered keys are the row's visible keys in ascending key position, SortedSelection's blocks
// one after the other.
template <typename Count>
__device__ inline int GatheredBlock(Count j, const Count* prefix, int nb) {
  int lo = 0, hi = nb - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= j) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The key position (in its sequence) of gathered key j, 0 <= j < prefix[nb].
template <typename Count>
__device__ inline int64_t GatheredKey(Count j, const int32_t* blocks, const Count* prefix, int nb, int64_t bk) {
  const int i = GatheredBlock(j, prefix, nb);
  return int64_t(blocks[i]) * bk + (j - prefix[i]);
}

}  // namespace msa::gpu

#endif  // MSA_GPU_SORTED_SELECTION_CUH_
