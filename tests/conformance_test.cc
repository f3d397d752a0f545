// Conformance: every available backend, at every precision it supports, on every canonical case, judged by
// the oracle against the FP64 reference twice: its own Select + Attend, and its Attend on the reference
// selection (so a near-tie flip in top-k never hides an attention bug). Exact precision demands bit-identical
// outputs. Also: poison around the inputs is never read, and every output is written.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/properties.h"

namespace msa {
namespace {

struct ConformanceCase {
  std::string backend;
  Precision precision;
  TestCase test_case;
  std::string name;  // "<backend>_<precision>_<case>"
};

void PrintTo(const ConformanceCase& c, std::ostream* os) { *os << c.name; }

std::vector<ConformanceCase> AllConformanceCases() {
  std::vector<ConformanceCase> cases;
  for (const Backend& backend : AllBackends()) {
    if (!backend.is_available()) continue;
    for (const TestCase& test_case : CanonicalCases()) {
      for (Precision precision : SupportedPrecisions(backend, test_case.spec.config)) {
        TestCase at = test_case;
        at.spec.config.precision = precision;
        cases.push_back(
            {std::string(backend.name), precision, at,
             std::string(backend.name) + "_" + std::string(PrecisionName(precision)) + "_" + test_case.name});
      }
    }
  }
  return cases;
}

class Conformance : public testing::TestWithParam<ConformanceCase> {
 protected:
  const Backend& backend() const { return *FindBackend(GetParam().backend); }
  const ProblemSpec& spec() const { return GetParam().test_case.spec; }
};

JudgeOptions Rules(Precision precision) {
  JudgeOptions options;
  options.precision = precision;
  return options;
}

TEST_P(Conformance, OwnSelectionAndAttentionAgreeWithTheReference) {
  const Problem problem = GenerateProblem(spec());
  Outputs reference, outputs;
  ASSERT_TRUE(RunReference(problem, &reference).ok());
  const Status status = RunBackend(backend(), problem, &outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  Verdict verdict;
  ASSERT_TRUE(Judge(problem, reference, Candidate{outputs.topk_indices, outputs.out, outputs.lse, outputs.index_lse},
                    Rules(GetParam().precision), &verdict)
                  .ok());
  EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
}

TEST_P(Conformance, AttentionOnTheReferenceSelectionAgrees) {
  const Problem problem = GenerateProblem(spec());
  Outputs reference, outputs;
  ASSERT_TRUE(RunReference(problem, &reference).ok());
  outputs.Allocate(problem);
  const Status status = Attend(backend(), problem.config, problem.attention_inputs(),
                               SelectionView{reference.topk_indices.data()}, outputs.attention_outputs());
  ASSERT_TRUE(status.ok()) << status.message();
  Verdict verdict;
  ASSERT_TRUE(Judge(problem, reference, Candidate{std::nullopt, outputs.out, outputs.lse, std::nullopt},
                    Rules(GetParam().precision), &verdict)
                  .ok());
  EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  EXPECT_EQ(verdict.attention_selection, "reference");
}

TEST_P(Conformance, PoisonAroundTheInputsIsNeverRead) {
  const Status status = CheckPoisonedInputsNeverRead(backend(), spec());
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_P(Conformance, EveryOutputIsWritten) {
  const Status status = CheckOutputsFullyWritten(backend(), spec());
  EXPECT_TRUE(status.ok()) << status.message();
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, Conformance, testing::ValuesIn(AllConformanceCases()),
                         [](const testing::TestParamInfo<ConformanceCase>& info) { return info.param.name; });

// A backend that declines a precision says so instead of failing.
TEST(ConformanceRegistry, EveryBackendDeclinesWhatItDoesNotSupport) {
  for (const Backend& backend : AllBackends()) {
    Config config;
    for (Precision precision : {Precision::kExact, Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      config.precision = precision;
      const Status status = backend.supports(config);
      EXPECT_TRUE(status.ok() || status.code() == StatusCode::kUnsupported) << backend.name << ": " << status.message();
    }
  }
}

}  // namespace
}  // namespace msa
