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
// Training (SPEC section 8), on the forward's stored probabilities P_j = R(p_j / l) and out:
//   dP_j = R(dot(dout, v_j)), Delta = R(dot(dout, out)), dS_j = R(P_j * (dP_j - Delta) (+ dlse));
//   dq = R(scale * sum_j dS_j k_j), dk = R(scale * sum dS q) (kPrescaledQuery: R(sum dS R(q * scale))),
//   dv = R(sum P dout), each sum in A over its terms in ascending (key, query, head) order;
//   the indexer's KL: x_j the index scores, ilse = lse of x over the key set in A, rho_j = exp(x_j - ilse) in A,
//   pbar_j = (sum_h P_hj) / G in A, diff_j = R(rho_j - pbar_j) (the official kernels round it to bf16 before the
//   products), g_j = diff_j / N; dqi = R(index_scale * sum_j g_j index_k_j), dki = R(index_scale * sum g index_q)
//   (kPrescaledQuery: R(sum g R(index_q * index_scale))), kl_loss = sum over rows of sum_j pbar_j * (log pbar_j -
//   (x_j - ilse)) in A, divided by N.
#ifndef MSA_ORACLE_NAIVE_LOWP_H_
#define MSA_ORACLE_NAIVE_LOWP_H_

#include <vector>

#include "oracle/precision.h"
#include "oracle/problem.h"

namespace msa {

// Where the scale is applied: after the dot, or to the query before it.
enum class ScaleOrder { kScaleAfterDot, kPrescaledQuery };

// Which parts to evaluate: the index branch (block_scores, index_lse), the main branch (out, lse) and, for a problem
// with dout, training (dq, dk, dv, dqi, dki, kl_loss; it evaluates the main branch too).
struct NaiveParts {
  bool index = true, attention = true, training = false;
};

// The sizes of the training sums' terms, for the error floors (oracle/error_floor.h): per gradient, the largest over
// its elements of the sum of its terms' sizes, each term's size the magnitudes its own rounding follows (for dq and
// dk: scale * P (sum|dout v| + sum|dout out| + |dlse|) |k| or |q|; for dv: P |dout|; for dqi and dki: index_scale
// (rho + pbar) / N |index_k| or |index_q|); for kl_loss the sum over rows and keys of pbar (|log pbar| + |log rho|) /
// N. The scores' own errors, which grow with their size, are the naive evaluation's to show (in both scale orders).
struct TermSizes {
  double dq = 0, dk = 0, dv = 0, dqi = 0, dki = 0, kl_loss = 0;
};

struct NaiveOutputs {
  std::vector<double> block_scores;  // [Hidx, total_q, max_blocks]; -inf where invisible
  std::vector<double> index_lse;     // [Hidx, total_q], over `selection`
  std::vector<double> out;           // [total_q, Hq, Dv], over `selection`
  std::vector<double> lse;           // [total_q, Hq]
  // training: [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv], [total_q, Hidx, Di], [total_k, 1, Di], [1]
  std::vector<double> dq, dk, dv, dqi, dki, kl_loss;
  TermSizes term_sizes;
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
