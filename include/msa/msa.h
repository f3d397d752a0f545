// The one public interface: inputs, outputs, the backend table and the Select / Attend / Run entry points.
//
// Shapes (SPEC section 1), with G = Hq / Hkv and Hidx == Hkv:
//   q        [total_q, Hq, D]        k [total_k, Hkv, D]      v [total_k, Hkv, Dv]
//   index_q  [total_q, Hidx, Di]     index_k [total_k, 1, Di]
//   topk_indices [Hidx, total_q, top_k]   block_scores [Hidx, total_q, max_blocks]   index_lse [Hidx, total_q]
//   out      [total_q, Hq, Dv]       lse [total_q, Hq]
// Query i of a sequence with lengths (q_len, k_len) sits at key position k_len - q_len + i.
#ifndef MSA_MSA_H_
#define MSA_MSA_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "msa/config.h"
#include "msa/status.h"
#include "msa/tensor.h"

namespace msa {

struct IndexInputs {
  TensorView index_q;  // [total_q, Hidx, Di]
  TensorView index_k;  // [total_k, 1, Di]
  Batch batch;
};

struct AttentionInputs {
  TensorView q;  // [total_q, Hq, D]
  TensorView k;  // [total_k, Hkv, D]
  TensorView v;  // [total_k, Hkv, Dv]
  Batch batch;
};

// Where Select writes. block_scores and index_lse are optional (nullptr: not computed).
struct SelectionOutputs {
  int32_t* topk_indices = nullptr;  // [Hidx, total_q, top_k]; -1 pads unused slots
  double* block_scores = nullptr;   // [Hidx, total_q, max_blocks]; -inf where invisible
  double* index_lse = nullptr;      // [Hidx, total_q]
};

// A selection handed to Attend: the valid prefix of each row is a SET of block ids, -1 after it.
struct SelectionView {
  const int32_t* topk_indices = nullptr;  // [Hidx, total_q, top_k]
};

struct AttentionOutputs {
  double* out = nullptr;  // [total_q, Hq, Dv]
  double* lse = nullptr;  // [total_q, Hq], natural log
};

// Training (SPEC section 8). The upstream gradients of the main branch's outputs.
struct GradientInputs {
  TensorView dout;  // [total_q, Hq, Dv]
  TensorView dlse;  // [total_q, Hq, 1], this project's extension; data == nullptr: none (no lse gradient)
};

// Where Backward writes: dq required when total_q > 0, dk and dv when total_k > 0.
struct AttentionGradients {
  double* dq = nullptr;  // [total_q, Hq, D]
  double* dk = nullptr;  // [total_k, Hkv, D]
  double* dv = nullptr;  // [total_k, Hkv, Dv]
};

// Where IndexerKl writes: kl_loss always, dqi when total_q > 0, dki when total_k > 0; the two LSEs are optional
// (nullptr: not written).
struct IndexerKlOutputs {
  double* kl_loss = nullptr;      // a scalar
  double* dqi = nullptr;          // [total_q, Hidx, Di]
  double* dki = nullptr;          // [total_k, 1, Di]
  double* teacher_lse = nullptr;  // [total_q, Hq]: the main branch's lse
  double* indexer_lse = nullptr;  // [Hidx, total_q]: logsumexp of the index token scores over the key set
};

// Reports progress of long work as a fraction in [0, 1]; may be called from any thread, often.
using ProgressFn = std::function<void(double fraction)>;

// A backend: a table of free functions. `supports` declines (kUnsupported) instead of failing.
// select/attend/dense are called only after the shared validation below has passed.
struct Backend {
  std::string_view name;
  bool (*is_available)();
  Status (*supports)(const Config& config);
  Status (*select)(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                   const ProgressFn& progress);
  Status (*attend)(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                   const AttentionOutputs& outputs, const ProgressFn& progress);
  // Whether select/attend read views in CUDA device memory (TensorView::memory); the others are handed host views only
  // (Select and Attend refuse device views for them).
  bool reads_device_memory = false;
  // The kernels the last select/attend call of this thread ran ("index=wgmma,batch=per-sequence,topk=warp" after a
  // select, "attend=kv-outer-wgmma,lists=direct" after an attend), empty when the backend has no choice (nullptr)
  // or the call ran nothing.
  std::string (*last_plan)() = nullptr;
  // Training (SPEC section 8), nullptr where a backend has none (Backward and IndexerKl then decline it). Called only
  // after the shared validation below has passed.
  Status (*backward)(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                     const GradientInputs& gradients, const AttentionGradients& outputs,
                     const ProgressFn& progress) = nullptr;
  Status (*indexer_kl)(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                       const SelectionView& selection, const IndexerKlOutputs& outputs,
                       const ProgressFn& progress) = nullptr;
};

// Every backend compiled into this binary, slowest first (reference first). The list lives in core/registry.cc.
std::span<const Backend> AllBackends();
// The named backend, or nullptr when it is not compiled in.
const Backend* FindBackend(std::string_view name);
// Whether `backend` can run `config` here: available, supporting it, and with `training` (SPEC section 8) having
// a backward and an indexer KL. The Status says why not.
Status BackendRuns(const Backend& backend, const Config& config, bool training = false);
// The fastest backend that runs `config` (BackendRuns), or nullptr.
const Backend* FastestBackend(const Config& config, bool training = false);

// Sizes derived from the batch: max_blocks = ceil(max k_len / block_size).
int64_t MaxBlocks(const Config& config, const Batch& batch);

// Validation shared by every backend. Messages name the field, the value and the rule. The values of views in device
// memory are not read here: a backend that reads device memory checks that they are finite (NonFiniteInput).
Status ValidateBatch(const Batch& batch);
Status ValidateIndexInputs(const Config& config, const IndexInputs& inputs);
Status ValidateAttentionInputs(const Config& config, const AttentionInputs& inputs);
// Each row: ids in [0, visible blocks), no duplicates, at least one id, -1 only after the valid prefix.
Status ValidateSelectionForAttend(const Config& config, const Batch& batch, const SelectionView& selection);
// The refusal of a non-finite input element, one message wherever it is found: "q[2, 1, 3] = nan: inputs must be
// finite".
Status NonFiniteInput(const char* name, int64_t row, int64_t head, int64_t d, double value);
// After attention on finite inputs: every out [total_q, Hq, Dv] and lse [total_q, Hq] value is finite, else
// InvalidArgument naming the first (query, head): a score or a weighted sum overflowed the backend's precision.
// (A score that overflows to -inf is harmless: its weight is 0, as the exact value's would be.)
Status RequireFiniteAttention(const Config& config, const Batch& batch, const AttentionOutputs& outputs);

// dout [total_q, Hq, Dv] and, when given, dlse [total_q, Hq, 1]: shapes against the batch and config, finite values.
Status ValidateGradientInputs(const Config& config, const Batch& batch, const GradientInputs& gradients);

// Entry points: validate, check that the backend is available and supports the config, then compute. With
// config.index_format == kE4M3, Select hands the backend index_q and index_k rounded to E4M3 values (packed F64
// copies; a value that is not finite or beyond +-448 is refused, named by tensor and position).
Status Select(const Backend& backend, const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
              const ProgressFn& progress = {});
Status Attend(const Backend& backend, const Config& config, const AttentionInputs& inputs,
              const SelectionView& selection, const AttentionOutputs& outputs, const ProgressFn& progress = {});
// index_format e4m3: `view` rounded to E4M3 values into a packed F64 copy (*storage, which *rounded views), as Select
// hands every backend; a value that is not finite or beyond +-448 is refused, named by `name` and position.
Status RoundViewToE4M3(const TensorView& view, const char* name, std::vector<double>* storage, TensorView* rounded);
// The main branch's backward on a given selection (SPEC section 8): dq, dk, dv of L = sum(dout * out) (+ sum(dlse *
// lse)), the selection held fixed. Unsupported where the backend has no backward.
Status Backward(const Backend& backend, const Config& config, const AttentionInputs& inputs,
                const SelectionView& selection, const GradientInputs& gradients, const AttentionGradients& outputs,
                const ProgressFn& progress = {});
// The indexer's KL distillation on a given selection (SPEC section 8): the loss, its gradients with respect to
// index_q and index_k (the teacher, the main branch's group-mean softmax, held constant), and the two LSEs. With
// index_format e4m3 the index inputs are rounded as Select rounds them. Unsupported where the backend has none.
Status IndexerKl(const Backend& backend, const Config& config, const IndexInputs& index_inputs,
                 const AttentionInputs& inputs, const SelectionView& selection, const IndexerKlOutputs& outputs,
                 const ProgressFn& progress = {});
// Select, then Attend on that selection.
Status Run(const Backend& backend, const Config& config, const IndexInputs& index_inputs,
           const AttentionInputs& attention_inputs, const SelectionOutputs& selection, const AttentionOutputs& outputs,
           const ProgressFn& progress = {});

}  // namespace msa

#endif  // MSA_MSA_H_
