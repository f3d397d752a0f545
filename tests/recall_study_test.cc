// The recall study (tools/msa/recall_study.h, tools/msa/recall_sweep.h, `msa recall`).
//
// Expected values come from independent routes: the max-pooling theorem (a needle whose token score beats
// the take-th best max of the other rankable blocks is selected) checked with the test's own dot products;
// monotonicity in the strength a at fixed seeds (the needle enters its block's score monotonically and
// nothing else changes); a backend that ignores the scores must be caught; the CSV / JSON schema as written
// here; PNG figures; CLI errors as one line naming the flag and the value.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <nlohmann/json.hpp>

#include "reference/reference.h"
#include "tests/run_cli.h"
#include "tools/msa/cli.h"
#include "tools/msa/recall_plot.h"
#include "tools/msa/recall_report.h"
#include "tools/msa/recall_study.h"
#include "tools/msa/recall_sweep.h"

namespace msa {

inline void showValue(const RecallSetup& s, std::ostream& os) {
  os << DescribeConfig(s.config) << " context=" << s.context << " queries=" << s.queries << " sequences=" << s.sequences
     << " distance=" << s.distance << " strength=" << s.strength << " needles=" << s.needles
     << " distractors=" << s.distractors << " distractor_strength=" << s.distractor_strength << " seed=" << s.seed;
}

namespace {

namespace fs = std::filesystem;

// A random max-pooling setup, small enough for the reference to take milliseconds.
rc::Gen<RecallSetup> MaxPoolingSetups() {
  return rc::gen::exec([] {
    RecallSetup s;
    Config& c = s.config;
    c.num_kv_heads = *rc::gen::inRange(1, 3);
    c.num_q_heads = c.num_kv_heads * *rc::gen::inRange(1, 3);
    c.head_dim = c.value_dim = c.index_head_dim = *rc::gen::inRange(2, 17);
    c.block_size = *rc::gen::inRange(1, 9);
    c.init_blocks = *rc::gen::inRange(0, 3);
    c.top_k = *rc::gen::inRange(c.init_blocks + 1, c.init_blocks + 6);
    c.pooling = Pooling::kMax;
    s.context = *rc::gen::inRange(8, 160);
    s.queries = *rc::gen::inRange(1, 5);
    s.sequences = *rc::gen::inRange(1, 4);
    s.needles = *rc::gen::inRange(1, 3);
    s.distance = *rc::gen::inRange<int64_t>(s.needles > 1 ? s.queries : 0, s.context / s.needles + 1);
    s.distractors = *rc::gen::inRange(0, 3);
    s.distractor_strength = *rc::gen::inRange(-10, 40) / 10.0;
    s.strength = *rc::gen::inRange(0, 120) / 10.0;
    s.seed = *rc::gen::arbitrary<uint64_t>();
    return s;
  });
}

// The test's own token score: a plain dot product of the planted inputs times the index scale.
double TokenScore(const Problem& problem, int64_t t, int64_t r, int64_t key_row) {
  const TensorView q = ViewOf(problem.index_q), k = ViewOf(problem.index_k);
  double dot = 0;
  for (int64_t d = 0; d < q.dim; ++d) dot += q.At(t, r, d) * k.At(key_row, 0, d);
  return dot * problem.config.IndexScale();
}

// Whether the theorem promises that `needle` is selected, with a margin that covers the rounding difference
// between the test's dot products and the canonical ones.
bool TheoremPromises(const Problem& problem, const PlantedNeedle& needle) {
  const Config& c = problem.config;
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  const reference::QueryPlace& place = places[needle.query_row];
  const int64_t local = place.position / c.block_size, init = std::min<int64_t>(c.init_blocks, local);
  if (needle.block >= local || needle.block < init) return false;  // forced blocks: not what the theorem is about
  std::vector<double> other_maxima;                                // of the rankable blocks other than the needle's
  for (int64_t b = init; b < local; ++b) {
    if (b == needle.block) continue;
    double best = -HUGE_VAL;
    for (int64_t s = b * c.block_size; s < (b + 1) * c.block_size; ++s) {
      best = std::max(best, TokenScore(problem, needle.query_row, needle.group, place.key_begin + s));
    }
    other_maxima.push_back(best);
  }
  const int64_t take = c.top_k - (init + 1);
  if (take <= 0) return false;
  if (int64_t(other_maxima.size()) < take) return true;
  std::sort(other_maxima.rbegin(), other_maxima.rend());
  const double threshold = other_maxima[take - 1];
  const double needle_score =
      TokenScore(problem, needle.query_row, needle.group, place.key_begin + needle.key_position);
  return needle_score > threshold + 1e-9 * (1 + std::abs(threshold));
}

std::vector<int32_t> ReferenceSelection(const Problem& problem) {
  Outputs outputs;
  EXPECT_TRUE(RunReference(problem, &outputs).ok());
  return outputs.topk_indices;
}

TEST(RecallStudy, MaxPoolingRecallsEveryNeedleThatBeatsTheKthBestOtherBlock) {
  int64_t promised = 0;  // needles the theorem spoke about, over all runs: the property must not be vacuous
  const bool passed = rc::check("a needle above the take-th best other block max is selected", [&promised] {
    const RecallSetup setup = *MaxPoolingSetups();
    RC_PRE(ValidateRecallSetup(setup).ok());
    const PlantedProblem planted = PlantNeedles(setup, NoiseProblem(setup));
    const std::vector<bool> hits = NeedleHits(planted, ReferenceSelection(planted.problem));
    for (size_t n = 0; n < planted.needles.size(); ++n) {
      if (!TheoremPromises(planted.problem, planted.needles[n])) continue;
      ++promised;
      RC_ASSERT(hits[n]);
    }
  });
  EXPECT_TRUE(passed);
  EXPECT_GT(promised, 20);
}

// A hand-built case: one query per sequence (so the needle's strength changes only its own block's score),
// 8 sequences, 16 blocks of 64 keys, top_k 4, the needle 600 tokens back.
TEST(RecallStudy, RecallFallsWeaklyAsTheStrengthFallsAtFixedSeeds) {
  RecallSetup setup;
  setup.config.num_q_heads = 2;
  setup.config.num_kv_heads = 1;
  setup.config.head_dim = setup.config.value_dim = setup.config.index_head_dim = 32;
  setup.config.block_size = 64;
  setup.config.top_k = 4;
  setup.context = 1024;
  setup.queries = 1;
  setup.sequences = 8;
  setup.distance = 600;
  setup.seed = 42;
  const Problem noise = NoiseProblem(setup);
  for (Pooling pooling : {Pooling::kMax, Pooling::kLse, Pooling::kMean}) {
    setup.config.pooling = pooling;
    double previous = 1.0;
    std::vector<double> recalls;
    for (double strength : {16.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.0}) {
      setup.strength = strength;
      ASSERT_TRUE(ValidateRecallSetup(setup).ok());
      const PlantedProblem planted = PlantNeedles(setup, noise);
      const double recall = MeasureRecall(planted, ReferenceSelection(planted.problem)).needle_recall;
      EXPECT_LE(recall, previous) << PoolingName(pooling) << " at a = " << strength;
      previous = recall;
      recalls.push_back(recall);
    }
    if (pooling != Pooling::kMean) {  // pool after: a = 16 beats every noise token of ~1000 (max about 3.3)
      EXPECT_EQ(recalls.front(), 1.0) << PoolingName(pooling);
      EXPECT_LT(recalls.back(), 1.0) << PoolingName(pooling);
    }
  }
}

// Hand-worked: Bk 4, one init block, context 10, queries at positions 8 and 9, one needle 5 back. Position 8
// (local block 2) has history block 1 free (its needle, at key 3, is in the forced block 0); position 9's
// needle, at key 4, sits in block 1, so that query has no free block. One distractor per query cannot be
// planted, though the first query alone would allow it (planting it divided by zero before this check).
TEST(RecallStudy, DistractorRoomIsCountedAtEveryQueryPosition) {
  RecallSetup setup;
  setup.config.num_q_heads = 2;
  setup.config.num_kv_heads = 1;
  setup.config.head_dim = setup.config.value_dim = setup.config.index_head_dim = 8;
  setup.config.block_size = 4;
  setup.config.top_k = 2;
  setup.config.init_blocks = 1;
  setup.context = 10;
  setup.queries = 2;
  setup.sequences = 1;
  setup.distance = 5;
  setup.distractors = 0;
  EXPECT_TRUE(ValidateRecallSetup(setup).ok());
  setup.distractors = 1;
  const Status status = ValidateRecallSetup(setup);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--distractors"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("exceeds the 0 history blocks"), std::string::npos) << status.message();
}

// A backend that ignores the scores (every block ties, so the lowest ids win) must be caught.
Status SelectLowestIds(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                       const ProgressFn&) {
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(inputs.batch);
  const int64_t total_q = inputs.batch.total_q();
  for (int64_t r = 0; r < config.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t visible = places[t].position / config.block_size + 1;
      const std::vector<double> equal_scores(visible, 0.0);
      int32_t* row = &outputs.topk_indices[(r * total_q + t) * config.top_k];  // [top_k]
      reference::PlaceSelection(config, equal_scores.data(), visible, row);
    }
  }
  return Status::Ok();
}

TEST(RecallStudy, ABackendThatIgnoresTheScoresFallsShort) {
  const Backend lowest_ids{"lowest_ids", [] { return true; }, [](const Config&) { return Status::Ok(); },
                           SelectLowestIds, nullptr};
  RecallSweep sweep;
  sweep.base.config.num_q_heads = 2;
  sweep.base.config.num_kv_heads = 1;
  sweep.base.config.head_dim = sweep.base.config.value_dim = sweep.base.config.index_head_dim = 16;
  sweep.contexts = {512};
  sweep.distances = {100};
  sweep.strengths = {8.0};
  sweep.top_ks = {4};
  sweep.block_sizes = {32};
  sweep.poolings = {Pooling::kMax};
  sweep.backends = {FindBackend("reference"), &lowest_ids};
  std::vector<RecallPoint> points;
  ASSERT_TRUE(RunRecallSweep(sweep, {}, &points).ok());
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].measure.needle_recall, 1.0);  // a = 8 over 512 noise tokens: the theorem applies
  EXPECT_EQ(points[1].measure.needle_recall, 0.0);  // the needle (block 12 of 16) is never among blocks 0-2
  EXPECT_EQ(points[1].recall_flips, points[1].measure.needles);
  EXPECT_GT(points[1].violation_rows, 0);
  EXPECT_FALSE(points[1].agrees);
  EXPECT_FALSE(RecallPassed(points));
  EXPECT_NE(RecallTable(points).find("lowest_ids (exact): FALLS SHORT"), std::string::npos);
}

class RecallCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("recall_study_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<std::string> SplitLine(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');) cells.push_back(cell);
  return cells;
}

TEST_F(RecallCli, WritesTheCsvAndJsonSchema) {
  const std::string out_dir = (dir_ / "out").string();
  const CliResult result =
      RunMsa({"recall", "--context",  "256", "--distance", "32,128",   "--strength", "2,6", "--block-size",
              "16",     "--top-k",    "4",   "--pooling",  "max,mean", "--queries",  "2",   "--sequences",
              "2",      "--head-dim", "8",   "--out-dir",  out_dir});
  ASSERT_EQ(result.code, 0) << result.err;
  int64_t backends = 0;
  for (const Backend& backend : AllBackends()) backends += backend.is_available() && backend.supports(Config{}).ok();
  const int64_t rows = 2 * 2 * 2 * backends;  // distances x strengths x poolings x backends

  const std::vector<std::string> columns = {"context",
                                            "queries",
                                            "sequences",
                                            "distance",
                                            "strength",
                                            "needles",
                                            "distractors",
                                            "distractor_strength",
                                            "top_k",
                                            "block_size",
                                            "pooling",
                                            "backend",
                                            "precision",
                                            "needles_planted",
                                            "needles_recalled",
                                            "needle_recall",
                                            "mass_recall_mean",
                                            "mass_recall_min",
                                            "kept_fraction",
                                            "recall_flips",
                                            "near_tie_rows",
                                            "violation_rows",
                                            "invalid_rows",
                                            "tau",
                                            "agrees"};
  std::ifstream csv(fs::path(out_dir) / "recall.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(SplitLine(line), columns);
  int64_t csv_rows = 0;
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = SplitLine(line);
    ASSERT_EQ(cells.size(), columns.size()) << line;
    EXPECT_EQ(cells[0], "256");
    EXPECT_EQ(cells[8], "4");
    EXPECT_EQ(cells[13], "4");  // 2 sequences x 2 queries x 1 needle
    ++csv_rows;
  }
  EXPECT_EQ(csv_rows, rows);

  std::ifstream json_file(fs::path(out_dir) / "recall.json");
  const nlohmann::json json = nlohmann::json::parse(json_file);
  EXPECT_EQ(json["command"].get<std::string>().rfind("msa recall --context 256 --distance 32,128", 0), 0u);
  EXPECT_EQ(json["settings"]["queries"], 2);
  EXPECT_TRUE(json["passed"].get<bool>());
  ASSERT_EQ(int64_t(json["points"].size()), rows);
  for (const nlohmann::json& point : json["points"]) {
    for (const std::string& column : columns) EXPECT_TRUE(point.contains(column)) << column;
    const double recall = point["needle_recall"];
    EXPECT_DOUBLE_EQ(recall, point["needles_recalled"].get<double>() / point["needles_planted"].get<double>());
    EXPECT_GE(point["mass_recall_min"].get<double>(), 0.0);
    EXPECT_LE(point["mass_recall_mean"].get<double>(), 1.0 + 1e-12);
    EXPECT_TRUE(point["agrees"].get<bool>());
  }
  // Nothing but the two files: no temporaries left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(out_dir), fs::directory_iterator()), 2);
}

