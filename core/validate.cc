// Validation shared by every backend: each message names the field, the value and the rule.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "msa/msa.h"

namespace msa {
namespace {

std::string Str(int64_t value) { return std::to_string(value); }

Status ValidatePrefixSums(const char* name, std::span<const int32_t> cu) {
  if (cu.size() < 2) {
    return InvalidArgument(std::string(name) + " has " + Str(cu.size()) +
                           " entries: needs B+1 >= 2 (at least one sequence)");
  }
  if (cu[0] != 0) {
    return InvalidArgument(std::string(name) + "[0] = " + Str(cu[0]) + ": must be 0");
  }
  for (size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      return InvalidArgument(std::string(name) + "[" + Str(b) + "] = " + Str(cu[b]) + " < " + name +
                             "[" + Str(b - 1) + "] = " + Str(cu[b - 1]) + ": prefix sums must not decrease");
    }
  }
  return Status::Ok();
}

// Checks a view's shape against [rows, heads, dim] and that its element count does not overflow.
Status ValidateView(const char* name, const TensorView& view, int64_t rows, int64_t heads, int64_t dim,
                    const char* heads_rule, const char* dim_rule) {
  if (view.data == nullptr && view.rows * view.heads * view.dim != 0) {
    return InvalidArgument(std::string(name) + ": data pointer is null");
  }
  if (!IsFloating(view.dtype)) {
    return InvalidArgument(std::string(name) + ": dtype " + std::string(DTypeName(view.dtype)) +
                           " is not floating point (F64, F32, BF16 or F16)");
  }
  if (view.rows != rows) {
    return InvalidArgument(std::string(name) + " has " + Str(view.rows) + " rows but the batch needs " +
                           Str(rows) + " (the last entry of its cu_seqlens)");
  }
  if (view.heads != heads) {
    return InvalidArgument(std::string(name) + " has " + Str(view.heads) + " heads but needs " + Str(heads) +
                           ": " + heads_rule);
  }
  if (view.dim != dim) {
    return InvalidArgument(std::string(name) + " has head dim " + Str(view.dim) + " but needs " + Str(dim) +
                           ": " + dim_rule);
  }
  int64_t elements;
  if (__builtin_mul_overflow(view.rows, view.heads, &elements) ||
      __builtin_mul_overflow(elements, view.dim, &elements)) {
    return InvalidArgument(std::string(name) + ": shape [" + Str(view.rows) + ", " + Str(view.heads) + ", " +
                           Str(view.dim) + "] overflows a 64-bit element count");
  }
  return Status::Ok();
}

// NaN or Inf anywhere in a view is refused, naming the first bad element.
Status ValidateFinite(const char* name, const TensorView& view) {
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      for (int64_t d = 0; d < view.dim; ++d) {
        const double value = view.At(row, head, d);
        if (!std::isfinite(value)) {
          return InvalidArgument(std::string(name) + "[" + Str(row) + ", " + Str(head) + ", " + Str(d) +
                                 "] = " + (std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf") +
                                 ": inputs must be finite");
        }
      }
    }
  }
  return Status::Ok();
}

// Output sizes Hidx * total_q * max_blocks and friends must fit in int64.
Status ValidateOutputSizes(const Config& config, const Batch& batch) {
  int64_t size;
  if (__builtin_mul_overflow(int64_t(config.num_kv_heads), batch.total_q(), &size) ||
      __builtin_mul_overflow(size, std::max<int64_t>(MaxBlocks(config, batch), config.top_k), &size) ||
      __builtin_mul_overflow(size, int64_t(sizeof(double)), &size)) {
    return InvalidArgument("selection outputs [Hidx=" + Str(config.num_kv_heads) + ", total_q=" +
                           Str(batch.total_q()) + ", max_blocks=" + Str(MaxBlocks(config, batch)) +
                           "] overflow a 64-bit byte count");
  }
  return Status::Ok();
}

}  // namespace

int64_t MaxBlocks(const Config& config, const Batch& batch) {
  int64_t max_k_len = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    max_k_len = std::max<int64_t>(max_k_len, batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b]);
  }
  return (max_k_len + config.block_size - 1) / config.block_size;
}

