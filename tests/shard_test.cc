// Static shards (oracle/shard.h): "I/N" parsing with its errors, and --shard auto from each launcher's variables,
// through the library (a table of environments) and through `msa golden generate --shard auto` with the variables
// set in the process environment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "oracle/shard.h"
#include "tests/run_cli.h"

namespace msa {
namespace {

namespace fs = std::filesystem;
using Environment = std::map<std::string, std::string>;

EnvironmentLookup LookupIn(const Environment& environment) {
  return [&environment](const char* name) -> const char* {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  };
}

TEST(ShardTest, ParsesIOfN) {
  Shard shard;
  ASSERT_TRUE(ParseShard("--shard", "2/3", &shard).ok());
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 3);
  EXPECT_EQ(shard.ToString(), "2/3");
  // Shard 2 of 3 holds positions 2, 5, 8, ...; the whole run (0/1) holds every position.
  EXPECT_TRUE(shard.Holds(5));
  EXPECT_FALSE(shard.Holds(4));
  EXPECT_TRUE(Shard{}.Holds(7));
}

TEST(ShardTest, RefusesBadShardsNamingTheValue) {
  const struct {
    const char* text;
    const char* says;
  } bad[] = {{"3/3", "I must be in [0, N-1] = [0, 2]"},
             {"-1/3", "I must be in"},
             {"0/0", "N must be in [1,"},
             {"1", "must be I/N"},
             {"a/3", "must be I/N"},
             {"1/3x", "must be I/N"},
             {"", "must be I/N"}};
  for (const auto& [text, says] : bad) {
    Shard shard;
    const Status status = ParseShard("--shard", text, &shard);
    ASSERT_FALSE(status.ok()) << text;
    EXPECT_NE(status.message().find("--shard " + std::string(text) + ":"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(says), std::string::npos) << status.message();
  }
}

// Each launcher's variables as it sets them, and the shard they mean.
struct LauncherCase {
  const char* what;
  Environment environment;
  int count_flag;
  int index, count;
  const char* source;  // the start of the description
};

const std::vector<LauncherCase>& LauncherCases() {
  static const std::vector<LauncherCase> cases = {
      {"Slurm array 0-2", {{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}, 0, 1, 3, "Slurm array"},
      {"Slurm array 1-7:3 (ids 1, 4, 7)",
       {{"SLURM_ARRAY_TASK_ID", "7"},
        {"SLURM_ARRAY_TASK_MIN", "1"},
        {"SLURM_ARRAY_TASK_STEP", "3"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"}},
       0,
       2,
       3,
       "Slurm array: SLURM_ARRAY_TASK_ID=7, SLURM_ARRAY_TASK_MIN=1, SLURM_ARRAY_TASK_STEP=3"},
      {"srun tasks", {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}}, 0, 3, 4, "Slurm: SLURM_PROCID=3"},
      {"torchrun", {{"RANK", "1"}, {"WORLD_SIZE", "2"}}, 0, 1, 2, "torchrun: RANK=1, WORLD_SIZE=2"},
      {"torchrun inside a Slurm allocation",
       {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}},
       0,
       2,
       4,
       "torchrun"},
      {"mpirun", {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "5"}}, 0, 0, 5, "Open MPI"},
      {"Kubernetes indexed Job",
       {{"JOB_COMPLETION_INDEX", "4"}},
       6,
       4,
       6,
       "Kubernetes indexed Job: JOB_COMPLETION_INDEX=4, --shard-count 6"},
      {"torchrun, --shard-count agreeing", {{"RANK", "0"}, {"WORLD_SIZE", "2"}}, 2, 0, 2, "torchrun"},
  };
  return cases;
}

TEST(ShardTest, ReadsEachLaunchersVariables) {
  for (const LauncherCase& c : LauncherCases()) {
    Shard shard;
    std::string source;
    const Status status = ShardFromEnvironment(LookupIn(c.environment), c.count_flag, &shard, &source);
    ASSERT_TRUE(status.ok()) << c.what << ": " << status.message();
    EXPECT_EQ(shard.index, c.index) << c.what;
    EXPECT_EQ(shard.count, c.count) << c.what;
    EXPECT_EQ(source.rfind(c.source, 0), 0u) << c.what << ": " << source;
  }
}

TEST(ShardTest, RefusesWhatNoLauncherCouldMean) {
  const struct {
    const char* what;
    Environment environment;
    int count_flag;
    const char* says;
  } bad[] = {
      {"nothing set", {}, 0, "no launcher's rank variable is set (looked for SLURM_ARRAY_TASK_ID, RANK,"},
      {"Kubernetes without a count", {{"JOB_COMPLETION_INDEX", "1"}}, 0, "give --shard-count N"},
      {"Kubernetes index past the count", {{"JOB_COMPLETION_INDEX", "3"}}, 3, "gives shard 3 of 3"},
      {"torchrun without WORLD_SIZE", {{"RANK", "1"}}, 0, "WORLD_SIZE is not set"},
      {"a rank that is not a number", {{"RANK", "one"}, {"WORLD_SIZE", "2"}}, 0, "RANK=one is not an integer"},
      {"a count flag that disagrees", {{"RANK", "0"}, {"WORLD_SIZE", "2"}}, 3, "--shard-count 3 disagrees with"},
      {"an array id off the step",
       {{"SLURM_ARRAY_TASK_ID", "2"},
        {"SLURM_ARRAY_TASK_STEP", "2"},
        {"SLURM_ARRAY_TASK_MIN", "1"},
        {"SLURM_ARRAY_TASK_COUNT", "3"}},
       0,
       "not first + a multiple of the step"},
  };
  for (const auto& c : bad) {
    Shard shard;
    std::string source;
    const Status status = ShardFromEnvironment(LookupIn(c.environment), c.count_flag, &shard, &source);
    ASSERT_FALSE(status.ok()) << c.what;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << c.what << ": " << status.message();
  }
}

// Sets the variables for its lifetime (and clears every launcher variable first), then restores an empty state.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const Environment& environment) {
    Clear();
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() { Clear(); }

 private:
  static void Clear() {
    for (const char* name : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP",
                             "SLURM_ARRAY_TASK_COUNT", "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE",
                             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "JOB_COMPLETION_INDEX"}) {
      unsetenv(name);
    }
  }
};

