// `msa cost`: the cost model of SPEC section 6 (tools/msa/cost_model.h) as a table and, with --json, a file.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/file_contract.h"
#include "tools/msa/cli.h"
#include "tools/msa/cost_model.h"

namespace msa {
namespace {

struct CostOptions {
  std::string inputs;  // empty: `config` (M3 defaults, changed by flags); else its file
  Config config;
  std::string lengths = "8K,32K,128K,1M";  // comma-separated, K = 2^10, M = 2^20, G = 2^30
  std::string mode = "prefill";            // prefill | decode
  std::string batch = "1";                 // independent sequences, like a length ("1K" = 1024)
  std::string dtype = "bf16";              // fp8 | bf16 | fp16 | fp32: bytes per element
  std::string gpu = "H200";
  bool gpu_info = false;  // print the GPU table with its sources, nothing else
  std::string json;       // empty: no JSON file
};

using Json = nlohmann::ordered_json;

struct ElementType {
  const char* name;
  int bytes;
};
constexpr ElementType kElementTypes[] = {{"fp8", 1}, {"bf16", 2}, {"fp16", 2}, {"fp32", 4}};

// "32K" -> 32768, "1M" -> 1048576, "2G" -> 2^31 (binary suffixes, either case), at least 1 and at most
// 2^63 - 1; `flag` names the option in messages.
Status ParseCount(const std::string& flag, const std::string& text, int64_t* result) {
  const auto fail = [&](const std::string& rule) { return InvalidArgument(flag + " " + text + ": " + rule); };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return fail("must be a positive whole number with an optional K, M or G suffix (e.g. 32K, 1M)");
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    return fail("unknown suffix \"" + suffix + "\" (K = 2^10, M = 2^20, G = 2^30)");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const int digit = text[i] - '0';
    if (value > (kMax - digit) / 10) return fail("larger than 2^63 - 1");
    value = value * 10 + digit;
  }
  if (value > (kMax >> shift)) return fail("larger than 2^63 - 1");
  if (value == 0) return fail("must be at least 1");
  *result = value << shift;
  return Status::Ok();
}

Status ParseLengths(const std::string& text, std::vector<int64_t>* lengths) {
  const Status not_a_list =
      InvalidArgument("--lengths " + text + ": must be a comma-separated list of lengths (e.g. 32K,128K,1M)");
  if (text.empty() || text.back() == ',') return not_a_list;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) return not_a_list;
    int64_t length = 0;
    MSA_RETURN_IF_ERROR(ParseCount("--lengths", item, &length));
    lengths->push_back(length);
  }
  return Status::Ok();
}

// The rules ValidateConfig checks, in terms of the flags that set them.
Status ValidateConfigFlags(const Config& c) {
  if (c.num_q_heads % c.num_kv_heads != 0) {
    return InvalidArgument("--q-heads " + std::to_string(c.num_q_heads) + ": must be a multiple of --kv-heads " +
                           std::to_string(c.num_kv_heads) + " (GQA: G = Hq / Hkv query heads share one kv head)");
  }
  if (int64_t{c.top_k} < int64_t{c.init_blocks} + 1) {
    return InvalidArgument("--top-k " + std::to_string(c.top_k) + ": must be at least --init-blocks + 1 = " +
                           std::to_string(int64_t{c.init_blocks} + 1) + " (the init blocks and the local block)");
  }
  return ValidateConfig(c);
}

// The config of an inputs file: msa_config and the head counts and dims of its tensors.
Status ConfigFromInputs(const std::string& path, Config* config) {
  SafetensorsFile file;
  Problem problem;
  Status status = ReadSafetensors(path, &file);
  if (status.ok()) status = ProblemFromSafetensors(file, path, &problem);
  if (status.ok()) status = ValidateConfig(problem.config);
  if (!status.ok()) {
    const bool names_path = status.message().rfind(path, 0) == 0;
    return Status(status.code(), "--inputs " + (names_path ? "" : path + ": ") + status.message());
  }
  *config = problem.config;
  return Status::Ok();
}

// `value` (at least 0, below 999.5) with 3 significant digits: "17.6", "268", "4.19".
std::string ThreeDigits(long double value) {
  char text[32];
  const int decimals = value >= 99.95L ? 0 : value >= 9.995L ? 1 : 2;
  std::snprintf(text, sizeof(text), "%.*Lf", decimals, value);
  return text;
}

