// `msa recall`: parse the sweep, run it (or one shard of it) on every backend, print the table, write CSV / JSON /
// PNG atomically; `msa recall merge`: shards' files into the unsharded run's.
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"
#include "tools/msa/cli.h"
#include "tools/msa/recall_merge.h"
#include "tools/msa/recall_plot.h"
#include "tools/msa/recall_report.h"
#include "tools/msa/recall_sweep.h"

namespace msa {
namespace {

// Exit 0 when every backend reaches the reference's recall up to counted near ties, 1 when one falls short.
struct RecallOptions {
  std::string contexts = "4096";
  std::string distances = "256,1024,3072";
  std::string strengths = "1,2,4,8";
  std::string top_ks = "8";
  std::string block_sizes = "64";
  std::string poolings = "max,lse,mean";
  std::string backends;             // empty: every compiled, available backend that supports the precision
  std::string precision = "exact";  // what the non-reference backends run; the reference always runs exact
  int queries = 4, sequences = 4, needles = 1, distractors = 0;
  double distractor_strength = 1.0;
  int q_heads = 4, kv_heads = 2, head_dim = 64, init_blocks = 0;  // D = Dv = Di = head_dim
  uint64_t seed = 1;
  std::string out_dir;  // empty: no files
  bool plot = false;    // PNG figures into out_dir (gnuplot)
  ShardFlags shard;
  int threads = 0;
};
struct RecallMergeFlags {
  std::string out_dir;
  std::vector<std::string> shard_dirs;
};

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (true) {
    const size_t comma = list.find(',', begin);
    items.push_back(list.substr(begin, comma - begin));
    if (comma == std::string::npos) return items;
    begin = comma + 1;
  }
}

// Parses a comma-separated list of integers in [low, high]; errors name the flag and the bad value.
template <typename Int>
Status ParseIntegers(const std::string& flag, const std::string& list, int64_t low, int64_t high,
                     std::vector<Int>* values) {
  for (const std::string& item : SplitList(list)) {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || end != item.data() + item.size()) {
      return InvalidArgument(flag + " " + item + ": not an integer (the flag takes a comma-separated list)");
    }
    if (value < low || value > high) {
      return InvalidArgument(flag + " " + item + ": must be in [" + std::to_string(low) + ", " + std::to_string(high) +
                             "]");
    }
    values->push_back(Int(value));
  }
  return Status::Ok();
}

Status ParseStrengths(const std::string& list, std::vector<double>* values) {
  for (const std::string& item : SplitList(list)) {
    double value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || !std::isfinite(value)) {
      return InvalidArgument("--strength " + item + ": not a finite number (the flag takes a comma-separated list)");
    }
    if (value < 0 || value > 1000) return InvalidArgument("--strength " + item + ": must be in [0, 1000]");
    values->push_back(value);
  }
  return Status::Ok();
}

Status ParsePoolings(const std::string& list, std::vector<Pooling>* values) {
  for (const std::string& item : SplitList(list)) {
    Pooling pooling;
    if (!ParsePooling(item, &pooling)) return InvalidArgument("--pooling " + item + ": must be max, lse or mean");
    values->push_back(pooling);
  }
  return Status::Ok();
}

// The reference first, then the named (or every compiled, available and supporting) backends.
Status ChooseBackends(const std::string& list, Precision precision, std::vector<const Backend*>* backends) {
  backends->push_back(FindBackend("reference"));
  Config config;
  config.precision = precision;
  if (list.empty()) {
    for (const Backend& backend : AllBackends()) {
      if (backend.name != "reference" && backend.is_available() && backend.supports(config).ok()) {
        backends->push_back(&backend);
      }
    }
    return Status::Ok();
  }
  for (const std::string& name : SplitList(list)) {
    const Backend* backend = FindBackend(name);
    if (backend == nullptr) {
      std::string names;
      for (const Backend& b : AllBackends()) names += (names.empty() ? "" : ", ") + std::string(b.name);
      return InvalidArgument("--backends " + name + ": unknown backend (compiled in: " + names + ")");
    }
    if (backend->name == "reference") continue;
    if (!backend->is_available()) {
      return Unsupported("--backends " + name + ": backend " + name + " is not available on this machine");
    }
    if (Status status = backend->supports(config); !status.ok()) {
      return Status(status.code(), "--backends " + name + ", --precision " + std::string(PrecisionName(precision)) +
                                       ": " + status.message());
    }
    backends->push_back(backend);
  }
  return Status::Ok();
}

