// The gpu backend at bf16 and fp16 under the oracle rules (SPEC section 5; near-tie flips counted, not failed): on
// every canonical and large case, on the shapes that reach the gathered attention kernel (GatheredAttend), and on a
// decode of q_len 1..16 over long contexts; where block maxima tie exactly, the low-precision selection equal to the
// reference's slot for slot (the tie order of SPEC section 2); and SPEC section 5's properties on random problems.
// Without a usable CUDA device the device tests skip saying why; the checks of the cases themselves run anyway.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
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

// The main-branch kernels of the test below, each asked for by its plan keys. `per_block`: the kernel computes each
// block's partial (or each block's step of an online softmax) on its own, so a block of weight 0 changes no bit of the
// result; the others group the remaining keys differently without it (gathered keys in 16-key steps; routed may send
// a tile whose union shrank to the other path).
struct AttendChoice {
  const char* attend;
  const char* lists;
  bool per_block;
};
constexpr AttendChoice kAttendChoices[] = {
    {"kv-outer", "direct", true},
    {"kv-outer", "general", true},
    {"kv-outer-wgmma", "direct", true},
    {"kv-outer-wgmma", "general", true},
    {"kv-outer-wgmma-p16", "", true},
    {"kv-outer-ws", "", true},
    {"split-k", "", true},
    {"fused-decode", "", true},
    {"union-tile", "", true},
    {"union-tile-ws", "", true},
    {"routed", "", false},
    {"q-outer", "", false},
    {"gathered", "", false},
};

// A problem whose block 0 is selected by every query and scores -inf in `precision` for every (query, head, key):
// q's first half of dims is `big`, block 0's keys are -big there and every other key 0, so those dots are
// -big^2 D/2 (past fp32's range at bf16, past binary16's as a scaled score at fp16) and every other dot is as drawn.
// Every sequence has at most top_k blocks, so every block is selected, and every query lies past block 0.
Problem BlockZeroOverflowProblem(Precision precision, std::vector<std::pair<int32_t, int32_t>> lengths) {
  // Stored as doubles (kF64), so that the values below can be written in place.
  ProblemSpec spec = MakeSpec(16, 2, 64, 64, 8, 0, Pooling::kMax, std::move(lengths), DType::kF64, 701);
  spec.config.precision = precision;
  Problem problem = GenerateProblem(spec);
  const Config& c = problem.config;
  const double big = precision == Precision::kFp16 ? 256.0 : std::ldexp(1.0, 63);  // exact in both formats
  const auto element = [](SafetensorsTensor& t, int64_t i) { return reinterpret_cast<double*>(t.bytes.data()) + i; };
  const int64_t total_q = problem.cu_seqlens_q.back();
  for (int64_t i = 0; i < total_q * c.num_q_heads; ++i) {
    for (int d = 0; d < c.head_dim / 2; ++d) *element(problem.q, i * c.head_dim + d) = big;
  }
  for (size_t b = 0; b + 1 < problem.cu_seqlens_k.size(); ++b) {
    for (int64_t s = problem.cu_seqlens_k[b]; s < problem.cu_seqlens_k[b + 1]; ++s) {
      const bool in_block_zero = s - problem.cu_seqlens_k[b] < c.block_size;
      for (int h = 0; h < c.num_kv_heads; ++h) {
        for (int d = 0; d < c.head_dim / 2; ++d) {
          *element(problem.k, (s * c.num_kv_heads + h) * c.head_dim + d) = in_block_zero ? -big : 0.0;
        }
      }
    }
  }
  return problem;
}

// A decode batch (split-k, the direct lists) and a prefill batch.
std::vector<Problem> BlockZeroOverflowProblems(Precision precision) {
  return {BlockZeroOverflowProblem(precision, {{1, 256}, {1, 130}, {1, 512}}),
          BlockZeroOverflowProblem(precision, {{40, 256}, {20, 300}})};
}

// `selection` [Hidx, total_q, top_k] with block 0 taken out of every row (the later ids moved up, -1 after).
std::vector<int32_t> WithoutBlockZero(const std::vector<int32_t>& selection, int64_t top_k) {
  std::vector<int32_t> thinned(selection.size(), -1);
  for (size_t row = 0; row < selection.size() / size_t(top_k); ++row) {
    size_t next = row * size_t(top_k);
    for (int64_t slot = 0; slot < top_k; ++slot) {
      const int32_t id = selection[row * size_t(top_k) + size_t(slot)];
      if (id > 0) thinned[next++] = id;
    }
  }
  return thinned;
}

// `backend`'s out and lse on `problem` with `selection`.
Status AttendOn(const Backend& backend, const Problem& problem, const std::vector<int32_t>& selection,
                Outputs* outputs) {
  outputs->Allocate(problem);
  return Attend(backend, problem.config, problem.attention_inputs(), SelectionView{selection.data()},
                outputs->attention_outputs());
}

double MaxAbsDifference(const std::vector<double>& a, const std::vector<double>& b) {
  double most = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) most = std::max(most, std::fabs(a[i] - b[i]));
  return most;  // NaN compares false: a NaN element leaves `most` as it was, so the callers also judge finiteness
}

