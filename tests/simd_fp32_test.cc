// The SIMD backend's fp32 mode (simd/fp32.h), judged by the oracle's rules (SPEC section 5) through msa::Judge:
//   - every CanonicalCases() case, plus the cases with rows of more than 512 selected keys and those of
//     several forced local blocks and of fp16 block scores with ties (oracle/case_list.cc), on EVERY Highway target
//     compiled in (forced one at a time with hwy::SetSupportedTargetsForTest, as Highway's own tests do; a
//     target the CPU lacks is skipped): its own Select + Attend, and its Attend on the reference selection,
//     pass; near-tie flips are counted, not failed;
//   - larger M3-shaped problems (D 128, Bk 128, top_k 16, bf16 / f16 / f32 inputs): a 4096-token prefill, chunked
//     prefill, decode over 16K keys, every pooling mode, blocks larger than a score chunk, wide GQA groups;
//   - determinism: the same bits for 1, 2 and 7 OpenMP threads, including the decode paths that split one row's
//     work over threads;
//   - the rank order (score descending, then id ascending; init blocks, the other forced local blocks, local
//     last, -1 padding) equals the reference's on ties, signed zeros, init blocks and overlapping forced sets;
//   - values too large for fp32 are refused with a message, never returned as NaN; fp16 block scores beyond
//     binary16 with the reference's message.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/precision.h"
#include "oracle/problem.h"
#include "oracle/random.h"
#include "reference/reference.h"
#include "simd/fp32.h"
#include "simd/fp32_common.h"
#include "simd/simd_backend.h"
#include "tests/simd_targets.h"

namespace msa {
namespace {

const Backend& Simd() { return *FindBackend("simd"); }

ProblemSpec AtFp32(ProblemSpec spec) {
  spec.config.precision = Precision::kFp32;
  return spec;
}

// The reference outputs of a problem, computed once per test binary (the large cases take seconds).
const Outputs& ReferenceOutputs(const std::string& name, const Problem& problem) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Outputs>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Outputs>& outputs = cache[name];
  if (!outputs) {
    outputs = std::make_unique<Outputs>();
    const Status status = RunReference(problem, outputs.get());
    EXPECT_TRUE(status.ok()) << status.message();
  }
  return *outputs;
}

JudgeOptions Fp32Rules() {
  JudgeOptions options;
  options.precision = Precision::kFp32;
  return options;
}

// Runs fp32 mode on `spec` (own selection, then Attend on the reference selection) and judges both.
// Returns the near-tie flips of its own selection.
int64_t ExpectPassesTheOracle(const std::string& name, const ProblemSpec& spec) {
  const Problem problem = GenerateProblem(AtFp32(spec));
  const Outputs& reference = ReferenceOutputs(name, problem);
  Outputs own;
  const Status status = RunBackend(Simd(), problem, &own);
  EXPECT_TRUE(status.ok()) << name << ": " << status.message();
  if (!status.ok()) return 0;
  Verdict verdict;
  EXPECT_TRUE(
      Judge(problem, reference,
            Candidate{.topk_indices = own.topk_indices, .out = own.out, .lse = own.lse, .index_lse = own.index_lse},
            Fp32Rules(), &verdict)
          .ok());
  EXPECT_TRUE(verdict.passed()) << name << " (own selection):\n" << FormatVerdict(verdict);
  EXPECT_EQ(verdict.selection.invalid_rows, 0);

  Outputs on_reference;
  on_reference.Allocate(problem);
  const Status attend = Attend(Simd(), problem.config, problem.attention_inputs(),
                               SelectionView{reference.topk_indices.data()}, on_reference.attention_outputs());
  EXPECT_TRUE(attend.ok()) << attend.message();
  Verdict attention;
  EXPECT_TRUE(
      Judge(problem, reference, Candidate{.out = on_reference.out, .lse = on_reference.lse}, Fp32Rules(), &attention)
          .ok());
  EXPECT_TRUE(attention.passed()) << name << " (reference selection):\n" << FormatVerdict(attention);

  // block_scores are fp32 values of the pooled scores: within tau of the FP64 ones wherever visible; fp16 scores
  // are binary16 roundings of those, so an fp32 max within tau of a rounding midpoint may land one binary16 step
  // from the reference's.
  const bool fp16_scores = problem.config.score_format == ScoreFormat::kFp16;
  for (size_t i = 0; i < own.block_scores.size(); ++i) {
    if (std::isinf(reference.block_scores[i])) {
      EXPECT_EQ(own.block_scores[i], reference.block_scores[i]) << name << " block_scores[" << i << "]";
    } else {
      const double allowed = fp16_scores ? UlpAt(reference.block_scores[i], Precision::kFp16) : verdict.selection.tau;
      EXPECT_NEAR(own.block_scores[i], reference.block_scores[i], allowed) << name << " block_scores[" << i << "]";
    }
  }
  testing::Test::RecordProperty("near_tie_rows", std::to_string(verdict.selection.near_tie_rows));
  std::cout << "[ fp32     ] " << name << ": " << verdict.selection.rows << " selection rows, "
            << verdict.selection.identical_rows << " identical, " << verdict.selection.near_tie_rows
            << " near-tie flip(s) within tau = " << verdict.selection.tau << "; out max error "
            << (verdict.tensors.empty() ? 0.0 : verdict.tensors[0].max_error) << " (bound "
            << (verdict.tensors.empty() ? 0.0 : verdict.tensors[0].bound) << ")\n";
  return verdict.selection.near_tie_rows;
}

// ---- every canonical case on every compiled target ----------------------------------------------------------

struct TargetCase {
  int64_t target;
  TestCase test_case;
  std::string name;
};

void PrintTo(const TargetCase& c, std::ostream* os) { *os << c.name; }

// The canonical cases, rows of more than 512 selected keys (their fp32 path) at small dims, and the forced blocks
// and fp16 score cases.
std::vector<TestCase> TargetTestCases() { return CasesTagged(kTagCanonical | kTagLongRows | kTagForcedAndFp16); }

std::vector<TargetCase> AllTargetCases() {
  std::vector<TargetCase> cases;
  for (int64_t target : RunnableTargetList()) {
    for (const TestCase& test_case : TargetTestCases()) {
      cases.push_back({target, test_case, simd::TargetName(target) + "_" + test_case.name});
    }
  }
  return cases;
}

class Fp32OnEveryTarget : public testing::TestWithParam<TargetCase> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam().target); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(Fp32OnEveryTarget, PassesTheOracle) {
  ExpectPassesTheOracle(GetParam().test_case.name, GetParam().test_case.spec);
  EXPECT_EQ(simd::LastDispatchedTarget(), GetParam().target) << "the forced target did not run";
}

