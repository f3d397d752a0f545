// The gpu backend's host side, a thin adaptor: support checks, packing the strided host views and uploading them,
// the kernel plan (gpu/common/kernel_plan.h PlanKernels on the requested plan and this device), the device pipeline
// (gpu/common/pipeline.h), downloads; the training functions hand their uploaded views to gpu/training/training.h.
// The kernels, by stage, are under gpu/index, gpu/topk, gpu/attend, gpu/exact, gpu/training and gpu/common
// (docs/gpu-kernels.md).
#include "gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/common/device_buffer.h"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/common/pipeline.h"
#include "gpu/training/training.h"
#include "reference/reference.h"

namespace msa::gpu {
namespace {

thread_local double last_kernel_seconds = 0.0;
thread_local int64_t last_input_upload_bytes = 0;  // input tensor bytes copied from the host by the last call
thread_local std::string last_plan;                // the stages of the last select or attend call of this thread

constexpr int kExactMaxDim = 512;
constexpr int kMaxTopK = 4096;

struct DeviceInfo {
  bool usable = false;
  std::string description;
};

const DeviceInfo& Info() {
  static const DeviceInfo info = [] {
    DeviceInfo result;
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description = std::string("no usable CUDA device: ") + cudaGetErrorString(error);
      return result;
    }
    if (count == 0) {
      result.description = "no CUDA device";
      return result;
    }
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceProp prop{};
    error = cudaGetDeviceProperties(&prop, device);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description = std::string("cannot read the CUDA device's properties: ") + cudaGetErrorString(error);
      return result;
    }
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", double(prop.totalGlobalMem) / double(1 << 30));
    result.description = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                         ", " + std::to_string(prop.multiProcessorCount) + " SMs, " + memory + ")";
    if (prop.major < 8) {
      result.description += ": the gpu backend needs compute capability 8.0 or newer";
      return result;
    }
    // A context that cannot be created (driver too old for this build, say) makes the device unusable.
    error = cudaFree(nullptr);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description += std::string(": cannot create a context: ") + cudaGetErrorString(error);
      return result;
    }
    result.usable = true;
    return result;
  }();
  return info;
}

bool IsAvailable() { return Info().usable; }

Status Supports(const Config& config) {
  const std::string name = std::string(PrecisionName(config.precision));
  if (config.precision == Precision::kFp32) {
    return Unsupported("backend gpu computes precisions exact, bf16 and fp16, not fp32 (not implemented yet)");
  }
  const int limit = config.precision == Precision::kExact ? kExactMaxDim : kLowpMaxDim;
  for (const auto& [field, value] : {std::pair{"head_dim", config.head_dim},
                                     {"value_dim", config.value_dim},
                                     {"index_head_dim", config.index_head_dim}}) {
    if (value > limit) {
      return Unsupported("backend gpu at precision " + name + " takes " + field + " up to " + std::to_string(limit) +
                         ", not " + std::to_string(value));
    }
  }
  if (config.top_k > kMaxTopK) {
    return Unsupported("backend gpu takes top_k up to " + std::to_string(kMaxTopK) + ", not " +
                       std::to_string(config.top_k));
  }
  return Status::Ok();
}

int TypeCode(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return kInF64;
    case DType::kF32:
      return kInF32;
    case DType::kBF16:
      return kInBF16;
    default:
      return kInF16;
  }
}

int LowpCode(Precision precision) { return precision == Precision::kBf16 ? kLowpBF16 : kLowpF16; }

// Packs a strided view into [rows, heads, dim] of its own dtype (only the view's elements are read).
std::vector<unsigned char> Pack(const TensorView& view) {
  const int64_t es = DTypeSize(view.dtype);
  std::vector<unsigned char> packed(size_t(view.rows * view.heads * view.dim * es));
  const auto* src = static_cast<const unsigned char*>(view.data);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      std::memcpy(&packed[size_t(((row * view.heads + head) * view.dim) * es)], src + view.Offset(row, head, 0) * es,
                  size_t(view.dim * es));
    }
  }
  return packed;
}

