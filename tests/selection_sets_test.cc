// The shortcuts that let the oracle skip work it would redo for the same answer, each checked against the
// long way: SameBlockSets (rows compared as sets), NaiveBlockScores (the naive block scores without the
// attention), a reordered selection measuring and judging like the reference's, a selection-only judgement
// giving the selection verdict of a full one, and `msa recall`'s per-setup progress lines without a terminal.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/naive_lowp.h"
#include "oracle/selection_contract.h"
#include "reference/reference.h"
#include "tests/run_cli.h"
#include "tools/msa/recall_sweep.h"

namespace msa {
namespace {

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Every row's valid history slots reversed (the local block stays last): an unordered kernel's selection.
std::vector<int32_t> ReverseHistory(std::vector<int32_t> topk_indices, int top_k) {
  for (size_t row = 0; row < topk_indices.size(); row += size_t(top_k)) {
    int32_t* slots = &topk_indices[row];
    const int64_t valid = std::find(slots, slots + top_k, -1) - slots;
    std::reverse(slots, slots + std::max<int64_t>(valid - 1, 0));
  }
  return topk_indices;
}

// A ragged batch with many blocks per row, so that reversing a row changes it.
Problem MakeProblem(Pooling pooling = Pooling::kMax) {
  ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 16;
  spec.config.block_size = 8;
  spec.config.top_k = 5;
  spec.config.pooling = pooling;
  spec.lengths = {{70, 70}, {5, 90}};
  spec.seed = 17;
  return GenerateProblem(spec);
}

TEST(SameBlockSets, ComparesEachRowAsASet) {
  const std::vector<int32_t> row = {3, 5, 1, 7, -1, -1};
  EXPECT_TRUE(SameBlockSets(row, row, 6));
  EXPECT_TRUE(SameBlockSets(row, {1, 3, 5, 7, -1, -1}, 6));
  EXPECT_FALSE(SameBlockSets(row, {3, 5, 2, 7, -1, -1}, 6));                   // another block
  EXPECT_FALSE(SameBlockSets(row, {3, 5, 1, 7, 7, -1}, 6));                    // a longer valid prefix
  EXPECT_FALSE(SameBlockSets({3, -1, 5}, {5, -1, 3}, 3));                      // the same ids, another valid prefix
  EXPECT_FALSE(SameBlockSets({3, 5, -1}, {3, -1, 5}, 3));                      // the padding in another place
  EXPECT_TRUE(SameBlockSets({3, 5, -1, 2, 1, -1}, {5, 3, -1, 1, 2, -1}, 3));   // two rows, each reordered
  EXPECT_FALSE(SameBlockSets({3, 5, -1, 2, 1, -1}, {2, 1, -1, 3, 5, -1}, 3));  // rows swapped
  EXPECT_FALSE(SameBlockSets(row, {3, 5, 1}, 3));                              // sizes differ
}

TEST(NaiveBlockScores, AreNaiveEvaluatesBlockScoresBitForBit) {
  for (const TestCase& test_case : CanonicalCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunReference(problem, &reference).ok()) << test_case.name;
    for (Precision precision : {Precision::kExact, Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      EXPECT_TRUE(SameBits(NaiveBlockScores(problem, precision),
                           NaiveEvaluate(problem, precision, reference.topk_indices).block_scores))
          << test_case.name << " at " << PrecisionName(precision);
    }
  }
}

// The premise of Judge's shortcut: on a selection holding the reference's blocks in another order, every
// expectation Judge would recompute equals the reference's, bit for bit.
TEST(ReorderedSelection, GivesTheReferencesExpectationsBitForBit) {
  for (Pooling pooling : {Pooling::kMax, Pooling::kLse, Pooling::kMean}) {
    const Problem problem = MakeProblem(pooling);
    const Config& c = problem.config;
    Outputs reference;
    ASSERT_TRUE(RunReference(problem, &reference).ok());
    const std::vector<int32_t> reordered = ReverseHistory(reference.topk_indices, c.top_k);
    ASSERT_NE(reordered, reference.topk_indices);
    ASSERT_TRUE(SameBlockSets(reordered, reference.topk_indices, c.top_k));
    std::vector<double> out(reference.out.size()), lse(reference.lse.size()), index_lse(reference.index_lse.size());
    ASSERT_TRUE(FindBackend("reference")
                    ->attend(c, problem.attention_inputs(), {reordered.data()}, {out.data(), lse.data()}, {})
                    .ok());
    ASSERT_TRUE(reference::IndexLseForSelection(c, problem.index_inputs(), {reordered.data()}, index_lse.data()).ok());
    EXPECT_TRUE(SameBits(out, reference.out));
    EXPECT_TRUE(SameBits(lse, reference.lse));
    EXPECT_TRUE(SameBits(index_lse, reference.index_lse));
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      const NaiveOutputs on_reordered = NaiveEvaluate(problem, precision, reordered);
      const NaiveOutputs on_reference = NaiveEvaluate(problem, precision, reference.topk_indices);
      EXPECT_TRUE(SameBits(on_reordered.out, on_reference.out));
      EXPECT_TRUE(SameBits(on_reordered.lse, on_reference.lse));
      EXPECT_TRUE(SameBits(on_reordered.index_lse, on_reference.index_lse));
    }
  }
}

// A selection-only judgement gives the same selection verdict (tau included) as a judgement of the same
// selection with outputs, and judges no tensor.
TEST(SelectionOnlyJudge, GivesTheSelectionVerdictOfAFullJudgement) {
  const Problem problem = MakeProblem();
  const Config& c = problem.config;
  Outputs reference;
  ASSERT_TRUE(RunReference(problem, &reference).ok());
  // Candidates: reordered rows, and a flip in the last row (the decode query over 90 keys: 12 blocks, 4 ranked
  // picks then the local block): its last ranked pick swapped for the best block it left out.
  std::vector<int32_t> flipped = reference.topk_indices;
  const int64_t max_blocks = MaxBlocks(c, problem.batch()), last_row = c.num_kv_heads * problem.batch().total_q() - 1;
  int32_t* row = &flipped[last_row * c.top_k];
  const double* scores = &reference.block_scores[last_row * max_blocks];
  int32_t best_left_out = -1;
  for (int32_t b = 0; b < 11; ++b) {
    if (std::find(row, row + c.top_k, b) == row + c.top_k && (best_left_out < 0 || scores[b] > scores[best_left_out])) {
      best_left_out = b;
    }
  }
  ASSERT_GE(best_left_out, 0);
  ASSERT_EQ(row[c.top_k - 1], 11);  // the local block last
  row[c.top_k - 2] = best_left_out;
  for (const std::vector<int32_t>& selection : {ReverseHistory(reference.topk_indices, c.top_k), flipped}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      JudgeOptions options;
      options.precision = precision;
      Verdict selection_only, full;
      ASSERT_TRUE(Judge(problem, reference, Candidate{selection, {}, {}, {}}, options, &selection_only).ok());
      ASSERT_TRUE(Judge(problem, reference, Candidate{selection, reference.out, reference.lse, reference.index_lse},
                        options, &full)
                      .ok());
      EXPECT_TRUE(selection_only.tensors.empty());
      EXPECT_EQ(full.tensors.size(), 3u);
      const SelectionVerdict &a = selection_only.selection, &b = full.selection;
      EXPECT_EQ(std::memcmp(&a.tau, &b.tau, sizeof(double)), 0);
      EXPECT_EQ(a.passed, b.passed);
      EXPECT_EQ(a.rows, b.rows);
      EXPECT_EQ(a.identical_rows, b.identical_rows);
      EXPECT_EQ(a.near_tie_rows, b.near_tie_rows);
      EXPECT_EQ(a.violation_rows, b.violation_rows);
      EXPECT_EQ(a.invalid_rows, b.invalid_rows);
      EXPECT_EQ(selection_only.attention_selection, full.attention_selection);
      EXPECT_EQ(a.identical_rows, a.rows - (selection == flipped ? 1 : 0));  // the flip is judged, not skipped
    }
  }
}

