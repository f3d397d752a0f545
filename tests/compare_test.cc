// The comparators judge correctly: right answers pass (bit-exact, bf16-rounded, naive low precision, another
// FP64 order), wrong ones fail at the right place, near-tie flips pass and are counted.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "oracle/compare.h"
#include "oracle/naive_lowp.h"
#include "reference/reference.h"

namespace msa {
namespace {

// A ragged batch: sequence 0 is a prefill of 70, sequence 1 decodes 5 queries over 90 keys.
Problem MakeProblem(DType dtype = DType::kF64, uint64_t seed = 3) {
  ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 16;
  spec.config.block_size = 8;
  spec.config.top_k = 4;
  spec.lengths = {{70, 70}, {5, 90}};
  spec.dtype = dtype;
  spec.seed = seed;
  return GenerateProblem(spec);
}

Outputs Reference(const Problem& problem) {
  Outputs outputs;
  EXPECT_TRUE(RunBackend(*FindBackend("reference"), problem, &outputs).ok());
  return outputs;
}

Candidate AllOf(const Outputs& outputs) {
  return Candidate{outputs.topk_indices, outputs.out, outputs.lse, outputs.index_lse};
}

Verdict MustJudge(const Problem& problem, const Outputs& reference, const Candidate& candidate, JudgeOptions options) {
  Verdict verdict;
  const Status status = Judge(problem, reference, candidate, options, &verdict);
  EXPECT_TRUE(status.ok()) << status.message();
  return verdict;
}

const TensorVerdict& Tensor(const Verdict& verdict, const std::string& name) {
  for (const TensorVerdict& t : verdict.tensors) {
    if (t.name == name) return t;
  }
  static TensorVerdict missing;
  ADD_FAILURE() << "no verdict for " << name;
  return missing;
}

TEST(Compare, ReferenceAgainstItselfIsBitExact) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  const Verdict verdict = MustJudge(problem, reference, AllOf(reference), {});
  EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  EXPECT_TRUE(verdict.exact_bits);
  EXPECT_EQ(verdict.selection.identical_rows, verdict.selection.rows);
}

TEST(Compare, ExactModeFailsOnOneUlp) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  Candidate candidate = AllOf(reference);
  (*candidate.out)[17] = std::nextafter((*candidate.out)[17], HUGE_VAL);
  const Verdict verdict = MustJudge(problem, reference, candidate, {});
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(Tensor(verdict, "out").mismatches, 1);
  EXPECT_DOUBLE_EQ(Tensor(verdict, "out").max_ulps, 1.0);
}

TEST(Compare, Bf16RoundedOutputsPassAtBf16) {
  const Problem problem = MakeProblem(DType::kBF16);
  const Outputs reference = Reference(problem);
  Candidate candidate = AllOf(reference);
  for (double& value : *candidate.out) value = RoundToPrecision(value, Precision::kBf16);
  JudgeOptions options;
  options.precision = Precision::kBf16;
  const Verdict verdict = MustJudge(problem, reference, candidate, options);
  EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  EXPECT_GT(Tensor(verdict, "out").max_error, 0.0);  // rounding did change values: the rule, not bits, passed them
}

TEST(Compare, NaiveLowPrecisionPassesItsOwnRule) {
  for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    const Problem problem = MakeProblem(DType::kF32);
    const Outputs reference = Reference(problem);
    const NaiveOutputs naive = NaiveEvaluate(problem, precision, reference.topk_indices);
    JudgeOptions options;
    options.precision = precision;
    const Verdict verdict = MustJudge(
        problem, reference, Candidate{reference.topk_indices, naive.out, naive.lse, naive.index_lse}, options);
    EXPECT_TRUE(verdict.passed()) << PrecisionName(precision) << "\n" << FormatVerdict(verdict);
    EXPECT_GT(Tensor(verdict, "out").naive_error, 0.0);
  }
}

TEST(Compare, AnotherFp64OrderPassesTheRulesButNotTheBits) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  const NaiveOutputs naive = NaiveEvaluate(problem, Precision::kExact, reference.topk_indices);
  const Candidate candidate{reference.topk_indices, naive.out, naive.lse, naive.index_lse};
  JudgeOptions rules;
  rules.exact_bits = false;
  EXPECT_TRUE(MustJudge(problem, reference, candidate, rules).passed());
  EXPECT_FALSE(MustJudge(problem, reference, candidate, {}).passed());  // sequential sums differ from canonical
}

TEST(Compare, PerturbedOutputFailsAndPointsAtItsPosition) {
  const Problem problem = MakeProblem(DType::kBF16);
  const Outputs reference = Reference(problem);
  Candidate candidate = AllOf(reference);
  // Sequence 1, query 3 is row 70 + 3 = 73; head 2, dim 5: index (73 * 4 + 2) * 16 + 5.
  (*candidate.out)[(73 * 4 + 2) * 16 + 5] += 0.25;
  JudgeOptions options;
  options.precision = Precision::kBf16;
  const Verdict verdict = MustJudge(problem, reference, candidate, options);
  EXPECT_FALSE(verdict.passed());
  const TensorVerdict& out = Tensor(verdict, "out");
  EXPECT_EQ(out.mismatches, 1);
  ASSERT_EQ(out.listed.size(), 1u);
  EXPECT_EQ(out.listed[0].sequence, 1);
  EXPECT_EQ(out.listed[0].query, 3);
  EXPECT_EQ(out.listed[0].row, 73);
  EXPECT_EQ(out.listed[0].head, 2);
  EXPECT_EQ(out.listed[0].index, 5);
  EXPECT_NE(FormatVerdict(verdict).find("seq 1 query 3 (row 73) head 2 dim 5"), std::string::npos);
}