// The tool with each launcher's variables in its environment: the shard it says and the record it writes.
TEST(ShardTest, GoldenGenerateShardAutoReadsTheProcessEnvironment) {
  const fs::path root = fs::temp_directory_path() / ("msa_shard_test_" + std::to_string(getpid()));
  int run = 0;
  for (const LauncherCase& c : LauncherCases()) {
    ScopedEnvironment environment(c.environment);
    const std::string dir = (root / std::to_string(run++)).string();
    std::vector<std::string> args = {"golden", "generate", "--suite", "smoke", "--dir", dir, "--shard", "auto"};
    if (c.count_flag != 0) args.insert(args.end(), {"--shard-count", std::to_string(c.count_flag)});
    const CliResult result = RunMsa(args);
    ASSERT_EQ(result.code, 0) << c.what << ": " << result.err;
    const std::string shard = std::to_string(c.index) + "/" + std::to_string(c.count);
    EXPECT_NE(result.out.find("msa golden generate: shard " + shard + " from " + c.source), std::string::npos)
        << c.what << ": " << result.out;
    const std::string record = "SHARD-" + std::to_string(c.index) + "-of-" + std::to_string(c.count) + ".json";
    EXPECT_TRUE(fs::exists(fs::path(dir) / record)) << c.what;
  }
  {
    ScopedEnvironment nothing({});
    const CliResult result = RunMsa({"golden", "generate", "--dir", (root / "none").string(), "--shard", "auto"});
    EXPECT_EQ(result.code, 2);
    EXPECT_NE(result.err.find("msa: error: --shard auto: no launcher's rank variable is set"), std::string::npos)
        << result.err;
  }
  std::error_code error;
  fs::remove_all(root, error);
}

}  // namespace
}  // namespace msa