INSTANTIATE_TEST_SUITE_P(Canonical, Fp32OnEveryTarget, testing::ValuesIn(AllTargetCases()),
                         [](const testing::TestParamInfo<TargetCase>& info) { return info.param.name; });

// Where fp32 computes every block score exactly (index inputs in {-1, 0, 1}, an index_scale of few significant
// bits: the canonical fp16_scores_ties and the simd midpoints cases), the fp16 block scores and the selection
// are the reference's bit for bit on every target: binary16 midpoints round to even, and scores tied before or
// by the rounding go by block id.
TEST(Fp32Fp16Scores, ExactlyComputedScoresRoundAndRankAsTheReferenceOnEveryTarget) {
  int64_t cases = 0;
  for (const TestCase& test_case : TargetTestCases()) {
    if (test_case.spec.config.score_format != ScoreFormat::kFp16 || !test_case.spec.few_valued_index) continue;
    ++cases;
    const Problem problem = GenerateProblem(AtFp32(test_case.spec));
    const Outputs& reference = ReferenceOutputs(test_case.name, problem);
    for (int64_t target : RunnableTargetList()) {
      hwy::SetSupportedTargetsForTest(target);
      Outputs own;
      own.Allocate(problem);
      const Status status = Select(Simd(), problem.config, problem.index_inputs(), own.selection_outputs());
      hwy::SetSupportedTargetsForTest(0);
      ASSERT_TRUE(status.ok()) << status.message();
      const std::string where = test_case.name + " on " + simd::TargetName(target);
      EXPECT_EQ(own.topk_indices, reference.topk_indices) << where;
      EXPECT_EQ(own.block_scores, reference.block_scores) << where;
    }
  }
  EXPECT_EQ(cases, 3);
}

