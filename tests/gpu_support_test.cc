// The gpu backend's clean answers where it cannot or must not compute: the configs it declines (supports), every
// call declined without a device (never a crash), and fp16 block scores overflowing binary16 refused with the
// reference's message on every index-branch path a plan can force. Without a usable CUDA device the device tests
// skip saying why.
#include <string>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/problem.h"
#include "tests/gpu_test_support.h"

namespace msa::gpu_test {
namespace {

TEST(GpuBackend, DeclinesWhatItDoesNotSupport) {
  if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";
  Config config;
  config.precision = Precision::kFp32;
  EXPECT_EQ(Gpu()->supports(config).code(), StatusCode::kUnsupported);
  config.precision = Precision::kBf16;
  config.head_dim = 1024;
  EXPECT_EQ(Gpu()->supports(config).code(), StatusCode::kUnsupported);
  config = Config{};
  for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
    config.precision = precision;
    EXPECT_TRUE(Gpu()->supports(config).ok()) << PrecisionName(precision);
  }
}

TEST(GpuBackend, WithoutADeviceEveryCallIsDeclinedNotCrashed) {
  if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";
  if (Gpu()->is_available()) GTEST_SKIP() << "a CUDA device is present: nothing to decline";
  const Problem problem = GenerateProblem(CanonicalCases().front().spec);
  Outputs outputs;
  const Status status = RunBackend(*Gpu(), problem, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported) << status.message();
}

// The binary16 overflow refused in bf16 and fp16 as in exact (the reference's message, the same first row) on every
// index-branch path: mma and wgmma block maxima, warp and threshold top-k, the batched and per-sequence decode batch.
TEST(GpuBackend, Fp16ScoresOverflowingBinary16AreRefusedOnEveryIndexPath) {
  MSA_REQUIRE_GPU();
  for (const bool positive : {true, false}) {
    Problem problem = Fp16OverflowProblem(positive);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      for (const char* index_kernel : {"mma", "wgmma"}) {
        for (const char* topk_kernel : {"warp", "threshold"}) {
          for (const char* index_batch : {"batched", "per-sequence"}) {
            if (!Runnable(problem,
                          std::string("index=") + index_kernel + ",topk=" + topk_kernel + ",batch=" + index_batch)) {
              continue;
            }
            Outputs outputs;
            const Status status = SelectWithIndexChoices(problem, index_kernel, topk_kernel, index_batch, &outputs);
            EXPECT_EQ(status.message(), Fp16OverflowMessage(positive))
                << PrecisionName(precision) << ", index " << index_kernel << ", top-k " << topk_kernel << ", "
                << index_batch;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace msa::gpu_test