TEST_F(RecallCli, PlotWritesOnePngPerSweptVariableOrSaysWhyNot) {
  const std::string out_dir = (dir_ / "figures").string();
  const CliResult result =
      RunMsa({"recall", "--context",  "128", "--distance", "16,64", "--strength", "2,6", "--block-size",
              "8",      "--top-k",    "3",   "--pooling",  "max",   "--queries",  "1",   "--sequences",
              "1",      "--head-dim", "4",   "--out-dir",  out_dir, "--plot"});
  if (!CheckPlotter().ok()) {  // no gnuplot here: one clear line, nothing written
    EXPECT_EQ(result.code, 2);
    EXPECT_NE(result.err.find("--plot: gnuplot"), std::string::npos) << result.err;
    EXPECT_FALSE(fs::exists(out_dir));
    return;
  }
  ASSERT_EQ(result.code, 0) << result.err;
  for (const char* name :
       {"needle_recall_vs_strength.png", "needle_recall_vs_distance.png", "mass_recall_vs_distance.png"}) {
    std::ifstream png(fs::path(out_dir) / name, std::ios::binary);
    char signature[8] = {};
    png.read(signature, 8);
    EXPECT_EQ(std::string(signature, 8), "\x89PNG\r\n\x1a\n") << name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(out_dir), fs::directory_iterator()), 5);  // + CSV and JSON
}

