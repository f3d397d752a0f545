// The entry points: shared validation, availability and support checks, then the backend's function.
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "msa/msa.h"

namespace msa {
namespace {

Status CheckBackend(const Backend& backend, const Config& config) {
  if (!backend.is_available()) {
    return Unsupported("backend " + std::string(backend.name) + " is not available on this machine");
  }
  return backend.supports(config);
}

// Views in device memory go only to a backend that reads them.
Status CheckMemory(const Backend& backend, std::initializer_list<std::pair<const char*, const TensorView*>> views) {
  for (const auto& [name, view] : views) {
    if (view->memory != Memory::kHost && !backend.reads_device_memory) {
      return InvalidArgument(std::string(name) + " is in CUDA device memory, but backend " + std::string(backend.name) +
                             " reads host memory only: copy it to the host or use a backend that reads device memory");
    }
  }
  return Status::Ok();
}

}  // namespace

Status RoundViewToE4M3(const TensorView& view, const char* name, std::vector<double>* storage, TensorView* rounded) {
  if (view.memory != Memory::kHost) {
    return Unsupported(std::string(name) + " is in CUDA device memory: index_format e4m3 rounds host inputs only");
  }
  storage->resize(size_t(view.rows * view.heads * view.dim));
  double* out = storage->data();
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      for (int64_t d = 0; d < view.dim; ++d) {
        const double value = view.At(row, head, d);
        if (!(std::fabs(value) <= kE4M3Max)) {
          char text[32];
          const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
          return InvalidArgument(std::string(name) + "[" + std::to_string(row) + ", " + std::to_string(head) + ", " +
                                 std::to_string(d) + "] = " + std::string(text, end) +
                                 ": index_format e4m3 takes finite values in [-448, 448]");
        }
        *out++ = RoundToE4M3(value);
      }
    }
  }
  *rounded = PackedView(storage->data(), DType::kF64, view.rows, view.heads, view.dim);
  return Status::Ok();
}

Status Select(const Backend& backend, const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
              const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateIndexInputs(config, inputs));
  const bool has_rows = inputs.batch.total_q() > 0;  // an all-empty batch has nothing to write
  if (has_rows && outputs.topk_indices == nullptr) return InvalidArgument("topk_indices: output pointer is null");
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  MSA_RETURN_IF_ERROR(CheckMemory(backend, {{"index_q", &inputs.index_q}, {"index_k", &inputs.index_k}}));
  if (config.index_format == IndexFormat::kNative) return backend.select(config, inputs, outputs, progress);
  std::vector<double> index_q, index_k;  // [total_q, Hidx, Di], [total_k, 1, Di] as E4M3 values
  IndexInputs rounded = inputs;
  MSA_RETURN_IF_ERROR(RoundViewToE4M3(inputs.index_q, "index_q", &index_q, &rounded.index_q));
  MSA_RETURN_IF_ERROR(RoundViewToE4M3(inputs.index_k, "index_k", &index_k, &rounded.index_k));
  return backend.select(config, rounded, outputs, progress);
}

Status Attend(const Backend& backend, const Config& config, const AttentionInputs& inputs,
              const SelectionView& selection, const AttentionOutputs& outputs, const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateAttentionInputs(config, inputs));
  MSA_RETURN_IF_ERROR(ValidateSelectionForAttend(config, inputs.batch, selection));
  const bool has_rows = inputs.batch.total_q() > 0;  // an all-empty batch has nothing to write
  if (has_rows && outputs.out == nullptr) return InvalidArgument("out: output pointer is null");
  if (has_rows && outputs.lse == nullptr) return InvalidArgument("lse: output pointer is null");
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  MSA_RETURN_IF_ERROR(CheckMemory(backend, {{"q", &inputs.q}, {"k", &inputs.k}, {"v", &inputs.v}}));
  MSA_RETURN_IF_ERROR(backend.attend(config, inputs, selection, outputs, progress));
  return RequireFiniteAttention(config, inputs.batch, outputs);
}