// 3 significant digits with an SI prefix: "17.6 TFLOP", "268 MB"; beyond 999 Y in scientific notation.
std::string Si(long double value, const char* unit) {
  if (value >= 999.5e24L) {
    char text[48];
    std::snprintf(text, sizeof(text), "%.2Le %s", value, unit);
    return text;
  }
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y"};
  int prefix = 0;
  while (value >= 999.5L) {
    value /= 1000;
    ++prefix;
  }
  return ThreeDigits(value) + " " + kPrefixes[prefix] + unit;
}

std::string Seconds(long double seconds) {
  if (seconds >= 999.5L) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2Le s", seconds);
    return text;
  }
  if (seconds >= 0.9995L) return ThreeDigits(seconds) + " s";
  if (seconds >= 0.9995e-3L) return ThreeDigits(seconds * 1e3L) + " ms";
  if (seconds >= 0.9995e-6L) return ThreeDigits(seconds * 1e6L) + " us";
  return ThreeDigits(seconds * 1e9L) + " ns";
}

// 3 significant digits: "28.4x", "6.67x", "0.97x".
std::string Ratio(long double ratio) {
  if (ratio >= 0.9995L && ratio < 999.5L) return ThreeDigits(ratio) + "x";
  char text[32];
  std::snprintf(text, sizeof(text), ratio < 1 ? "%.2Lgx" : "%.0Lfx", ratio);
  return text;
}

std::string LengthLabel(int64_t n) {
  if (n % (int64_t{1} << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n % (int64_t{1} << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (int64_t{1} << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string CountText(ExactCount count) {
  std::string digits;
  do {
    digits.insert(digits.begin(), char('0' + int(count % 10)));
    count /= 10;
  } while (count != 0);
  return digits;
}

// A JSON number: exact while it fits in 64 bits.
Json CountJson(ExactCount count) {
  if (count <= std::numeric_limits<uint64_t>::max()) return uint64_t(count);
  return double(count);
}

std::string Row(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    char cell[64];
    std::snprintf(cell, sizeof(cell), i == 0 ? "  %-8s" : " %14s", cells[i].c_str());
    line += cell;
  }
  return line + "\n";
}

std::string Bound(const BranchCost& branch) { return branch.memory_bound ? "memory" : "compute"; }

// A branch's roofline time, marked with * when memory bound.
std::string Time(const BranchCost& branch) { return Seconds(branch.seconds) + (branch.memory_bound ? "*" : ""); }

std::string GpuRates(const GpuSpec& gpu) {
  char text[96];
  std::snprintf(text, sizeof(text), "%s: %.1f TFLOP/s dense bf16, %.2f TB/s", std::string(gpu.name).c_str(),
                gpu.peak_flops / 1e12, gpu.bandwidth / 1e12);
  return text;
}

struct Report {
  const CostQuery* query;  // length varies per row
  const GpuSpec* gpu;
  const char* dtype;
  std::vector<int64_t> lengths;
  std::vector<CostEstimate> rows;
};

std::string FormatTable(const Report& report) {
  const Config& c = report.query->config;
  const bool prefill = report.query->mode == CostMode::kPrefill;
  std::ostringstream out;
  out << "msa cost: " << (prefill ? "causal prefill of N tokens" : "decode of one token at KV length N") << ", batch "
      << report.query->batch << ", one layer\n"
      << "config: Hq " << c.num_q_heads << ", Hkv = Hidx " << c.num_kv_heads << ", D " << c.head_dim << ", Dv "
      << c.value_dim << ", Di " << c.index_head_dim << ", Bk " << c.block_size << ", top_k " << c.top_k
      << ", init_blocks " << c.init_blocks << "; " << report.dtype << " (" << report.query->element_bytes
      << " bytes per element)\n"
      << "gpu: " << GpuRates(*report.gpu) << " (msa cost --gpu-info gives the sources)\n\n";

  out << "FLOPs: index 2*Hidx*Di per query-key pair, main 2*Hq*(D+Dv) per selected key, dense 2*Hq*(D+Dv) per "
         "causal pair ("
      << (prefill ? "sum|S_t|" : "|S|") << " per sequence)\n";
  std::vector<std::string> header = {"N", prefill ? "sum|S_t|" : "|S|", "index", "main", "dense", "dense/MSA"};
  if (prefill) header.insert(header.end(), {"main (Eq. 12)", "Eq. 12 ratio"});
  out << Row(header);
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CostEstimate& e = report.rows[i];
    std::vector<std::string> cells = {LengthLabel(report.lengths[i]), CountText(e.selected_keys),
                                      Si(e.index.flops, "FLOP"),      Si(e.main.flops, "FLOP"),
                                      Si(e.dense.flops, "FLOP"),      Ratio(e.flop_ratio())};
    if (prefill) {
      const long double batch = report.query->batch;
      cells.push_back(Si(batch * ClosedFormMainFlops(c, report.lengths[i]), "FLOP"));
      cells.push_back(Ratio(ClosedFormRatio(c, report.lengths[i])));
    }
    out << Row(cells);
  }
  if (prefill) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "Eq. 12 (SPEC section 6): dense Hq*(D+Dv)*N^2 over Hkv*Di*N^2 + 2*Hq*(D+Dv)*N*top_k*Bk; ceiling "
                  "Hq*(D+Dv)/(Hkv*Di) = %s, MSA cheaper above N = %.0Lf\n",
                  Ratio(ClosedFormRatioCeiling(c)).c_str(), ClosedFormCrossover(c));
    out << line;
  }

  out << "\nbytes that must move (every input read once, every output written once) and cache sizes\n"
      << Row({"N", "index", "main", "dense", "KV cache", "index cache"});
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CostEstimate& e = report.rows[i];
    out << Row({LengthLabel(report.lengths[i]), Si(e.index.bytes, "B"), Si(e.main.bytes, "B"), Si(e.dense.bytes, "B"),
                Si(e.kv_cache_bytes, "B"), Si(e.index_cache_bytes, "B")});
  }

  out << "\nroofline on " << report.gpu->name
      << ": max(FLOPs / peak, bytes / bandwidth) per branch (* memory "
         "bound); top-k not counted\n"
      << Row({"N", "index", "main", "MSA", "dense", "speed-up"});
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CostEstimate& e = report.rows[i];
    out << Row({LengthLabel(report.lengths[i]), Time(e.index), Time(e.main), Seconds(e.msa_seconds()), Time(e.dense),
                Ratio(e.speedup())});
  }
  return out.str();
}

