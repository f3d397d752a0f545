// The SIMD backend's exact mode on EVERY Highway target compiled into it (as Highway's own tests do: each
// target is forced with hwy::SetSupportedTargetsForTest; a target the CPU lacks is skipped and said so):
//   - vector exp and log equal the scalar CanonicalExp / CanonicalLog bit for bit on millions of inputs
//     (random bit patterns, the used ranges, every branch boundary, special values);
//   - the tiled vector dot equals CanonicalDot bit for bit (any length, tile edges, zeros of both signs,
//     overflow to inf and NaN);
//   - every output (topk_indices, block_scores, index_lse, out, lse) equals the reference bit for bit on every
//     CanonicalCases() case, the cases of several forced local blocks and of fp16 block scores with ties
//     (kTagForcedAndFp16 in oracle/case_list.cc) and random rapidcheck problems (local_blocks 1..3, score_format fp16
//     under max pooling), for 1, 2 and 7 OpenMP threads, and the non-finite-score and fp16-overflow errors are the
//     reference's;
//   - the forced target is the one that ran (LastDispatchedTarget), and it changes with the forced target.
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "hwy/targets.h"
#include "oracle/cases.h"
#include "oracle/problem.h"
#include "reference/canonical.h"
#include "reference/exp_log.h"
#include "simd/exact.h"
#include "simd/simd_backend.h"
#include "tests/arbitrary.h"
#include "tests/first_difference.h"
#include "tests/simd_targets.h"

namespace msa {
namespace {

using exp_log_internal::FromBits;
using exp_log_internal::ToBits;

constexpr int kThreadCounts[] = {1, 2, 7};

// ---- targets -----------------------------------------------------------------------------------------------

std::set<int64_t>& TargetsRun() {
  static std::set<int64_t> targets;
  return targets;
}

std::string Names(const std::vector<int64_t>& targets) {
  std::string names;
  for (int64_t target : targets) names += (names.empty() ? "" : " ") + simd::TargetName(target);
  return names.empty() ? "none" : names;
}

// Prints, once all tests ran, which targets were compiled, which ran and which the CPU lacks.
class TargetReport : public testing::Environment {
 public:
  void TearDown() override {
    std::vector<int64_t> ran, skipped;
    const int64_t cpu = CpuTargets();
    for (int64_t target : CompiledTargetList()) ((cpu & target) ? ran : skipped).push_back(target);
    std::vector<int64_t> ran_here(TargetsRun().begin(), TargetsRun().end());
    std::cout << "[ simd     ] compiled targets: " << Names(CompiledTargetList()) << "; ran: " << Names(ran_here)
              << "; not tested (not supported by this CPU): " << Names(skipped) << "\n";
  }
};
[[maybe_unused]] const testing::Environment* const kTargetReport = testing::AddGlobalTestEnvironment(new TargetReport);

// A test run once per compiled target this CPU runs, with that target forced.
class SimdTarget : public testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    TargetsRun().insert(GetParam());
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }

  // The call just made ran on the forced target.
  void ExpectRanOnTheForcedTarget() const {
    EXPECT_EQ(simd::TargetName(simd::LastDispatchedTarget()), simd::TargetName(GetParam()));
  }
};

std::string TargetParamName(const testing::TestParamInfo<int64_t>& info) { return simd::TargetName(info.param); }

INSTANTIATE_TEST_SUITE_P(EveryCompiledTarget, SimdTarget, testing::ValuesIn(RunnableTargetList()), TargetParamName);

// ---- inputs for exp and log --------------------------------------------------------------------------------

