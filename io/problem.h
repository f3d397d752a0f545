// An owned MSA problem (config + input tensors + batch) and its owned outputs: the in-memory form of the file
// contract's inputs and outputs files (io/file_contract.h), what `msa run`, the tests and the goldens pass around.
// Tensors are SafetensorsTensor so files map onto them one to one.
#ifndef MSA_IO_PROBLEM_H_
#define MSA_IO_PROBLEM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "msa/msa.h"

namespace msa {

struct Problem {
  Config config;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // [B+1] each
  SafetensorsTensor q, k, v;                        // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
  SafetensorsTensor index_q, index_k;               // [total_q, Hidx, Di], [total_k, 1, Di]
  // Training (SPEC section 8): with dout, the backward and the indexer KL are part of the problem.
  std::optional<SafetensorsTensor> dout;  // [total_q, Hq, Dv]
  std::optional<SafetensorsTensor> dlse;  // [total_q, Hq], only with dout

  Batch batch() const { return {cu_seqlens_q, cu_seqlens_k}; }
  IndexInputs index_inputs() const;
  AttentionInputs attention_inputs() const;
  // Precondition: dout is set. dlse is viewed as [total_q, Hq, 1] (no data without it).
  GradientInputs gradient_inputs() const;
};

// Outputs of SPEC section 7, always FP64 (int32 for the selection).
struct Outputs {
  std::vector<int32_t> topk_indices;  // [Hidx, total_q, top_k]
  std::vector<double> block_scores;   // [Hidx, total_q, max_blocks]
  std::vector<double> index_lse;      // [Hidx, total_q]
  std::vector<double> out;            // [total_q, Hq, Dv]
  std::vector<double> lse;            // [total_q, Hq]
  // Training (SPEC section 8): computed when the problem has dout, empty otherwise.
  std::vector<double> dq;       // [total_q, Hq, D]
  std::vector<double> dk;       // [total_k, Hkv, D]
  std::vector<double> dv;       // [total_k, Hkv, Dv]
  std::vector<double> dqi;      // [total_q, Hidx, Di]
  std::vector<double> dki;      // [total_k, 1, Di]
  std::vector<double> kl_loss;  // one value
  // The kernels the backend ran (Backend::last_plan of its select, then of its attend, joined by ","); empty for a
  // backend with no choice of kernels.
  std::string kernel_plan;

  // Sizes every vector for `problem` and fills it with poison (NaN, or INT32_MIN for the selection),
  // so an output the backend forgot to write can never pass as a value.
  void Allocate(const Problem& problem);
  SelectionOutputs selection_outputs() { return {topk_indices.data(), block_scores.data(), index_lse.data()}; }
  AttentionOutputs attention_outputs() { return {out.data(), lse.data()}; }
  AttentionGradients attention_gradients() { return {dq.data(), dk.data(), dv.data()}; }
  IndexerKlOutputs indexer_kl_outputs() { return {kl_loss.data(), dqi.data(), dki.data()}; }
  bool has_training() const { return !kl_loss.empty(); }
};

// A [rows, heads, dim] view of a rank-3 tensor (precondition: shape has 3 entries).
TensorView ViewOf(const SafetensorsTensor& tensor);

// Overwrites element `element` (in storage order) of a floating-point tensor, rounding to its dtype.
void StoreElement(SafetensorsTensor& tensor, int64_t element, double value);

// Overwrites element (row, head, d) of a rank-3 tensor, rounding to its dtype.
void SetElement(SafetensorsTensor& tensor, int64_t row, int64_t head, int64_t d, double value);

// Every input rule (config, batch, q, k, v, index_q, index_k, then dout and dlse when present, in that order), before
// anything is allocated.
Status ValidateProblem(const Problem& problem);

}  // namespace msa

#endif  // MSA_IO_PROBLEM_H_