TEST_F(RecallCli, BadValuesNameTheFlagAndTheValue) {
  const std::string out_dir = (dir_ / "out").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--distance", "10,abc"}, "--distance abc: not an integer"},
      {{"--strength", "1,-2"}, "--strength -2: must be in [0, 1000]"},
      {{"--strength", "1,x"}, "--strength x: not a finite number"},
      {{"--pooling", "max,median"}, "--pooling median: must be max, lse or mean"},
      {{"--backends", "nope"}, "--backends nope: unknown backend"},
      {{"--context", "256", "--distance", "300"}, "--distance 300: must be in [0, (context - queries) / needles]"},
      {{"--top-k", "4,0"}, "--top-k 0: must be in [1, 65536]"},
      {{"--block-size", ""}, "--block-size : not an integer"},
      {{"--precision", "fp8"}, "--precision fp8: must be exact, fp32, bf16 or fp16"},
      {{"--context", "256", "--distance", "32", "--distractors", "99"}, "--distractors 99: exceeds the"},
      {{"--q-heads", "3"}, "--q-heads 3: must be a multiple of --kv-heads 2"},
  };
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> args = {"recall", "--out-dir", out_dir};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult result = RunMsa(args);
    EXPECT_EQ(result.code, 2) << expected;
    EXPECT_EQ(result.err.rfind("msa: error: " + expected, 0), 0u) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_FALSE(fs::exists(out_dir)) << expected;
  }
  const CliResult plot = RunMsa({"recall", "--plot"});
  EXPECT_EQ(plot.code, 2);
  EXPECT_EQ(plot.err, "msa: error: --plot: needs --out-dir for the figures\n");
}

