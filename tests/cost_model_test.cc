// The cost model of SPEC section 6 (tools/msa/cost_model.h) and `msa cost`. Expected values come from other
// routes: brute-force enumeration of the selected keys, SPEC section 6's closed form worked by hand, byte
// counts of small cases added up tensor by tensor, and an enumeration in Python for the exact crossover.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/file_contract.h"
#include "io/safetensors.h"
#include "oracle/problem.h"
#include "tests/run_cli.h"
#include "tools/msa/cli.h"
#include "tools/msa/cost_model.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kOneMillion = int64_t{1} << 20;

Config M3() { return Config{}; }  // Config's defaults are M3's shapes

Config SmallConfig(int block_size, int top_k, int init_blocks) {
  Config config;
  config.num_q_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 8;
  config.value_dim = 6;
  config.index_head_dim = 4;
  config.block_size = block_size;
  config.top_k = top_k;
  config.init_blocks = init_blocks;
  return config;
}

CostQuery Prefill(const Config& config, int64_t length) {
  CostQuery query;
  query.config = config;
  query.length = length;
  return query;
}

// |S| by enumeration: select the local block, the init blocks and then arbitrary other visible blocks (a
// position-dependent pick) until min(visible, top_k) are chosen, then count their keys <= pos one by one.
int64_t EnumerateSelectedKeys(const Config& config, int64_t pos) {
  const int64_t bk = config.block_size, local = pos / bk, visible = local + 1;
  const int64_t wanted = std::min<int64_t>(visible, config.top_k);
  std::vector<bool> chosen(visible, false);
  int64_t count = 0;
  const auto choose = [&](int64_t block) {
    if (count < wanted && !chosen[block]) {
      chosen[block] = true;
      ++count;
    }
  };
  choose(local);
  for (int64_t block = 0; block < std::min<int64_t>(config.init_blocks, visible); ++block) choose(block);
  int64_t step = 0;  // 104729 is prime, so the picks run through every block
  while (count < wanted) choose((pos * 7919 + step++ * 104729) % visible);
  int64_t keys = 0;
  for (int64_t key = 0; key <= pos; ++key) keys += chosen[key / bk] ? 1 : 0;
  return keys;
}

TEST(CostModelTest, SelectedKeysMatchEnumeration) {
  const Config configs[] = {SmallConfig(4, 3, 0), SmallConfig(4, 3, 2),    SmallConfig(16, 4, 1), SmallConfig(1, 1, 0),
                            SmallConfig(7, 5, 0), SmallConfig(128, 16, 0), SmallConfig(3, 1, 0)};
  const int64_t lengths[] = {1, 2, 3, 127, 128, 129, 1000, 2049};
  for (const Config& config : configs) {
    for (const int64_t n : lengths) {
      int64_t sum = 0;
      for (int64_t pos = 0; pos < n; ++pos) {
        const int64_t keys = EnumerateSelectedKeys(config, pos);
        ASSERT_EQ(SelectedKeysAt(config, pos), ExactCount(keys))
            << "Bk " << config.block_size << " top_k " << config.top_k << " init " << config.init_blocks << " pos "
            << pos;
        sum += keys;
      }
      EXPECT_EQ(SumSelectedKeys(config, n), ExactCount(sum))
          << "Bk " << config.block_size << " top_k " << config.top_k << " init " << config.init_blocks << " N " << n;
    }
  }
}

TEST(CostModelTest, SelectedKeysAtOneMillionByHand) {
  // Positions 0..2047 (= top_k * Bk) attend every visible key: 2048 * 2049 / 2. The 1046528 later positions
  // (8176 whole blocks) attend 15 full blocks (1920 keys) plus 1..128 keys of their local block.
  EXPECT_EQ(SumSelectedKeys(M3(), kOneMillion),
            ExactCount(2098176) + ExactCount(1046528) * 1920 + ExactCount(8176) * (128 * 129 / 2));
  EXPECT_EQ(SumSelectedKeys(M3(), kOneMillion), ExactCount(2078932992));
}

