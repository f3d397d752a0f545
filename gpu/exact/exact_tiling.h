// The shared-memory tiling of the exact kernels (gpu/exact/exact_kernels.cu), as plain arithmetic: the kernels
// launch with these plans and the planner (gpu/common/kernel_fits.h ExactFits) asks whether one exists.
#ifndef MSA_GPU_EXACT_EXACT_TILING_H_
#define MSA_GPU_EXACT_EXACT_TILING_H_

#include <cstddef>
#include <cstdint>

namespace msa::gpu::exact {

inline constexpr int kThreads = 256;
inline constexpr int kMaxPairs = 8;  // (head, dim) accumulators per thread in ExactAttendKernel
inline constexpr int kMaxTile = 32;  // keys per tile

// Token scores: tm rows x tn keys of full index vectors in `smem` bytes (tm == 0: no tile fits `limit`).
struct TokenPlan {
  int tm = 0, tn = 0;
  size_t smem = 0;
};

inline TokenPlan PlanTokens(int di, size_t limit) {
  TokenPlan plan;
  const int64_t fit = int64_t(limit / sizeof(double)) / (di + 1);  // rows + keys that fit
  if (fit < 2) return plan;
  plan.tn = int(fit / 2 < 32 ? fit / 2 : 32);
  plan.tm = int(fit - plan.tn < 64 ? fit - plan.tn : 64);
  plan.smem = size_t(plan.tm + plan.tn) * (di + 1) * sizeof(double);
  return plan;
}

// Main branch: hg heads per block, tk keys per tile in `smem` bytes (tk == 0: nothing fits `limit`).
struct AttendPlan {
  int hg = 0;
  int tk = 0;
  size_t smem = 0;
};

inline size_t AttendSmem(int hg, int tk, int d, int dv, int top_k) {
  const size_t doubles = size_t(hg) * d + size_t(tk) * (d + 1) + size_t(tk) * dv + size_t(hg) * tk + 2 * size_t(hg) +
                         size_t(tk) + size_t(top_k) + 1;
  return doubles * sizeof(double) + size_t(top_k) * sizeof(int32_t);
}

inline AttendPlan PlanAttend(int d, int dv, int group, int top_k, size_t limit) {
  AttendPlan plan;
  int hg = (kThreads * kMaxPairs) / (dv > 0 ? dv : 1);
  if (hg > 64) hg = 64;
  if (hg > group) hg = group;
  if (hg < 1) hg = 1;
  if (int64_t(hg) * dv > int64_t(kThreads) * kMaxPairs) return plan;  // dv too large for the accumulators
  for (int tk = kMaxTile; tk >= 1; --tk) {
    if (AttendSmem(hg, tk, d, dv, top_k) <= limit) {
      plan.hg = hg;
      plan.tk = tk;
      plan.smem = AttendSmem(hg, tk, d, dv, top_k);
      return plan;
    }
  }
  return plan;
}

}  // namespace msa::gpu::exact

#endif  // MSA_GPU_EXACT_EXACT_TILING_H_
