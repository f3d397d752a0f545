// Argument parsing and dispatch for `msa`. Every failure is one line "msa: error: ..." and exit code 2.
#include "oracle/cli.h"

#include <omp.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <new>

#include <CLI/CLI.hpp>

namespace msa {
namespace {

constexpr const char* kSubcommands = "run, check, golden";

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
                            "exact | fp32 | bf16 | fp16 (default: from the dtype of their out)");
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
  generate_command->add_option("--suite", generate.suite, "smoke | full")
      ->check(CLI::IsMember({"smoke", "full"}))
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
