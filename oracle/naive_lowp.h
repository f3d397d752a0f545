// The yardstick of the oracle's 2x rule (SPEC section 5, FlashAttention's rule): the reference algorithm run
// NAIVELY in a given precision, the way a plain framework implementation would (PyTorch-style eager
// attention). Not canonical, but deterministic.
//
// For precision P with storage rounding R (double, float, bf16 or fp16) and accumulator A (double for
// kExact, float otherwise):
//   inputs are rounded to R (index inputs to E4M3 first where index_format is e4m3);
//   dot = sequential sum in A of A-products;  the scale applied in one of the two orders kernels use (SPEC
//   section 5): kScaleAfterDot score = R(R(dot(q, k)) * scale), kPrescaledQuery score = R(dot(R(q * scale), k))
//   (FlashAttention-style kernels and the official FP32 reference pre-scale q), for the main and index scores;
//   max pooling = max; lse pooling = m + log(sum exp(x - m)) in A; mean pooling = R(mean key in A), then dot;
//   block_scores are these pooled values, before any score_format rounding;
//   attention: m = max s, p = exp(s - m) in A, l = sum p in A, out = R(sum_j R(p_j / l) * v_j in A),
//   lse = m + log(l) in A (kernels keep lse in fp32);  index_lse = lse of the token scores in A (score_format
//   fp16: of fp16(M[b]) + log(sum exp(x - M[b])) per selected block, in A).
#ifndef MSA_ORACLE_NAIVE_LOWP_H_
#define MSA_ORACLE_NAIVE_LOWP_H_

#include <vector>

#include "oracle/precision.h"
#include "oracle/problem.h"

namespace msa {

// Where the scale is applied: after the dot, or to the query before it.
enum class ScaleOrder { kScaleAfterDot, kPrescaledQuery };

// Which parts to evaluate: the index branch (block_scores, index_lse) and the main branch (out, lse).
struct NaiveParts {
  bool index = true, attention = true;
};

struct NaiveOutputs {
  std::vector<double> block_scores;  // [Hidx, total_q, max_blocks]; -inf where invisible
  std::vector<double> index_lse;     // [Hidx, total_q], over `selection`
  std::vector<double> out;           // [total_q, Hq, Dv], over `selection`
  std::vector<double> lse;           // [total_q, Hq]
};

// The parts not asked for stay empty. Precondition: ValidateProblem passed; selection [Hidx, total_q, top_k]
// passes ValidateSelectionForAttend.
NaiveOutputs NaiveEvaluate(const Problem& problem, Precision precision, const std::vector<int32_t>& selection,
                           ScaleOrder order = ScaleOrder::kScaleAfterDot, NaiveParts parts = {});

// NaiveEvaluate's block_scores alone (they do not depend on the selection), bit for bit, without rounding
// q, k, v or evaluating any attention: what a judge of a selection alone needs (tau).
// Precondition: ValidateProblem passed.
std::vector<double> NaiveBlockScores(const Problem& problem, Precision precision,
                                     ScaleOrder order = ScaleOrder::kScaleAfterDot);

}  // namespace msa

#endif  // MSA_ORACLE_NAIVE_LOWP_H_