Status BuildSweep(const RecallOptions& options, RecallSweep* sweep) {
  if (!ParsePrecision(options.precision, &sweep->precision)) {
    return InvalidArgument("--precision " + options.precision + ": must be exact, fp32, bf16 or fp16");
  }
  constexpr int64_t kMaxContext = 1 << 24;
  MSA_RETURN_IF_ERROR(ParseIntegers("--context", options.contexts, 1, kMaxContext, &sweep->contexts));
  MSA_RETURN_IF_ERROR(ParseIntegers("--distance", options.distances, 0, kMaxContext, &sweep->distances));
  MSA_RETURN_IF_ERROR(ParseStrengths(options.strengths, &sweep->strengths));
  MSA_RETURN_IF_ERROR(ParseIntegers("--top-k", options.top_ks, options.init_blocks + 1, 1 << 16, &sweep->top_ks));
  MSA_RETURN_IF_ERROR(ParseIntegers("--block-size", options.block_sizes, 1, 1 << 16, &sweep->block_sizes));
  MSA_RETURN_IF_ERROR(ParsePoolings(options.poolings, &sweep->poolings));
  MSA_RETURN_IF_ERROR(ChooseBackends(options.backends, sweep->precision, &sweep->backends));
  RecallSetup& base = sweep->base;
  base.config.num_q_heads = options.q_heads;
  base.config.num_kv_heads = options.kv_heads;
  base.config.head_dim = base.config.value_dim = base.config.index_head_dim = options.head_dim;
  base.config.init_blocks = options.init_blocks;
  base.queries = options.queries;
  base.sequences = options.sequences;
  base.needles = options.needles;
  base.distractors = options.distractors;
  base.distractor_strength = options.distractor_strength;
  base.seed = options.seed;
  if (options.q_heads % options.kv_heads != 0) {
    return InvalidArgument("--q-heads " + std::to_string(options.q_heads) + ": must be a multiple of --kv-heads " +
                           std::to_string(options.kv_heads));
  }
  for (const RecallSetup& setup : ExpandSweep(*sweep)) MSA_RETURN_IF_ERROR(ValidateRecallSetup(setup));
  return Status::Ok();
}

std::string ShortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// The command line that reproduces the run, every setting spelled out.
std::string CanonicalCommand(const RecallOptions& o) {
  return "msa recall --context " + o.contexts + " --distance " + o.distances + " --strength " + o.strengths +
         " --top-k " + o.top_ks + " --block-size " + o.block_sizes + " --pooling " + o.poolings +
         (o.backends.empty() ? "" : " --backends " + o.backends) + " --precision " + o.precision + " --queries " +
         std::to_string(o.queries) + " --sequences " + std::to_string(o.sequences) + " --needles " +
         std::to_string(o.needles) + " --distractors " + std::to_string(o.distractors) + " --distractor-strength " +
         ShortNumber(o.distractor_strength) + " --q-heads " + std::to_string(o.q_heads) + " --kv-heads " +
         std::to_string(o.kv_heads) + " --head-dim " + std::to_string(o.head_dim) + " --init-blocks " +
         std::to_string(o.init_blocks) + " --seed " + std::to_string(o.seed);
}

Status WriteOutputs(const RecallOptions& options, const RecallSweep& sweep, const std::vector<RecallPoint>& points,
                    std::vector<std::string>* written) {
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error) return IoError("--out-dir " + options.out_dir + ": cannot create it: " + error.message());
  // Every file is staged and renamed into place only once all of them exist.
  const std::filesystem::path dir(options.out_dir);
  const auto in_dir = [&](Status status) {
    return status.ok() ? status : IoError("--out-dir " + options.out_dir + ": " + status.message());
  };
  // A shard's JSON says which shard it holds (msa recall merge reads it); the whole run's does not.
  nlohmann::ordered_json shard = nullptr;
  if (!sweep.shard.whole()) {
    shard = {{"index", sweep.shard.index},
             {"count", sweep.shard.count},
             {"setups", ExpandSweep(sweep).size()},
             {"backends", sweep.backends.size()},
             {"msa_version", MSA_VERSION}};
  }
  const std::vector<RecallRow> rows = RecallRows(points);
  AtomicFileSet files;
  MSA_RETURN_IF_ERROR(in_dir(files.Stage((dir / "recall.csv").string(), RecallCsv(rows))));
  MSA_RETURN_IF_ERROR(in_dir(files.Stage((dir / "recall.json").string(),
                                         RecallJson(CanonicalCommand(options), RecallSettings(sweep), rows, shard))));
  if (options.plot) {
    for (const RecallFigure& figure : FiguresFor(sweep)) {
      const auto draw = [&](const std::string& temporary) { return DrawFigure(figure, points, temporary); };
      MSA_RETURN_IF_ERROR(files.StageThroughTemporary((dir / figure.file).string(), draw));
    }
  }
  MSA_RETURN_IF_ERROR(in_dir(files.Commit()));
  written->push_back(options.out_dir + "/recall.csv");
  written->push_back(options.out_dir + "/recall.json");
  if (options.plot) {
    for (const RecallFigure& figure : FiguresFor(sweep)) written->push_back(options.out_dir + "/" + figure.file);
  }
  return Status::Ok();
}