Status ValidateBatch(const Batch& batch) {
  MSA_RETURN_IF_ERROR(ValidatePrefixSums("cu_seqlens_q", batch.cu_seqlens_q));
  MSA_RETURN_IF_ERROR(ValidatePrefixSums("cu_seqlens_k", batch.cu_seqlens_k));
  if (batch.cu_seqlens_q.size() != batch.cu_seqlens_k.size()) {
    return InvalidArgument("cu_seqlens_q has " + Str(batch.cu_seqlens_q.size()) + " entries but cu_seqlens_k has " +
                           Str(batch.cu_seqlens_k.size()) + ": both must have B+1");
  }
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_len = batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b];
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    if (q_len > k_len) {
      return InvalidArgument("sequence " + Str(b) + ": q_len = " + Str(q_len) + " > k_len = " + Str(k_len) +
                             ": queries are the causal suffix of the keys, so q_len <= k_len");
    }
  }
  return Status::Ok();
}

Status ValidateIndexInputs(const Config& config, const IndexInputs& inputs) {
  MSA_RETURN_IF_ERROR(ValidateConfig(config));
  MSA_RETURN_IF_ERROR(ValidateBatch(inputs.batch));
  const int64_t total_q = inputs.batch.total_q(), total_k = inputs.batch.total_k();
  MSA_RETURN_IF_ERROR(ValidateView("index_q", inputs.index_q, total_q, config.num_kv_heads,
                                   config.index_head_dim, "Hidx must equal Hkv (one index head per GQA group)",
                                   "index_q and index_k share Di"));
  MSA_RETURN_IF_ERROR(ValidateView("index_k", inputs.index_k, total_k, 1, config.index_head_dim,
                                   "index_k has ONE head shared by all groups", "index_q and index_k share Di"));
  MSA_RETURN_IF_ERROR(ValidateOutputSizes(config, inputs.batch));
  MSA_RETURN_IF_ERROR(ValidateFinite("index_q", inputs.index_q));
  MSA_RETURN_IF_ERROR(ValidateFinite("index_k", inputs.index_k));
  return Status::Ok();
}

Status ValidateAttentionInputs(const Config& config, const AttentionInputs& inputs) {
  MSA_RETURN_IF_ERROR(ValidateConfig(config));
  MSA_RETURN_IF_ERROR(ValidateBatch(inputs.batch));
  const int64_t total_q = inputs.batch.total_q(), total_k = inputs.batch.total_k();
  MSA_RETURN_IF_ERROR(ValidateView("q", inputs.q, total_q, config.num_q_heads, config.head_dim,
                                   "q has Hq heads", "q and k share D"));
  MSA_RETURN_IF_ERROR(ValidateView("k", inputs.k, total_k, config.num_kv_heads, config.head_dim,
                                   "k has Hkv heads", "q and k share D"));
  MSA_RETURN_IF_ERROR(ValidateView("v", inputs.v, total_k, config.num_kv_heads, config.value_dim,
                                   "v has Hkv heads, as k", "v has Dv"));
  MSA_RETURN_IF_ERROR(ValidateFinite("q", inputs.q));
  MSA_RETURN_IF_ERROR(ValidateFinite("k", inputs.k));
  MSA_RETURN_IF_ERROR(ValidateFinite("v", inputs.v));
  return Status::Ok();
}

Status ValidateSelectionForAttend(const Config& config, const Batch& batch, const SelectionView& selection) {
  if (selection.topk_indices == nullptr) return InvalidArgument("topk_indices: data pointer is null");
  const int64_t total_q = batch.total_q();
  std::vector<char> seen;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = q_begin + i, position = k_len - q_len + i;
      const int64_t visible = position / config.block_size + 1;
      for (int64_t r = 0; r < config.num_kv_heads; ++r) {
        const int32_t* row = selection.topk_indices + (r * total_q + t) * config.top_k;
        const std::string where = "topk_indices[" + Str(r) + ", " + Str(t) + ", ";
        seen.assign(visible, 0);
        int64_t valid = 0;
        while (valid < config.top_k && row[valid] != -1) {
          const int32_t id = row[valid];
          if (id < 0 || id >= visible) {
            return InvalidArgument(where + Str(valid) + "] = " + Str(id) + ": block ids must be in [0, " +
                                   Str(visible) + ") for a query at position " + Str(position));
          }
          if (seen[id]) {
            return InvalidArgument(where + Str(valid) + "] = " + Str(id) + ": block selected twice");
          }
          seen[id] = 1;
          ++valid;
        }
        if (valid == 0) return InvalidArgument(where + "0] = -1: a selection row must hold at least one block");
        for (int64_t slot = valid; slot < config.top_k; ++slot) {
          if (row[slot] != -1) {
            return InvalidArgument(where + Str(slot) + "] = " + Str(row[slot]) +
                                   ": after the first -1 every slot must be -1");
          }
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace msa
