// Argument parsing and dispatch for `msa`. Every failure is one line "msa: error: ..." and exit code 2.
#include "tools/msa/cli.h"

#include <omp.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>

#include <CLI/CLI.hpp>

namespace msa {
namespace {

// Every subcommand, in the order `msa --help` lists them. A new one is its own *_command.cc, a line here and its
// declaration in cli.h.
constexpr AddSubcommandFn kSubcommands[] = {&AddRunCommand,    &AddCheckCommand,   &AddGoldenCommand,
                                            &AddRecallCommand, &AddExplainCommand, &AddCostCommand};
// The subcommands as the error for a missing one names them.
constexpr const char* kSubcommandNames = "run, check, golden, cost, recall, explain";

}  // namespace

void AddThreadsOption(CLI::App* command, int* threads) {
  command->add_option("--threads", *threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 4096));
}

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

void AddShardOptions(CLI::App* command, ShardFlags* flags, const std::string& what) {
  command
      ->add_option("--shard", flags->shard,
                   "I/N: only the " + what +
                       " at positions p with p % N == I (then merge); auto: I and N from the "
                       "launcher (Slurm array or step, torchrun, Open MPI, Kubernetes indexed Job)")
      ->capture_default_str();
  command
      ->add_option("--shard-count", flags->shard_count,
                   "N for --shard auto where the launcher does not give it (a Kubernetes indexed Job)")
      ->check(CLI::Range(1, kMaxShards));
}

Status ChooseShard(const ShardFlags& flags, const std::string& command, std::ostream& out, Shard* shard) {
  if (flags.shard != "auto") {
    if (flags.shard_count != 0) return InvalidArgument("--shard-count: only with --shard auto");
    return ParseShard("--shard", flags.shard, shard);
  }
  std::string source;
  MSA_RETURN_IF_ERROR(
      ShardFromEnvironment([](const char* name) { return std::getenv(name); }, flags.shard_count, shard, &source));
  out << command << ": shard " << shard->ToString() << " from " << source << "\n";
  return Status::Ok();
}

int RunCli(const std::vector<std::string>& args, const CliStreams& streams) {
  CLI::App app{"msa: reference simulator and correctness oracle for MiniMax Sparse Attention", "msa"};
  app.require_subcommand(1);
  CliAction action;  // set by the parsed subcommand
  const std::string no_subcommand =
      std::string("no subcommand given: must be one of: ") + kSubcommandNames + " (see msa --help)";
  for (const AddSubcommandFn add : kSubcommands) add(app, streams, &action);

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
      return CliFail(streams, no_subcommand);
    }
    return CliFail(streams, std::string(error.what()) + " (see msa --help)");
  }
  if (!action) {
    return CliFail(streams, no_subcommand);
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