// The premise of the recall sweep's shortcut, and the sweep itself: a backend whose rows hold the reference's
// blocks in another order measures exactly the reference's recall and agrees with it.
Status SelectReversed(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                      const ProgressFn& progress) {
  Config exact = config;
  exact.precision = Precision::kExact;
  MSA_RETURN_IF_ERROR(FindBackend("reference")->select(exact, inputs, outputs, progress));
  const int64_t size = config.num_kv_heads * inputs.batch.total_q() * config.top_k;
  const std::vector<int32_t> reversed =
      ReverseHistory(std::vector<int32_t>(outputs.topk_indices, outputs.topk_indices + size), config.top_k);
  std::copy(reversed.begin(), reversed.end(), outputs.topk_indices);
  return Status::Ok();
}

TEST(ReorderedSelection, MeasuresAndAgreesLikeTheReference) {
  RecallSetup setup;
  setup.config.num_q_heads = 2;
  setup.config.num_kv_heads = 1;
  setup.config.head_dim = setup.config.value_dim = setup.config.index_head_dim = 16;
  setup.config.block_size = 16;
  setup.config.top_k = 6;
  setup.context = 512;
  setup.queries = 3;
  setup.sequences = 2;
  setup.distance = 200;
  setup.strength = 3;
  ASSERT_TRUE(ValidateRecallSetup(setup).ok());
  const PlantedProblem planted = PlantNeedles(setup, NoiseProblem(setup));
  Outputs reference;
  ASSERT_TRUE(RunReference(planted.problem, &reference).ok());
  const std::vector<int32_t> reordered = ReverseHistory(reference.topk_indices, setup.config.top_k);
  ASSERT_NE(reordered, reference.topk_indices);
  const RecallMeasure a = MeasureRecall(planted, reference.topk_indices), b = MeasureRecall(planted, reordered);
  EXPECT_EQ(a.needles, b.needles);
  EXPECT_EQ(a.hits, b.hits);
  for (auto field : {&RecallMeasure::needle_recall, &RecallMeasure::mass_recall_mean, &RecallMeasure::mass_recall_min,
                     &RecallMeasure::kept_fraction}) {
    EXPECT_EQ(std::memcmp(&(a.*field), &(b.*field), sizeof(double)), 0);
  }

  const Backend reversed{"reversed", [] { return true; }, [](const Config&) { return Status::Ok(); }, SelectReversed,
                         nullptr};
  RecallSweep sweep;
  sweep.base = setup;
  sweep.contexts = {setup.context};
  sweep.distances = {setup.distance};
  sweep.strengths = {setup.strength};
  sweep.top_ks = {setup.config.top_k};
  sweep.block_sizes = {setup.config.block_size};
  sweep.poolings = {Pooling::kMax, Pooling::kMean};
  sweep.backends = {FindBackend("reference"), &reversed};
  sweep.precision = Precision::kBf16;
  std::vector<RecallPoint> points;
  ASSERT_TRUE(RunRecallSweep(sweep, {}, &points).ok());
  ASSERT_EQ(points.size(), 4u);
  for (size_t i = 0; i < points.size(); i += 2) {
    const RecallPoint &ref = points[i], &other = points[i + 1];
    EXPECT_EQ(other.measure.hits, ref.measure.hits);
    EXPECT_EQ(std::memcmp(&other.measure.mass_recall_mean, &ref.measure.mass_recall_mean, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&other.measure.kept_fraction, &ref.measure.kept_fraction, sizeof(double)), 0);
    EXPECT_EQ(other.recall_flips, 0);
    EXPECT_EQ(other.near_tie_rows, 0);
    EXPECT_EQ(other.violation_rows, 0);
    EXPECT_TRUE(other.agrees);
  }
}

// Without a terminal, `msa recall` says on stderr which setup it starts and when, one line each; stdout holds
// the header and the table only.
TEST(RecallProgress, OneLinePerSetupOnStderrWithoutATerminal) {
  const CliResult result =
      RunMsa({"recall", "--context",  "128", "--distance", "16,64", "--strength",  "4",   "--block-size",
              "8",      "--top-k",    "3",   "--pooling",  "max",   "--queries",   "1",   "--sequences",
              "1",      "--head-dim", "4",   "--backends", "simd",  "--precision", "fp32"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("msa recall: setup 1/2 (context 128, Bk 8, distance 16, a 4, top_k 3, max) at ", 0), 0u)
      << result.err;
  EXPECT_NE(result.err.find("\nmsa recall: setup 2/2 (context 128, Bk 8, distance 64, a 4, top_k 3, max) at "),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("\nmsa recall: 2 setups done in "), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 3) << result.err;
  EXPECT_EQ(result.out.find("setup 1/2"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.rfind("msa recall: 2 setups x backends reference, simd", 0), 0u) << result.out;
}

}  // namespace
}  // namespace msa
