// The gpu backend's exact mode: bit-identical to the FP64 reference on every canonical and large case and on the
// problems built for local_blocks > 1 and fp16 block scores (overlapping forced sets, binary16 ties; binary16
// overflow refused with the reference's message), and two runs bitwise identical at every precision. Without a usable
// CUDA device every test skips saying why.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/problem.h"
#include "tests/gpu_test_support.h"

namespace msa::gpu_test {
namespace {

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

// Exact mode on the local-blocks, fp16-tie and fp16-overflow problems: every output bit for bit the reference's
// (slots, block_scores, index_lse with the fp16 formula, out, lse), and the overflow refused with the reference's
// message.
TEST(GpuBackend, ExactIsBitIdenticalToTheReferenceOnLocalBlocksAndFp16Scores) {
  MSA_REQUIRE_GPU();
  std::vector<GpuCase> cases = LocalBlocksCases();
  for (GpuCase& c : Fp16TieCases()) cases.push_back(std::move(c));
  for (const GpuCase& c : cases) {
    Outputs reference, gpu;
    ASSERT_TRUE(RunReference(c.problem, &reference).ok()) << c.name;
    const Status status = RunBackend(*Gpu(), c.problem, &gpu);
    ASSERT_TRUE(status.ok()) << c.name << ": " << status.message();
    ExpectSameBits(reference, gpu, c.name);
  }
  for (const bool positive : {true, false}) {
    Outputs gpu;
    EXPECT_EQ(RunBackend(*Gpu(), Fp16OverflowProblem(positive), &gpu).message(), Fp16OverflowMessage(positive));
  }
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

}  // namespace
}  // namespace msa::gpu_test