// ---- larger M3-shaped problems (best target) -----------------------------------------------------------------

// M3-shaped prefill, chunked prefill with lse pooling, mean pooling with partial local blocks, decode over long
// contexts, blocks larger than a score chunk, wide GQA groups.
class Fp32Large : public testing::TestWithParam<TestCase> {};

TEST_P(Fp32Large, PassesTheOracle) { ExpectPassesTheOracle(GetParam().name, GetParam().spec); }

INSTANTIATE_TEST_SUITE_P(M3Size, Fp32Large, testing::ValuesIn(CasesTagged(kTagM3Size)),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });

// ---- determinism ---------------------------------------------------------------------------------------------

Outputs RunWithThreads(const Problem& problem, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Outputs outputs;
  const Status status = RunBackend(Simd(), problem, &outputs);
  omp_set_num_threads(saved);
  EXPECT_TRUE(status.ok()) << status.message();
  return outputs;
}

template <typename T>
void ExpectSameBits(const std::vector<T>& got, const std::vector<T>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &expected[i], sizeof(T)), 0)
        << what << "[" << i << "]: " << got[i] << " vs " << expected[i];
  }
}

TEST(Fp32Determinism, SameBitsForOneTwoAndSevenThreads) {
  // Few rows over long keys (kTagThreadSplit): the index tile and the attention rows are split over threads.
  for (const auto& [name, spec, tags] : CasesTagged(kTagCanonical | kTagForcedAndFp16 | kTagThreadSplit)) {
    const Problem problem = GenerateProblem(AtFp32(spec));
    const Outputs one = RunWithThreads(problem, 1);
    for (int threads : {2, 7}) {
      const Outputs many = RunWithThreads(problem, threads);
      const std::string what = name + " with " + std::to_string(threads) + " threads: ";
      ExpectSameBits(many.topk_indices, one.topk_indices, what + "topk_indices");
      ExpectSameBits(many.block_scores, one.block_scores, what + "block_scores");
      ExpectSameBits(many.index_lse, one.index_lse, what + "index_lse");
      ExpectSameBits(many.out, one.out, what + "out");
      ExpectSameBits(many.lse, one.lse, what + "lse");
    }
  }
}

// ---- rank order ----------------------------------------------------------------------------------------------

TEST(Fp32Rank, PlaceRowEqualsTheReferenceOnTiesSignedZerosInitAndLocalBlocks) {
  RandomStream random(42, 1);
  const float values[] = {-0.0f, 0.0f, 1.0f, -1.0f, 2.5f, 1e-30f, -1e30f, 3.0f};
  std::vector<uint64_t> keys;
  for (int trial = 0; trial < 20000; ++trial) {
    Config config;
    config.init_blocks = int(random.Below(4));
    config.local_blocks = 1 + int(random.Below(4));
    config.top_k = config.init_blocks + config.local_blocks + int(random.Below(8));
    const int64_t visible = 1 + int64_t(random.Below(40));
    std::vector<float> scores(visible);
    std::vector<double> widened(visible);
    for (int64_t b = 0; b < visible; ++b) {
      scores[b] = trial % 2 ? values[random.Below(8)] : float(random.Normal());
      widened[b] = scores[b];
    }
    std::vector<int32_t> got(config.top_k), expected(config.top_k);
    simd::fp32::PlaceRow(config, scores.data(), visible, got.data(), &keys);
    reference::PlaceSelection(config, widened.data(), visible, expected.data());
    ASSERT_EQ(got, expected) << "trial " << trial << ", visible " << visible << ", top_k " << config.top_k << ", init "
                             << config.init_blocks << ", local_blocks " << config.local_blocks;
  }
}

// ---- values fp32 cannot hold ---------------------------------------------------------------------------------

