// The entry points: shared validation, availability and support checks, then the backend's function.
#include <string>

#include "msa/msa.h"

namespace msa {
namespace {

Status CheckBackend(const Backend& backend, const Config& config) {
  if (!backend.is_available()) {
    return Unsupported("backend " + std::string(backend.name) + " is not available on this machine");
  }
  return backend.supports(config);
}

}  // namespace

Status Select(const Backend& backend, const Config& config, const IndexInputs& inputs,
              const SelectionOutputs& outputs, const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateIndexInputs(config, inputs));
  const bool has_rows = inputs.batch.total_q() > 0;  // an all-empty batch has nothing to write
  if (has_rows && outputs.topk_indices == nullptr) return InvalidArgument("topk_indices: output pointer is null");
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  return backend.select(config, inputs, outputs, progress);
}

Status Attend(const Backend& backend, const Config& config, const AttentionInputs& inputs,
              const SelectionView& selection, const AttentionOutputs& outputs, const ProgressFn& progress) {
  MSA_RETURN_IF_ERROR(ValidateAttentionInputs(config, inputs));
  MSA_RETURN_IF_ERROR(ValidateSelectionForAttend(config, inputs.batch, selection));
  const bool has_rows = inputs.batch.total_q() > 0;  // an all-empty batch has nothing to write
  if (has_rows && outputs.out == nullptr) return InvalidArgument("out: output pointer is null");
  if (has_rows && outputs.lse == nullptr) return InvalidArgument("lse: output pointer is null");
  MSA_RETURN_IF_ERROR(CheckBackend(backend, config));
  MSA_RETURN_IF_ERROR(backend.attend(config, inputs, selection, outputs, progress));
  return RequireFiniteAttention(config, inputs.batch, outputs);
}

Status Run(const Backend& backend, const Config& config, const IndexInputs& index_inputs,
           const AttentionInputs& attention_inputs, const SelectionOutputs& selection,
           const AttentionOutputs& outputs, const ProgressFn& progress) {
  const ProgressFn select_progress = [&](double f) { if (progress) progress(0.5 * f); };
  const ProgressFn attend_progress = [&](double f) { if (progress) progress(0.5 + 0.5 * f); };
  MSA_RETURN_IF_ERROR(Select(backend, config, index_inputs, selection, select_progress));
  return Attend(backend, config, attention_inputs, SelectionView{selection.topk_indices}, outputs,
                attend_progress);
}

}  // namespace msa
