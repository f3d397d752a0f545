#include "io/problem.h"

#include <cstring>
#include <limits>

namespace msa {

TensorView ViewOf(const SafetensorsTensor& tensor) {
  return PackedView(tensor.bytes.data(), tensor.dtype, tensor.shape[0], tensor.shape[1], tensor.shape[2]);
}

IndexInputs Problem::index_inputs() const { return {ViewOf(index_q), ViewOf(index_k), batch()}; }

AttentionInputs Problem::attention_inputs() const { return {ViewOf(q), ViewOf(k), ViewOf(v), batch()}; }

GradientInputs Problem::gradient_inputs() const {
  GradientInputs gradients{ViewOf(*dout), {}};
  if (dlse) gradients.dlse = PackedView(dlse->bytes.data(), dlse->dtype, dlse->shape[0], dlse->shape[1], 1);
  return gradients;
}

void Outputs::Allocate(const Problem& problem) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const double poison = std::numeric_limits<double>::quiet_NaN();
  topk_indices.assign(int64_t(c.num_kv_heads) * total_q * c.top_k, std::numeric_limits<int32_t>::min());
  block_scores.assign(int64_t(c.num_kv_heads) * total_q * max_blocks, poison);
  index_lse.assign(int64_t(c.num_kv_heads) * total_q, poison);
  out.assign(total_q * c.num_q_heads * c.value_dim, poison);
  lse.assign(total_q * c.num_q_heads, poison);
  const int64_t total_k = problem.batch().total_k(), training = problem.dout ? 1 : 0;
  dq.assign(training * total_q * c.num_q_heads * c.head_dim, poison);
  dk.assign(training * total_k * c.num_kv_heads * c.head_dim, poison);
  dv.assign(training * total_k * c.num_kv_heads * c.value_dim, poison);
  dqi.assign(training * total_q * c.num_kv_heads * c.index_head_dim, poison);
  dki.assign(training * total_k * c.index_head_dim, poison);
  kl_loss.assign(training, poison);
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
  MSA_RETURN_IF_ERROR(ValidateIndexInputs(problem.config, problem.index_inputs()));
  if (problem.dlse && !problem.dout) return InvalidArgument("dlse is given without dout: training needs dout");
  if (!problem.dout) return Status::Ok();
  if (problem.dout->shape.size() != 3 || (problem.dlse && problem.dlse->shape.size() != 2)) {
    return InvalidArgument("dout must be rank 3 [total_q, Hq, Dv] and dlse rank 2 [total_q, Hq]");
  }
  return ValidateGradientInputs(problem.config, problem.batch(), problem.gradient_inputs());
}

}  // namespace msa
