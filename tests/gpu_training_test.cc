// The gpu backend's training functions (SPEC section 8) on every training case (CasesTagged(kTagTraining |
// kTagTrainingTiny)): exact mode bit-identical to the FP64 reference (dq, dk, dv, dqi, dki, kl_loss, teacher_lse,
// indexer_lse; native and e4m3 index inputs); device views (TensorView::memory, one of them strided) giving the host
// views' bits without uploading from the host; bf16 and fp16 within a relative L2 of kLowpRelativeL2 per gradient (and
// of kl_loss) of the reference evaluated on the same rounded inputs and the same selection; two runs bitwise identical
// at every precision. Without a usable CUDA device every test skips saying why.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "gpu/common/device_buffer.h"
#include "gpu/gpu_backend.h"
#endif

namespace msa::gpu_test {
namespace {

// The bound of the low-precision training outputs: relative L2 against the exact reference on the same rounded inputs
// and selection, per gradient (dq, dk, dv, dqi, dki) and for kl_loss. What the kernels round (bf16 / fp16 P, dS and
// rho - pbar as mma operands, gpu/training/training_lowp.cu) costs about 2^-9 relative (bf16); fp32 sums the rest.
constexpr double kLowpRelativeL2 = 2e-2;

std::vector<TestCase> TrainingCases() { return CasesTagged(kTagTraining | kTagTrainingTiny); }

// Every output of Backward and IndexerKl, the optional LSEs included.
struct TrainingOutputs {
  std::vector<double> dq, dk, dv;   // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
  std::vector<double> dqi, dki;     // [total_q, Hidx, Di], [total_k, 1, Di]
  std::vector<double> kl_loss;      // [1]
  std::vector<double> teacher_lse;  // [total_q, Hq]
  std::vector<double> indexer_lse;  // [Hidx, total_q]
};

// The views a training call reads.
struct TrainingViews {
  AttentionInputs inputs;
  IndexInputs index_inputs;
  GradientInputs gradients;
};

TrainingViews HostViews(const Problem& problem) {
  return {problem.attention_inputs(), problem.index_inputs(), problem.gradient_inputs()};
}

// Backward and IndexerKl of `backend` at `config` on `views` and the selection [Hidx, total_q, top_k], into
// NaN-poisoned outputs sized for `problem`.
Status RunTraining(const Backend& backend, const Config& config, const Problem& problem, const TrainingViews& views,
                   const std::vector<int32_t>& selection, TrainingOutputs* out) {
  const int64_t total_q = problem.batch().total_q(), total_k = problem.batch().total_k();
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out->dq.assign(total_q * hq * config.head_dim, nan);
  out->dk.assign(total_k * hkv * config.head_dim, nan);
  out->dv.assign(total_k * hkv * config.value_dim, nan);
  out->dqi.assign(total_q * hkv * config.index_head_dim, nan);
  out->dki.assign(total_k * config.index_head_dim, nan);
  out->kl_loss.assign(1, nan);
  out->teacher_lse.assign(total_q * hq, nan);
  out->indexer_lse.assign(hkv * total_q, nan);
  const SelectionView view{selection.data()};
  MSA_RETURN_IF_ERROR(
      Backward(backend, config, views.inputs, view, views.gradients, {out->dq.data(), out->dk.data(), out->dv.data()}));
  return IndexerKl(
      backend, config, views.index_inputs, views.inputs, view,
      {out->kl_loss.data(), out->dqi.data(), out->dki.data(), out->teacher_lse.data(), out->indexer_lse.data()});
}

void ExpectSameTrainingBits(const TrainingOutputs& expected, const TrainingOutputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.dq, got.dq), 0) << what << ": dq";
  EXPECT_EQ(BitDiffs(expected.dk, got.dk), 0) << what << ": dk";
  EXPECT_EQ(BitDiffs(expected.dv, got.dv), 0) << what << ": dv";
  EXPECT_EQ(BitDiffs(expected.dqi, got.dqi), 0) << what << ": dqi";
  EXPECT_EQ(BitDiffs(expected.dki, got.dki), 0) << what << ": dki";
  EXPECT_EQ(BitDiffs(expected.kl_loss, got.kl_loss), 0) << what << ": kl_loss";
  EXPECT_EQ(BitDiffs(expected.teacher_lse, got.teacher_lse), 0) << what << ": teacher_lse";
  EXPECT_EQ(BitDiffs(expected.indexer_lse, got.indexer_lse), 0) << what << ": indexer_lse";
}