int RecallCommand(const RecallOptions& options, const CliStreams& streams) {
  RecallSweep sweep;
  if (Status status = BuildSweep(options, &sweep); !status.ok()) return CliFail(streams, status.message());
  if (options.plot && options.out_dir.empty()) return CliFail(streams, "--plot: needs --out-dir for the figures");
  if (!options.out_dir.empty()) {
    const std::filesystem::path parent = std::filesystem::absolute(options.out_dir).parent_path();
    if (!std::filesystem::is_directory(parent)) {
      return CliFail(streams, "--out-dir " + options.out_dir + ": directory " + parent.string() + " does not exist");
    }
  }
  if (options.plot) {
    if (Status status = CheckPlotter(); !status.ok()) return CliFail(streams, status.message());
  }
  if (Status status = ChooseShard(options.shard, "msa recall", streams.out, &sweep.shard); !status.ok()) {
    return CliFail(streams, status.message());
  }
  if (!sweep.shard.whole() && options.out_dir.empty()) {
    return CliFail(streams, "--shard " + options.shard.shard + ": needs --out-dir (msa recall merge reads its files)");
  }
  if (!sweep.shard.whole() && options.plot) {
    return CliFail(streams, "--plot: a shard holds part of the sweep; draw the figures from an unsharded run");
  }
  SetThreads(options.threads);

  std::string backends;
  for (const Backend* backend : sweep.backends) backends += (backends.empty() ? "" : ", ") + std::string(backend->name);
  const std::vector<RecallSetup> setups = ShardSetups(sweep);
  // Flushed at once, so that a run stopped early (a timeout, a pipe) still shows what it was running.
  streams.out << "msa recall: " << setups.size() << " setups"
              << (sweep.shard.whole()
                      ? ""
                      : " (shard " + sweep.shard.ToString() + " of " + std::to_string(ExpandSweep(sweep).size()) + ")")
              << " x backends " << backends << " (reference exact, others " << PrecisionName(sweep.precision) << ")\n  "
              << CanonicalCommand(options) << "\n"
              << std::flush;
  // Progress: a live line on a terminal; otherwise one line per setup as it starts, with the time so far, so
  // that a log cut short shows how far the sweep got and how long each setup takes.
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_so_far = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto announce = [&](size_t index) {
    if (streams.show_progress || index >= setups.size()) return;
    const RecallSetup& setup = setups[index];
    char elapsed[32];
    std::snprintf(elapsed, sizeof(elapsed), "%.1f", seconds_so_far());
    streams.err << "msa recall: setup " << index + 1 << "/" << setups.size() << " (context " << setup.context << ", Bk "
                << setup.config.block_size << ", distance " << setup.distance << ", a " << ShortNumber(setup.strength)
                << ", top_k " << setup.config.top_k << ", " << PoolingName(setup.config.pooling) << ") at " << elapsed
                << " s" << std::endl;
  };
  const size_t runs_per_setup = sweep.backends.size();
  std::vector<RecallPoint> points;
  const auto progress = [&](int64_t done, int64_t total) {
    if (streams.show_progress) streams.err << "\r  recall  " << done << "/" << total << " runs   " << std::flush;
    if (size_t(done) % runs_per_setup == 0) announce(size_t(done) / runs_per_setup);
  };
  announce(0);
  if (Status status = RunRecallSweep(sweep, progress, &points); !status.ok()) {
    return CliFail(streams, status.message());
  }
  if (streams.show_progress) {
    streams.err << "\r" << std::string(40, ' ') << "\r" << std::flush;
  } else {
    char elapsed[32];
    std::snprintf(elapsed, sizeof(elapsed), "%.1f", seconds_so_far());
    streams.err << "msa recall: " << setups.size() << " setups done in " << elapsed << " s" << std::endl;
  }
  streams.out << RecallTable(points);
  if (!options.out_dir.empty()) {
    std::vector<std::string> written;
    if (Status status = WriteOutputs(options, sweep, points, &written); !status.ok()) {
      return CliFail(streams, status.message());
    }
    for (const std::string& path : written) streams.out << "  wrote      " << path << "\n";
  }
  return RecallPassed(points) ? 0 : 1;
}

