// The canonical FP64 primitives of SPEC section 4, shared by every backend (host and device):
// CanonicalDot here, CanonicalExp / CanonicalLog in exp_log.h. Compiled without FMA contraction.
#ifndef MSA_REFERENCE_CANONICAL_H_
#define MSA_REFERENCE_CANONICAL_H_

#include <cstdint>

#include "reference/exp_log.h"

namespace msa {

// dot(a, b, n): eight partial sums, P[i % 8] += a[i] * b[i] for i ascending (multiply, then add),
// combined as ((P0+P1)+(P2+P3)) + ((P4+P5)+(P6+P7)).
// docs:begin canonical-dot
MSA_HOST_DEVICE inline double CanonicalDot(const double* a, const double* b, int64_t n) {
  double p[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) p[lane] += a[i + lane] * b[i + lane];
  }
  for (int lane = 0; i < n; ++i, ++lane) p[lane] += a[i] * b[i];
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}
// docs:end canonical-dot

// m + log(sum_j exp(x_j - m)) over x[0..n), n >= 1, summing in ascending index order (SPEC section 4).
// docs:begin canonical-lse
MSA_HOST_DEVICE inline double CanonicalLogSumExp(const double* x, int64_t n) {
  double m = x[0];
  for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
  double l = 0.0;
  for (int64_t j = 0; j < n; ++j) l += CanonicalExp(x[j] - m);
  return m + CanonicalLog(l);
}
// docs:end canonical-lse

}  // namespace msa

#endif  // MSA_REFERENCE_CANONICAL_H_
