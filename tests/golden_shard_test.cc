// Sharded golden suites (`msa golden generate --shard I/N`, `msa golden merge`): three shards merged give the
// unsharded run's MANIFEST.json byte for byte (smoke and full, shards computed by another exact backend too);
// merges of shards that overlap, are missing, incomplete, corrupted or from another version or suite are refused
// with the reason; a resumed shard keeps the cases whose files match its record and redoes the others.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracle/golden.h"
#include "tests/run_cli.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

class GoldenShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int count = 0;
    root_ = fs::temp_directory_path() /
            ("msa_golden_shard_test_" + std::to_string(getpid()) + "_" + std::to_string(count++));
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code error;
    fs::remove_all(root_, error);
  }
  std::string Dir(const std::string& name) const { return (root_ / name).string(); }

  // `msa golden generate` of `suite` into `dir` (with --shard `shard` unless empty); asserts success.
  void Generate(const std::string& suite, const std::string& dir, const std::string& shard,
                const std::string& backend = "reference") {
    std::vector<std::string> args = {"golden", "generate", "--suite", suite, "--dir", dir, "--backend", backend};
    if (!shard.empty()) args.insert(args.end(), {"--shard", shard});
    const CliResult result = RunMsa(args);
    ASSERT_EQ(result.code, 0) << result.err;
  }
  // Shards 0/3, 1/3, 2/3 of `suite` into s0, s1, s2.
  void GenerateThreeShards(const std::string& suite, const std::string& backend = "reference") {
    for (int i = 0; i < 3; ++i) Generate(suite, Dir("s" + std::to_string(i)), std::to_string(i) + "/3", backend);
  }
  void ExpectThreeShardsMergeToTheWholeRun(const std::string& suite);
  CliResult Merge(const std::string& out, const std::vector<std::string>& shard_dirs) {
    std::vector<std::string> args = {"golden", "merge", "--dir", out};
    for (const std::string& name : shard_dirs) args.push_back(Dir(name));
    return RunMsa(args);
  }

  fs::path root_;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void ExpectSameManifest(const std::string& suite, const fs::path& whole, const fs::path& merged) {
  const std::string expected = ReadFile(whole / kGoldenManifest);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ReadFile(merged / kGoldenManifest), expected) << suite;
  // Every case directory the manifest lists is in the merged directory, with the whole run's bytes.
  const auto manifest = nlohmann::json::parse(expected);
  for (const auto& entry : manifest["cases"]) {
    for (const auto& [file, hash] : entry["files"].items()) {
      const std::string name = entry["name"].get<std::string>();
      EXPECT_EQ(ReadFile(merged / name / file), ReadFile(whole / name / file)) << name << "/" << file;
    }
  }
}

