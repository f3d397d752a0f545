// Golden suites (oracle/golden.h; `msa golden generate|verify`): the smoke suite round-trips; its manifest
// records every case and file hash; generating is deterministic; a corrupted or missing file fails its case
// by name (exit 1); a bad manifest or an unknown backend is bad input (exit 2); a backend one bit off fails
// naming the tensor and element; a low-precision backend is judged by the oracle rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/sha256.h"
#include "oracle/golden.h"
#include "tests/run_cli.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temporary directory, removed with its content at scope exit.
class TempDir {
 public:
  TempDir() {
    static int count = 0;
    path_ = fs::temp_directory_path() / ("msa_golden_test_" + std::to_string(getpid()) + "_" + std::to_string(count++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<TestCase> Smoke() {
  std::vector<TestCase> cases;
  EXPECT_TRUE(GoldenSuite("smoke", &cases));
  return cases;
}

// Three small smoke cases (one ragged with empty sequences), for the tests that corrupt a suite.
std::vector<TestCase> Small() {
  std::vector<TestCase> cases;
  for (const TestCase& test_case : Smoke()) {
    if (test_case.name.starts_with("prefill_b6") || test_case.name.starts_with("ragged") ||
        test_case.name.starts_with("ties_equal")) {
      cases.push_back(test_case);
    }
  }
  EXPECT_EQ(cases.size(), 3u);
  return cases;
}

void Generate(const std::string& dir, const std::vector<TestCase>& cases) {
  const Status status = GenerateGolden(dir, "small", cases);
  ASSERT_TRUE(status.ok()) << status.message();
}

// The output line of one case in a verify run.
std::string CaseLine(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" " + name + " ") != std::string::npos) return line;
  }
  return "(no line for " + name + ")";
}

TEST(GoldenSuite, SmokeRoundTripsThroughTheCli) {
  TempDir temp;
  const std::string dir = temp / "nested/smoke";  // parents are created
  const std::vector<TestCase> cases = Smoke();
  const CliResult generate = RunMsa({"golden", "generate", "--suite", "smoke", "--dir", dir});
  ASSERT_EQ(generate.code, 0) << generate.err;
  EXPECT_NE(generate.out.find("[1/" + std::to_string(cases.size()) + "] " + cases[0].name), std::string::npos)
      << generate.out;
  for (const TestCase& test_case : cases) {
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / test_case.name / kGoldenInputs)) << test_case.name;
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / test_case.name / kGoldenOutputs)) << test_case.name;
  }
  const CliResult verify = RunMsa({"golden", "verify", "--dir", dir, "--backend", "reference"});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  for (const TestCase& test_case : cases) {
    EXPECT_NE(CaseLine(verify.out, test_case.name).find("PASS"), std::string::npos) << verify.out;
  }
  const std::string total = std::to_string(cases.size());
  EXPECT_NE(verify.out.find(total + " of " + total + " cases passed"), std::string::npos) << verify.out;
}

// The training suite (SPEC section 8): its outputs files hold the six training tensors, verify recomputes them bit for
// bit, and a flipped gradient bit fails that case naming the tensor.
TEST(GoldenSuite, TrainingRoundTripsThroughTheCli) {
  TempDir temp;
  const std::string dir = temp / "training";
  std::vector<TestCase> cases;
  ASSERT_TRUE(GoldenSuite("training", &cases));
  const CliResult generate = RunMsa({"golden", "generate", "--suite", "training", "--dir", dir});
  ASSERT_EQ(generate.code, 0) << generate.err;
  SafetensorsFile outputs;
  ASSERT_TRUE(ReadSafetensors((fs::path(dir) / cases[0].name / kGoldenOutputs).string(), &outputs).ok());
  for (const char* name : {"dq", "dk", "dv", "dqi", "dki", "kl_loss"}) EXPECT_NE(outputs.Find(name), nullptr) << name;
  EXPECT_EQ(outputs.Find("kl_loss")->shape, std::vector<int64_t>{});
  const CliResult verify = RunMsa({"golden", "verify", "--dir", dir, "--backend", "reference"});
  const std::string total = std::to_string(cases.size());
  EXPECT_NE(verify.out.find(total + " of " + total + " cases passed"), std::string::npos) << verify.out;

  const fs::path target = fs::path(dir) / cases[0].name / kGoldenOutputs;
  SafetensorsTensor* dk = nullptr;
  for (SafetensorsTensor& tensor : outputs.tensors) dk = tensor.name == "dk" ? &tensor : dk;
  dk->bytes[8 * 5] ^= 1;  // the lowest bit of dk element 5
  ASSERT_TRUE(WriteSafetensors(target.string(), outputs).ok());
  const CliResult corrupted = RunMsa({"golden", "verify", "--dir", dir, "--backend", "reference"});
  EXPECT_EQ(corrupted.code, 1) << corrupted.out;
  EXPECT_NE(CaseLine(corrupted.out, cases[0].name).find("FAIL"), std::string::npos) << corrupted.out;
}

