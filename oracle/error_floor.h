// The error analysis behind the oracle's bounds (SPEC section 5): how far a correct evaluation in a given
// precision can be from the exact value, from the magnitudes involved, whatever luck the naive evaluation had on
// a small tensor (a naive error's maximum over a few elements can be far below what another summation order
// reaches). Each bound is `2 * max(naive error, floor) + 1 ulp at max|reference|`.
//
// With u the unit roundoff of the accumulator (2^-24 for every low precision, kernels accumulate in fp32; 2^-53
// for kExact) and L(n) = ceil(log2 n) (the depth of a tree sum, the usual kernel reduction):
//   a dot product of length n scaled by c:  (L(n) + 2) * u * c * max|a| * max|b|   (norms of the rows: Cauchy-
//                                           Schwarz bounds sum |a_i b_i|; +2 for the product and the scaling)
//   index scores (token and pooled):        the dot's, plus (L(Bk) + 2) * u for lse pooling's sum, plus the
//                                           dot's magnitude times (L(Bk) + 2) * u for mean pooling's mean key
//   lse, index_lse over n keys:             score floor + (L(n) + 2) * u                (the sum of exponentials)
//   out:                                    (main score floor + (L(n) + 2) * u) * max|v|  (the weights' error is
//                                           a covariance under the softmax: |cov(ds, v)| <= max|ds| * max|v|)
// where n is the most keys a row can attend (top_k * Bk, at most the longest sequence).
#ifndef MSA_ORACLE_ERROR_FLOOR_H_
#define MSA_ORACLE_ERROR_FLOOR_H_

#include "oracle/problem.h"

namespace msa {

struct ErrorFloors {
  double index_score = 0;  // one index block score (what tau protects)
  double index_lse = 0;
  double lse = 0;
  double out = 0;
};

// The floors at `precision` (its accumulator) for `problem`; index inputs rounded to E4M3 first where
// index_format is e4m3. Precondition: ValidateProblem passed.
ErrorFloors ErrorFloorsOf(const Problem& problem, Precision precision);

}  // namespace msa

#endif  // MSA_ORACLE_ERROR_FLOOR_H_
