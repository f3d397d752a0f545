// The SIMD CPU backend (Highway + OpenMP) as a backend table entry: "simd". Precision exact is the canonical
// FP64 order of SPEC section 4 (simd/exact.h), bit-identical to the reference on every Highway target.
// Every call dispatches at run time to the best Highway target the CPU supports.
#ifndef MSA_SIMD_SIMD_BACKEND_H_
#define MSA_SIMD_SIMD_BACKEND_H_

#include <cstdint>
#include <string>

#include "msa/msa.h"

namespace msa::simd {

Backend SimdBackend();

// Introspection (tests, `msa run`). Targets are Highway's bits (HWY_AVX3, HWY_AVX2, ..., HWY_SCALAR).
// Every target compiled into this backend (HWY_TARGETS), as a bit set.
int64_t CompiledTargets();
// The target the next call will dispatch to: the best one hwy::SupportedTargets() allows and that is compiled in.
int64_t BestAvailableTarget();
// The target the most recent Select, Attend or array primitive of this backend ran on (0 before any call).
int64_t LastDispatchedTarget();
// "AVX3", "AVX2", "SSE4", "SSSE3", "EMU128", "SCALAR", ...
std::string TargetName(int64_t target);

// Called by each per-target entry point with its HWY_TARGET.
void RecordDispatchedTarget(int64_t target);

}  // namespace msa::simd

#endif  // MSA_SIMD_SIMD_BACKEND_H_