// Shards 0/3, 1/3, 2/3 of `suite`, merged in any order and into one of the shard directories, against one run.
void GoldenShardTest::ExpectThreeShardsMergeToTheWholeRun(const std::string& suite) {
  Generate(suite, Dir("whole"), "");
  GenerateThreeShards(suite);
  const CliResult result = Merge(Dir("merged"), {"s2", "s0", "s1"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_NE(result.out.find("from 3 shards (computed by reference "), std::string::npos) << result.out;
  ExpectSameManifest(suite, Dir("whole"), Dir("merged"));
  ASSERT_EQ(Merge(Dir("s1"), {"s0", "s1", "s2"}).code, 0);
  ExpectSameManifest(suite, Dir("whole"), Dir("s1"));
}

TEST_F(GoldenShardTest, ThreeShardsOfSmokeMergeToTheWholeRunsManifest) { ExpectThreeShardsMergeToTheWholeRun("smoke"); }

// The full suite's M3-sized cases take minutes under ASan: make sanitize leaves this test out (SANITIZE_EXCLUDE).
TEST_F(GoldenShardTest, ThreeShardsOfFullMergeToTheWholeRunsManifest) { ExpectThreeShardsMergeToTheWholeRun("full"); }

// Every exact backend available here (the reference, simd, gpu) computes shards that merge to the reference run.
TEST_F(GoldenShardTest, ShardsFromEveryExactBackendGiveTheSameFiles) {
  Generate("smoke", Dir("whole"), "");
  Config exact;
  int backends = 0;
  for (const Backend& backend : AllBackends()) {
    if (!BackendRuns(backend, exact).ok()) continue;
    ++backends;
    const std::string name(backend.name);
    std::vector<std::string> shard_dirs;
    for (int i = 0; i < 3; ++i) {
      shard_dirs.push_back(name + "_s" + std::to_string(i));
      Generate("smoke", Dir(shard_dirs.back()), std::to_string(i) + "/3", name);
    }
    const CliResult result = Merge(Dir(name + "_merged"), shard_dirs);
    ASSERT_EQ(result.code, 0) << name << ": " << result.err;
    EXPECT_NE(result.out.find("(computed by " + name + " "), std::string::npos) << result.out;
    ExpectSameManifest("smoke", Dir("whole"), Dir(name + "_merged"));
  }
  EXPECT_GE(backends, 1);  // the reference at least
}

TEST(GoldenSuites, EveryNamedSuiteHasCasesAndLongIsAMillionKeys) {
  for (const char* name : kGoldenSuiteNames) {
    std::vector<TestCase> cases;
    ASSERT_TRUE(GoldenSuite(name, &cases)) << name;
    EXPECT_FALSE(cases.empty()) << name;
  }
  std::vector<TestCase> smoke, full, cases;
  ASSERT_TRUE(GoldenSuite("smoke", &smoke) && GoldenSuite("full", &full) && GoldenSuite("long", &cases));
  ASSERT_GT(full.size(), smoke.size());
  for (size_t i = 0; i < smoke.size(); ++i) EXPECT_EQ(full[i].name, smoke[i].name);  // full = smoke, then more
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].spec.lengths, (std::vector<std::pair<int32_t, int32_t>>{{16, 1 << 20}}));
  EXPECT_EQ(cases[0].spec.config.num_q_heads, 64);
  EXPECT_FALSE(GoldenSuite("nope", &cases));
}

TEST_F(GoldenShardTest, TheWholeRunIsShardZeroOfOneAndLeavesNoRecord) {
  Generate("smoke", Dir("whole"), "");
  Generate("smoke", Dir("one"), "0/1");
  for (const char* dir : {"whole", "one"}) {
    EXPECT_FALSE(fs::exists(fs::path(Dir(dir)) / "SHARD-0-of-1.json")) << dir;
  }
  ExpectSameManifest("smoke", Dir("whole"), Dir("one"));
}

// A record's JSON, edited by `change`, written back.
void EditRecord(const fs::path& path, const std::function<void(nlohmann::ordered_json&)>& change) {
  auto json = nlohmann::ordered_json::parse(ReadFile(path));
  change(json);
  WriteFile(path, json.dump(1));
}