std::string ReadText(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// A sweep of 2 contexts x 2 distances x 2 strengths x 2 poolings = 16 setups, small enough for every test.
std::vector<std::string> ShardedSweep(const std::string& out_dir) {
  return {"recall", "--context",  "256,320", "--distance", "32,96",   "--strength", "1,4", "--block-size",
          "16",     "--top-k",    "4",       "--pooling",  "max,lse", "--queries",  "2",   "--sequences",
          "2",      "--head-dim", "8",       "--out-dir",  out_dir};
}

TEST_F(RecallCli, ShardsMergeToTheUnshardedRunsFiles) {
  const CliResult whole = RunMsa(ShardedSweep((dir_ / "whole").string()));
  ASSERT_EQ(whole.code, 0) << whole.err;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args = ShardedSweep((dir_ / ("s" + std::to_string(i))).string());
    args.insert(args.end(), {"--shard", std::to_string(i) + "/3"});
    const CliResult shard = RunMsa(args);
    ASSERT_EQ(shard.code, 0) << shard.err;
    EXPECT_NE(shard.out.find("shard " + std::to_string(i) + "/3 of 16"), std::string::npos) << shard.out;
  }
  const std::string s0 = (dir_ / "s0").string(), s1 = (dir_ / "s1").string(), s2 = (dir_ / "s2").string();
  const CliResult merged = RunMsa({"recall", "merge", "--out-dir", (dir_ / "merged").string(), s2, s0, s1});
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_NE(merged.out.find("16 setups"), std::string::npos) << merged.out;
  for (const char* file : {"recall.csv", "recall.json"}) {
    const std::string expected = ReadText(dir_ / "whole" / file);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(ReadText(dir_ / "merged" / file), expected) << file;
  }

  // Bad merges: refused with the reason, nothing written.
  std::vector<std::string> other = ShardedSweep((dir_ / "other").string());
  other[std::find(other.begin(), other.end(), "--strength") - other.begin() + 1] = "1,5";
  other.insert(other.end(), {"--shard", "1/3"});
  ASSERT_EQ(RunMsa(other).code, 0);
  std::vector<std::string> two = ShardedSweep((dir_ / "two").string());
  two.insert(two.end(), {"--shard", "1/2"});
  ASSERT_EQ(RunMsa(two).code, 0);
  const std::string out = (dir_ / "refused").string();
  const struct {
    std::vector<std::string> dirs;
    const char* says;
  } refusals[] = {
      {{s0, s2}, "shard 1/3 is missing"},
      {{s0, s1, s1, s2}, "shard 1/3 appears twice (overlapping shards)"},
      {{s0, (dir_ / "other").string(), s2}, "shards of different sweeps"},
      {{s0, (dir_ / "two").string(), s2}, "shards of different shard counts"},
      {{s0, s1, s2, (dir_ / "whole").string()}, "shard.index missing: not written by msa recall --shard I/N"},
  };
  for (const auto& refusal : refusals) {
    std::vector<std::string> args = {"recall", "merge", "--out-dir", out};
    args.insert(args.end(), refusal.dirs.begin(), refusal.dirs.end());
    const CliResult result = RunMsa(args);
    EXPECT_EQ(result.code, 2) << refusal.says;
    EXPECT_NE(result.err.find(refusal.says), std::string::npos) << result.err;
    EXPECT_FALSE(fs::exists(out)) << refusal.says;
  }
  // A shard of another msa version.
  const std::string json = ReadText(dir_ / "s1" / "recall.json");
  auto edited = nlohmann::ordered_json::parse(json);
  edited["shard"]["msa_version"] = "0.0.1";
  std::ofstream(dir_ / "s1" / "recall.json", std::ios::trunc) << edited.dump(1);
  const CliResult version = RunMsa({"recall", "merge", "--out-dir", out, s0, s1, s2});
  EXPECT_EQ(version.code, 2);
  EXPECT_NE(version.err.find("shards of different msa versions"), std::string::npos) << version.err;
  std::ofstream(dir_ / "s1" / "recall.json", std::ios::trunc) << json;
  // A CSV cut short.
  const std::string csv = ReadText(dir_ / "s1" / "recall.csv");
  std::ofstream(dir_ / "s1" / "recall.csv", std::ios::trunc) << csv.substr(0, csv.rfind('\n', csv.size() - 2) + 1);
  const CliResult cut = RunMsa({"recall", "merge", "--out-dir", out, s0, s1, s2});
  EXPECT_EQ(cut.code, 2);
  EXPECT_NE(cut.err.find("rows, but shard 1/3 of 16 setups"), std::string::npos) << cut.err;
  // A shard needs --out-dir.
  const CliResult no_dir = RunMsa({"recall", "--shard", "0/2"});
  EXPECT_EQ(no_dir.err, "msa: error: --shard 0/2: needs --out-dir (msa recall merge reads its files)\n");
}

}  // namespace
}  // namespace msa