TEST(Fp32Range, ValuesBeyondFp32AreRefusedWithAMessage) {
  ProblemSpec spec = MakeSpec(4, 2, 16, 8, 3, 0, Pooling::kMax, {{20, 20}}, DType::kF64, 401);
  spec.query_scale = 1e40;  // f64 queries near 1e40: fine for the reference, beyond fp32
  const Problem problem = GenerateProblem(AtFp32(spec));
  Outputs outputs;
  outputs.Allocate(problem);
  const Status select = Select(Simd(), problem.config, problem.index_inputs(), outputs.selection_outputs());
  EXPECT_EQ(select.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(select.message().find("fp32"), std::string::npos) << select.message();

  std::vector<int32_t> selection(problem.config.num_kv_heads * 20 * problem.config.top_k, -1);
  for (int64_t r = 0; r < problem.config.num_kv_heads; ++r) {
    for (int64_t t = 0; t < 20; ++t) selection[(r * 20 + t) * problem.config.top_k] = int32_t(t / 8);
  }
  const Status attend = Attend(Simd(), problem.config, problem.attention_inputs(), SelectionView{selection.data()},
                               outputs.attention_outputs());
  EXPECT_EQ(attend.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(attend.message().find("fp32"), std::string::npos) << attend.message();
}

TEST(Fp32Range, ScoresThatOverflowFp32AreRefusedWithAMessage) {
  // Inputs near 1e20 fit in fp32, their dot products (about 1e40) do not.
  ProblemSpec spec = MakeSpec(64, 4, 128, 128, 16, 0, Pooling::kMax, {{2, 1500}}, DType::kF32, 402);
  spec.query_scale = 1e20;
  Problem problem = GenerateProblem(AtFp32(spec));
  for (int64_t s = 0; s < 1500; ++s) {
    for (int64_t d = 0; d < 128; ++d) {
      SetElement(problem.index_k, s, 0, d, 1e20);
      for (int64_t r = 0; r < 4; ++r) SetElement(problem.k, s, r, d, 1e20);
    }
  }
  Outputs outputs;
  outputs.Allocate(problem);
  const Status select = Select(Simd(), problem.config, problem.index_inputs(), outputs.selection_outputs());
  EXPECT_EQ(select.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(select.message().find("not finite in fp32"), std::string::npos) << select.message();
  std::vector<int32_t> selection(4 * 2 * 16, -1);  // rows of 12 blocks (1500 keys): the fp32 path
  for (int64_t row = 0; row < 4 * 2; ++row) {
    for (int32_t b = 0; b < 12; ++b) selection[row * 16 + b] = b;
  }
  const Status attend = Attend(Simd(), problem.config, problem.attention_inputs(), SelectionView{selection.data()},
                               outputs.attention_outputs());
  EXPECT_EQ(attend.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(attend.message().find("not finite in fp32"), std::string::npos) << attend.message();
}

// fp16 block scores beyond binary16 in rows (query 2, group 1) and (query 4, group 0) only: refused with the
// reference's message, which names the first in query-major order.
TEST(Fp32Range, Fp16ScoresBeyondBinary16AreRefusedAsTheReferenceRefusesThem) {
  ProblemSpec spec = MakeSpec(4, 2, 12, 4, 3, 0, Pooling::kMax, {{5, 9}, {3, 30}}, DType::kF64, 11);
  spec.config.score_format = ScoreFormat::kFp16;
  Problem problem = GenerateProblem(AtFp32(spec));
  for (const auto& [t, r] : {std::pair{2, 1}, std::pair{4, 0}}) {
    for (int64_t d = 0; d < spec.config.index_head_dim; ++d) {
      SetElement(problem.index_q, t, r, d, 1e7 * (d % 2 ? 1 : -1));
    }
  }
  Outputs reference, outputs;
  const Status refused = RunReference(problem, &reference);
  EXPECT_NE(refused.message().find("block score of query 2, group 1 overflows binary16"), std::string::npos)
      << refused.message();
  outputs.Allocate(problem);
  const Status select = Select(Simd(), problem.config, problem.index_inputs(), outputs.selection_outputs());
  EXPECT_EQ(select.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(select.message(), refused.message());
}

TEST(Fp32Registry, SimdSupportsExactAndFp32Only) {
  Config config;
  for (Precision precision : {Precision::kExact, Precision::kFp32}) {
    config.precision = precision;
    EXPECT_TRUE(Simd().supports(config).ok()) << PrecisionName(precision);
  }
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    config.precision = precision;
    EXPECT_EQ(Simd().supports(config).code(), StatusCode::kUnsupported) << PrecisionName(precision);
  }
}

}  // namespace
}  // namespace msa
