// An owned MSA problem (config + input tensors + batch) and its owned outputs: what `msa run`, the
// tests and the goldens pass around. Tensors are SafetensorsTensor so files map onto them one to one.
#ifndef MSA_ORACLE_PROBLEM_H_
#define MSA_ORACLE_PROBLEM_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "msa/msa.h"
#include "oracle/safetensors.h"

namespace msa {

struct Problem {
  Config config;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // [B+1] each
  SafetensorsTensor q, k, v;                         // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
  SafetensorsTensor index_q, index_k;                // [total_q, Hidx, Di], [total_k, 1, Di]

  Batch batch() const { return {cu_seqlens_q, cu_seqlens_k}; }
  IndexInputs index_inputs() const;
  AttentionInputs attention_inputs() const;
};

// Outputs of SPEC section 7, always FP64 (int32 for the selection).
struct Outputs {
  std::vector<int32_t> topk_indices;  // [Hidx, total_q, top_k]
  std::vector<double> block_scores;   // [Hidx, total_q, max_blocks]
  std::vector<double> index_lse;      // [Hidx, total_q]
  std::vector<double> out;            // [total_q, Hq, Dv]
  std::vector<double> lse;            // [total_q, Hq]

  // Sizes every vector for `problem` and fills it with poison (NaN, or INT32_MIN for the selection),
  // so an output the backend forgot to write can never pass as a value.
  void Allocate(const Problem& problem);
  SelectionOutputs selection_outputs() { return {topk_indices.data(), block_scores.data(), index_lse.data()}; }
  AttentionOutputs attention_outputs() { return {out.data(), lse.data()}; }
};

// A [rows, heads, dim] view of a rank-3 tensor (precondition: shape has 3 entries).
TensorView ViewOf(const SafetensorsTensor& tensor);

// What to generate: a config, (q_len, k_len) per sequence, the input dtype and a seed.
struct ProblemSpec {
  Config config;
  std::vector<std::pair<int32_t, int32_t>> lengths;  // (q_len, k_len) per sequence
  DType dtype = DType::kF64;
  uint64_t seed = 0;
  double query_scale = 1.0;       // multiplies q and index_q: 100 gives |scores| around 1e4 (large logits)
  bool few_valued_index = false;  // index_q, index_k drawn from {-1, 0, 1}: many exactly tied scores
};

// Fills every input with standard normal values (our own generator; see query_scale and few_valued_index),
// rounded to spec.dtype.
// Each tensor draws from its own stream, so changing one tensor's size leaves the others unchanged.
Problem GenerateProblem(const ProblemSpec& spec);

// Overwrites element (row, head, d) of a rank-3 tensor, rounding to its dtype.
void SetElement(SafetensorsTensor& tensor, int64_t row, int64_t head, int64_t d, double value);

// Every input rule (config, batch, q, k, v, index_q, index_k, in that order), before anything is allocated.
Status ValidateProblem(const Problem& problem);

// Runs Select then Attend of `backend` on `problem` into freshly allocated `outputs`.
Status RunBackend(const Backend& backend, const Problem& problem, Outputs* outputs,
                  const ProgressFn& select_progress = {}, const ProgressFn& attend_progress = {});

// Runs the FP64 reference on `problem` at precision exact, whatever problem.config.precision asks of the
// backend being judged (the reference computes only exact): the expectation every precision is judged against.
Status RunReference(const Problem& problem, Outputs* outputs);

}  // namespace msa

#endif  // MSA_ORACLE_PROBLEM_H_
