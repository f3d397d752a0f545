// The main branch's two output formats (gpu/common/geometry.h OutputFormat) through the device pipeline: each
// low-precision main-branch kernel writes fp32 values, widened exactly in kFp64 and, in kBf16Fp32, out rounded to bf16
// (to nearest, ties to even) and lse kept in fp32. Tested here, for every main-branch kernel a plan can request: the
// two formats of one step hold the same values, by a rounding written in this test from the bf16 format's definition;
// exact mode refuses the bf16 format. Without a usable device the step test skips saying why.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/kernel_plan.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_query.h"
#include "tests/gpu_device_step.h"
#endif

namespace msa::gpu_test {
namespace {

// x rounded to bf16 (to nearest, ties to even): the upper 16 bits of the float once the lower 16 are rounded off.
uint16_t RoundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

TEST(GpuOutFormat, RoundToBf16RoundsToNearestTiesToEven) {
  EXPECT_EQ(RoundToBf16(1.0f), 0x3f80);
  EXPECT_EQ(RoundToBf16(-2.5f), 0xc020);               // exact in bf16
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f), 0x3f80);      // halfway between 1 and 1 + 2^-7: ties to the even 1
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // halfway between 1 + 2^-7 and 1 + 2^-6: to the even 1 + 2^-6
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // past halfway: up
  EXPECT_EQ(RoundToBf16(0x1.fffffep127f), 0x7f80);            // past the largest bf16: +inf
}

#if defined(MSA_HAVE_CUDA)
struct FormatCase {
  std::string name;
  Config config;
  std::vector<int32_t> q_lens, k_lens;  // per sequence
};

// A prefill of two sequences, a decode batch (split-k and fused-decode take it) and fp16 with groups of 8.
std::vector<FormatCase> FormatCases() {
  std::vector<FormatCase> cases;
  cases.push_back({"prefill_two_sequences", M3Config(), {300, 70}, {1500, 70}});
  cases.push_back({"decode_batch", M3Config(), {1, 1, 1}, {4096, 100, 8000}});
  Config small = M3Config(Precision::kFp16);
  small.num_q_heads = 32;
  small.top_k = 8;
  cases.push_back({"fp16_group8", small, {40, 1}, {3000, 3000}});
  return cases;
}

// Every main-branch kernel a plan can request but exact, once each.
std::vector<gpu::AttendKernel> LowPrecisionAttendKernels() {
  std::vector<gpu::AttendKernel> kernels;
  std::set<int> seen;
  for (const gpu::KernelPlan& plan : gpu::AllRequestablePlans()) {
    if (plan.attend == gpu::AttendKernel::kExact || !seen.insert(int(plan.attend)).second) continue;
    kernels.push_back(plan.attend);
  }
  return kernels;
}

TEST(GpuOutFormat, ExactModeRefusesTheBf16Format) {
  Config config;
  config.precision = Precision::kExact;
  gpu::KernelPlan plan;
  plan.attend = gpu::AttendKernel::kExact;
  gpu::AttendWorkspace workspace;
  const Status status = gpu::AttendOnDevice(config, plan, gpu::DeviceAttendInputs{},
                                            gpu::Bf16Fp32Outputs(nullptr, nullptr), &workspace, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("attend=exact"), std::string::npos) << status.message();
}

// Per main-branch kernel (a test each, so that a sanitizer can take one at a time) and case, one step in each
// format: the same selection; the FP64 out and lse every value a float, all written (no poison left); the bf16 out each
// FP64 value rounded to bf16 by RoundToBf16, the fp32 lse each FP64 lse. On an sm_90a device every kernel takes some
// case.
class GpuOutFormatByKernel : public ::testing::TestWithParam<gpu::AttendKernel> {};

TEST_P(GpuOutFormatByKernel, Bf16OutAndFp32LseAreTheFp64ValuesRounded) {
  MSA_REQUIRE_GPU();
  const gpu::AttendKernel kernel = GetParam();
  int64_t runs = 0;
  for (const FormatCase& c : FormatCases()) {
    const LengthsBatch lengths(c.q_lens, c.k_lens);
    const Batch batch = lengths.batch();
    gpu::KernelPlan requested, plan;
    requested.attend = kernel;
    if (!gpu::PlanKernels(c.config, gpu::ShapesOf(c.config, batch), gpu::CurrentDeviceCaps(), requested, &plan).ok()) {
      continue;  // the kernel does not take this case or device
    }
    StepInputs inputs;
    MakeInputs(c.config, batch, /*overflow=*/false, &inputs);
    const std::string what = c.name + " at " + gpu::FormatKernelPlan(plan);
    StepOutputs wide, narrow;
    ASSERT_TRUE(RunStep(c.config, batch, plan, inputs, gpu::OutputFormat::kFp64, &wide).ok()) << what;
    ASSERT_TRUE(RunStep(c.config, batch, plan, inputs, gpu::OutputFormat::kBf16Fp32, &narrow).ok()) << what;
    EXPECT_EQ(BitDiffs(wide.topk, narrow.topk), 0) << what << ": the selection";
    ASSERT_EQ(wide.out.size(), narrow.out_bf16.size()) << what;
    ASSERT_EQ(wide.lse.size(), narrow.lse_fp32.size()) << what;
    int64_t bad_out = 0, bad_lse = 0;
    for (size_t i = 0; i < wide.out.size(); ++i) {
      const float value = float(wide.out[i]);
      ASSERT_TRUE(std::isfinite(wide.out[i]) && double(value) == wide.out[i]) << what << ": out[" << i << "]";
      bad_out += narrow.out_bf16[i] != RoundToBf16(value);
    }
    for (size_t i = 0; i < wide.lse.size(); ++i) {
      const float value = float(wide.lse[i]);
      ASSERT_TRUE(std::isfinite(wide.lse[i]) && double(value) == wide.lse[i]) << what << ": lse[" << i << "]";
      uint32_t expected, got;
      std::memcpy(&expected, &value, 4);
      std::memcpy(&got, &narrow.lse_fp32[i], 4);
      bad_lse += expected != got;
    }
    EXPECT_EQ(bad_out, 0) << what << ": bf16 out values that are not the FP64 value rounded";
    EXPECT_EQ(bad_lse, 0) << what << ": fp32 lse values that are not the FP64 value";
    ++runs;
  }
  if (gpu::CurrentDeviceCaps().RunsSm90a()) {
    EXPECT_GT(runs, 0) << "the kernel runs some case on an sm_90a device";
  }
  std::printf("bf16 out, fp32 lse = the FP64 outputs rounded: %lld runs\n", static_cast<long long>(runs));
}

// The test's name for a kernel: its plan value with '-' as '_' (gtest names take letters, digits and '_').
std::string KernelTestName(const ::testing::TestParamInfo<gpu::AttendKernel>& info) {
  gpu::KernelPlan plan;
  plan.attend = info.param;
  plan.lists = gpu::KvLists::kNone;  // the attend value alone
  std::string name = gpu::FormatAttendPlan(plan).substr(std::string("attend=").size());
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuOutFormatByKernel, ::testing::ValuesIn(LowPrecisionAttendKernels()),
                         KernelTestName);
#endif

}  // namespace
}  // namespace msa::gpu_test