// Runs without a device: the problems of the test below are what it needs, by the reference and the oracle alone:
// block 0 in every selection row; the reference's outputs the same bits with block 0 left out of the selection
// (its exact weight underflows to 0); and an out with a NaN failing the oracle at bf16 and fp16. (The oracle's
// floors grow with max|q| max|k| over the whole problem, so on these problems it catches NaN and gross errors only;
// the test's own comparisons are the tight ones.)
TEST(GpuBackend, BlockZeroOverflowProblemsAreWhatTheGpuTestNeeds) {
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    for (const Problem& problem : BlockZeroOverflowProblems(precision)) {
      const std::string what =
          std::string(PrecisionName(precision)) + ", " + std::to_string(problem.cu_seqlens_q.size() - 1) + " sequences";
      Outputs reference, thinned;
      ASSERT_TRUE(RunReference(problem, &reference).ok()) << what;
      const int64_t top_k = problem.config.top_k;
      for (size_t row = 0; row < reference.topk_indices.size() / size_t(top_k); ++row) {
        const auto first = reference.topk_indices.begin() + std::ptrdiff_t(row) * top_k;
        EXPECT_NE(std::find(first, first + top_k, 0), first + top_k) << what << ": row " << row << " lacks block 0";
      }
      Problem exact = problem;
      exact.config.precision = Precision::kExact;
      ASSERT_TRUE(
          AttendOn(*FindBackend("reference"), exact, WithoutBlockZero(reference.topk_indices, top_k), &thinned).ok());
      EXPECT_EQ(BitDiffs(reference.out, thinned.out), 0) << what;
      EXPECT_EQ(BitDiffs(reference.lse, thinned.lse), 0) << what;
      JudgeOptions options;
      options.precision = precision;
      Verdict verdict;
      std::vector<double> with_nan = reference.out;
      with_nan[with_nan.size() / 2] = NAN;
      ASSERT_TRUE(
          Judge(problem, reference, Candidate{std::nullopt, with_nan, reference.lse, std::nullopt}, options, &verdict)
              .ok());
      EXPECT_FALSE(verdict.passed()) << what << ": an out with a NaN passed";
    }
  }
}

// A selected block whose every score overflows to -inf carries weight 0, as its exact weight e^(s - m) does. On every
// main-branch kernel the planner runs, at bf16 and fp16, with block 0 selected, against the same kernel with block 0
// left out of the selection: the same bits for a kernel that treats each block on its own, within 1e-3 (16-key steps
// regrouped) for the others; every output finite, and passing the oracle against the FP64 reference. (Before this
// held, the mma.sync tiles and split-k gave the block a NaN partial, and the 16-bit partials stored O_b / l_b as
// 0 / 0.)
TEST(GpuBackend, ABlockWhoseScoresAllOverflowToMinusInfinityWeighsNothing) {
  MSA_REQUIRE_GPU();
  int64_t runs = 0;
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    for (const Problem& problem : BlockZeroOverflowProblems(precision)) {
      Outputs reference;
      ASSERT_TRUE(RunReference(problem, &reference).ok());
      const std::vector<int32_t> thinned = WithoutBlockZero(reference.topk_indices, problem.config.top_k);
      for (const AttendChoice& choice : kAttendChoices) {
        const std::string request =
            std::string("attend=") + choice.attend + (*choice.lists ? std::string(",lists=") + choice.lists : "");
        if (!Runnable(problem, request)) continue;
        const std::string what = std::string(PrecisionName(precision)) + ", " +
                                 std::to_string(problem.cu_seqlens_q.size() - 1) + " sequences, " + request;
        const ScopedPlan attend_plan("attend", choice.attend);
        const ScopedPlan lists_plan("lists", choice.lists);
        Outputs full, without;
        const Status full_status = AttendOn(*Gpu(), problem, reference.topk_indices, &full);
        ASSERT_TRUE(full_status.ok()) << what << ": " << full_status.message();
        const Status without_status = AttendOn(*Gpu(), problem, thinned, &without);
        ASSERT_TRUE(without_status.ok()) << what << ": " << without_status.message();
        const Status finite = RequireFiniteAttention(problem.config, problem.batch(), full.attention_outputs());
        EXPECT_TRUE(finite.ok()) << what << ": " << finite.message();
        if (choice.per_block) {
          EXPECT_EQ(BitDiffs(full.out, without.out), 0) << what << ": out, with block 0 against without it";
          EXPECT_EQ(BitDiffs(full.lse, without.lse), 0) << what << ": lse, with block 0 against without it";
        } else {
          EXPECT_LE(MaxAbsDifference(full.out, without.out), 1e-3) << what << ": out";
          EXPECT_LE(MaxAbsDifference(full.lse, without.lse), 1e-3) << what << ": lse";
        }
        JudgeOptions options;
        options.precision = precision;
        Verdict verdict;
        ASSERT_TRUE(
            Judge(problem, reference, Candidate{std::nullopt, full.out, full.lse, std::nullopt}, options, &verdict)
                .ok());
        EXPECT_TRUE(verdict.passed()) << what << "\n" << FormatVerdict(verdict);
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0);
  std::printf("a block of -inf scores: %lld main-branch runs\n", static_cast<long long>(runs));
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