TEST(CostModelTest, SumSelectedKeysDoesNotOverflowAtHugeLengths) {
  // N = 2^62: 2098176 for the first 2048 positions, then (N - 2048) positions averaging 1920 + 64.5 keys.
  const ExactCount n = ExactCount(1) << 62;
  EXPECT_EQ(SumSelectedKeys(M3(), int64_t{1} << 62), ExactCount(2098176) + (n - 2048) * 3969 / 2);
  CostQuery query;
  query.length = std::numeric_limits<int64_t>::max();
  query.batch = int64_t{1} << 40;
  const CostEstimate cost = EstimateCost(query, *FindGpu("H200"));
  EXPECT_TRUE(std::isfinite(double(cost.flop_ratio())) && cost.flop_ratio() > 31 && cost.flop_ratio() < 32);
  EXPECT_GT(cost.dense.flops, 1e54L);  // about 2^40 * 2^15 * 2^125
}

TEST(CostModelTest, ClosedFormRatioAtOneMillionIs28Point4) {
  // SPEC section 6 with M3 shapes, by hand: 2*64*128*N^2 / (4*128*N^2 + 4*64*128*N*16*128) at N = 2^20
  // = 2^54 / (2^49 + 2^46) = 256 / 9.
  const long double n = kOneMillion;
  const long double hand = 2.0L * 64 * 128 * n * n / (4.0L * 128 * n * n + 4.0L * 64 * 128 * n * 16 * 128);
  EXPECT_NEAR(double(hand), 256.0 / 9, 1e-12);
  EXPECT_NEAR(double(ClosedFormRatio(M3(), kOneMillion)), 256.0 / 9, 1e-12);
  EXPECT_NEAR(double(ClosedFormRatioCeiling(M3())), 32.0, 1e-12);  // 2G
  EXPECT_NEAR(double(ClosedFormMainFlops(M3(), kOneMillion)), 4.0 * 64 * 128 * 1048576.0 * 16 * 128, 1.0);
}

TEST(CostModelTest, ExactFlopsAtOneMillion) {
  // Dense 4*64*128 per causal pair, index 2*4*128 per pair, main 4*64*128 per selected key (2078932992 of them).
  const long double pairs = 1048576.0L * 1048577 / 2;
  const CostEstimate cost = EstimateCost(Prefill(M3(), kOneMillion), *FindGpu("H200"));
  EXPECT_EQ(cost.query_key_pairs, ExactCount(549756338176));
  EXPECT_EQ(cost.dense.flops, 32768.0L * pairs);
  EXPECT_EQ(cost.index.flops, 1024.0L * pairs);
  EXPECT_EQ(cost.main.flops, 32768.0L * 2078932992);
  EXPECT_NEAR(double(cost.flop_ratio()), 28.5456938, 1e-6);  // a Python loop over the 2^20 positions
}

TEST(CostModelTest, DenseMsaCrossover) {
  // Closed form: MSA is cheaper when 2*64*128*N^2 > 4*128*N^2 + 4*64*128*N*16*128, N > 67108864 / 15872.
  EXPECT_NEAR(double(ClosedFormCrossover(M3())), 67108864.0 / 15872, 1e-9);
  EXPECT_LT(ClosedFormRatio(M3(), 4228), 1);
  EXPECT_GT(ClosedFormRatio(M3(), 4229), 1);
  // Exact counts: up to N = top_k * Bk = 2048 every query attends everything, so MSA = dense + index branch.
  const GpuSpec& gpu = *FindGpu("H200");
  const CostEstimate at_window = EstimateCost(Prefill(M3(), 2048), gpu);
  EXPECT_EQ(at_window.main.flops, at_window.dense.flops);
  EXPECT_LT(at_window.flop_ratio(), 1);
  // A Python loop over the positions (same per-pair costs) finds the first N with dense > MSA: 2414.
  EXPECT_LT(EstimateCost(Prefill(M3(), 2413), gpu).flop_ratio(), 1);
  EXPECT_GT(EstimateCost(Prefill(M3(), 2414), gpu).flop_ratio(), 1);
  // With as many index FLOPs per pair as dense ones MSA never wins.
  Config no_gain = M3();
  no_gain.index_head_dim = 128 * 64 * 2 / 4;
  EXPECT_TRUE(std::isinf(double(ClosedFormCrossover(no_gain))));
}

