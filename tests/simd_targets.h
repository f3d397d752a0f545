// The Highway targets the simd tests are instantiated over (simd_exact_test, simd_fp32_test).
#ifndef MSA_TESTS_SIMD_TARGETS_H_
#define MSA_TESTS_SIMD_TARGETS_H_

#include <cstdint>
#include <vector>

#include "hwy/targets.h"
#include "simd/simd_backend.h"

namespace msa {

// What the CPU supports, without any test mock.
inline int64_t CpuTargets() {
  hwy::SetSupportedTargetsForTest(0);
  return hwy::SupportedTargets();
}

// The targets in `mask`, best first.
inline std::vector<int64_t> TargetList(int64_t mask) {
  std::vector<int64_t> targets;
  for (int64_t bits = mask; bits != 0; bits &= bits - 1) targets.push_back(bits & -bits);
  return targets;
}

// Every target compiled into the backend.
inline std::vector<int64_t> CompiledTargetList() { return TargetList(simd::CompiledTargets()); }

// The compiled targets this CPU can run: the per-target tests are instantiated over these only (a target the
// CPU lacks gets no test rather than a skipped one; the exact test's report names it).
inline std::vector<int64_t> RunnableTargetList() { return TargetList(simd::CompiledTargets() & CpuTargets()); }

}  // namespace msa

#endif  // MSA_TESTS_SIMD_TARGETS_H_
