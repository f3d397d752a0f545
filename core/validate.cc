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
    return InvalidArgument(std::string(name) + " has " + Str(cu.size()) + (cu.size() == 1 ? " entry" : " entries") +
                           ": must have B+1 >= 2 entries (at least one sequence)");
  }
  if (cu[0] != 0) {
    return InvalidArgument(std::string(name) + "[0] = " + Str(cu[0]) + ": must be 0");
  }
  for (size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      return InvalidArgument(std::string(name) + "[" + Str(b) + "] = " + Str(cu[b]) + ": must be >= " + name + "[" +
                             Str(b - 1) + "] = " + Str(cu[b - 1]) + " (prefix sums never decrease)");
    }
  }
  return Status::Ok();
}

// Checks a view's shape against [rows, heads, dim] and that its element count does not overflow. `rows`
// is the last entry of the prefix sums `cu` (called `cu_name`); the rules are spelled for messages.
Status ValidateView(const char* name, const TensorView& view, const char* cu_name, std::span<const int32_t> cu,
                    int64_t heads, const std::string& heads_rule, int64_t dim, const std::string& dim_rule) {
  if (!IsFloating(view.dtype)) {
    return InvalidArgument(std::string(name) + " dtype " + std::string(DTypeName(view.dtype)) +
                           ": must be floating point (F64, F32, BF16 or F16)");
  }
  const int64_t rows = cu.back();
  if (view.rows != rows) {
    return InvalidArgument(std::string(name) + " has " + Str(view.rows) + " rows but " + cu_name + "[" +
                           Str(cu.size() - 1) + "] = " + Str(rows) + ": the rows of " + name +
                           " must equal the last entry of " + cu_name);
  }
  if (view.heads != heads) {
    return InvalidArgument(std::string(name) + " has " + Str(view.heads) + " heads: " + heads_rule);
  }
  if (view.dim != dim) {
    return InvalidArgument(std::string(name) + " has head dim " + Str(view.dim) + ": " + dim_rule);
  }
  int64_t elements;
  if (view.rows < 0 || view.heads < 0 || view.dim < 0 || __builtin_mul_overflow(view.rows, view.heads, &elements) ||
      __builtin_mul_overflow(elements, view.dim, &elements)) {
    return InvalidArgument(std::string(name) + " shape [" + Str(view.rows) + ", " + Str(view.heads) + ", " +
                           Str(view.dim) + "]: the element count must fit in int64");
  }
  if (view.data == nullptr && elements != 0) return InvalidArgument(std::string(name) + ": data pointer is null");
  return Status::Ok();
}

// NaN or Inf anywhere in a host view is refused, naming the first bad element. (A backend that reads device memory
// checks its device views.)
Status ValidateFinite(const char* name, const TensorView& view) {
  if (view.memory != Memory::kHost) return Status::Ok();
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      for (int64_t d = 0; d < view.dim; ++d) {
        const double value = view.At(row, head, d);
        if (!std::isfinite(value)) return NonFiniteInput(name, row, head, d, value);
      }
    }
  }
  return Status::Ok();
}

// Output sizes Hidx * total_q * max(max_blocks, top_k) (selection) and total_q * Hq * Dv (attention), in
// bytes, must fit in int64.
Status ValidateSelectionOutputSizes(const Config& config, const Batch& batch) {
  int64_t size;
  const int64_t max_blocks = MaxBlocks(config, batch);
  if (__builtin_mul_overflow(int64_t(config.num_kv_heads), batch.total_q(), &size) ||
      __builtin_mul_overflow(size, std::max<int64_t>(max_blocks, config.top_k), &size) ||
      __builtin_mul_overflow(size, int64_t(sizeof(double)), &size)) {
    return InvalidArgument("selection outputs [Hidx, total_q, max(max_blocks, top_k)] = [" + Str(config.num_kv_heads) +
                           ", " + Str(batch.total_q()) + ", " + Str(std::max<int64_t>(max_blocks, config.top_k)) +
                           "]: the byte count must fit in int64");
  }
  return Status::Ok();
}

Status ValidateAttentionOutputSizes(const Config& config, const Batch& batch) {
  int64_t size;
  if (__builtin_mul_overflow(batch.total_q(), int64_t(config.num_q_heads), &size) ||
      __builtin_mul_overflow(size, int64_t(config.value_dim), &size) ||
      __builtin_mul_overflow(size, int64_t(sizeof(double)), &size)) {
    return InvalidArgument("out [total_q, Hq, Dv] = [" + Str(batch.total_q()) + ", " + Str(config.num_q_heads) + ", " +
                           Str(config.value_dim) + "]: the byte count must fit in int64");
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
                           Str(batch.cu_seqlens_k.size()) + ": both must have B+1 entries (one batch)");
  }
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_len = batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b];
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    if (q_len > k_len) {
      return InvalidArgument("sequence " + Str(b) + " has q_len " + Str(q_len) + " > k_len " + Str(k_len) +
                             ": must have q_len <= k_len (the queries are the causal suffix of the keys)");
    }
  }
  return Status::Ok();
}