// A view on the device: exact mode widens it to double, low precision rounds it to 16 bits.
struct DeviceTensor {
  DeviceBuffer<double> wide;
  DeviceBuffer<uint16_t> narrow;
  DeviceBuffer<uint8_t> e4m3;  // with_e4m3: the values as E4M3 bytes too (the fp8 index kernel's inputs)
};

// A device view's elements packed [rows, heads, dim] on the device: the view's own memory when it is packed
// already, else a device-to-device copy into *copy (one 2-D copy per head). The host never sees them.
Status PackedOnDevice(const TensorView& view, const char* name, DeviceBuffer<unsigned char>* copy,
                      const void** packed) {
  int current = 0;
  MSA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (view.device != current) {
    return InvalidArgument(std::string(name) + " is on CUDA device " + std::to_string(view.device) +
                           " but the gpu backend runs on device " + std::to_string(current));
  }
  if (view.row_stride < 0 || view.head_stride < 0) {
    return InvalidArgument(std::string(name) + ": a view in device memory must have non-negative strides");
  }
  if (view.row_stride == view.heads * view.dim && view.head_stride == view.dim) {
    *packed = view.data;
    return Status::Ok();
  }
  const size_t es = size_t(DTypeSize(view.dtype)), row_bytes = size_t(view.heads * view.dim) * es;
  MSA_RETURN_IF_ERROR(copy->Allocate(view.rows * view.heads * view.dim * int64_t(es), name));
  for (int64_t head = 0; head < view.heads; ++head) {
    const auto* src = static_cast<const unsigned char*>(view.data) + size_t(head * view.head_stride) * es;
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(copy->get() + size_t(head * view.dim) * es, row_bytes, src,
                                          size_t(view.row_stride) * es, size_t(view.dim) * es, size_t(view.rows),
                                          cudaMemcpyDeviceToDevice));
  }
  *packed = copy->get();
  return Status::Ok();
}

// What ValidateFinite checks of host views, for a view read on the device: its first element that is not finite is
// refused with the same message.
Status RequireFiniteOnDevice(const void* packed, const TensorView& view, const char* name) {
  const unsigned long long none = std::numeric_limits<unsigned long long>::max();
  DeviceBuffer<unsigned long long> first;
  MSA_RETURN_IF_ERROR(first.Allocate(1, "finiteness flag"));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(first.get(), &none, sizeof none, cudaMemcpyHostToDevice));
  const int64_t n = view.rows * view.heads * view.dim;
  MSA_CUDA_RETURN_IF_ERROR(FirstNonFinite(packed, TypeCode(view.dtype), n, first.get()));
  unsigned long long bad = none;
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(&bad, first.get(), sizeof bad, cudaMemcpyDeviceToHost));
  if (bad == none) return Status::Ok();
  const size_t es = size_t(DTypeSize(view.dtype));
  unsigned char element[8] = {};
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(element, static_cast<const unsigned char*>(packed) + bad * es, es, cudaMemcpyDeviceToHost));
  const int64_t i = int64_t(bad);
  return NonFiniteInput(name, i / (view.heads * view.dim), i / view.dim % view.heads, i % view.dim,
                        LoadAsDouble(element, view.dtype, 0));
}

