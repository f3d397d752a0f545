// CanonicalDot (reference/canonical.h) for the exact kernels, called with a compile-time length for the common head
// dims: inlined with a constant n, its tail loop (which indexes the partial sums with a run-time lane) disappears and
// the eight partial sums stay in registers instead of a local-memory array. Same function, same operations, same bits.
#ifndef MSA_GPU_EXACT_CANONICAL_DOT_CUH_
#define MSA_GPU_EXACT_CANONICAL_DOT_CUH_

#include "reference/canonical.h"

namespace msa::gpu {

__device__ inline double Dot(const double* a, const double* b, int n) {
  switch (n) {
    case 128:
      return CanonicalDot(a, b, 128);
    case 64:
      return CanonicalDot(a, b, 64);
    case 256:
      return CanonicalDot(a, b, 256);
    case 32:
      return CanonicalDot(a, b, 32);
    default:
      return CanonicalDot(a, b, n);
  }
}

}  // namespace msa::gpu

#endif  // MSA_GPU_EXACT_CANONICAL_DOT_CUH_