Status Backward(const Backend& backend, const Config& config, const AttentionInputs& inputs,
                const SelectionView& selection, const GradientInputs& gradients, const AttentionGradients& outputs,
                const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateAttentionInputs(config, inputs));
  MSA_RETURN_IF_ERROR(ValidateSelectionForAttend(config, inputs.batch, selection));
  MSA_RETURN_IF_ERROR(ValidateGradientInputs(config, inputs.batch, gradients));
  const bool has_queries = inputs.batch.total_q() > 0, has_keys = inputs.batch.total_k() > 0;
  for (const auto& [name, pointer, needed] :
       {std::tuple{"dq", outputs.dq, has_queries}, {"dk", outputs.dk, has_keys}, {"dv", outputs.dv, has_keys}}) {
    if (needed && pointer == nullptr) return InvalidArgument(std::string(name) + ": output pointer is null");
  }
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  if (backend.backward == nullptr) return Unsupported("backend " + std::string(backend.name) + " has no backward");
  MSA_RETURN_IF_ERROR(CheckMemory(
      backend,
      {{"q", &inputs.q}, {"k", &inputs.k}, {"v", &inputs.v}, {"dout", &gradients.dout}, {"dlse", &gradients.dlse}}));
  return backend.backward(config, inputs, selection, gradients, outputs, progress);
}

Status IndexerKl(const Backend& backend, const Config& config, const IndexInputs& index_inputs,
                 const AttentionInputs& inputs, const SelectionView& selection, const IndexerKlOutputs& outputs,
                 const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateIndexInputs(config, index_inputs));
  MSA_RETURN_IF_ERROR(ValidateAttentionInputs(config, inputs));
  MSA_RETURN_IF_ERROR(ValidateSelectionForAttend(config, inputs.batch, selection));
  const bool has_queries = inputs.batch.total_q() > 0, has_keys = inputs.batch.total_k() > 0;
  for (const auto& [name, pointer, needed] : {std::tuple{"kl_loss", outputs.kl_loss, true},
                                              {"dqi", outputs.dqi, has_queries},
                                              {"dki", outputs.dki, has_keys}}) {
    if (needed && pointer == nullptr) return InvalidArgument(std::string(name) + ": output pointer is null");
  }
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  if (backend.indexer_kl == nullptr) {
    return Unsupported("backend " + std::string(backend.name) + " has no indexer KL");
  }
  MSA_RETURN_IF_ERROR(CheckMemory(backend, {{"index_q", &index_inputs.index_q},
                                            {"index_k", &index_inputs.index_k},
                                            {"q", &inputs.q},
                                            {"k", &inputs.k},
                                            {"v", &inputs.v}}));
  if (config.index_format == IndexFormat::kNative) {
    return backend.indexer_kl(config, index_inputs, inputs, selection, outputs, progress);
  }
  std::vector<double> index_q, index_k;  // [total_q, Hidx, Di], [total_k, 1, Di] as E4M3 values
  IndexInputs rounded = index_inputs;
  MSA_RETURN_IF_ERROR(RoundViewToE4M3(index_inputs.index_q, "index_q", &index_q, &rounded.index_q));
  MSA_RETURN_IF_ERROR(RoundViewToE4M3(index_inputs.index_k, "index_k", &index_k, &rounded.index_k));
  return backend.indexer_kl(config, rounded, inputs, selection, outputs, progress);
}

Status Run(const Backend& backend, const Config& config, const IndexInputs& index_inputs,
           const AttentionInputs& attention_inputs, const SelectionOutputs& selection, const AttentionOutputs& outputs,
           const ProgressFn& progress) {
  const ProgressFn select_progress = [&](double f) {
    if (progress) progress(0.5 * f);
  };
  const ProgressFn attend_progress = [&](double f) {
    if (progress) progress(0.5 + 0.5 * f);
  };
  MSA_RETURN_IF_ERROR(Select(backend, config, index_inputs, selection, select_progress));
  return Attend(backend, config, attention_inputs, SelectionView{selection.topk_indices}, outputs, attend_progress);
}

}  // namespace msa