TEST(Compare, OneSidedNanFails) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  Candidate candidate{std::nullopt, std::nullopt, reference.lse, std::nullopt};
  (*candidate.lse)[9] = std::numeric_limits<double>::quiet_NaN();
  JudgeOptions options;
  options.precision = Precision::kFp32;
  const Verdict verdict = MustJudge(problem, reference, candidate, options);
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(Tensor(verdict, "lse").one_sided_nonfinite, 1);
}

TEST(Compare, CorruptedSelectionFailsAtItsRow) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  // Group 1, query row 60 (position 60: blocks 0..7, local 7). Replace its first (best-ranked) history block
  // by the lowest-scoring history block it did not select.
  const int64_t total_q = 75, max_blocks = 12, row = 1 * total_q + 60;
  std::vector<int32_t> selection = reference.topk_indices;
  int32_t* slots = &selection[row * 4];
  const double* scores = &reference.block_scores[row * max_blocks];
  int32_t worst = -1;
  for (int32_t b = 0; b < 7; ++b) {
    if (std::find(slots, slots + 4, b) == slots + 4 && (worst < 0 || scores[b] < scores[worst])) worst = b;
  }
  ASSERT_GE(worst, 0);
  ASSERT_GT(scores[slots[0]] - scores[worst], 1e-3);  // a real gap, not a tie
  slots[0] = worst;
  JudgeOptions options;
  options.precision = Precision::kFp32;
  const Verdict verdict =
      MustJudge(problem, reference, Candidate{selection, std::nullopt, std::nullopt, std::nullopt}, options);
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.selection.violation_rows, 1);
  ASSERT_EQ(verdict.selection.listed.size(), 1u);
  EXPECT_EQ(verdict.selection.listed[0].head, 1);
  EXPECT_EQ(verdict.selection.listed[0].row, 60);
}

TEST(Compare, InvalidSelectionIsReportedAndAttentionFallsBackToTheReferenceSelection) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  Candidate candidate = AllOf(reference);
  (*candidate.topk_indices)[4 * 50] = (*candidate.topk_indices)[4 * 50 + 3];  // duplicate the local block
  JudgeOptions options;
  options.precision = Precision::kFp32;
  const Verdict verdict = MustJudge(problem, reference, candidate, options);
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.selection.invalid_rows, 1);
  EXPECT_EQ(verdict.attention_selection, "reference");
  EXPECT_TRUE(Tensor(verdict, "out").passed);
}

TEST(Compare, NearTieFlipPassesAndIsCounted) {
  // Few-valued index inputs make exact ties. Find a row whose last ranked pick ties with a block it left out,
  // and swap them: a low-precision kernel may legitimately order ties differently.
  ProblemSpec spec;
  spec.config.num_q_heads = spec.config.num_kv_heads = 1;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 4;
  spec.config.block_size = 2;
  spec.config.top_k = 3;
  spec.lengths = {{40, 40}};
  spec.few_valued_index = true;
  const Problem problem = GenerateProblem(spec);
  const Outputs reference = Reference(problem);
  std::vector<int32_t> selection = reference.topk_indices;
  int64_t flipped_row = -1;
  for (int64_t t = 0; t < 40 && flipped_row < 0; ++t) {
    int32_t* slots = &selection[t * 3];
    const double* scores = &reference.block_scores[t * 20];
    const int64_t local = t / 2;
    if (local < 3) continue;
    for (int32_t b = 0; b < local; ++b) {
      if (b != slots[0] && b != slots[1] && scores[b] == scores[slots[1]]) {
        slots[1] = b;
        flipped_row = t;
        break;
      }
    }
  }
  ASSERT_GE(flipped_row, 0) << "no tie found: pick another seed";
  JudgeOptions options;
  options.precision = Precision::kBf16;
  Candidate candidate{selection, std::nullopt, std::nullopt, std::nullopt};
  // Attention computed by a correct kernel on its own (flipped) selection.
  std::vector<double> out(reference.out.size()), lse(reference.lse.size());
  ASSERT_TRUE(reference::AttendSelected(problem.config, problem.attention_inputs(), {selection.data()},
                                        {out.data(), lse.data()}, {})
                  .ok());
  candidate.out = out;
  candidate.lse = lse;
  const Verdict verdict = MustJudge(problem, reference, candidate, options);
  EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  EXPECT_EQ(verdict.selection.near_tie_rows, 1);
  EXPECT_EQ(verdict.attention_selection, "candidate");
  EXPECT_EQ(Tensor(verdict, "out").max_error, 0.0);  // judged on its own selection: no attention error at all
}

TEST(Compare, WrongSizeIsAnError) {
  const Problem problem = MakeProblem();
  const Outputs reference = Reference(problem);
  Candidate candidate;
  candidate.lse = std::vector<double>(3, 0.0);
  Verdict verdict;
  const Status status = Judge(problem, reference, candidate, {}, &verdict);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "lse has 3 elements: must have 300");
}

}  // namespace
}  // namespace msa
