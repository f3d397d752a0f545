#include "io/problem.h"

#include <cstring>
#include <limits>

namespace msa {

TensorView ViewOf(const SafetensorsTensor& tensor) {
  return PackedView(tensor.bytes.data(), tensor.dtype, tensor.shape[0], tensor.shape[1], tensor.shape[2]);
}

IndexInputs Problem::index_inputs() const { return {ViewOf(index_q), ViewOf(index_k), batch()}; }

AttentionInputs Problem::attention_inputs() const { return {ViewOf(q), ViewOf(k), ViewOf(v), batch()}; }

void Outputs::Allocate(const Problem& problem) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const double poison = std::numeric_limits<double>::quiet_NaN();
  topk_indices.assign(int64_t(c.num_kv_heads) * total_q * c.top_k, std::numeric_limits<int32_t>::min());
  block_scores.assign(int64_t(c.num_kv_heads) * total_q * max_blocks, poison);
  index_lse.assign(int64_t(c.num_kv_heads) * total_q, poison);
  out.assign(total_q * c.num_q_heads * c.value_dim, poison);
  lse.assign(total_q * c.num_q_heads, poison);
}

void StoreElement(SafetensorsTensor& tensor, int64_t element, double value) {
  uint8_t* at = tensor.bytes.data() + element * DTypeSize(tensor.dtype);
  switch (tensor.dtype) {
    case DType::kF64:
      std::memcpy(at, &value, 8);
      return;
    case DType::kF32: {
      const float f = float(value);
      std::memcpy(at, &f, 4);
      return;
    }
    case DType::kBF16: {
      const uint16_t b = DoubleToBF16(value);
      std::memcpy(at, &b, 2);
      return;
    }
    case DType::kF16: {
      const uint16_t b = DoubleToF16(value);
      std::memcpy(at, &b, 2);
      return;
    }
    default:
      return;  // an integer tensor is left unchanged
  }
}

void SetElement(SafetensorsTensor& tensor, int64_t row, int64_t head, int64_t d, double value) {
  StoreElement(tensor, (row * tensor.shape[1] + head) * tensor.shape[2] + d, value);
}

Status ValidateProblem(const Problem& problem) {
  MSA_RETURN_IF_ERROR(ValidateAttentionInputs(problem.config, problem.attention_inputs()));
  return ValidateIndexInputs(problem.config, problem.index_inputs());
}

}  // namespace msa