// ||got - want|| / ||want|| (||got - want|| when want is all zeros); NaN when either holds a NaN.
double RelativeL2(const std::vector<double>& got, const std::vector<double>& want) {
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    error += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0.0 ? std::sqrt(error / norm) : std::sqrt(error);
}

// `tensor` rounded to the storage format of `precision` (bf16 or fp16), as F64: the values the gpu backend computes
// with at that precision.
SafetensorsTensor Rounded(const SafetensorsTensor& tensor, Precision precision) {
  SafetensorsTensor rounded = tensor;
  const int64_t n = int64_t(tensor.bytes.size()) / DTypeSize(tensor.dtype);
  rounded.dtype = DType::kF64;
  rounded.bytes.assign(size_t(n) * sizeof(double), 0);
  for (int64_t e = 0; e < n; ++e) {
    const double value = LoadAsDouble(tensor.bytes.data(), tensor.dtype, e);
    StoreElement(rounded, e,
                 precision == Precision::kBf16 ? BF16ToDouble(DoubleToBF16(value)) : F16ToDouble(DoubleToF16(value)));
  }
  return rounded;
}

Problem RoundedProblem(const Problem& problem, Precision precision) {
  Problem rounded = problem;
  for (SafetensorsTensor* tensor : {&rounded.q, &rounded.k, &rounded.v, &rounded.index_q, &rounded.index_k}) {
    *tensor = Rounded(*tensor, precision);
  }
  rounded.dout = Rounded(*problem.dout, precision);
  if (problem.dlse) rounded.dlse = Rounded(*problem.dlse, precision);
  return rounded;
}

TEST(GpuTraining, ExactIsBitIdenticalToTheReferenceOnEveryTrainingCase) {
  MSA_REQUIRE_GPU();
  const Backend& reference = *FindBackend("reference");
  for (const TestCase& test_case : TrainingCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    ASSERT_EQ(problem.config.precision, Precision::kExact) << test_case.name;
    Outputs expected, gpu;
    ASSERT_TRUE(RunReference(problem, &expected).ok()) << test_case.name;
    const Status status = RunBackend(*Gpu(), problem, &gpu);
    ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    ExpectSameBits(expected, gpu, test_case.name);
    EXPECT_EQ(BitDiffs(expected.dq, gpu.dq), 0) << test_case.name << ": dq";
    EXPECT_EQ(BitDiffs(expected.dk, gpu.dk), 0) << test_case.name << ": dk";
    EXPECT_EQ(BitDiffs(expected.dv, gpu.dv), 0) << test_case.name << ": dv";
    EXPECT_EQ(BitDiffs(expected.dqi, gpu.dqi), 0) << test_case.name << ": dqi";
    EXPECT_EQ(BitDiffs(expected.dki, gpu.dki), 0) << test_case.name << ": dki";
    EXPECT_EQ(BitDiffs(expected.kl_loss, gpu.kl_loss), 0) << test_case.name << ": kl_loss";

    // Called directly on the reference's selection: the LSEs too, and index inputs rounded to E4M3 by the front end.
    for (const IndexFormat format : {IndexFormat::kNative, IndexFormat::kE4M3}) {
      Config config = problem.config;
      config.index_format = format;
      const std::string what = test_case.name + (format == IndexFormat::kE4M3 ? " e4m3" : "");
      TrainingOutputs want, got;
      ASSERT_TRUE(RunTraining(reference, config, problem, HostViews(problem), expected.topk_indices, &want).ok());
      const Status direct = RunTraining(*Gpu(), config, problem, HostViews(problem), expected.topk_indices, &got);
      ASSERT_TRUE(direct.ok()) << what << ": " << direct.message();
      ExpectSameTrainingBits(want, got, what);
    }
  }
}