Json BranchJson(const BranchCost& branch) {
  return {{"flops", double(branch.flops)},
          {"bytes", double(branch.bytes)},
          {"seconds", double(branch.seconds)},
          {"bound", Bound(branch)}};
}

std::string FormatJson(const Report& report) {
  const Config& c = report.query->config;
  const bool prefill = report.query->mode == CostMode::kPrefill;
  Json json;
  json["mode"] = prefill ? "prefill" : "decode";
  json["batch"] = report.query->batch;
  json["dtype"] = report.dtype;
  json["element_bytes"] = report.query->element_bytes;
  json["config"] = {{"num_q_heads", c.num_q_heads},
                    {"num_kv_heads", c.num_kv_heads},
                    {"head_dim", c.head_dim},
                    {"value_dim", c.value_dim},
                    {"index_head_dim", c.index_head_dim},
                    {"block_size", c.block_size},
                    {"top_k", c.top_k},
                    {"init_blocks", c.init_blocks}};
  json["gpu"] = {{"name", report.gpu->name},
                 {"peak_flops", report.gpu->peak_flops},
                 {"bandwidth", report.gpu->bandwidth},
                 {"source", report.gpu->source}};
  if (prefill) {
    const long double crossover = ClosedFormCrossover(c);
    json["closed_form"] = {{"ratio_ceiling", double(ClosedFormRatioCeiling(c))},
                           {"crossover_length", std::isinf(crossover) ? Json(nullptr) : Json(double(crossover))}};
  }
  json["rows"] = Json::array();
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CostEstimate& e = report.rows[i];
    Json row = {{"length", report.lengths[i]},
                {"query_key_pairs", CountJson(e.query_key_pairs)},
                {"selected_keys", CountJson(e.selected_keys)},
                {"index", BranchJson(e.index)},
                {"main", BranchJson(e.main)},
                {"dense", BranchJson(e.dense)},
                {"flop_ratio", double(e.flop_ratio())},
                {"msa_seconds", double(e.msa_seconds())},
                {"speedup", double(e.speedup())},
                {"kv_cache_bytes", double(e.kv_cache_bytes)},
                {"index_cache_bytes", double(e.index_cache_bytes)}};
    if (prefill) {
      row["closed_form_main_flops"] = double(report.query->batch * ClosedFormMainFlops(c, report.lengths[i]));
      row["closed_form_ratio"] = double(ClosedFormRatio(c, report.lengths[i]));
    }
    json["rows"].push_back(std::move(row));
  }
  return json.dump(2) + "\n";
}

std::string GpuInfo() {
  std::string text = "GPU rates used by msa cost (peak dense bf16 tensor FLOP/s, memory bandwidth), with sources:\n";
  for (const GpuSpec& gpu : KnownGpus()) {
    text += "  " + GpuRates(gpu) + "\n    " + std::string(gpu.source) + "\n";
  }
  return text;
}

