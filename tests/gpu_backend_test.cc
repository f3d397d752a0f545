// The CUDA backend ("gpu"): exact mode bit-identical to the reference on every canonical and large case,
// bf16/fp16 passing the oracle rules (near-tie flips counted, not failed), bitwise replay, and clean Status
// answers where it declines. Without a usable CUDA device (or without a CUDA build) every device test skips
// with a message saying why; the conformance and property suites run the gpu backend too when it is available.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "oracle/properties.h"
#include "tests/arbitrary.h"

namespace msa {
namespace {

const Backend* Gpu() { return FindBackend("gpu"); }

// Skips the calling test unless the gpu backend is compiled in and a usable device is present.
#define MSA_REQUIRE_GPU()                                                                                      \
  do {                                                                                                         \
    if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";     \
    if (!Gpu()->is_available()) GTEST_SKIP() << "gpu backend compiled in, but no usable CUDA device "          \
                                                "(compute capability 8.0 or newer) is present";                \
  } while (false)

template <typename T>
int64_t BitDiffs(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return -1;
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return count;
}

void ExpectSameBits(const Outputs& expected, const Outputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.topk_indices, got.topk_indices), 0) << what << ": topk_indices";
  EXPECT_EQ(BitDiffs(expected.block_scores, got.block_scores), 0) << what << ": block_scores";
  EXPECT_EQ(BitDiffs(expected.index_lse, got.index_lse), 0) << what << ": index_lse";
  EXPECT_EQ(BitDiffs(expected.out, got.out), 0) << what << ": out";
  EXPECT_EQ(BitDiffs(expected.lse, got.lse), 0) << what << ": lse";
}

std::vector<TestCase> AllCases() {
  std::vector<TestCase> cases = CanonicalCases();
  for (TestCase& c : LargeCases()) cases.push_back(std::move(c));
  return cases;
}

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

TEST(GpuBackend, ExactIsBitIdenticalToTheReferenceOnEveryCase) {
  MSA_REQUIRE_GPU();
  for (const TestCase& test_case : AllCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference, gpu;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const Status status = RunBackend(*Gpu(), problem, &gpu);
    ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    ExpectSameBits(reference, gpu, test_case.name);
  }
}

TEST(GpuBackend, LowPrecisionPassesTheOracleRulesOnEveryCase) {
  MSA_REQUIRE_GPU();
  int64_t near_ties[2] = {0, 0}, rows[2] = {0, 0};
  for (const TestCase& test_case : AllCases()) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    for (int i = 0; i < 2; ++i) {
      const Precision precision = i == 0 ? Precision::kBf16 : Precision::kFp16;
      problem.config.precision = precision;
      Outputs gpu;
      const Status status = RunBackend(*Gpu(), problem, &gpu);
      ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
      JudgeOptions options;
      options.precision = precision;
      Verdict verdict;
      ASSERT_TRUE(Judge(problem, reference, Candidate{gpu.topk_indices, gpu.out, gpu.lse, gpu.index_lse}, options,
                        &verdict).ok());
      EXPECT_TRUE(verdict.passed()) << test_case.name << " at " << PrecisionName(precision) << "\n"
                                    << FormatVerdict(verdict);
      near_ties[i] += verdict.selection.near_tie_rows;
      rows[i] += verdict.selection.rows;
    }
  }
  std::printf("gpu bf16: %lld near-tie selection rows of %lld; fp16: %lld of %lld\n",
              static_cast<long long>(near_ties[0]), static_cast<long long>(rows[0]),
              static_cast<long long>(near_ties[1]), static_cast<long long>(rows[1]));
}

TEST(GpuBackend, TwoRunsAreBitwiseIdentical) {
  MSA_REQUIRE_GPU();
  const TestCase test_case = LargeCases().front();
  for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
    Problem problem = GenerateProblem(test_case.spec);
    problem.config.precision = precision;
    Outputs first, second;
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &first).ok());
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &second).ok());
    ExpectSameBits(first, second, test_case.name + " " + std::string(PrecisionName(precision)));
  }
}

