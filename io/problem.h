// An owned MSA problem (config + input tensors + batch) and its owned outputs: the in-memory form of the file
// contract's inputs and outputs files (io/file_contract.h), what `msa run`, the tests and the goldens pass around.
// Tensors are SafetensorsTensor so files map onto them one to one.
#ifndef MSA_IO_PROBLEM_H_
#define MSA_IO_PROBLEM_H_

#include <cstdint>
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
  // The kernels the backend ran (Backend::last_plan of its select, then of its attend, joined by ","); empty for a
  // backend with no choice of kernels.
  std::string kernel_plan;

  // Sizes every vector for `problem` and fills it with poison (NaN, or INT32_MIN for the selection),
  // so an output the backend forgot to write can never pass as a value.
  void Allocate(const Problem& problem);
  SelectionOutputs selection_outputs() { return {topk_indices.data(), block_scores.data(), index_lse.data()}; }
  AttentionOutputs attention_outputs() { return {out.data(), lse.data()}; }
};

// A [rows, heads, dim] view of a rank-3 tensor (precondition: shape has 3 entries).
TensorView ViewOf(const SafetensorsTensor& tensor);

// Overwrites element `element` (in storage order) of a floating-point tensor, rounding to its dtype.
void StoreElement(SafetensorsTensor& tensor, int64_t element, double value);

// Overwrites element (row, head, d) of a rank-3 tensor, rounding to its dtype.
void SetElement(SafetensorsTensor& tensor, int64_t row, int64_t head, int64_t d, double value);

// Every input rule (config, batch, q, k, v, index_q, index_k, in that order), before anything is allocated.
Status ValidateProblem(const Problem& problem);

}  // namespace msa

#endif  // MSA_IO_PROBLEM_H_