// Hq 4, Hkv = Hidx 2, D 8, Dv 6, Di 4, Bk 4, top_k 3, bf16 (2 bytes), batch 3, decode at KV length 19:
// pos 18, local block 4 of 5 visible; |S| = 2 full blocks (8 keys) + keys 16..18 (3) = 11.
TEST(CostModelTest, DecodeBytesAndFlopsByHand) {
  CostQuery query = Prefill(SmallConfig(4, 3, 0), 19);
  query.mode = CostMode::kDecode;
  query.batch = 3;
  const GpuSpec slow{"slow", 100, 10, "test"};  // 100 FLOP/s, 10 B/s
  const CostEstimate cost = EstimateCost(query, slow);
  EXPECT_EQ(cost.selected_keys, ExactCount(11));
  // index: index_q 2*4*2 = 16, index_k 19*4*2 = 152, selection written 2*3*4 = 24; 192 per sequence.
  EXPECT_EQ(cost.index.bytes, 3 * 192);
  // main: q 4*8*2 = 64, selection read 24, K and V of 11 keys per group 2*11*14*2 = 616, out 4*6*2 = 48.
  EXPECT_EQ(cost.main.bytes, 3 * 752);
  // dense: q 64, all K and V 2*19*14*2 = 1064, out 48.
  EXPECT_EQ(cost.dense.bytes, 3 * 1176);
  EXPECT_EQ(cost.kv_cache_bytes, 3 * 19 * 2 * 14 * 2);
  EXPECT_EQ(cost.index_cache_bytes, 3 * 19 * 4 * 2);
  // FLOPs: index 2*2*4 per key * 19, main 2*4*14 per key * 11, dense 2*4*14 * 19.
  EXPECT_EQ(cost.index.flops, 3 * 304);
  EXPECT_EQ(cost.main.flops, 3 * 1232);
  EXPECT_EQ(cost.dense.flops, 3 * 2128);
  // Roofline: bytes / 10 beats FLOPs / 100 in every branch.
  EXPECT_TRUE(cost.index.memory_bound && cost.main.memory_bound && cost.dense.memory_bound);
  EXPECT_NEAR(double(cost.index.seconds), 57.6, 1e-12);
  EXPECT_NEAR(double(cost.main.seconds), 225.6, 1e-12);
  EXPECT_NEAR(double(cost.dense.seconds), 352.8, 1e-12);
}

// The same config, prefill of 10 tokens: 55 pairs, all attended (10 <= top_k * Bk = 12).
TEST(CostModelTest, PrefillBytesAndFlopsByHand) {
  const GpuSpec fast{"fast", 1e30, 10, "test"};
  const CostEstimate cost = EstimateCost(Prefill(SmallConfig(4, 3, 0), 10), fast);
  EXPECT_EQ(cost.selected_keys, ExactCount(55));
  EXPECT_EQ(cost.index.flops, 2 * 2 * 4 * 55);
  EXPECT_EQ(cost.main.flops, 2 * 4 * 14 * 55);
  EXPECT_EQ(cost.dense.flops, cost.main.flops);
  // index: index_q 10*2*4*2 = 160, index_k 10*4*2 = 80, selections 10*2*3*4 = 240.
  EXPECT_EQ(cost.index.bytes, 480);
  // main: q and out 10*4*14*2 = 1120, selections 240, every K and V once 10*2*14*2 = 560.
  EXPECT_EQ(cost.main.bytes, 1920);
  EXPECT_EQ(cost.dense.bytes, 1680);
  EXPECT_NEAR(double(cost.main.seconds), 192.0, 1e-12);
}

TEST(CostModelTest, GpuTable) {
  for (const char* name : {"H100", "H200", "H800", "B200", "h200"}) {
    const GpuSpec* gpu = FindGpu(name);
    ASSERT_NE(gpu, nullptr) << name;
    EXPECT_GT(gpu->peak_flops, 1e14);
    EXPECT_GT(gpu->bandwidth, 1e12);
    EXPECT_FALSE(gpu->source.empty());
  }
  EXPECT_EQ(FindGpu("A100"), nullptr);
}

// ---- the command ----------------------------------------------------------------------------------------

