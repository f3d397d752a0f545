// Argument parsing and dispatch for `msa`. Every failure is one line "msa: error: ..." and exit code 2.
#include "tools/msa/cli.h"

#include <omp.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <new>

#include <CLI/CLI.hpp>

namespace msa {
namespace {

constexpr const char* kSubcommands = "run, check, golden, cost, recall, explain";

void AddThreadsOption(CLI::App* command, int* threads) {
  command->add_option("--threads", *threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 4096));
}

}  // namespace

int CliFail(const CliStreams& streams, const std::string& message) {
  streams.err << "msa: error: " << message << "\n";
  return 2;
}

Status LookupBackend(const std::string& name, const Backend** backend) {
  *backend = FindBackend(name);
  if (*backend != nullptr) return Status::Ok();
  std::string names;
  for (const Backend& b : AllBackends()) names += (names.empty() ? "" : ", ") + std::string(b.name);
  return InvalidArgument("--backend " + name + ": unknown backend (compiled in: " + names + ")");
}

Status CheckOutputPath(const std::string& flag, const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return IoError(flag + " " + path + ": cannot resolve the path: " + error.message());
  const std::filesystem::path parent = absolute.parent_path();
  if (!std::filesystem::is_directory(parent, error)) {
    return IoError(flag + " " + path + ": directory " + parent.string() + " does not exist");
  }
  if (std::filesystem::is_directory(path, error)) return IoError(flag + " " + path + ": is a directory");
  return Status::Ok();
}

void SetThreads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