TEST(GoldenSuite, ManifestRecordsEveryCaseAndFileHash) {
  TempDir temp;
  const std::vector<TestCase> cases = Smoke();
  ASSERT_TRUE(GenerateGolden(temp.path().string(), "smoke", cases).ok());
  const auto manifest = nlohmann::json::parse(ReadFile(temp.path() / kGoldenManifest));
  EXPECT_EQ(manifest["format_version"], kGoldenFormatVersion);
  EXPECT_EQ(manifest["suite"], "smoke");
  ASSERT_EQ(manifest["cases"].size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& entry = manifest["cases"][i];
    const ProblemSpec& spec = cases[i].spec;
    EXPECT_EQ(entry["name"], cases[i].name);
    EXPECT_EQ(entry["seed"], spec.seed);
    EXPECT_EQ(entry["dtype"], std::string(DTypeName(spec.dtype)));
    EXPECT_EQ(entry["config"]["num_q_heads"], spec.config.num_q_heads);
    EXPECT_EQ(entry["config"]["top_k"], spec.config.top_k);
    EXPECT_EQ(entry["config"]["pooling"], std::string(PoolingName(spec.config.pooling)));
    EXPECT_EQ(entry["config"]["softmax_scale"], spec.config.SoftmaxScale());
    EXPECT_EQ(entry["lengths"].size(), spec.lengths.size());
    EXPECT_EQ(entry["query_scale"], spec.query_scale);
    ASSERT_EQ(entry["files"].size(), 2u);
    for (const auto& [file, hash] : entry["files"].items()) {
      std::string actual;
      ASSERT_TRUE(Sha256OfFile((temp.path() / cases[i].name / file).string(), &actual).ok());
      EXPECT_EQ(hash, actual) << cases[i].name << "/" << file;
    }
  }
}

TEST(GoldenSuite, GeneratingTwiceGivesIdenticalFiles) {
  TempDir first, second;
  const std::vector<TestCase> cases = Smoke();
  ASSERT_TRUE(GenerateGolden(first.path().string(), "smoke", cases).ok());
  ASSERT_TRUE(GenerateGolden(second.path().string(), "smoke", cases).ok());
  std::map<std::string, std::string> files;  // relative path -> bytes, of the first run
  for (const auto& item : fs::recursive_directory_iterator(first.path())) {
    if (item.is_regular_file()) files[fs::relative(item.path(), first.path()).string()] = ReadFile(item.path());
  }
  EXPECT_EQ(files.size(), 1 + 2 * cases.size());  // no temporary file left behind
  size_t seen = 0;
  for (const auto& item : fs::recursive_directory_iterator(second.path())) {
    if (!item.is_regular_file()) continue;
    const std::string name = fs::relative(item.path(), second.path()).string();
    ++seen;
    ASSERT_TRUE(files.count(name)) << name;
    EXPECT_TRUE(files[name] == ReadFile(item.path())) << name << " differs between two runs";
  }
  EXPECT_EQ(seen, files.size());
}

