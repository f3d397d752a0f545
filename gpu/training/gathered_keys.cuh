// The key set of a selection row as the training kernels walk it: gpu/topk/sorted_selection.cuh's sorted blocks and
// prefix counts, read as one list of gathered keys in ascending key position.
#ifndef MSA_GPU_TRAINING_GATHERED_KEYS_CUH_
#define MSA_GPU_TRAINING_GATHERED_KEYS_CUH_

#include <cstdint>

namespace msa::gpu {

// The sorted block (an index into blocks[nb]) holding gathered key j, 0 <= j < prefix[nb]: the last i with
// prefix[i] <= j.
__device__ inline int GatheredBlock(int64_t j, const int64_t* prefix, int nb) {
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
__device__ inline int64_t GatheredKey(int64_t j, const int32_t* blocks, const int64_t* prefix, int nb, int64_t bk) {
  const int i = GatheredBlock(j, prefix, nb);
  return int64_t(blocks[i]) * bk + (j - prefix[i]);
}

}  // namespace msa::gpu

#endif  // MSA_GPU_TRAINING_GATHERED_KEYS_CUH_