int CostCommand(const CostOptions& options, const CliStreams& streams) {
  if (options.gpu_info) {
    streams.out << GpuInfo();
    return 0;
  }
  const GpuSpec* gpu = FindGpu(options.gpu);
  if (gpu == nullptr) {
    std::string names;
    for (const GpuSpec& known : KnownGpus()) names += (names.empty() ? "" : ", ") + std::string(known.name);
    return CliFail(streams, "--gpu " + options.gpu + ": unknown GPU (known: " + names + ")");
  }
  CostQuery query;
  query.mode = options.mode == "decode" ? CostMode::kDecode : CostMode::kPrefill;
  query.element_bytes = 0;
  for (const ElementType& type : kElementTypes) {
    if (options.dtype == type.name) query.element_bytes = type.bytes;
  }
  if (query.element_bytes == 0) {
    return CliFail(streams, "--dtype " + options.dtype + ": must be fp8, bf16, fp16 or fp32");
  }
  if (Status status = ParseCount("--batch", options.batch, &query.batch); !status.ok()) {
    return CliFail(streams, status.message());
  }
  Report report{&query, gpu, options.dtype.c_str(), {}, {}};
  if (Status status = ParseLengths(options.lengths, &report.lengths); !status.ok()) {
    return CliFail(streams, status.message());
  }
  query.config = options.config;
  Status config_status =
      options.inputs.empty() ? ValidateConfigFlags(query.config) : ConfigFromInputs(options.inputs, &query.config);
  if (!config_status.ok()) return CliFail(streams, config_status.message());
  if (!options.json.empty()) {
    Status status = CheckOutputPath("--json", options.json);
    if (!status.ok()) return CliFail(streams, status.message());
  }

  for (const int64_t length : report.lengths) {
    query.length = length;
    report.rows.push_back(EstimateCost(query, *gpu));
  }
  if (!options.json.empty()) {
    if (Status status = WriteFileAtomically(options.json, FormatJson(report)); !status.ok()) {
      return CliFail(streams, "--json " + status.message());
    }
  }
  streams.out << FormatTable(report);
  return 0;
}

}  // namespace

void AddCostCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<CostOptions>();
  CLI::App* command = app.add_subcommand(
      "cost",
      "The cost model of SPEC section 6 for any length: FLOPs, bytes, cache sizes, roofline time on a GPU "
      "(config: M3's unless changed)");
  command->add_option("--lengths", options->lengths, "comma-separated lengths, K = 2^10, M = 2^20, G = 2^30")
      ->capture_default_str();
  command->add_option("--mode", options->mode, "prefill (N tokens) | decode (one token at KV length N)")
      ->check(CLI::IsMember({"prefill", "decode"}))
      ->capture_default_str();
  command->add_option("--batch", options->batch, "independent sequences")->capture_default_str();
  command->add_option("--dtype", options->dtype, "fp8 | bf16 | fp16 | fp32: bytes of q, k, v, index tensors, out")
      ->capture_default_str();
  command->add_option("--gpu", options->gpu, "H100 | H200 | H800 | B200 | H200-measured")->capture_default_str();
  command->add_flag("--gpu-info", options->gpu_info, "print the GPU rates and their sources, then exit");
  command->add_option("--json", options->json, "also write the estimates as JSON to this file");
  CLI::Option* cost_inputs =
      command->add_option("--inputs", options->inputs, "take msa_config and head shapes from this inputs file");
  const struct {
    const char* flag;
    int* field;
    int min;
    const char* what;
  } cost_config_flags[] = {{"--q-heads", &options->config.num_q_heads, 1, "Hq"},
                           {"--kv-heads", &options->config.num_kv_heads, 1, "Hkv = Hidx"},
                           {"--head-dim", &options->config.head_dim, 1, "D"},
                           {"--value-dim", &options->config.value_dim, 1, "Dv"},
                           {"--index-head-dim", &options->config.index_head_dim, 1, "Di"},
                           {"--block-size", &options->config.block_size, 1, "Bk"},
                           {"--top-k", &options->config.top_k, 1, "top_k: selected blocks, local included"},
                           {"--init-blocks", &options->config.init_blocks, 0, "init_blocks: sink blocks"}};
  for (const auto& flag : cost_config_flags) {
    command->add_option(flag.flag, *flag.field, flag.what)
        ->check(CLI::Range(flag.min, INT32_MAX))
        ->excludes(cost_inputs)
        ->capture_default_str();
  }
  command->callback(
      [options, &streams, action] { *action = [options, &streams] { return CostCommand(*options, streams); }; });
}

}  // namespace msa
