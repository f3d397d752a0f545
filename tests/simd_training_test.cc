// The SIMD backend's training functions (simd/training.h, SPEC section 8) on every training case of the one case list
// (CasesTagged(kTagTraining | kTagTrainingTiny)) and on EVERY Highway target compiled in (forced one at a time with
// hwy::SetSupportedTargetsForTest, as Highway's own tests do; a target the CPU lacks gets no test):
//   - exact: the selection, out, lse, dq, dk, dv, kl_loss, dqi and dki of RunBackend equal the reference's bit for bit
//     for 1, 2 and 7 OpenMP threads, and so do the KL's optional teacher_lse and indexer_lse;
//   - fp32, on the reference selection: every gradient and the loss within the fp32 bound derived below of the FP64
//     reference, and the same bits for 1, 2 and 7 threads;
//   - bf16 and fp16 are declined with kUnsupported, through the front end and through the backend table;
//   - the forced target is the one that ran.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "simd/simd_backend.h"
#include "tests/first_difference.h"
#include "tests/simd_targets.h"

namespace msa {
namespace {

constexpr int kThreadCounts[] = {1, 2, 7};

const Backend& Reference() { return *FindBackend("reference"); }
const Backend& Simd() { return *FindBackend("simd"); }

std::vector<TestCase> TrainingCases() { return CasesTagged(kTagTraining | kTagTrainingTiny); }

// A case's name with its seed: the list holds several cases of one name.
std::string CaseKey(const TestCase& test_case) { return test_case.name + "_" + std::to_string(test_case.spec.seed); }

// The reference outputs of a case's problem (precision exact whatever the problem's: every precision generates the same
// inputs), computed once per test binary.
const Outputs& ReferenceOutputs(const TestCase& test_case, const Problem& problem) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Outputs>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Outputs>& outputs = cache[CaseKey(test_case)];
  if (!outputs) {
    outputs = std::make_unique<Outputs>();
    const Status status = RunReference(problem, outputs.get());
    EXPECT_TRUE(status.ok()) << CaseKey(test_case) << ": " << status.message();
  }
  return *outputs;
}

// Runs `body` with `threads` OpenMP threads.
template <typename Body>
Status WithThreads(int threads, Body&& body) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  const Status status = body();
  omp_set_num_threads(before);
  return status;
}

std::string CompareOutputs(const Outputs& got, const Outputs& expected) {
  for (const std::string& difference :
       {FirstDifference("topk_indices", got.topk_indices, expected.topk_indices),
        FirstDifference("out", got.out, expected.out), FirstDifference("lse", got.lse, expected.lse),
        FirstDifference("dq", got.dq, expected.dq), FirstDifference("dk", got.dk, expected.dk),
        FirstDifference("dv", got.dv, expected.dv), FirstDifference("kl_loss", got.kl_loss, expected.kl_loss),
        FirstDifference("dqi", got.dqi, expected.dqi), FirstDifference("dki", got.dki, expected.dki)}) {
    if (!difference.empty()) return difference;
  }
  return "";
}

// Every output of IndexerKl, the optional LSEs included.
struct KlOutputs {
  std::vector<double> kl_loss, dqi, dki, teacher_lse, indexer_lse;

  explicit KlOutputs(const Problem& problem) {
    const Config& c = problem.config;
    const int64_t total_q = problem.cu_seqlens_q.back(), total_k = problem.cu_seqlens_k.back();
    kl_loss.assign(1, NAN);
    dqi.assign(total_q * c.num_kv_heads * c.index_head_dim, NAN);
    dki.assign(total_k * c.index_head_dim, NAN);
    teacher_lse.assign(total_q * c.num_q_heads, NAN);
    indexer_lse.assign(c.num_kv_heads * total_q, NAN);
  }
  IndexerKlOutputs view() { return {kl_loss.data(), dqi.data(), dki.data(), teacher_lse.data(), indexer_lse.data()}; }
};

// ---- every training case on every compiled target ---------------------------------------------------------

struct TargetCase {
  int64_t target;
  TestCase test_case;
  std::string name;
};

void PrintTo(const TargetCase& c, std::ostream* os) { *os << c.name; }

std::vector<TargetCase> AllTargetCases() {
  std::vector<TargetCase> cases;
  for (int64_t target : RunnableTargetList()) {
    for (const TestCase& test_case : TrainingCases()) {
      cases.push_back({target, test_case, simd::TargetName(target) + "_" + CaseKey(test_case)});
    }
  }
  return cases;
}

class TrainingOnEveryTarget : public testing::TestWithParam<TargetCase> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam().target); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }

  void ExpectRanOnTheForcedTarget() const {
    EXPECT_EQ(simd::TargetName(simd::LastDispatchedTarget()), simd::TargetName(GetParam().target));
  }
};

INSTANTIATE_TEST_SUITE_P(Training, TrainingOnEveryTarget, testing::ValuesIn(AllTargetCases()),
                         [](const testing::TestParamInfo<TargetCase>& info) { return info.param.name; });