// A view on the device as the kernels take it: exact mode widens it to double, low precision rounds it to 16 bits.
// A host view is packed and copied over (counted in last_input_upload_bytes); a device view is read where it is.
Status Upload(const TensorView& view, Precision precision, const char* name, DeviceTensor* tensor,
              bool with_e4m3 = false) {
  const int64_t n = view.rows * view.heads * view.dim;
  if (n == 0) return Status::Ok();
  DeviceBuffer<unsigned char> raw;
  const void* packed = nullptr;
  if (view.memory == Memory::kHost) {
    const std::vector<unsigned char> host = Pack(view);
    MSA_RETURN_IF_ERROR(raw.Allocate(int64_t(host.size()), name));
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(raw.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    last_input_upload_bytes += int64_t(host.size());
    packed = raw.get();
  } else {
    MSA_RETURN_IF_ERROR(PackedOnDevice(view, name, &raw, &packed));
    MSA_RETURN_IF_ERROR(RequireFiniteOnDevice(packed, view, name));
  }
  if (precision == Precision::kExact) {
    MSA_RETURN_IF_ERROR(tensor->wide.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(WidenToDouble(packed, TypeCode(view.dtype), n, tensor->wide.get()));
  } else {
    MSA_RETURN_IF_ERROR(tensor->narrow.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(RoundToLowp(packed, TypeCode(view.dtype), n, LowpCode(precision), tensor->narrow.get()));
  }
  if (with_e4m3) {
    MSA_RETURN_IF_ERROR(tensor->e4m3.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(RoundToE4M3(packed, TypeCode(view.dtype), n, tensor->e4m3.get()));
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // `raw` is freed on return
  return Status::Ok();
}

// Times the device work between construction and Stop().
class KernelTimer {
 public:
  KernelTimer() {
    if (cudaEventCreate(&start_) == cudaSuccess && cudaEventCreate(&stop_) == cudaSuccess) {
      ok_ = cudaEventRecord(start_) == cudaSuccess;
    }
    cudaGetLastError();
  }
  ~KernelTimer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  void Stop() {
    float ms = 0.0f;
    if (ok_ && cudaEventRecord(stop_) == cudaSuccess && cudaEventSynchronize(stop_) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) {
      last_kernel_seconds = double(ms) / 1000.0;
    }
    cudaGetLastError();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool ok_ = false;
};

Status CheckDevice() {
  if (!IsAvailable()) return Unsupported("backend gpu is not available: " + Info().description);
  return Status::Ok();
}

// The concrete plan of this call: the requested one (MSA_GPU_PLAN or SetKernelPlanForTest) on this batch and device.
Status PlanCall(const Config& config, const Batch& batch, KernelPlan* plan) {
  KernelPlan requested;
  MSA_RETURN_IF_ERROR(RequestedKernelPlan(&requested));
  return PlanKernels(config, ShapesOf(config, batch), CurrentDeviceCaps(), requested, plan);
}

Status CheckExactFits(const Config& config) {
  if (config.precision == Precision::kExact &&
      !ExactFits(config.head_dim, config.value_dim, config.index_head_dim, config.group_size(), CurrentDeviceCaps())) {
    return Unsupported("backend gpu: the exact kernels cannot tile these head dims in this device's shared memory");
  }
  return Status::Ok();
}

// Copies a chunk's `rows` block-score rows (t - t0) * Hidx + r into block_scores [Hidx, total_q, max_blocks].
Status DownloadBlockScores(const Config& config, const SelectWorkspace& ws, const ChunkGeometry& g, int64_t rows,
                           double* block_scores) {
  const int64_t hidx = g.hidx, max_blocks = g.max_blocks;
  const size_t n = size_t(rows * max_blocks);
  std::vector<double> scores(n);
  if (config.precision == Precision::kExact) {
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(scores.data(), ws.bs_double.get(), n * 8, cudaMemcpyDeviceToHost));
  } else {
    std::vector<float> narrow(n);
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(narrow.data(), ws.bs_float.get(), n * 4, cudaMemcpyDeviceToHost));
    std::copy(narrow.begin(), narrow.end(), scores.begin());
  }
  for (int64_t row = 0; row < rows; ++row) {
    double* dst = block_scores + ((row % hidx) * g.total_q + g.t0 + row / hidx) * max_blocks;
    std::copy_n(&scores[size_t(row * max_blocks)], max_blocks, dst);
  }
  return Status::Ok();
}

Status SelectImpl(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  last_input_upload_bytes = 0;
  last_plan.clear();
  const Batch& batch = inputs.batch;
  KernelPlan requested;
  MSA_RETURN_IF_ERROR(RequestedKernelPlan(&requested));  // a misspelt MSA_GPU_PLAN is refused even without a device
  const int64_t total_q = batch.total_q();
  if (total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(CheckDevice());
  MSA_RETURN_IF_ERROR(CheckExactFits(config));
  KernelPlan plan;
  MSA_RETURN_IF_ERROR(PlanCall(config, batch, &plan));
  const bool exact = config.precision == Precision::kExact;
  const int64_t hidx = config.num_kv_heads, top_k = config.top_k;

  DeviceTensor index_q, index_k;  // with fp8: the values are E4M3 numbers already (msa::Select rounded them)
  const bool fp8 = plan.index == IndexKernel::kFp8;
  MSA_RETURN_IF_ERROR(Upload(inputs.index_q, config.precision, "index_q", &index_q, fp8));
  MSA_RETURN_IF_ERROR(Upload(inputs.index_k, config.precision, "index_k", &index_k, fp8));
  const bool want_lse = outputs.index_lse != nullptr;
  SelectWorkspace workspace;
  MSA_RETURN_IF_ERROR(AllocateSelectWorkspace(config, batch, plan, want_lse, &workspace));
  DeviceBuffer<int32_t> topk;
  DeviceBuffer<double> index_lse;
  DeviceBuffer<unsigned long long> flags;  // DeviceSelection::flags
  MSA_RETURN_IF_ERROR(topk.Allocate(hidx * total_q * top_k, "topk_indices"));
  if (want_lse) MSA_RETURN_IF_ERROR(index_lse.Allocate(hidx * total_q, "index_lse"));
  MSA_RETURN_IF_ERROR(flags.Allocate(2, "flags"));
  const unsigned long long no_bad = std::numeric_limits<unsigned long long>::max();
  const unsigned long long no_flags[2] = {no_bad, no_bad};
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(flags.get(), no_flags, sizeof no_flags, cudaMemcpyHostToDevice));

  const DeviceIndexInputs device_inputs{index_q.wide.get(),   index_k.wide.get(), index_q.narrow.get(),
                                        index_k.narrow.get(), index_q.e4m3.get(), index_k.e4m3.get()};
  const DeviceSelection selection{topk.get(), index_lse.get(), flags.get()};
  ChunkScoresFn on_scores;
  if (outputs.block_scores != nullptr) {
    on_scores = [&](const SelectWorkspace& ws, const ChunkGeometry& g, int64_t rows) {
      return DownloadBlockScores(config, ws, g, rows, outputs.block_scores);
    };
  }
  KernelTimer timer;
  MSA_RETURN_IF_ERROR(
      SelectOnDevice(config, batch, plan, device_inputs, selection, &workspace, nullptr, on_scores, {}, progress));
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  timer.Stop();
  last_plan = FormatSelectPlan(plan);

  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(outputs.topk_indices, topk.get(), size_t(hidx * total_q * top_k) * 4, cudaMemcpyDeviceToHost));
  if (want_lse) {
    MSA_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(outputs.index_lse, index_lse.get(), size_t(hidx * total_q) * 8, cudaMemcpyDeviceToHost));
  }
  unsigned long long first[2] = {no_bad, no_bad};  // flags: a non-finite score first, as the reference reports
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(first, flags.get(), sizeof first, cudaMemcpyDeviceToHost));
  if (const unsigned long long bad = first[0]; bad != no_bad) {
    return InvalidArgument("index score of query " + std::to_string(bad / hidx) + ", group " +
                           std::to_string(bad % hidx) + " is not finite: index_q and index_k are too large for " +
                           (exact ? std::string("a double dot product")
                                  : std::string(PrecisionName(config.precision)) + " inputs with fp32 accumulation"));
  }
  if (const unsigned long long overflow = first[1]; overflow != no_bad) {
    return Fp16ScoreOverflow(int64_t(overflow / hidx), int64_t(overflow % hidx));
  }
  return Status::Ok();
}

Status AttendImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  last_input_upload_bytes = 0;
  last_plan.clear();
  const Batch& batch = inputs.batch;
  KernelPlan requested;
  MSA_RETURN_IF_ERROR(RequestedKernelPlan(&requested));
  const int64_t total_q = batch.total_q();
  if (total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(CheckDevice());
  MSA_RETURN_IF_ERROR(CheckExactFits(config));
  KernelPlan plan;
  MSA_RETURN_IF_ERROR(PlanCall(config, batch, &plan));
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, dv = config.value_dim, top_k = config.top_k;

  DeviceTensor q, k, v;
  MSA_RETURN_IF_ERROR(Upload(inputs.q, config.precision, "q", &q));
  MSA_RETURN_IF_ERROR(Upload(inputs.k, config.precision, "k", &k));
  MSA_RETURN_IF_ERROR(Upload(inputs.v, config.precision, "v", &v));

  // Per query: its key position, its sequence's first key row, the blocks of the sequences before its own.
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  std::vector<int64_t> position(total_q), key_begin(total_q);
  for (int64_t t = 0; t < total_q; ++t) {
    position[t] = places[t].position;
    key_begin[t] = places[t].key_begin;
  }
  std::vector<int32_t> first_block(total_q);
  int64_t num_blocks = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    for (int64_t t = batch.cu_seqlens_q[b]; t < batch.cu_seqlens_q[b + 1]; ++t) first_block[t] = int32_t(num_blocks);
    num_blocks += (batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b] + config.block_size - 1) / config.block_size;
  }
  DeviceBuffer<int32_t> topk, d_first_block;
  DeviceBuffer<int64_t> d_position, d_key_begin;
  DeviceBuffer<double> out, lse;
  MSA_RETURN_IF_ERROR(topk.Allocate(hkv * total_q * top_k, "selection"));
  MSA_RETURN_IF_ERROR(d_position.Allocate(total_q, "positions"));
  MSA_RETURN_IF_ERROR(d_key_begin.Allocate(total_q, "key offsets"));
  MSA_RETURN_IF_ERROR(d_first_block.Allocate(total_q, "block offsets"));
  MSA_RETURN_IF_ERROR(out.Allocate(total_q * hq * dv, "out"));
  MSA_RETURN_IF_ERROR(lse.Allocate(total_q * hq, "lse"));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(topk.get(), selection.topk_indices, size_t(hkv * total_q * top_k) * 4, cudaMemcpyHostToDevice));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_position.get(), position.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_key_begin.get(), key_begin.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_first_block.get(), first_block.data(), size_t(total_q) * 4, cudaMemcpyHostToDevice));
  AttendWorkspace workspace;
  MSA_RETURN_IF_ERROR(AllocateAttendWorkspace(config, ShapesOf(config, batch), plan, &workspace));
  const DeviceAttendInputs device_inputs{q.wide.get(),      k.wide.get(),       v.wide.get(), q.narrow.get(),
                                         k.narrow.get(),    v.narrow.get(),     topk.get(),   d_position.get(),
                                         d_key_begin.get(), d_first_block.get()};
  KernelTimer timer;
  MSA_RETURN_IF_ERROR(
      AttendOnDevice(config, plan, device_inputs, Fp64Outputs(out.get(), lse.get()), &workspace, nullptr));
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  timer.Stop();
  last_plan = FormatAttendPlan(plan);
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.out, out.get(), size_t(total_q * hq * dv) * 8, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.lse, lse.get(), size_t(total_q * hq) * 8, cudaMemcpyDeviceToHost));
  if (progress) progress(1.0);
  return Status::Ok();
}

