// Online softmax statistics: a scalar logsumexp state (LseAdd, LseMerge), and those of an mma.sync m16n8
// accumulator pair: rows gid (a) and gid + 8 (b) of a 16 x 16 score tile s[2][4] (the layout Mma16816 leaves:
// s[nt][0..1] row a, s[nt][2..3] row b, columns nt * 8 + tig * 2 + 0..1; -inf where masked). Shared by the kernels
// that take m and l over key tiles before a second pass.
#ifndef MSA_GPU_COMMON_ONLINE_MAX_SUM_CUH_
#define MSA_GPU_COMMON_ONLINE_MAX_SUM_CUH_

#include <cmath>

#include "gpu/common/mma.cuh"

namespace msa::gpu::mma {

// An online logsumexp (m, l), whose value is m + log(l): one score s added, or another state (m2, l2) merged.
__device__ inline void LseAdd(float& m, float& l, float s) {
  if (s > m) {
    l = l * expf(m - s) + 1.0f;
    m = s;
  } else {
    l += expf(s - m);
  }
}

__device__ inline void LseMerge(float& m, float& l, float m2, float l2) {
  if (m2 > m) {
    const float tm = m, tl = l;
    m = m2;
    l = l2;
    m2 = tm;
    l2 = tl;
  }
  if (m2 != -INFINITY) l += l2 * expf(m2 - m);
}

// Folds one tile into (m, l): m is the running row maximum (the 4 threads of a row agree on it), l the running
// sum of exp(s - m), rescaled when m grows, each thread holding its columns' part.
__device__ inline void OnlineMaxSumTile(const float s[2][4], float& m_a, float& l_a, float& m_b, float& l_b) {
  float tmax_a = -INFINITY, tmax_b = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    tmax_a = fmaxf(tmax_a, fmaxf(s[nt][0], s[nt][1]));
    tmax_b = fmaxf(tmax_b, fmaxf(s[nt][2], s[nt][3]));
  }
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    tmax_a = fmaxf(tmax_a, __shfl_xor_sync(kFullMask, tmax_a, offset));
    tmax_b = fmaxf(tmax_b, __shfl_xor_sync(kFullMask, tmax_b, offset));
  }
  const float new_a = fmaxf(m_a, tmax_a), new_b = fmaxf(m_b, tmax_b);
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sum_a += s[nt][e] == -INFINITY ? 0.0f : expf(s[nt][e] - new_a);
      sum_b += s[nt][2 + e] == -INFINITY ? 0.0f : expf(s[nt][2 + e] - new_b);
    }
  }
  l_a = (m_a == -INFINITY ? 0.0f : l_a * expf(m_a - new_a)) + sum_a;
  l_b = (m_b == -INFINITY ? 0.0f : l_b * expf(m_b - new_b)) + sum_b;
  m_a = new_a;
  m_b = new_b;
}

// Sums each row's l over its 4 threads once every tile is folded in.
__device__ inline void OnlineSumRows(float& l_a, float& l_b) {
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    l_a += __shfl_xor_sync(kFullMask, l_a, offset);
    l_b += __shfl_xor_sync(kFullMask, l_b, offset);
  }
}

}  // namespace msa::gpu::mma

#endif  // MSA_GPU_COMMON_ONLINE_MAX_SUM_CUH_