#if defined(MSA_HAVE_CUDA)
// A packed host view copied into device memory, its rows `pad` elements apart past the packed row (pad > 0: a strided
// view, which the backend packs on the device). The padding holds all-ones bytes (NaN for F64) that must never be read.
struct DeviceCopy {
  gpu::DeviceBuffer<unsigned char> buffer;
  TensorView view;
};

Status CopyToDevice(const TensorView& host, int64_t pad, DeviceCopy* copy) {
  const int64_t es = DTypeSize(host.dtype), row = host.heads * host.dim, stride = row + pad;
  if (host.row_stride != row || host.head_stride != host.dim) return InvalidArgument("CopyToDevice: packed views only");
  copy->view = host;
  copy->view.row_stride = stride;
  copy->view.memory = Memory::kCudaDevice;
  MSA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&copy->view.device));
  if (host.rows == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(copy->buffer.Allocate(host.rows * stride * es, "test device copy"));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(copy->buffer.get(), 0xff, size_t(host.rows * stride * es)));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy2D(copy->buffer.get(), size_t(stride * es), host.data, size_t(row * es),
                                        size_t(row * es), size_t(host.rows), cudaMemcpyHostToDevice));
  copy->view.data = copy->buffer.get();
  return Status::Ok();
}
#endif

TEST(GpuTraining, DeviceViewsGiveTheHostViewsBits) {
  MSA_REQUIRE_GPU();
#if defined(MSA_HAVE_CUDA)
  for (const TestCase& test_case : TrainingCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs expected;
    ASSERT_TRUE(RunReference(problem, &expected).ok()) << test_case.name;
    TrainingOutputs host, device;
    const Status on_host =
        RunTraining(*Gpu(), problem.config, problem, HostViews(problem), expected.topk_indices, &host);
    ASSERT_TRUE(on_host.ok()) << test_case.name << ": " << on_host.message();

    const TrainingViews views = HostViews(problem);
    DeviceCopy q, k, v, dout, dlse, index_q, index_k;
    ASSERT_TRUE(CopyToDevice(views.inputs.q, 0, &q).ok());
    ASSERT_TRUE(CopyToDevice(views.inputs.k, 0, &k).ok());
    ASSERT_TRUE(CopyToDevice(views.inputs.v, 0, &v).ok());
    ASSERT_TRUE(CopyToDevice(views.gradients.dout, 3, &dout).ok());  // strided: packed on the device
    ASSERT_TRUE(CopyToDevice(views.index_inputs.index_q, 0, &index_q).ok());
    ASSERT_TRUE(CopyToDevice(views.index_inputs.index_k, 0, &index_k).ok());
    TrainingViews on_device = views;
    on_device.inputs.q = q.view;
    on_device.inputs.k = k.view;
    on_device.inputs.v = v.view;
    on_device.gradients.dout = dout.view;
    on_device.index_inputs.index_q = index_q.view;
    on_device.index_inputs.index_k = index_k.view;
    if (views.gradients.dlse.data != nullptr) {
      ASSERT_TRUE(CopyToDevice(views.gradients.dlse, 0, &dlse).ok());
      on_device.gradients.dlse = dlse.view;
    }
    const Status status = RunTraining(*Gpu(), problem.config, problem, on_device, expected.topk_indices, &device);
    ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    EXPECT_EQ(gpu::LastInputUploadBytes(), 0) << test_case.name;
    ExpectSameTrainingBits(host, device, test_case.name + " device views");
  }
#endif
}