CliResult Cost(std::vector<std::string> args) {
  args.insert(args.begin(), "cost");
  return RunMsa(args);
}

// The cells of the row for `label` in the first table after the line holding `after` (cells are separated
// by two or more spaces).
std::vector<std::string> RowOf(const std::string& table, const std::string& label, const std::string& after) {
  const size_t section = table.find(after);
  if (section == std::string::npos) return {};
  const size_t start = table.find("\n  " + label + " ", section);
  if (start == std::string::npos) return {};
  const std::string row = table.substr(start + 3, table.find('\n', start + 1) - start - 3);
  std::vector<std::string> cells;
  for (size_t at = 0; at < row.size();) {
    const size_t gap = row.find("  ", at);
    const size_t end = gap == std::string::npos ? row.size() : gap;
    if (end > at) cells.push_back(row.substr(at, end - at));
    at = row.find_first_not_of(' ', end);
  }
  return cells;
}

TEST(CostCommandTest, PrintsThe28Point4AtOneMillion) {
  const CliResult result = Cost({"--lengths", "32K,128K,1M"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const std::vector<std::string> row = RowOf(result.out, "1M", "FLOPs");
  ASSERT_EQ(row.size(), 8u) << result.out;  // N, sum|S_t|, index, main, dense, ratio, Eq. 12 main, Eq. 12 ratio
  EXPECT_EQ(row[1], "2078932992");
  EXPECT_EQ(row[7], "28.4x");
  EXPECT_NE(result.out.find("ceiling Hq*(D+Dv)/(Hkv*Di) = 32.0x"), std::string::npos) << result.out;
}

TEST(CostCommandTest, DecodeTable) {
  const CliResult result = Cost(
      {"--mode",     "decode", "--lengths",   "19", "--batch",          "3", "--q-heads",    "4", "--kv-heads", "2",
       "--head-dim", "8",      "--value-dim", "6",  "--index-head-dim", "4", "--block-size", "4", "--top-k",    "3"});
  ASSERT_EQ(result.code, 0) << result.err;
  // bytes by hand in DecodeBytesAndFlopsByHand: 576, 2256, 3528; caches 3192 and 456.
  const std::vector<std::string> expected = {"19", "576 B", "2.26 kB", "3.53 kB", "3.19 kB", "456 B"};
  EXPECT_EQ(RowOf(result.out, "19", "bytes that must move"), expected) << result.out;
  EXPECT_EQ(result.out.find("Eq. 12"), std::string::npos);  // the closed form is a prefill formula
}

TEST(CostCommandTest, JsonFile) {
  const fs::path dir = fs::path(testing::TempDir()) / "cost_json";
  fs::create_directories(dir);
  const std::string path = (dir / "cost.json").string();
  const CliResult result = Cost({"--lengths", "1M", "--gpu", "B200", "--json", path});
  ASSERT_EQ(result.code, 0) << result.err;
  std::ifstream file(path);
  const nlohmann::json json = nlohmann::json::parse(file);
  EXPECT_EQ(json["gpu"]["name"], "B200");
  EXPECT_EQ(json["rows"][0]["length"], kOneMillion);
  EXPECT_EQ(json["rows"][0]["selected_keys"], 2078932992);
  EXPECT_NEAR(json["rows"][0]["closed_form_ratio"].get<double>(), 256.0 / 9, 1e-12);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary left
}

TEST(CostCommandTest, ConfigFromInputsFile) {
  ProblemSpec spec;
  spec.config = SmallConfig(4, 3, 0);
  spec.lengths = {{5, 5}};
  const fs::path path = fs::path(testing::TempDir()) / "cost_inputs.safetensors";
  ASSERT_TRUE(WriteSafetensors(path.string(), ProblemToSafetensors(GenerateProblem(spec))).ok());
  const CliResult result = Cost({"--inputs", path.string(), "--lengths", "100"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_NE(result.out.find("Hq 4, Hkv = Hidx 2, D 8, Dv 6, Di 4, Bk 4, top_k 3, init_blocks 0"), std::string::npos)
      << result.out;
}

TEST(CostCommandTest, GpuInfoNamesEverySource) {
  const CliResult result = Cost({"--gpu-info"});
  ASSERT_EQ(result.code, 0);
  for (const GpuSpec& gpu : KnownGpus()) EXPECT_NE(result.out.find(std::string(gpu.source)), std::string::npos);
}

struct BadCase {
  std::vector<std::string> args;
  std::string message;  // the whole stderr line after "msa: error: "
};

TEST(CostCommandTest, BadInputIsOneLineAndExitTwo) {
  const std::string missing = (fs::path(testing::TempDir()) / "no_such_dir" / "cost.json").string();
  const BadCase cases[] = {
      {{"--lengths", "12Q"}, "--lengths 12Q: unknown suffix \"Q\" (K = 2^10, M = 2^20, G = 2^30)"},
      {{"--lengths", "0"}, "--lengths 0: must be at least 1"},
      {{"--lengths", "32K,-5"},
       "--lengths -5: must be a positive whole number with an optional K, M or G suffix (e.g. 32K, 1M)"},
      {{"--lengths", "9223372036854775808"}, "--lengths 9223372036854775808: larger than 2^63 - 1"},
      {{"--lengths", "8589934592G"}, "--lengths 8589934592G: larger than 2^63 - 1"},
      {{"--lengths", "32K,"}, "--lengths 32K,: must be a comma-separated list of lengths (e.g. 32K,128K,1M)"},
      {{"--lengths", "32K,,1M"}, "--lengths 32K,,1M: must be a comma-separated list of lengths (e.g. 32K,128K,1M)"},
      {{"--lengths", ""}, "--lengths : must be a comma-separated list of lengths (e.g. 32K,128K,1M)"},
      {{"--lengths", "K"},
       "--lengths K: must be a positive whole number with an optional K, M or G suffix (e.g. 32K, 1M)"},
      {{"--batch", "0"}, "--batch 0: must be at least 1"},
      {{"--batch", "99999999999999999999"}, "--batch 99999999999999999999: larger than 2^63 - 1"},
      {{"--gpu", "A100"}, "--gpu A100: unknown GPU (known: H100, H200, H800, B200, H200-measured)"},
      {{"--dtype", "int4"}, "--dtype int4: must be fp8, bf16, fp16 or fp32"},
      {{"--q-heads", "62"},
       "--q-heads 62: must be a multiple of --kv-heads 4 (GQA: G = Hq / Hkv query heads share one kv head)"},
      {{"--top-k", "2", "--init-blocks", "2"},
       "--top-k 2: must be at least --init-blocks + 1 = 3 (the init blocks and the local block)"},
      {{"--json", missing},
       "--json " + missing + ": directory " + fs::path(missing).parent_path().string() + " does not exist"},
  };
  for (const BadCase& bad : cases) {
    const CliResult result = Cost(bad.args);
    EXPECT_EQ(result.code, 2) << bad.args[1];
    EXPECT_EQ(result.out, "") << bad.args[1];
    EXPECT_EQ(result.err, "msa: error: " + bad.message + "\n");
  }
  EXPECT_FALSE(fs::exists(fs::path(missing).parent_path()));
}

// Flags CLI11 checks: the message is CLI11's, one line naming the flag and the value.
TEST(CostCommandTest, FlagRangesNameTheFlagAndValue) {
  const std::vector<std::string> cases[] = {{"--top-k", "0"},
                                            {"--top-k", "99999999999"},
                                            {"--block-size", "-3"},
                                            {"--mode", "train"},
                                            {"--init-blocks", "-1"}};
  for (const std::vector<std::string>& args : cases) {
    const CliResult result = Cost(args);
    EXPECT_EQ(result.code, 2) << args[0];
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err.rfind("msa: error: " + args[0], 0), 0u) << result.err;
    EXPECT_NE(result.err.find(args[1]), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  const CliResult both = Cost({"--inputs", "x.safetensors", "--top-k", "3"});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  const CliResult unreadable = Cost({"--inputs", "/no/such/inputs.safetensors"});
  EXPECT_EQ(unreadable.code, 2);
  EXPECT_EQ(unreadable.err.rfind("msa: error: --inputs /no/such/inputs.safetensors: ", 0), 0u) << unreadable.err;
}

}  // namespace
}  // namespace msa