std::string LastPlan() { return last_plan; }

// The uploaded main-branch views and upstream gradients of a training call (absent ones: null pointers).
DeviceTrainingInputs TrainingInputsOf(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                                      const DeviceTensor& dout, const DeviceTensor& dlse) {
  return {q.wide.get(),   k.wide.get(),   v.wide.get(),   dout.wide.get(),   dlse.wide.get(),
          q.narrow.get(), k.narrow.get(), v.narrow.get(), dout.narrow.get(), dlse.narrow.get()};
}

// A training call counts as the thread's latest call: its uploads are counted, no kernel time is recorded.
Status BackwardImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                    const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  last_input_upload_bytes = 0;
  if (inputs.batch.total_q() == 0) {
    BackwardWithoutQueries(config, inputs.batch, outputs);
    return Status::Ok();
  }
  MSA_RETURN_IF_ERROR(CheckDevice());
  MSA_RETURN_IF_ERROR(CheckExactFits(config));
  DeviceTensor q, k, v, dout, dlse;
  MSA_RETURN_IF_ERROR(Upload(inputs.q, config.precision, "q", &q));
  MSA_RETURN_IF_ERROR(Upload(inputs.k, config.precision, "k", &k));
  MSA_RETURN_IF_ERROR(Upload(inputs.v, config.precision, "v", &v));
  MSA_RETURN_IF_ERROR(Upload(gradients.dout, config.precision, "dout", &dout));
  if (gradients.dlse.data != nullptr) MSA_RETURN_IF_ERROR(Upload(gradients.dlse, config.precision, "dlse", &dlse));
  MSA_RETURN_IF_ERROR(
      BackwardOnDevice(config, inputs.batch, selection, TrainingInputsOf(q, k, v, dout, dlse), outputs));
  if (progress) progress(1.0);
  return Status::Ok();
}