// SplitMix64: the project's own counter-based generator style (no std distributions).
class Bits {
 public:
  explicit Bits(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * double(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// The double `steps` representations away from x (bit patterns, wrapping): neighbours of the same sign.
double NextUp(double x, int64_t steps) { return FromBits(ToBits(x) + uint64_t(steps)); }

// x and its neighbours within `ulps` (same sign), both signs.
void AddAround(std::vector<double>& inputs, double x, int ulps) {
  for (double base : {x, -x}) {
    for (int step = -ulps; step <= ulps; ++step) inputs.push_back(NextUp(base, step));
  }
}

void AddSpecials(std::vector<double>& inputs) {
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             -std::numeric_limits<double>::quiet_NaN(),
                             FromBits(0x7FF0000000000001ULL),  // signalling NaN
                             FromBits(0xFFF4000000000123ULL),  // negative signalling NaN with a payload
                             FromBits(0x7FF8DEADBEEF0001ULL),  // quiet NaN with a payload
                             std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::lowest(),
                             std::numeric_limits<double>::min(),
                             std::numeric_limits<double>::denorm_min(),
                             -std::numeric_limits<double>::denorm_min(),
                             1.0,
                             -1.0,
                             2.0,
                             0.5};
  inputs.insert(inputs.end(), std::begin(specials), std::end(specials));
}

std::vector<double> ExpInputs() {
  using namespace exp_log_internal;
  std::vector<double> inputs;
  Bits bits(0x5EED0001);
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(FromBits(bits.Next()));        // any bit pattern
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(bits.Uniform(-750.0, 750.0));  // the used range
  for (int i = 0; i < (1 << 20); ++i) {  // |x| from 2^-60 to 2^10: every reduction branch
    const uint64_t exponent = 1023 - 60 + bits.Next() % 71;
    inputs.push_back(FromBits((bits.Next() & 0x800FFFFFFFFFFFFFULL) | (exponent << 52)));
  }
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(bits.Uniform(-40.0, 0.0));  // softmax: s - m <= 0
  // Branch boundaries: overflow, underflow, |x| = 0.5 ln2 and 1.5 ln2 (high-word tests), 2^-28.
  AddAround(inputs, kExpOverflow, 64);
  AddAround(inputs, -kExpUnderflow, 64);
  AddAround(inputs, FromBits(0x3FD62E42FFFFFFFFULL), 64);
  AddAround(inputs, FromBits(0x3FD62E4300000000ULL), 64);
  AddAround(inputs, FromBits(0x3FF0A2B200000000ULL), 64);
  AddAround(inputs, FromBits(0x3E30000000000000ULL), 64);
  AddAround(inputs, 0.5 * kLn2Hi, 16);
  AddAround(inputs, 1.5 * kLn2Hi, 16);
  // Rounding boundaries of k = round(x / ln2): x = (k + 1/2) ln2 for every k, and the k = 1024 scaling.
  for (int k = -1030; k <= 1030; ++k) AddAround(inputs, (k + 0.5) * (kLn2Hi + kLn2Lo), 4);
  AddAround(inputs, 1023.5 * (kLn2Hi + kLn2Lo), 256);
  AddSpecials(inputs);
  return inputs;
}

std::vector<double> LogInputs() {
  std::vector<double> inputs;
  Bits bits(0x5EED0002);
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(FromBits(bits.Next()));        // any bit pattern
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(FromBits(bits.Next() >> 1));   // any positive double
  for (int i = 0; i < (1 << 19); ++i) inputs.push_back(FromBits(bits.Next() >> 12));  // subnormals
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(bits.Uniform(1.0, 4096.0));    // softmax sums l
  // Near 1 (|f| < 2^-20: hx in {0, 0xFFFFE, 0xFFFFF}), at any exponent and low word.
  for (int i = 0; i < (1 << 18); ++i) {
    const uint64_t hx[] = {0x00000, 0xFFFFE, 0xFFFFF, 0x00001, 0xFFFFD};
    const uint64_t exponent = (i % 4 == 0) ? 1023 : 1 + bits.Next() % 2046;
    inputs.push_back(FromBits((exponent << 52) | (hx[bits.Next() % 5] << 32) | (bits.Next() & 0xFFFFFFFFULL)));
  }
  // The f^2/2 band 0x6147A <= hx <= 0x6B851 and the sqrt(2) split (0x95F64 + hx overflowing into bit 20).
  for (uint64_t hx : {0x61478ULL, 0x61479ULL, 0x6147AULL, 0x6147BULL, 0x6B850ULL, 0x6B851ULL, 0x6B852ULL, 0x6A09BULL,
                      0x6A09CULL, 0x6A09DULL, 0x6A09EULL}) {
    for (int i = 0; i < 4096; ++i) {
      const uint64_t exponent = (i % 4 == 0) ? 1023 : 1 + bits.Next() % 2046;
      inputs.push_back(FromBits((exponent << 52) | (hx << 32) | (bits.Next() & 0xFFFFFFFFULL)));
    }
  }
  for (int e = -1074; e <= 1023; ++e) AddAround(inputs, std::ldexp(1.0, e), 2);  // powers of two
  AddSpecials(inputs);
  return inputs;
}

// Runs `vector_fn` on `inputs` and compares with `scalar_fn` bit for bit; reports the first mismatches.
template <typename VectorFn, typename ScalarFn>
void ExpectBitIdentical(const char* name, const std::vector<double>& inputs, VectorFn vector_fn, ScalarFn scalar_fn) {
  std::vector<double> got(inputs.size());
  vector_fn(inputs.data(), inputs.size(), got.data());
  int64_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double expected = scalar_fn(inputs[i]);
    if (ToBits(got[i]) == ToBits(expected)) continue;
    if (++mismatches <= 8) {
      first.precision(17);
      first << "\n  " << name << "(" << inputs[i] << " = 0x" << std::hex << ToBits(inputs[i]) << ") vector 0x"
            << ToBits(got[i]) << " scalar 0x" << ToBits(expected) << std::dec;
    }
  }
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << inputs.size() << " inputs differ:" << first.str();
}

TEST_P(SimdTarget, VectorExpIsBitIdenticalToCanonicalExp) {
  static const std::vector<double> inputs = ExpInputs();
  ExpectBitIdentical("exp", inputs, simd::CanonicalExpArray, [](double x) { return CanonicalExp(x); });
  ExpectRanOnTheForcedTarget();
}

TEST_P(SimdTarget, VectorLogIsBitIdenticalToCanonicalLog) {
  static const std::vector<double> inputs = LogInputs();
  ExpectBitIdentical("log", inputs, simd::CanonicalLogArray, [](double x) { return CanonicalLog(x); });
  ExpectRanOnTheForcedTarget();
}

// Every length 0..80 (tails of every size), tile edges (1..9 rows and columns), values that are zeros of
// both signs (the sign of a zero sum) and values whose products overflow (inf, inf - inf = NaN).
TEST_P(SimdTarget, VectorDotIsBitIdenticalToCanonicalDot) {
  Bits bits(0x5EED0003);
  int64_t mismatches = 0, dots = 0;
  std::ostringstream first;
  for (int kind = 0; kind < 3; ++kind) {
    for (size_t n = 0; n <= 80; ++n) {
      const size_t rows = 1 + bits.Next() % 9, cols = 1 + bits.Next() % 9;
      std::vector<double> a(rows * n), b(cols * n), out(rows * cols);
      for (std::vector<double>* v : {&a, &b}) {
        for (double& x : *v) {
          const double u = bits.Uniform(-1.0, 1.0);
          x = kind == 0   ? u
              : kind == 1 ? (bits.Next() % 3 == 0 ? 0.0
                             : bits.Next() % 2    ? -0.0
                                                  : u * 1e-300)
                          : (bits.Next() % 4 == 0 ? u * 1e300 : u);
        }
      }
      simd::CanonicalDotMatrix(a.data(), rows, b.data(), cols, n, out.data());
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < cols; ++j, ++dots) {
          const double expected = CanonicalDot(a.data() + i * n, b.data() + j * n, int64_t(n));
          if (ToBits(out[i * cols + j]) == ToBits(expected)) continue;
          if (++mismatches <= 8) {
            first.precision(17);
            first << "\n  kind " << kind << " n " << n << " (" << i << ", " << j << "): vector " << out[i * cols + j]
                  << " canonical " << expected;
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << dots << " dots differ:" << first.str();
  ExpectRanOnTheForcedTarget();
}

// ---- whole problems ----------------------------------------------------------------------------------------

const Backend& Reference() { return *FindBackend("reference"); }
const Backend& Simd() { return *FindBackend("simd"); }

// Runs `backend` with `threads` OpenMP threads.
Status RunWithThreads(const Backend& backend, const Problem& problem, int threads, Outputs* outputs) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  const Status status = RunBackend(backend, problem, outputs);
  omp_set_num_threads(before);
  return status;
}

std::string CompareOutputs(const Outputs& got, const Outputs& expected) {
  for (const std::string& difference :
       {FirstDifference("topk_indices", got.topk_indices, expected.topk_indices),
        FirstDifference("block_scores", got.block_scores, expected.block_scores),
        FirstDifference("index_lse", got.index_lse, expected.index_lse), FirstDifference("out", got.out, expected.out),
        FirstDifference("lse", got.lse, expected.lse)}) {
    if (!difference.empty()) return difference;
  }
  return "";
}

// The simd backend's outputs and status equal the reference's (computed once) for 1, 2 and 7 threads; also
// its selection alone when the optional outputs are not requested. "" when all agree.
std::string CompareWithReference(const Problem& problem) {
  Outputs expected;
  const Status expected_status = RunBackend(Reference(), problem, &expected);
  for (int threads : kThreadCounts) {
    Outputs got;
    const Status status = RunWithThreads(Simd(), problem, threads, &got);
    if (status.ok() != expected_status.ok() || status.message() != expected_status.message()) {
      return std::to_string(threads) + " threads: status \"" + status.message() + "\", reference \"" +
             expected_status.message() + "\"";
    }
    if (!status.ok()) continue;
    if (std::string difference = CompareOutputs(got, expected); !difference.empty()) {
      return std::to_string(threads) + " threads: " + difference;
    }
    // Selection with no block_scores / index_lse requested: the scratch path gives the same slots.
    std::vector<int32_t> slots(expected.topk_indices.size(), INT32_MIN);
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Status select = Select(Simd(), problem.config, problem.index_inputs(), SelectionOutputs{slots.data()});
    omp_set_num_threads(before);
    if (!select.ok()) return "select without optional outputs: " + select.message();
    if (std::string difference = FirstDifference("topk_indices (no optional outputs)", slots, expected.topk_indices);
        !difference.empty()) {
      return std::to_string(threads) + " threads: " + difference;
    }
  }
  return "";
}

TEST_P(SimdTarget, CanonicalCasesAreBitIdenticalToTheReference) {
  for (const TestCase& test_case : CanonicalCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    EXPECT_EQ(CompareWithReference(problem), "") << test_case.name;
  }
  ExpectRanOnTheForcedTarget();
}

// Several forced local blocks whose sets overlap on short sequences, and fp16 block scores tied by the rounding
// or exactly, with every pooling mode and dtype.
TEST_P(SimdTarget, ForcedBlocksAndFp16ScoreCasesAreBitIdenticalToTheReference) {
  for (const TestCase& test_case : CasesTagged(kTagForcedAndFp16)) {
    const Problem problem = GenerateProblem(test_case.spec);
    EXPECT_EQ(CompareWithReference(problem), "") << test_case.name;
  }
  ExpectRanOnTheForcedTarget();
}

TEST_P(SimdTarget, RandomProblemsAreBitIdenticalToTheReference) {
  const bool passed = rc::check("simd exact == reference, bit for bit", [](ProblemSpec spec) {
    spec.query_scale = *rc::gen::element(1.0, 1.0, 100.0);          // sometimes large logits
    spec.few_valued_index = *rc::gen::element(false, false, true);  // sometimes many exact ties
    // Sometimes several forced local blocks (top_k grows with them, so it still covers the forced blocks) and,
    // under max pooling, fp16 block scores.
    spec.config.local_blocks = *rc::gen::inRange(1, 4);
    spec.config.top_k += spec.config.local_blocks - 1;
    if (spec.config.pooling == Pooling::kMax) {
      spec.config.score_format = *rc::gen::element(ScoreFormat::kNative, ScoreFormat::kFp16);
    }
    const Problem problem = GenerateProblem(spec);
    const std::string difference = CompareWithReference(problem);
    if (!difference.empty()) RC_FAIL(difference);
  });
  EXPECT_TRUE(passed);
  ExpectRanOnTheForcedTarget();
}

// A selection whose block scores outgrow the scratch the backend allows itself when the caller asks for no
// block_scores (more than 2^22 scores): the queries then go in several batches, with the same slots.
TEST(SimdExact, SelectionWithoutBlockScoresInSeveralBatches) {
  ProblemSpec spec;
  spec.config.num_q_heads = spec.config.num_kv_heads = 1;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 2;
  spec.config.block_size = 1;
  spec.config.top_k = 3;
  spec.lengths = {{2100, 2100}};  // 2100 * 2100 block scores
  spec.seed = 5;
  const Problem problem = GenerateProblem(spec);
  Outputs reference;
  const Status status = RunBackend(Reference(), problem, &reference);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(CompareWithReference(problem), "");
}

// Multiplies every element of an F64 tensor by `factor`.
void ScaleTensor(SafetensorsTensor& tensor, double factor) {
  ASSERT_EQ(tensor.dtype, DType::kF64);
  double* values = reinterpret_cast<double*>(tensor.bytes.data());
  for (int64_t i = 0; i < tensor.num_elements(); ++i) values[i] *= factor;
}

ProblemSpec OverflowSpec(Pooling pooling) {
  ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 12;
  spec.config.block_size = 4;
  spec.config.top_k = 3;
  spec.config.pooling = pooling;
  spec.lengths = {{5, 9}, {3, 30}};
  spec.seed = 11;
  return spec;
}

// Index scores that overflow: the same error (the first bad (query, group) row) as the reference. With fp16
// block scores, every finite score overflows binary16 too, and the non-finite one still is the error.
TEST_P(SimdTarget, NonFiniteIndexScoresGiveTheReferenceError) {
  for (Pooling pooling : {Pooling::kMax, Pooling::kLse, Pooling::kMean}) {
    for (ScoreFormat format : {ScoreFormat::kNative, ScoreFormat::kFp16}) {
      if (format == ScoreFormat::kFp16 && pooling != Pooling::kMax) continue;
      ProblemSpec spec = OverflowSpec(pooling);
      spec.config.score_format = format;
      Problem problem = GenerateProblem(spec);
      ScaleTensor(problem.index_q, 1e160);
      ScaleTensor(problem.index_k, 1e160);
      Outputs reference;
      const Status refused = RunBackend(Reference(), problem, &reference);
      EXPECT_NE(refused.message().find("is not finite"), std::string::npos) << refused.message();
      EXPECT_EQ(CompareWithReference(problem), "") << PoolingName(pooling) << " " << ScoreFormatName(format);
    }
  }
}

// fp16 block scores beyond binary16 in rows (query 2, group 1) and (query 4, group 0) only: the reference's
// error, which names the first in query-major order.
TEST_P(SimdTarget, Fp16ScoreOverflowGivesTheReferenceError) {
  ProblemSpec spec = OverflowSpec(Pooling::kMax);
  spec.config.score_format = ScoreFormat::kFp16;
  Problem problem = GenerateProblem(spec);
  for (const auto& [t, r] : {std::pair{2, 1}, std::pair{4, 0}}) {
    for (int64_t d = 0; d < spec.config.index_head_dim; ++d) {
      SetElement(problem.index_q, t, r, d, 1e7 * (d % 2 ? 1 : -1));
    }
  }
  Outputs reference;
  const Status refused = RunBackend(Reference(), problem, &reference);
  EXPECT_EQ(refused.message(),
            "block score of query 2, group 1 overflows binary16 (|score| >= 65520): score_format fp16 cannot "
            "represent it");
  EXPECT_EQ(CompareWithReference(problem), "");
}

// Attention scores that overflow to inf and NaN: Attend refuses with the reference's message (the first bad
// (query, head)), and underneath, the backends' raw outputs (called through the table, past that check) are
// the same bits, NaN included.
TEST_P(SimdTarget, OverflowingAttentionIsRefusedAndHasTheReferenceBits) {
  Problem problem = GenerateProblem(OverflowSpec(Pooling::kMax));
  ScaleTensor(problem.q, 1e160);
  ScaleTensor(problem.k, 1e160);
  Outputs reference;
  const Status refused = RunBackend(Reference(), problem, &reference);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("is not finite: q, k or v are too large"), std::string::npos) << refused.message();
  EXPECT_EQ(CompareWithReference(problem), "");

  Outputs raw_reference, raw_simd;
  for (auto [backend, outputs] : {std::pair{&Reference(), &raw_reference}, std::pair{&Simd(), &raw_simd}}) {
    outputs->Allocate(problem);
    ASSERT_TRUE(backend->select(problem.config, problem.index_inputs(), outputs->selection_outputs(), {}).ok());
    ASSERT_TRUE(backend
                    ->attend(problem.config, problem.attention_inputs(), SelectionView{outputs->topk_indices.data()},
                             outputs->attention_outputs(), {})
                    .ok());
  }
  int64_t nan = 0;
  for (double x : raw_reference.out) nan += std::isnan(x);
  EXPECT_GT(nan, 0);  // the case really reaches inf - inf
  EXPECT_EQ(CompareOutputs(raw_simd, raw_reference), "");
}

// ---- dispatch ------------------------------------------------------------------------------------------------

// Each forced target is the one that ran, so the tests above really cover every target; with more than one
// supported target the dispatched target changes.
TEST(SimdDispatch, TheForcedTargetIsTheOneThatRuns) {
  const Problem problem = GenerateProblem(OverflowSpec(Pooling::kLse));
  const int64_t cpu = CpuTargets();
  std::set<int64_t> seen;
  for (int64_t target : RunnableTargetList()) {
    hwy::SetSupportedTargetsForTest(target);
    EXPECT_EQ(simd::BestAvailableTarget(), target);
    Outputs outputs;
    ASSERT_TRUE(RunBackend(Simd(), problem, &outputs).ok());
    EXPECT_EQ(simd::TargetName(simd::LastDispatchedTarget()), simd::TargetName(target));
    seen.insert(simd::LastDispatchedTarget());
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_EQ(seen.size(), size_t(std::popcount(uint64_t(simd::CompiledTargets() & cpu))));
  std::cout << "[ simd     ] dispatched to: " << Names(std::vector<int64_t>(seen.begin(), seen.end())) << "\n";
  // Without a mock, the best compiled target the CPU supports.
  Outputs outputs;
  ASSERT_TRUE(RunBackend(Simd(), problem, &outputs).ok());
  EXPECT_EQ(simd::LastDispatchedTarget(), simd::BestAvailableTarget());
}

TEST(SimdDispatch, ExactIsTheFastestBackendForExactPrecision) {
  Config config;
  const Backend* fastest = FastestBackend(config);
  ASSERT_NE(fastest, nullptr);
  EXPECT_EQ(fastest->name, "simd");
  EXPECT_TRUE(Simd().supports(config).ok());
}

}  // namespace
}  // namespace msa
