// Bit reproducibility of the reference (SPEC sections 4, 8): the SHA-256 of the outputs of every canonical and training
// case is recorded in tests/golden/reference_sha256.txt, and must come out the same for 1, 2 and 7 OpenMP threads, for
// g++ and clang++ builds (make test builds this test with both) and on every machine.
#include <omp.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "io/file_contract.h"
#include "oracle/cases.h"

namespace msa {
namespace {

std::map<std::string, std::string> RecordedHashes() {
  std::map<std::string, std::string> hashes;
  std::ifstream file(std::string(MSA_SOURCE_DIR) + "/tests/golden/reference_sha256.txt");
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, hash;
    fields >> name >> hash;
    hashes[name] = hash;
  }
  return hashes;
}

class Reproducibility : public testing::TestWithParam<TestCase> {};

TEST_P(Reproducibility, OutputsHashAsRecordedForEveryThreadCount) {
  const TestCase& test_case = GetParam();
  const Problem problem = GenerateProblem(test_case.spec);
  const auto recorded = RecordedHashes();
  const auto entry = recorded.find(test_case.name);
  const int default_threads = omp_get_max_threads();
  for (int threads : {1, 2, 7}) {
    omp_set_num_threads(threads);
    Outputs outputs;
    const Status status = RunBackend(*FindBackend("reference"), problem, &outputs);
    ASSERT_TRUE(status.ok()) << status.message();
    const std::string hash = OutputsSha256(outputs);
    ASSERT_NE(entry, recorded.end()) << "no hash recorded for " << test_case.name
                                     << "; add this line to tests/golden/reference_sha256.txt:\n"
                                     << test_case.name << " " << hash;
    EXPECT_EQ(hash, entry->second) << test_case.name << " with " << threads << " threads. If the canonical order "
                                   << "changed on purpose, record:\n"
                                   << test_case.name << " " << hash;
  }
  omp_set_num_threads(default_threads);
}

INSTANTIATE_TEST_SUITE_P(CanonicalCases, Reproducibility, testing::ValuesIn(CanonicalCases()),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });
// Training (SPEC section 8): the outputs hash covers dq, dk, dv, dqi, dki and kl_loss too.
INSTANTIATE_TEST_SUITE_P(TrainingCases, Reproducibility,
                         testing::ValuesIn(CasesTagged(kTagTraining | kTagTrainingTiny)),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });

}  // namespace
}  // namespace msa