TEST(GoldenSuite, FlippedOutputByteFailsThatCase) {
  TempDir temp;
  const std::vector<TestCase> cases = Small();
  Generate(temp.path().string(), cases);
  const std::string victim = cases[1].name;
  const fs::path path = temp.path() / victim / kGoldenOutputs;
  std::string bytes = ReadFile(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  const size_t data_begin = 8 + header_length;
  bytes[data_begin + (bytes.size() - data_begin) / 2] ^= 0x01;
  WriteFile(path, bytes);
  std::string corrupted_hash;
  ASSERT_TRUE(Sha256OfFile(path.string(), &corrupted_hash).ok());

  const CliResult verify = RunMsa({"golden", "verify", "--dir", temp.path().string()});
  EXPECT_EQ(verify.code, 1) << verify.out << verify.err;
  const std::string line = CaseLine(verify.out, victim);
  EXPECT_NE(line.find("FAIL"), std::string::npos) << verify.out;
  EXPECT_NE(line.find(victim + "/outputs.safetensors is corrupted"), std::string::npos) << line;
  EXPECT_NE(line.find(corrupted_hash), std::string::npos) << line;
  EXPECT_NE(CaseLine(verify.out, cases[0].name).find("PASS"), std::string::npos) << verify.out;
  EXPECT_NE(CaseLine(verify.out, cases[2].name).find("PASS"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("2 of 3 cases passed, 1 failed"), std::string::npos) << verify.out;
}

TEST(GoldenSuite, MissingInputsFileFailsThatCase) {
  TempDir temp;
  const std::vector<TestCase> cases = Small();
  Generate(temp.path().string(), cases);
  fs::remove(temp.path() / cases[2].name / kGoldenInputs);
  const CliResult verify = RunMsa({"golden", "verify", "--dir", temp.path().string()});
  EXPECT_EQ(verify.code, 1) << verify.out << verify.err;
  EXPECT_NE(CaseLine(verify.out, cases[2].name).find(cases[2].name + "/inputs.safetensors is missing"),
            std::string::npos)
      << verify.out;
}

TEST(GoldenSuite, BadManifestIsBadInput) {
  TempDir temp;
  Generate(temp.path().string(), Small());
  const fs::path manifest_path = temp.path() / kGoldenManifest;
  const std::string valid = ReadFile(manifest_path);
  const auto without = [&valid](const std::function<void(nlohmann::ordered_json&)>& edit) {
    auto json = nlohmann::ordered_json::parse(valid);
    edit(json);
    return json.dump();
  };
  const std::vector<std::pair<std::string, std::string>> manifests = {
      // (content, expected in the message)
      {valid.substr(0, valid.size() / 2), "not valid JSON"},
      {"[]", "must be a JSON object"},
      {without([](auto& j) { j.erase("cases"); }), "cases"},
      {without([](auto& j) { j["format_version"] = 2; }), "format_version = 2"},
      {without([](auto& j) { j["cases"][1].erase("files"); }), "cases[1].files"},
      {without([](auto& j) { j["cases"][0]["files"].erase(kGoldenOutputs); }), "outputs.safetensors\"] is missing"},
      {without([](auto& j) { j["cases"][0]["name"] = "../escape"; }), "cases[0].name"},
      {without([](auto& j) { j["cases"][2]["files"][kGoldenInputs] = "abc"; }), "64 lower-case hex"},
  };
  for (const auto& [content, expected] : manifests) {
    WriteFile(manifest_path, content);
    const CliResult verify = RunMsa({"golden", "verify", "--dir", temp.path().string()});
    EXPECT_EQ(verify.code, 2) << expected << "\n" << verify.out;
    EXPECT_EQ(verify.out, "");
    EXPECT_EQ(verify.err.rfind("msa: error: " + manifest_path.string() + ": ", 0), 0u) << verify.err;
    EXPECT_NE(verify.err.find(expected), std::string::npos) << verify.err;
  }
  fs::remove(manifest_path);
  const CliResult missing = RunMsa({"golden", "verify", "--dir", temp.path().string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
}

TEST(GoldenSuite, UnknownBackendIsBadInput) {
  TempDir temp;
  Generate(temp.path().string(), Small());
  const CliResult verify = RunMsa({"golden", "verify", "--dir", temp.path().string(), "--backend", "no_such_backend"});
  EXPECT_EQ(verify.code, 2);
  EXPECT_NE(verify.err.find("--backend no_such_backend: unknown backend"), std::string::npos) << verify.err;
}

// Backends that run the reference, then distort its attention outputs.
using Distortion = void (*)(double* out, int64_t out_size, double* lse, int64_t lse_size);

Status ReferenceSelect(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                       const ProgressFn& progress) {
  Config exact = config;
  exact.precision = Precision::kExact;
  return FindBackend("reference")->select(exact, inputs, outputs, progress);
}

template <Distortion distort>
Status DistortedAttend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                       const AttentionOutputs& outputs, const ProgressFn& progress) {
  Config exact = config;
  exact.precision = Precision::kExact;
  MSA_RETURN_IF_ERROR(FindBackend("reference")->attend(exact, inputs, selection, outputs, progress));
  const int64_t total_q = inputs.batch.total_q();
  distort(outputs.out, total_q * config.num_q_heads * config.value_dim, outputs.lse, total_q * config.num_q_heads);
  return Status::Ok();
}

template <Distortion distort>
Backend DistortedBackend(std::string_view name) {
  return {name, [] { return true; }, [](const Config&) { return Status::Ok(); }, ReferenceSelect,
          DistortedAttend<distort>};
}

void FlipLowestBitOfFirstOut(double* out, int64_t out_size, double*, int64_t) {
  if (out_size == 0) return;
  uint64_t bits = 0;
  std::memcpy(&bits, out, 8);
  bits ^= 1;
  std::memcpy(out, &bits, 8);
}

// What a bf16 kernel writes: out rounded to bf16, lse kept in fp32.
void RoundToBF16(double* out, int64_t out_size, double* lse, int64_t lse_size) {
  for (int64_t i = 0; i < out_size; ++i) out[i] = BF16ToDouble(DoubleToBF16(out[i]));
  for (int64_t i = 0; i < lse_size; ++i) lse[i] = double(float(lse[i]));
}

void AddOneToFirstOut(double* out, int64_t out_size, double*, int64_t) {
  if (out_size > 0) out[0] += 1.0;
}

TEST(GoldenSuite, BackendOneBitOffFailsNamingTensorAndElement) {
  TempDir temp;
  const std::vector<TestCase> cases = Small();
  Generate(temp.path().string(), cases);
  GoldenVerifyResult result;
  const Status status = VerifyGolden(temp.path().string(), DistortedBackend<FlipLowestBitOfFirstOut>("one_bit_off"),
                                     Precision::kExact, &result);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(result.failed(), 3);
  for (const GoldenCaseResult& case_result : result.cases) {
    EXPECT_EQ(case_result.reason.rfind("out: 1 of ", 0), 0u) << case_result.reason;
    EXPECT_NE(case_result.reason.find("elements differ, first at [0, 0, 0]:"), std::string::npos) << case_result.reason;
  }
}

TEST(GoldenSuite, LowPrecisionBackendIsJudgedByTheOracleRules) {
  TempDir temp;
  Generate(temp.path().string(), Small());
  GoldenVerifyResult rounded, wrong;
  ASSERT_TRUE(
      VerifyGolden(temp.path().string(), DistortedBackend<RoundToBF16>("bf16_outputs"), Precision::kBf16, &rounded)
          .ok());
  for (const GoldenCaseResult& case_result : rounded.cases) {
    EXPECT_TRUE(case_result.passed) << case_result.name << ": " << case_result.reason << "\n" << case_result.detail;
    EXPECT_EQ(case_result.reason.rfind("judged at bf16 (scores ", 0), 0u) << case_result.reason;
  }
  ASSERT_TRUE(
      VerifyGolden(temp.path().string(), DistortedBackend<AddOneToFirstOut>("off_by_one"), Precision::kBf16, &wrong)
          .ok());
  EXPECT_EQ(wrong.failed(), 3);
  for (const GoldenCaseResult& case_result : wrong.cases) {
    EXPECT_NE(case_result.reason.find("out max error"), std::string::npos) << case_result.reason;
    EXPECT_FALSE(case_result.detail.empty()) << case_result.name;
  }
}

}  // namespace
}  // namespace msa