TEST_P(TrainingOnEveryTarget, ExactIsBitIdenticalToTheReference) {
  const std::string& name = GetParam().name;
  const Problem problem = GenerateProblem(GetParam().test_case.spec);
  ASSERT_EQ(problem.config.precision, Precision::kExact);
  const Outputs& reference = ReferenceOutputs(GetParam().test_case, problem);
  ASSERT_TRUE(reference.has_training()) << name;
  for (int threads : kThreadCounts) {
    Outputs got;
    const Status status = WithThreads(threads, [&] { return RunBackend(Simd(), problem, &got); });
    ASSERT_TRUE(status.ok()) << name << ": " << status.message();
    EXPECT_EQ(CompareOutputs(got, reference), "") << name << ", " << threads << " threads";
    ExpectRanOnTheForcedTarget();
  }

  // The KL's optional outputs too, on the reference selection.
  const SelectionView selection{reference.topk_indices.data()};
  KlOutputs expected(problem), got(problem);
  ASSERT_TRUE(IndexerKl(Reference(), problem.config, problem.index_inputs(), problem.attention_inputs(), selection,
                        expected.view())
                  .ok());
  for (int threads : kThreadCounts) {
    const Status status = WithThreads(threads, [&] {
      return IndexerKl(Simd(), problem.config, problem.index_inputs(), problem.attention_inputs(), selection,
                       got.view());
    });
    ASSERT_TRUE(status.ok()) << status.message();
    for (const std::string& difference :
         {FirstDifference("kl_loss", got.kl_loss, expected.kl_loss), FirstDifference("dqi", got.dqi, expected.dqi),
          FirstDifference("dki", got.dki, expected.dki),
          FirstDifference("teacher_lse", got.teacher_lse, expected.teacher_lse),
          FirstDifference("indexer_lse", got.indexer_lse, expected.indexer_lse)}) {
      EXPECT_EQ(difference, "") << name << ", " << threads << " threads";
    }
  }
}

// ---- fp32 ---------------------------------------------------------------------------------------------------

// The largest |logit| the problem can produce, by Cauchy-Schwarz: max(scale * max|q| * max|k|, index_scale *
// max|index_q| * max|index_k|) over rows.
double LogitBound(const Problem& problem) {
  const auto max_norm = [](const SafetensorsTensor& tensor) {
    const TensorView view = ViewOf(tensor);
    double largest = 0;
    for (int64_t row = 0; row < view.rows; ++row) {
      for (int64_t head = 0; head < view.heads; ++head) {
        double sum = 0;
        for (int64_t d = 0; d < view.dim; ++d) sum += view.At(row, head, d) * view.At(row, head, d);
        largest = std::max(largest, std::sqrt(sum));
      }
    }
    return largest;
  };
  const Config& c = problem.config;
  return std::max(c.SoftmaxScale() * max_norm(problem.q) * max_norm(problem.k),
                  c.IndexScale() * max_norm(problem.index_q) * max_norm(problem.index_k));
}

// The fp32 bound. Every step of SPEC section 8 in fp32 rounds with relative error at most u = 2^-24 (inputs narrowed
// from f64, products, sums, exp and log: each a few u). A logit s (or index score x) of magnitude up to L thus carries
// an absolute error of a few u * (1 + L), and P = exp(s - lse), rho = exp(x - ilse) a relative error of that size;
// every gradient element is a sum of such terms times inputs, so its error, relative to the size of its tensor, is
// c * u * (1 + L), c growing slowly with the length of the sums (up to 512 keys per row, 2048 rows per key here).
// Measured on every case and target: c <= 1.4 for the L2 norm of the error relative to the reference tensor's, c <= 2.0
// for the largest element error relative to the tensor's largest magnitude (cancellation in dS = P (dP - Delta) and g =
// rho - pbar puts more error on a few elements), c <= 1.3 for the loss relative to itself. The bounds allow about 5x
// that. With L about 10 (unit-normal inputs) the L2 bound is near 5e-6 and the largest-element bound near 1e-5.
constexpr double kUnitRoundoff = 0x1.0p-24;
constexpr double kL2Factor = 8, kMaxFactor = 16, kLossFactor = 8;

struct Fp32Error {
  double relative_l2 = 0, relative_max = 0;
};

Fp32Error ErrorOf(const std::vector<double>& got, const std::vector<double>& expected) {
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::isfinite(got[i]) ? got[i] - expected[i] : INFINITY;
    diff2 += diff * diff;
    ref2 += expected[i] * expected[i];
    max_diff = std::max(max_diff, std::abs(diff));
    max_ref = std::max(max_ref, std::abs(expected[i]));
  }
  if (ref2 == 0) return {diff2 == 0 ? 0.0 : INFINITY, max_diff == 0 ? 0.0 : INFINITY};
  return {std::sqrt(diff2 / ref2), max_diff / max_ref};
}

