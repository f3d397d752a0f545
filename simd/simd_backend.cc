// The "simd" backend table entry: routes each call by precision (exact: simd/exact.h, fp32: simd/fp32.h; training,
// both precisions: simd/training.h).
#include "simd/simd_backend.h"

#include <atomic>
#include <string>

#include "hwy/highway.h"
#include "simd/exact.h"
#include "simd/fp32.h"
#include "simd/training.h"

namespace msa::simd {
namespace {

std::atomic<int64_t> last_dispatched_target{0};

bool IsAvailable() { return true; }  // Highway always has a portable target to fall back on

Status Declined(const Config& config) {
  return Unsupported("backend simd computes precision exact (FP64 canonical) and fp32, not " +
                     std::string(PrecisionName(config.precision)));
}

Status Supports(const Config& config) {
  switch (config.precision) {
    case Precision::kExact:
    case Precision::kFp32:  // simd/fp32.h
      return Status::Ok();
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return Declined(config);
}

Status Select(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
              const ProgressFn& progress) {
  switch (config.precision) {
    case Precision::kExact:
      return ExactSelect(config, inputs, outputs, progress);
    case Precision::kFp32:
      return Fp32Select(config, inputs, outputs, progress);
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return Declined(config);
}

Status Attend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
              const AttentionOutputs& outputs, const ProgressFn& progress) {
  switch (config.precision) {
    case Precision::kExact:
      return ExactAttend(config, inputs, selection, outputs, progress);
    case Precision::kFp32:
      return Fp32Attend(config, inputs, selection, outputs, progress);
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return Declined(config);
}

Status Backward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress) {
  switch (config.precision) {
    case Precision::kExact:
      return ExactBackward(config, inputs, selection, gradients, outputs, progress);
    case Precision::kFp32:
      return Fp32Backward(config, inputs, selection, gradients, outputs, progress);
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return Declined(config);
}

Status IndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                 const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  switch (config.precision) {
    case Precision::kExact:
      return ExactIndexerKl(config, index_inputs, inputs, selection, outputs, progress);
    case Precision::kFp32:
      return Fp32IndexerKl(config, index_inputs, inputs, selection, outputs, progress);
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return Declined(config);
}

}  // namespace

Backend SimdBackend() {
  return Backend{.name = "simd",
                 .is_available = IsAvailable,
                 .supports = Supports,
                 .select = Select,
                 .attend = Attend,
                 .backward = Backward,
                 .indexer_kl = IndexerKl};
}

int64_t CompiledTargets() { return HWY_TARGETS; }

int64_t BestAvailableTarget() {
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return targets & -targets;  // lower bits are better targets
}

int64_t LastDispatchedTarget() { return last_dispatched_target.load(std::memory_order_relaxed); }

std::string TargetName(int64_t target) { return hwy::TargetName(target); }

void RecordDispatchedTarget(int64_t target) { last_dispatched_target.store(target, std::memory_order_relaxed); }

}  // namespace msa::simd