int RunCli(const std::vector<std::string>& args, const CliStreams& streams) {
  CLI::App app{"msa: reference simulator and correctness oracle for MiniMax Sparse Attention", "msa"};
  app.require_subcommand(1);
  std::function<int()> action;  // the parsed subcommand

  RunOptions run;
  CLI::App* run_command = app.add_subcommand(
      "run", "Compute every output of SPEC section 7; with no --inputs, run the embedded default job");
  run_command->add_option("--inputs", run.inputs, "inputs file (safetensors, file contract v1)");
  run_command->add_option("--out", run.out, "outputs file to write (safetensors)");
  run_command->add_option("--backend", run.backend,
                          "backend name (default: the fastest available one that supports the precision)");
  run_command->add_option("--precision", run.precision,
                          "exact | fp32 | bf16 | fp16 (default: the inputs' msa_config.precision, else exact)");
  run_command->add_option("--index-format", run.index_format,
                          "native | e4m3: index_q, index_k rounded to fp8 E4M3 first (default: the inputs' "
                          "msa_config.index_format, else native)");
  run_command->add_option("--score-format", run.score_format,
                          "native | fp16: rank binary16-rounded block maxima, max pooling only (the official "
                          "use_fp16_score; default: the inputs' msa_config.score_format, else native)");
  AddThreadsOption(run_command, &run.threads);
  run_command->add_option("--mass-recall-queries", run.mass_recall_queries,
                          "queries sampled for attention-mass recall")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  run_command->callback([&] { action = [&] { return RunCommand(run, streams); }; });

  CheckOptions check;
  CLI::App* check_command = app.add_subcommand(
      "check", "Judge an implementation's outputs (any subset of topk_indices, out, lse, index_lse) against "
               "the FP64 reference computed on the same inputs. Exit 0 pass, 1 fail, 2 bad input");
  check_command->add_option("--inputs", check.inputs, "inputs file (safetensors, file contract v1)")->required();
  check_command->add_option("--outputs", check.outputs, "their outputs file (safetensors)")->required();
  check_command->add_option("--precision", check.precision,
                            "exact | fp32 | bf16 | fp16: judge every float output at it (default: each at its own "
                            "dtype, F64 exact, F32 fp32, BF16 bf16, F16 fp16)");
  check_command->add_option("--score-precision", check.score_precision,
                            "exact | fp32 | bf16 | fp16: the arithmetic of their ranked index scores, which sets tau "
                            "(default: metadata score_precision, else exact for an all-F64 candidate, else fp32: "
                            "kernels accumulate index scores in fp32)");
  check_command->add_option("--order", check.order,
                            "strict | any: strict wants the local block in the last valid slot, any reads the valid "
                            "prefix as a set (default: metadata order, else strict)");
  check_command->add_option("--topk-layout", check.topk_layout,
                            "head_major [Hidx, total_q, top_k] | query_major [total_q, Hidx, top_k] (default: "
                            "metadata topk_layout, else head_major)");
  check_command->add_option("--lse-base", check.lse_base,
                            "e | 2: the base of their lse and index_lse (default: metadata lse_base, else e)");
  check_command->add_option("--tau", check.tau, "selection tolerance (default: from a naive evaluation)")
      ->check(CLI::NonNegativeNumber);
  check_command->add_option("--json", check.json, "also write the report as JSON to this file");
  AddThreadsOption(check_command, &check.threads);
  check_command->callback([&] { action = [&] { return CheckCommand(check, streams); }; });

  CLI::App* golden_command = app.add_subcommand("golden", "Golden suites: generate, verify");
  golden_command->require_subcommand(1);
  GoldenGenerateOptions generate;
  CLI::App* generate_command =
      golden_command->add_subcommand("generate", "Write a suite's inputs, reference outputs and MANIFEST.json");
  generate_command->add_option("--suite", generate.suite, "smoke | full | dialects")
      ->check(CLI::IsMember({"smoke", "full", "dialects"}))
      ->capture_default_str();
  generate_command->add_option("--dir", generate.dir, "directory to write (created if missing)")->required();
  AddThreadsOption(generate_command, &generate.threads);
  generate_command->callback([&] { action = [&] { return GoldenGenerateCommand(generate, streams); }; });
  GoldenVerifyOptions verify;
  CLI::App* verify_command = golden_command->add_subcommand(
      "verify", "Recompute a golden suite with a backend and compare. Exit 0 pass, 1 fail, 2 bad input");
  verify_command->add_option("--dir", verify.dir, "a directory written by golden generate")->required();
  verify_command->add_option("--backend", verify.backend, "backend name")->capture_default_str();
  verify_command->add_option("--precision", verify.precision,
                             "exact (bit-identical) | fp32 | bf16 | fp16 (the oracle rules)")
      ->check(CLI::IsMember({"exact", "fp32", "bf16", "fp16"}))
      ->capture_default_str();
  AddThreadsOption(verify_command, &verify.threads);
  verify_command->callback([&] { action = [&] { return GoldenVerifyCommand(verify, streams); }; });

  RecallOptions recall;
  CLI::App* recall_command = app.add_subcommand(
      "recall", "Recall of planted distant needles per backend and pooling mode (SPEC section 5). List flags take "
                "comma-separated values. Exit 0 when every backend reaches the reference's recall up to counted "
                "near ties, 1 when one falls short, 2 bad input");
  const struct {
    const char* flag;
    std::string* list;
    const char* what;
  } recall_lists[] = {{"--context", &recall.contexts, "context lengths (k_len)"},
                      {"--distance", &recall.distances, "needle distances d (tokens before the query)"},
                      {"--strength", &recall.strengths, "needle strengths a (index and main score, noise std units)"},
                      {"--top-k", &recall.top_ks, "selected blocks per (query, group), local included"},
                      {"--block-size", &recall.block_sizes, "block sizes Bk"},
                      {"--pooling", &recall.poolings, "pooling modes: max, lse, mean"}};
  for (const auto& list : recall_lists) {
    recall_command->add_option(list.flag, *list.list, list.what)->capture_default_str();
  }
  recall_command->add_option("--backends", recall.backends,
                             "backends besides the reference (default: every available one supporting --precision)");
  recall_command->add_option("--precision", recall.precision,
                             "exact | fp32 | bf16 | fp16, for the non-reference backends")
      ->capture_default_str();
  const struct {
    const char* flag;
    int* field;
    int min;
    const char* what;
  } recall_ints[] = {{"--queries", &recall.queries, 1, "queries per sequence (the last positions)"},
                     {"--sequences", &recall.sequences, 1, "independent sequences (trials)"},
                     {"--needles", &recall.needles, 1, "needles per query, at distances d, 2d, ..."},
                     {"--distractors", &recall.distractors, 0, "distractor blocks per query"},
                     {"--q-heads", &recall.q_heads, 1, "Hq"},
                     {"--kv-heads", &recall.kv_heads, 1, "Hkv = Hidx"},
                     {"--head-dim", &recall.head_dim, 1, "D = Dv = Di"},
                     {"--init-blocks", &recall.init_blocks, 0, "sink blocks"}};
  for (const auto& option : recall_ints) {
    recall_command->add_option(option.flag, *option.field, option.what)
        ->check(CLI::Range(option.min, 1 << 20))
        ->capture_default_str();
  }
  recall_command->add_option("--distractor-strength", recall.distractor_strength,
                             "index score shift of every distractor key (noise std units)")
      ->check(CLI::Range(-1000.0, 1000.0))
      ->capture_default_str();
  recall_command->add_option("--seed", recall.seed, "random seed")->capture_default_str();
  recall_command->add_option("--out-dir", recall.out_dir, "write recall.csv and recall.json (and figures) here");
  recall_command->add_flag("--plot", recall.plot, "also draw PNG figures into --out-dir (needs gnuplot)");
  AddThreadsOption(recall_command, &recall.threads);
  recall_command->callback([&] { action = [&] { return RecallCommand(recall, streams); }; });

  ExplainOptions explain;
  CLI::App* explain_command = app.add_subcommand(
      "explain", "Step-by-step trace of MSA on a tiny prefill (token scores, block scores, forced blocks, ranking, "
                 "selection, softmax, output), computed by the reference; --image draws the selection pattern");
  const struct {
    const char* flag;
    int* field;
    int min, max;
    const char* what;
  } explain_ints[] = {{"--keys", &explain.keys, 1, 4096, "keys (and queries: a prefill) of the one sequence"},
                      {"--block-size", &explain.block_size, 1, 4096, "Bk"},
                      {"--top-k", &explain.top_k, 1, 4096, "selected blocks per (query, group), local included"},
                      {"--init-blocks", &explain.init_blocks, 0, 4096, "sink blocks"},
                      {"--q-heads", &explain.q_heads, 1, 64, "Hq"},
                      {"--kv-heads", &explain.kv_heads, 1, 64, "Hkv = Hidx"},
                      {"--head-dim", &explain.head_dim, 1, 64, "D = Dv = Di"},
                      {"--query", &explain.query, -1, 4095, "traced query within the sequence (-1: the last)"}};
  for (const auto& option : explain_ints) {
    explain_command->add_option(option.flag, *option.field, option.what)
        ->check(CLI::Range(option.min, option.max))
        ->capture_default_str();
  }
  explain_command->add_option("--pooling", explain.pooling, "max | lse | mean")
      ->check(CLI::IsMember({"max", "lse", "mean"}))
      ->capture_default_str();
  explain_command->add_option("--seed", explain.seed, "random seed")->capture_default_str();
  explain_command->add_option("--image", explain.image, "write a PNG of the selection pattern (queries x blocks)");
  explain_command->callback([&] { action = [&] { return ExplainCommand(explain, streams); }; });

  CostOptions cost;
  CLI::App* cost_command = app.add_subcommand(
      "cost", "The cost model of SPEC section 6 for any length: FLOPs, bytes, cache sizes, roofline time on a GPU "
              "(config: M3's unless changed)");
  cost_command->add_option("--lengths", cost.lengths, "comma-separated lengths, K = 2^10, M = 2^20, G = 2^30")
      ->capture_default_str();
  cost_command->add_option("--mode", cost.mode, "prefill (N tokens) | decode (one token at KV length N)")
      ->check(CLI::IsMember({"prefill", "decode"}))
      ->capture_default_str();
  cost_command->add_option("--batch", cost.batch, "independent sequences")->capture_default_str();
  cost_command->add_option("--dtype", cost.dtype, "fp8 | bf16 | fp16 | fp32: bytes of q, k, v, index tensors, out")
      ->capture_default_str();
  cost_command->add_option("--gpu", cost.gpu, "H100 | H200 | H800 | B200 | H200-measured")->capture_default_str();
  cost_command->add_flag("--gpu-info", cost.gpu_info, "print the GPU rates and their sources, then exit");
  cost_command->add_option("--json", cost.json, "also write the estimates as JSON to this file");
  CLI::Option* cost_inputs =
      cost_command->add_option("--inputs", cost.inputs, "take msa_config and head shapes from this inputs file");
  const struct {
    const char* flag;
    int* field;
    int min;
    const char* what;
  } cost_config_flags[] = {
      {"--q-heads", &cost.config.num_q_heads, 1, "Hq"},
      {"--kv-heads", &cost.config.num_kv_heads, 1, "Hkv = Hidx"},
      {"--head-dim", &cost.config.head_dim, 1, "D"},
      {"--value-dim", &cost.config.value_dim, 1, "Dv"},
      {"--index-head-dim", &cost.config.index_head_dim, 1, "Di"},
      {"--block-size", &cost.config.block_size, 1, "Bk"},
      {"--top-k", &cost.config.top_k, 1, "top_k: selected blocks, local included"},
      {"--init-blocks", &cost.config.init_blocks, 0, "init_blocks: sink blocks"}};
  for (const auto& flag : cost_config_flags) {
    cost_command->add_option(flag.flag, *flag.field, flag.what)
        ->check(CLI::Range(flag.min, INT32_MAX))
        ->excludes(cost_inputs)
        ->capture_default_str();
  }
  cost_command->callback([&] { action = [&] { return CostCommand(cost, streams); }; });

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes the arguments reversed
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    streams.out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    streams.out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& error) {
    if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
      return CliFail(streams, std::string("no subcommand given: must be one of: ") + kSubcommands +
                                  " (see msa --help)");
    }
    return CliFail(streams, std::string(error.what()) + " (see msa --help)");
  }
  if (!action) {
    return CliFail(streams, std::string("no subcommand given: must be one of: ") + kSubcommands + " (see msa --help)");
  }
  try {
    return action();
  } catch (const std::bad_alloc&) {
    return CliFail(streams, "out of memory");
  } catch (const std::exception& error) {  // a bug: the library reports bad input through Status
    return CliFail(streams, std::string("internal error: ") + error.what());
  }
}

}  // namespace msa