Status IndexerKlImpl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                     const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  last_input_upload_bytes = 0;
  if (inputs.batch.total_q() == 0) {
    IndexerKlWithoutQueries(config, inputs.batch, outputs);
    return Status::Ok();
  }
  MSA_RETURN_IF_ERROR(CheckDevice());
  MSA_RETURN_IF_ERROR(CheckExactFits(config));
  DeviceTensor q, k, v, index_q, index_k, none;
  MSA_RETURN_IF_ERROR(Upload(inputs.q, config.precision, "q", &q));
  MSA_RETURN_IF_ERROR(Upload(inputs.k, config.precision, "k", &k));
  if (config.precision == Precision::kExact) {  // the exact forward's lse (ExactAttend) reads v
    MSA_RETURN_IF_ERROR(Upload(inputs.v, config.precision, "v", &v));
  }
  MSA_RETURN_IF_ERROR(Upload(index_inputs.index_q, config.precision, "index_q", &index_q));
  MSA_RETURN_IF_ERROR(Upload(index_inputs.index_k, config.precision, "index_k", &index_k));
  const DeviceIndexTensors index{index_q.wide.get(), index_k.wide.get(), index_q.narrow.get(), index_k.narrow.get()};
  MSA_RETURN_IF_ERROR(
      IndexerKlOnDevice(config, inputs.batch, selection, TrainingInputsOf(q, k, v, none, none), index, outputs));
  if (progress) progress(1.0);
  return Status::Ok();
}

}  // namespace

Backend GpuBackend() {
  return Backend{.name = "gpu",
                 .is_available = IsAvailable,
                 .supports = Supports,
                 .select = SelectImpl,
                 .attend = AttendImpl,
                 .reads_device_memory = true,
                 .last_plan = LastPlan,
                 .backward = BackwardImpl,
                 .indexer_kl = IndexerKlImpl};
}

std::string DeviceDescription() { return Info().description; }

double LastKernelSeconds() { return last_kernel_seconds; }

int64_t LastInputUploadBytes() { return last_input_upload_bytes; }

}  // namespace msa::gpu
