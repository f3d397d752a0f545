// The gpu backend at bf16 and fp16 under the oracle rules (SPEC section 5; near-tie flips counted, not failed): on
// every canonical and large case, on the shapes that reach the gathered attention kernel (GatheredAttend), and on a
// decode of q_len 1..16 over long contexts; where block maxima tie exactly, the low-precision selection equal to the
// reference's slot for slot (the tie order of SPEC section 2); and SPEC section 5's properties on random problems.
// Without a usable CUDA device the device tests skip saying why; the checks of the cases themselves run anyway.
#include <cstdio>
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
#include "tests/gpu_test_support.h"

namespace msa::gpu_test {
namespace {

// The oracle's verdict (SPEC section 5) on the gpu's outputs `gpu` computed at `precision`, judged with its own
// selection against `reference` (the FP64 reference's outputs on the same problem).
Verdict JudgeGpuOutputs(const Problem& problem, const Outputs& reference, const Outputs& gpu, Precision precision) {
  JudgeOptions options;
  options.precision = precision;
  Verdict verdict;
  const Status status =
      Judge(problem, reference,
            Candidate{.topk_indices = gpu.topk_indices, .out = gpu.out, .lse = gpu.lse, .index_lse = gpu.index_lse},
            options, &verdict);
  EXPECT_TRUE(status.ok()) << status.message();
  return verdict;
}

// Runs the gpu at bf16 and at fp16 on every case and judges both by the oracle rules against the FP64
// reference; prints the near-tie selection rows (counted, not failed) per precision under `label`.
void ExpectLowPrecisionPassesTheOracleRules(const std::vector<TestCase>& cases, const std::string& label) {
  int64_t near_ties[2] = {0, 0}, rows[2] = {0, 0};
  for (const TestCase& test_case : cases) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    for (int i = 0; i < 2; ++i) {
      const Precision precision = i == 0 ? Precision::kBf16 : Precision::kFp16;
      problem.config.precision = precision;
      Outputs gpu;
      const Status status = RunBackend(*Gpu(), problem, &gpu);
      ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
      const Verdict verdict = JudgeGpuOutputs(problem, reference, gpu, precision);
      EXPECT_TRUE(verdict.passed()) << test_case.name << " at " << PrecisionName(precision) << "\n"
                                    << FormatVerdict(verdict);
      near_ties[i] += verdict.selection.near_tie_rows;
      rows[i] += verdict.selection.rows;
    }
  }
  std::printf("gpu %s, bf16: %lld near-tie selection rows of %lld; fp16: %lld of %lld\n", label.c_str(),
              static_cast<long long>(near_ties[0]), static_cast<long long>(rows[0]),
              static_cast<long long>(near_ties[1]), static_cast<long long>(rows[1]));
}

TEST(GpuBackend, LowPrecisionPassesTheOracleRulesOnEveryCase) {
  MSA_REQUIRE_GPU();
  ExpectLowPrecisionPassesTheOracleRules(AllCases(), "canonical and large cases");
}

TEST(GpuBackend, LowPrecisionPassesTheOracleRulesWhereGatheredAttendRuns) {
  MSA_REQUIRE_GPU();
  ExpectLowPrecisionPassesTheOracleRules(CasesTagged(kTagGpuGathered), "GatheredAttend cases");
}

// Runs without a device: the kTagGpuTiedBlockMax cases are what the gpu test below (and the wgmma and threshold
// twins, gpu_twins_test.cc) need them to be, by the reference alone.
TEST(GpuBackend, TiedBlockMaxCasesHaveExactTiesThatDecideTheSelection) {
  for (const TestCase& test_case : CasesTagged(kTagGpuTiedBlockMax)) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const TieRows ties = FindTieRows(problem, reference);
    const int64_t rows = int64_t(ties.exact.size());
    EXPECT_EQ(ties.exact_rows, rows) << test_case.name;
    EXPECT_GE(ties.tie_decided_rows, rows * 3 / 4) << test_case.name;  // 492 of 520 and 124 of 130 here
    std::printf("%s: %lld of %lld rows exact, %lld of them decided by ties\n", test_case.name.c_str(),
                static_cast<long long>(ties.exact_rows), static_cast<long long>(rows),
                static_cast<long long>(ties.tie_decided_rows));
  }
}

// SPEC section 2's tie order (score descending, then block id ascending; init blocks, then the local block last)
// on the gpu's low-precision index branch: where the block maxima are exact in both precisions, the gpu's
// selection and block scores equal the FP64 reference's, slot for slot.
TEST(GpuBackend, LowPrecisionSelectionEqualsTheReferenceOnExactlyTiedBlockMaxima) {
  MSA_REQUIRE_GPU();
  for (const TestCase& test_case : CasesTagged(kTagGpuTiedBlockMax)) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const TieRows ties = FindTieRows(problem, reference);
    const int64_t top_k = problem.config.top_k, max_blocks = MaxBlocks(problem.config, problem.batch());
    const int64_t total_q = problem.batch().total_q();
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      Outputs gpu;
      const Status status = RunBackend(*Gpu(), problem, &gpu);
      ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
      int64_t differing_rows = 0;
      for (int64_t row = 0; row < int64_t(ties.exact.size()); ++row) {
        if (!ties.exact[size_t(row)]) continue;
        const bool same_selection = SameRow(reference.topk_indices, gpu.topk_indices, row, top_k);
        const bool same_scores = SameRow(reference.block_scores, gpu.block_scores, row, max_blocks);
        if (same_selection && same_scores) continue;
        if (++differing_rows > 8) continue;  // list the first 8
        ADD_FAILURE() << test_case.name << " at " << PrecisionName(precision) << ", group " << row / total_q
                      << ", query row " << row % total_q << (same_scores ? "" : ": block scores differ")
                      << "\n  reference:" << FormatRow(reference.topk_indices, row, top_k)
                      << "\n  gpu:      " << FormatRow(gpu.topk_indices, row, top_k);
      }
      EXPECT_EQ(differing_rows, 0) << test_case.name << " at " << PrecisionName(precision);
      std::printf("%s at %s: %lld exact rows (%lld decided by ties) compared\n", test_case.name.c_str(),
                  std::string(PrecisionName(precision)).c_str(), static_cast<long long>(ties.exact_rows),
                  static_cast<long long>(ties.tie_decided_rows));
    }
  }
}

TEST(GpuBackend, DecodeShapesQLen1To16OverALongContext) {
  MSA_REQUIRE_GPU();
  const ProblemSpec spec = CasesTagged(kTagGpuLongDecode).front().spec;  // q_len 1..16 over 8K+ keys each
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
    const Verdict verdict = JudgeGpuOutputs(problem, reference, gpu, precision);
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
  EXPECT_TRUE(
      GpuHolds("causality", [](const Backend& b, const ProblemSpec& s) { return CheckCausality(b, s, s.seed ^ 1); }));
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
  EXPECT_TRUE(GpuHolds("linearity in v",
                       [](const Backend& b, const ProblemSpec& s) { return CheckLinearityInV(b, s, s.seed ^ 5); }));
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
}  // namespace msa::gpu_test