int RecallMergeCommand(const RecallMergeFlags& flags, const CliStreams& streams) {
  RecallMergeResult result;
  if (Status status = MergeRecall(flags.out_dir, flags.shard_dirs, &result); !status.ok()) {
    return CliFail(streams, status.message());
  }
  streams.out << "msa recall merge: " << result.setups << " setups (" << result.rows << " rows) from " << result.shards
              << " shards: " << (result.passed ? "every backend reaches" : "a backend FALLS SHORT of")
              << " the reference's recall\n  wrote      " << flags.out_dir << "/recall.csv\n  wrote      "
              << flags.out_dir << "/recall.json\n";
  return result.passed ? 0 : 1;
}

}  // namespace

void AddRecallCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<RecallOptions>();
  CLI::App* command = app.add_subcommand(
      "recall",
      "Recall of planted distant needles per backend and pooling mode (SPEC section 5). List flags take "
      "comma-separated values. Exit 0 when every backend reaches the reference's recall up to counted "
      "near ties, 1 when one falls short, 2 bad input");
  const struct {
    const char* flag;
    std::string* list;
    const char* what;
  } recall_lists[] = {{"--context", &options->contexts, "context lengths (k_len)"},
                      {"--distance", &options->distances, "needle distances d (tokens before the query)"},
                      {"--strength", &options->strengths, "needle strengths a (index and main score, noise std units)"},
                      {"--top-k", &options->top_ks, "selected blocks per (query, group), local included"},
                      {"--block-size", &options->block_sizes, "block sizes Bk"},
                      {"--pooling", &options->poolings, "pooling modes: max, lse, mean"}};
  for (const auto& list : recall_lists) {
    command->add_option(list.flag, *list.list, list.what)->capture_default_str();
  }
  command->add_option("--backends", options->backends,
                      "backends besides the reference (default: every available one supporting --precision)");
  command->add_option("--precision", options->precision, "exact | fp32 | bf16 | fp16, for the non-reference backends")
      ->capture_default_str();
  const struct {
    const char* flag;
    int* field;
    int min;
    const char* what;
  } recall_ints[] = {{"--queries", &options->queries, 1, "queries per sequence (the last positions)"},
                     {"--sequences", &options->sequences, 1, "independent sequences (trials)"},
                     {"--needles", &options->needles, 1, "needles per query, at distances d, 2d, ..."},
                     {"--distractors", &options->distractors, 0, "distractor blocks per query"},
                     {"--q-heads", &options->q_heads, 1, "Hq"},
                     {"--kv-heads", &options->kv_heads, 1, "Hkv = Hidx"},
                     {"--head-dim", &options->head_dim, 1, "D = Dv = Di"},
                     {"--init-blocks", &options->init_blocks, 0, "sink blocks"}};
  for (const auto& option : recall_ints) {
    command->add_option(option.flag, *option.field, option.what)
        ->check(CLI::Range(option.min, 1 << 20))
        ->capture_default_str();
  }
  command
      ->add_option("--distractor-strength", options->distractor_strength,
                   "index score shift of every distractor key (noise std units)")
      ->check(CLI::Range(-1000.0, 1000.0))
      ->capture_default_str();
  command->add_option("--seed", options->seed, "random seed")->capture_default_str();
  command->add_option("--out-dir", options->out_dir, "write recall.csv and recall.json (and figures) here");
  command->add_flag("--plot", options->plot, "also draw PNG figures into --out-dir (needs gnuplot)");
  AddShardOptions(command, &options->shard, "setups");
  AddThreadsOption(command, &options->threads);
  const auto merge = std::make_shared<RecallMergeFlags>();
  CLI::App* merge_command = command->add_subcommand(
      "merge",
      "Merge the --out-dir files of msa recall --shard runs into those of one unsharded run. Exit 0 when "
      "every backend reaches the reference's recall, 1 when one falls short, 2 bad input");
  merge_command->add_option("--out-dir", merge->out_dir, "where to write recall.csv and recall.json")->required();
  merge_command->add_option("shard_dirs", merge->shard_dirs, "the shards' --out-dir directories")->required();
  merge_command->callback(
      [merge, &streams, action] { *action = [merge, &streams] { return RecallMergeCommand(*merge, streams); }; });
  command->callback([options, merge_command, &streams, action] {
    if (merge_command->parsed()) return;  // `msa recall merge`: its own action
    *action = [options, &streams] { return RecallCommand(*options, streams); };
  });
}

}  // namespace msa
