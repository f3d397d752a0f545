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
// Training (SPEC section 8): each gradient's floor is (L(n) + L(d) + 4) * u times the largest sum of its terms'
// sizes (TermSizes, from the naive training evaluation): n the terms of its sum (keys of a row for dq and dqi, the
// (query, head) pairs reaching a key for dk, dv and dki, every (row, key) for kl_loss), d the longest dot product
// behind a term, 4 for the products, the exponential and P's normalisation.
#ifndef MSA_ORACLE_ERROR_FLOOR_H_
#define MSA_ORACLE_ERROR_FLOOR_H_

#include "oracle/naive_lowp.h"
#include "oracle/problem.h"

namespace msa {

struct ErrorFloors {
  double index_score = 0;  // one index block score (what tau protects)
  double index_lse = 0;
  double lse = 0;
  double out = 0;
  double dq = 0, dk = 0, dv = 0, dqi = 0, dki = 0, kl_loss = 0;  // with `term_sizes` only
};

// The floors at `precision` (its accumulator) for `problem`; index inputs rounded to E4M3 first where
// index_format is e4m3; the training floors when `term_sizes` (of the problem's naive training evaluation) is given.
// Precondition: ValidateProblem passed.
ErrorFloors ErrorFloorsOf(const Problem& problem, Precision precision, const TermSizes* term_sizes = nullptr);

}  // namespace msa

#endif  // MSA_ORACLE_ERROR_FLOOR_H_