TEST_F(GoldenShardTest, RefusesBadMergesWithTheReason) {
  GenerateThreeShards("smoke");
  Generate("training", Dir("other_suite"), "1/3");
  Generate("smoke", Dir("other_count"), "1/2");
  const struct {
    const char* what;
    std::vector<std::string> dirs;
    const char* says;
  } refusals[] = {
      {"a shard missing", {"s0", "s2"}, "shard 1/3 is missing"},
      {"a shard twice", {"s0", "s1", "s1", "s2"}, "shard 1/3 appears twice (overlapping shards)"},
      {"another suite", {"s0", "other_suite", "s2"}, "shards of different suites or case definitions: smoke"},
      {"another shard count", {"s0", "other_count", "s2"}, "shards of different shard counts: 0/3 and 1/2"},
      {"no record", {"s0", "s1", "s2", "empty"}, "holds no SHARD-<I>-of-<N>.json"},
  };
  fs::create_directories(Dir("empty"));
  for (const auto& refusal : refusals) {
    const CliResult result = Merge(Dir("out"), refusal.dirs);
    EXPECT_EQ(result.code, 2) << refusal.what;
    EXPECT_NE(result.err.find(refusal.says), std::string::npos) << refusal.what << ": " << result.err;
    EXPECT_FALSE(fs::exists(fs::path(Dir("out")) / kGoldenManifest)) << refusal.what;
  }
  const fs::path record = fs::path(Dir("s1")) / "SHARD-1-of-3.json";
  const std::string original = ReadFile(record);
  const struct {
    const char* what;
    std::function<void(nlohmann::ordered_json&)> change;
    const char* says;
  } edits[] = {
      {"another version", [](auto& j) { j["msa_version"] = "0.0.1"; }, "shards of different msa versions"},
      {"incomplete", [](auto& j) { j["complete"] = false; }, "shard 1/3 is incomplete"},
      {"a case lost", [](auto& j) { j["cases"].erase(j["cases"].begin()); }, "is missing from shard 1/3"},
  };
  for (const auto& edit : edits) {
    EditRecord(record, edit.change);
    const CliResult result = Merge(Dir("out"), {"s0", "s1", "s2"});
    EXPECT_EQ(result.code, 2) << edit.what;
    EXPECT_NE(result.err.find(edit.says), std::string::npos) << edit.what << ": " << result.err;
    WriteFile(record, original);
  }
  // A case file changed after its shard finished.
  const auto json = nlohmann::json::parse(original);
  const std::string victim = json["cases"][0]["entry"]["name"];
  const fs::path outputs = fs::path(Dir("s1")) / victim / kGoldenOutputs;
  std::string bytes = ReadFile(outputs);
  bytes[bytes.size() - 1] ^= 1;
  WriteFile(outputs, bytes);
  const CliResult result = Merge(Dir("out"), {"s0", "s1", "s2"});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.err.find(victim + "/outputs.safetensors is corrupted"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(fs::path(Dir("out")) / kGoldenManifest));
}

TEST_F(GoldenShardTest, ResumeKeepsMatchingCasesAndRedoesTheRest) {
  std::vector<TestCase> cases;
  ASSERT_TRUE(GoldenSuite("smoke", &cases));
  GoldenGenerateOptions options;
  options.shard = Shard{1, 3};
  ASSERT_TRUE(GenerateGolden(Dir("s1"), "smoke", cases, options).ok());
  const std::string record = ReadFile(fs::path(Dir("s1")) / "SHARD-1-of-3.json");
  // Corrupt the second case of the shard; the first stays as it was.
  const auto json = nlohmann::json::parse(record);
  const std::string kept = json["cases"][0]["entry"]["name"], redone = json["cases"][1]["entry"]["name"];
  const fs::path corrupted = fs::path(Dir("s1")) / redone / kGoldenInputs;
  WriteFile(corrupted, ReadFile(corrupted) + "x");
  options.resume = true;
  std::vector<std::pair<std::string, bool>> events;
  ASSERT_TRUE(GenerateGolden(Dir("s1"), "smoke", cases, options, [&](const GoldenCaseEvent& event) {
                events.emplace_back(event.name, event.reused);
              }).ok());
  ASSERT_EQ(events.size(), json["cases"].size());
  for (const auto& [name, reused] : events) EXPECT_EQ(reused, name != redone) << name;
  EXPECT_EQ(ReadFile(fs::path(Dir("s1")) / "SHARD-1-of-3.json"), record);  // the redone case has its old bytes
  // Without --resume every case is redone.
  options.resume = false;
  int reused = 0;
  ASSERT_TRUE(GenerateGolden(Dir("s1"), "smoke", cases, options, [&](const GoldenCaseEvent& event) {
                reused += event.reused;
              }).ok());
  EXPECT_EQ(reused, 0);
  EXPECT_FALSE(kept.empty());
}

}  // namespace
}  // namespace msa