Status ValidateIndexInputs(const Config& config, const IndexInputs& inputs) {
  MSA_RETURN_IF_ERROR(ValidateConfig(config));
  MSA_RETURN_IF_ERROR(ValidateBatch(inputs.batch));
  const Batch& batch = inputs.batch;
  const int64_t hkv = config.num_kv_heads, di = config.index_head_dim;
  MSA_RETURN_IF_ERROR(
      ValidateView("index_q", inputs.index_q, "cu_seqlens_q", batch.cu_seqlens_q, hkv,
                   "must equal Hkv = " + Str(hkv) + " (Hidx == Hkv: one index-query head per GQA group)", di,
                   "must equal Di = " + Str(di)));
  MSA_RETURN_IF_ERROR(ValidateView("index_k", inputs.index_k, "cu_seqlens_k", batch.cu_seqlens_k, 1,
                                   "must be 1 (one index-key head shared by all groups)", di,
                                   "must equal Di = " + Str(di) + " (index_q and index_k share Di)"));
  MSA_RETURN_IF_ERROR(ValidateSelectionOutputSizes(config, batch));
  MSA_RETURN_IF_ERROR(ValidateFinite("index_q", inputs.index_q));
  MSA_RETURN_IF_ERROR(ValidateFinite("index_k", inputs.index_k));
  return Status::Ok();
}

Status ValidateAttentionInputs(const Config& config, const AttentionInputs& inputs) {
  MSA_RETURN_IF_ERROR(ValidateConfig(config));
  MSA_RETURN_IF_ERROR(ValidateBatch(inputs.batch));
  const Batch& batch = inputs.batch;
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, d = config.head_dim, dv = config.value_dim;
  MSA_RETURN_IF_ERROR(ValidateView("q", inputs.q, "cu_seqlens_q", batch.cu_seqlens_q, hq, "must equal Hq = " + Str(hq),
                                   d, "must equal D = " + Str(d)));
  MSA_RETURN_IF_ERROR(ValidateView("k", inputs.k, "cu_seqlens_k", batch.cu_seqlens_k, hkv,
                                   "must equal Hkv = " + Str(hkv), d,
                                   "must equal D = " + Str(d) + " (q and k share the head dim D)"));
  MSA_RETURN_IF_ERROR(ValidateView("v", inputs.v, "cu_seqlens_k", batch.cu_seqlens_k, hkv,
                                   "must equal Hkv = " + Str(hkv) + " (v has the heads of k)", dv,
                                   "must equal Dv = " + Str(dv)));
  MSA_RETURN_IF_ERROR(ValidateAttentionOutputSizes(config, batch));
  MSA_RETURN_IF_ERROR(ValidateFinite("q", inputs.q));
  MSA_RETURN_IF_ERROR(ValidateFinite("k", inputs.k));
  MSA_RETURN_IF_ERROR(ValidateFinite("v", inputs.v));
  return Status::Ok();
}

Status ValidateGradientInputs(const Config& config, const Batch& batch, const GradientInputs& gradients) {
  const int64_t hq = config.num_q_heads, dv = config.value_dim;
  MSA_RETURN_IF_ERROR(ValidateView("dout", gradients.dout, "cu_seqlens_q", batch.cu_seqlens_q, hq,
                                   "must equal Hq = " + Str(hq) + " (dout has the shape of out)", dv,
                                   "must equal Dv = " + Str(dv) + " (dout has the shape of out)"));
  MSA_RETURN_IF_ERROR(ValidateFinite("dout", gradients.dout));
  if (gradients.dlse.data == nullptr) return Status::Ok();
  MSA_RETURN_IF_ERROR(ValidateView("dlse", gradients.dlse, "cu_seqlens_q", batch.cu_seqlens_q, hq,
                                   "must equal Hq = " + Str(hq) + " (dlse has the shape of lse)", 1,
                                   "must be 1 (dlse [total_q, Hq] has one value per row)"));
  return ValidateFinite("dlse", gradients.dlse);
}

Status ValidateSelectionForAttend(const Config& config, const Batch& batch, const SelectionView& selection) {
  const int64_t total_q = batch.total_q();
  if (total_q > 0 && selection.topk_indices == nullptr) return InvalidArgument("topk_indices: data pointer is null");
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

Status NonFiniteInput(const char* name, int64_t row, int64_t head, int64_t d, double value) {
  return InvalidArgument(std::string(name) + "[" + Str(row) + ", " + Str(head) + ", " + Str(d) + "] = " +
                         (std::isnan(value) ? "nan"
                          : value > 0       ? "inf"
                                            : "-inf") +
                         ": inputs must be finite");
}

Status RequireFiniteAttention(const Config& config, const Batch& batch, const AttentionOutputs& outputs) {
  const int64_t total_q = batch.total_q(), hq = config.num_q_heads, dv = config.value_dim;
  for (int64_t row = 0; row < total_q * hq; ++row) {  // row = t * Hq + h
    bool finite = std::isfinite(outputs.lse[row]);
    for (int64_t c = 0; c < dv; ++c) finite = finite && std::isfinite(outputs.out[row * dv + c]);
    if (!finite) {
      return InvalidArgument("attention of query " + Str(row / hq) + ", head " + Str(row % hq) +
                             " is not finite: q, k or v are too large for the precision " +
                             std::string(PrecisionName(config.precision)));
    }
  }
  return Status::Ok();
}

}  // namespace msa