// fp32 Backward and IndexerKl of the simd backend on the reference selection, with `threads` threads.
Outputs Fp32OnReferenceSelection(const Problem& problem, const Outputs& reference, int threads) {
  Outputs got;
  got.Allocate(problem);
  const SelectionView selection{reference.topk_indices.data()};
  const Status status = WithThreads(threads, [&]() -> Status {
    MSA_RETURN_IF_ERROR(Backward(Simd(), problem.config, problem.attention_inputs(), selection,
                                 problem.gradient_inputs(), got.attention_gradients()));
    return IndexerKl(Simd(), problem.config, problem.index_inputs(), problem.attention_inputs(), selection,
                     got.indexer_kl_outputs());
  });
  EXPECT_TRUE(status.ok()) << status.message();
  return got;
}

TEST_P(TrainingOnEveryTarget, Fp32IsWithinItsBoundOfTheReference) {
  const std::string& name = GetParam().name;
  ProblemSpec spec = GetParam().test_case.spec;
  spec.config.precision = Precision::kFp32;
  const Problem problem = GenerateProblem(spec);
  const Outputs& reference = ReferenceOutputs(GetParam().test_case, problem);
  const Outputs got = Fp32OnReferenceSelection(problem, reference, 1);
  ExpectRanOnTheForcedTarget();

  const double scale = kUnitRoundoff * (1 + LogitBound(problem));
  std::ostringstream measured;
  measured.precision(2);
  for (const auto& [tensor, values, expected] : {std::tuple{"dq", &got.dq, &reference.dq},
                                                 {"dk", &got.dk, &reference.dk},
                                                 {"dv", &got.dv, &reference.dv},
                                                 {"dqi", &got.dqi, &reference.dqi},
                                                 {"dki", &got.dki, &reference.dki}}) {
    const Fp32Error error = ErrorOf(*values, *expected);
    EXPECT_LE(error.relative_l2, kL2Factor * scale) << name << " " << tensor;
    EXPECT_LE(error.relative_max, kMaxFactor * scale) << name << " " << tensor;
    measured << " " << tensor << " " << error.relative_l2 << " / " << error.relative_max;
  }
  const double loss_error = std::abs(got.kl_loss[0] - reference.kl_loss[0]) / std::abs(reference.kl_loss[0]);
  EXPECT_LE(loss_error, kLossFactor * scale)
      << name << " kl_loss " << got.kl_loss[0] << ", reference " << reference.kl_loss[0];
  std::cout << "[ fp32     ] " << name << ": u(1 + L) = " << scale << "; relative L2 / max error" << measured.str()
            << "; kl_loss " << loss_error << "\n";

  for (int threads : {2, 7}) {
    EXPECT_EQ(CompareOutputs(Fp32OnReferenceSelection(problem, reference, threads), got), "")
        << name << ", " << threads << " threads";
  }

  // The oracle's rule (SPEC sections 5 and 8): each gradient within twice a naive fp32 evaluation's error.
  Verdict verdict;
  const Candidate candidate{.topk_indices = reference.topk_indices,
                            .dq = got.dq,
                            .dk = got.dk,
                            .dv = got.dv,
                            .dqi = got.dqi,
                            .dki = got.dki,
                            .kl_loss = got.kl_loss};
  JudgeOptions options;
  options.precision = Precision::kFp32;
  ASSERT_TRUE(Judge(problem, reference, candidate, options, &verdict).ok());
  EXPECT_TRUE(verdict.passed()) << name << "\n" << FormatVerdict(verdict);
}

// ---- precisions the backend declines ---------------------------------------------------------------------------

TEST(SimdTraining, Bf16AndFp16AreDeclined) {
  const TestCase test_case = TrainingCases().front();
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    ProblemSpec spec = test_case.spec;
    spec.config.precision = precision;
    const Problem problem = GenerateProblem(spec);
    const Outputs& reference = ReferenceOutputs(test_case, problem);
    Outputs got;
    got.Allocate(problem);
    const SelectionView selection{reference.topk_indices.data()};
    const Status front_backward = Backward(Simd(), problem.config, problem.attention_inputs(), selection,
                                           problem.gradient_inputs(), got.attention_gradients());
    const Status front_kl = IndexerKl(Simd(), problem.config, problem.index_inputs(), problem.attention_inputs(),
                                      selection, got.indexer_kl_outputs());
    const Status table_backward = Simd().backward(problem.config, problem.attention_inputs(), selection,
                                                  problem.gradient_inputs(), got.attention_gradients(), {});
    const Status table_kl = Simd().indexer_kl(problem.config, problem.index_inputs(), problem.attention_inputs(),
                                              selection, got.indexer_kl_outputs(), {});
    for (const Status* status : {&front_backward, &front_kl, &table_backward, &table_kl}) {
      EXPECT_EQ(status->code(), StatusCode::kUnsupported) << PrecisionName(precision) << ": " << status->message();
    }
    EXPECT_NE(table_backward.message().find(std::string(PrecisionName(precision))), std::string::npos)
        << table_backward.message();
  }
}

}  // namespace
}  // namespace msa