TEST(GpuTraining, LowPrecisionIsWithinItsBoundOfTheReference) {
  MSA_REQUIRE_GPU();
  const Backend& reference = *FindBackend("reference");
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    for (const TestCase& test_case : TrainingCases()) {
      const std::string what = test_case.name + " " + std::string(PrecisionName(precision));
      Problem problem = GenerateProblem(test_case.spec);
      Outputs expected;
      ASSERT_TRUE(RunReference(problem, &expected).ok()) << what;
      problem.config.precision = precision;
      TrainingOutputs got, want;
      const Status status =
          RunTraining(*Gpu(), problem.config, problem, HostViews(problem), expected.topk_indices, &got);
      ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      const Problem rounded = RoundedProblem(problem, precision);
      Config exact = rounded.config;
      exact.precision = Precision::kExact;
      ASSERT_TRUE(RunTraining(reference, exact, rounded, HostViews(rounded), expected.topk_indices, &want).ok());
      EXPECT_LT(RelativeL2(got.dq, want.dq), kLowpRelativeL2) << what << ": dq";
      EXPECT_LT(RelativeL2(got.dk, want.dk), kLowpRelativeL2) << what << ": dk";
      EXPECT_LT(RelativeL2(got.dv, want.dv), kLowpRelativeL2) << what << ": dv";
      EXPECT_LT(RelativeL2(got.dqi, want.dqi), kLowpRelativeL2) << what << ": dqi";
      EXPECT_LT(RelativeL2(got.dki, want.dki), kLowpRelativeL2) << what << ": dki";
      EXPECT_LT(RelativeL2(got.kl_loss, want.kl_loss), kLowpRelativeL2) << what << ": kl_loss";
      EXPECT_LT(RelativeL2(got.teacher_lse, want.teacher_lse), kLowpRelativeL2) << what << ": teacher_lse";
      EXPECT_LT(RelativeL2(got.indexer_lse, want.indexer_lse), kLowpRelativeL2) << what << ": indexer_lse";

      // The whole pipeline at this precision (its own selection), every training output finite.
      Outputs run;
      const Status pipeline = RunBackend(*Gpu(), problem, &run);
      ASSERT_TRUE(pipeline.ok()) << what << ": " << pipeline.message();
      for (const std::vector<double>* output : {&run.dq, &run.dk, &run.dv, &run.dqi, &run.dki, &run.kl_loss}) {
        for (double value : *output) ASSERT_TRUE(std::isfinite(value)) << what << ": a training output is not finite";
      }
    }
  }
}

// The oracle's rule (SPEC sections 5 and 8): on the reference's selection, every bf16 / fp16 gradient within twice the
// error of a naive evaluation at that precision (or its floor).
TEST(GpuTraining, LowPrecisionPassesTheOraclesRule) {
  MSA_REQUIRE_GPU();
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    for (const TestCase& test_case : TrainingCases()) {
      const std::string what = test_case.name + " " + std::string(PrecisionName(precision));
      Problem problem = GenerateProblem(test_case.spec);
      Outputs expected;
      ASSERT_TRUE(RunReference(problem, &expected).ok()) << what;
      problem.config.precision = precision;
      TrainingOutputs got;
      const Status status =
          RunTraining(*Gpu(), problem.config, problem, HostViews(problem), expected.topk_indices, &got);
      ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      const Candidate candidate{.topk_indices = expected.topk_indices,
                                .dq = got.dq,
                                .dk = got.dk,
                                .dv = got.dv,
                                .dqi = got.dqi,
                                .dki = got.dki,
                                .kl_loss = got.kl_loss};
      JudgeOptions options;
      options.precision = precision;
      Verdict verdict;
      ASSERT_TRUE(Judge(problem, expected, candidate, options, &verdict).ok()) << what;
      EXPECT_TRUE(verdict.passed()) << what << "\n" << FormatVerdict(verdict);
    }
  }
}

TEST(GpuTraining, TwoRunsAreBitwiseIdentical) {
  MSA_REQUIRE_GPU();
  for (const Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
    for (const TestCase& test_case : TrainingCases()) {
      const std::string what = test_case.name + " " + std::string(PrecisionName(precision));
      Problem problem = GenerateProblem(test_case.spec);
      Outputs expected;
      ASSERT_TRUE(RunReference(problem, &expected).ok()) << what;
      problem.config.precision = precision;
      TrainingOutputs first, second;
      ASSERT_TRUE(RunTraining(*Gpu(), problem.config, problem, HostViews(problem), expected.topk_indices, &first).ok())
          << what;
      ASSERT_TRUE(RunTraining(*Gpu(), problem.config, problem, HostViews(problem), expected.topk_indices, &second).ok())
          << what;
      ExpectSameTrainingBits(first, second, what);
    }
  }
}

}  // namespace
}  // namespace msa::gpu_test