TEST(GpuBackend, DecodeShapesQLen1To16OverALongContext) {
  MSA_REQUIRE_GPU();
  ProblemSpec spec;  // M3 dims with 16 query heads: one sequence per q_len 1..16, each over 8K+ keys
  spec.config.num_q_heads = 16;
  for (int32_t q_len = 1; q_len <= 16; ++q_len) spec.lengths.push_back({q_len, 8192 + 61 * q_len});
  spec.dtype = DType::kBF16;
  spec.seed = 77;
  Problem problem = GenerateProblem(spec);
  Outputs reference;
  ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
  for (Precision precision : {Precision::kExact, Precision::kBf16}) {
    problem.config.precision = precision;
    Outputs gpu;
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &gpu).ok());
    if (precision == Precision::kExact) {
      ExpectSameBits(reference, gpu, "decode");
      continue;
    }
    JudgeOptions options;
    options.precision = precision;
    Verdict verdict;
    ASSERT_TRUE(Judge(problem, reference, Candidate{gpu.topk_indices, gpu.out, gpu.lse, gpu.index_lse}, options,
                      &verdict).ok());
    EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  }
}

// SPEC section 5's properties (oracle/properties.h) on the gpu backend alone, at every precision it supports,
// on random valid problems: property_test runs them for every backend in turn, and stops at the first backend
// that fails; these keep the gpu's verdict independent of the others.
bool GpuHolds(const std::string& name, const std::function<Status(const Backend&, const ProblemSpec&)>& check) {
  return rc::check(name, [&check](const ProblemSpec& spec) {
    for (Precision precision : SupportedPrecisions(*Gpu(), spec.config)) {
      ProblemSpec at = spec;
      at.config.precision = precision;
      const Status status = check(*Gpu(), at);
      if (!status.ok()) RC_FAIL("gpu at " + std::string(PrecisionName(precision)) + ": " + status.message());
    }
  });
}

TEST(GpuProperty, EverySpecSection5PropertyHolds) {
  MSA_REQUIRE_GPU();
  EXPECT_TRUE(GpuHolds("selection contract", CheckSelectionContract));
  EXPECT_TRUE(GpuHolds("dense equivalence", CheckDenseEquivalence));
  EXPECT_TRUE(GpuHolds("causality", [](const Backend& b, const ProblemSpec& s) { return CheckCausality(b, s, s.seed ^ 1); }));
  EXPECT_TRUE(GpuHolds("gqa sharing", CheckGqaSharing));
  EXPECT_TRUE(GpuHolds("group independence", [](const Backend& b, ProblemSpec s) {
    const int group_size = s.config.group_size();
    s.config.num_kv_heads += 1;
    s.config.num_q_heads = s.config.num_kv_heads * group_size;
    return CheckGroupIndependence(b, s, s.seed ^ 2);
  }));
  EXPECT_TRUE(GpuHolds("block order", [](const Backend& b, const ProblemSpec& s) {
    return CheckBlockOrderInvariance(b, s, s.seed ^ 3);
  }));
  EXPECT_TRUE(GpuHolds("shift invariance", [](const Backend& b, const ProblemSpec& s) {
    return CheckShiftInvariance(b, s, s.seed ^ 4, double(int64_t(s.seed % 11) - 5));
  }));
  EXPECT_TRUE(GpuHolds("scaling v", CheckScalingV));
  EXPECT_TRUE(GpuHolds("linearity in v", [](const Backend& b, const ProblemSpec& s) {
    return CheckLinearityInV(b, s, s.seed ^ 5);
  }));
  EXPECT_TRUE(GpuHolds("suffix rule", [](const Backend& b, const ProblemSpec& s) {
    const int32_t k_len = 1 + int32_t(s.seed % 59), q_len = 1 + int32_t((s.seed >> 8) % uint64_t(k_len));
    return CheckSuffixRule(b, s, k_len, q_len);
  }));
  EXPECT_TRUE(GpuHolds("softmax rows sum to one", CheckSoftmaxRowsSumToOne));
  EXPECT_TRUE(GpuHolds("max dominance", CheckMaxDominance));
  EXPECT_TRUE(GpuHolds("poison never read", CheckPoisonedInputsNeverRead));
  EXPECT_TRUE(GpuHolds("every output written", CheckOutputsFullyWritten));
}

}  // namespace
}  // namespace msa
