// The `msa` command line tool. Exit codes: 0 success, 1 a judged implementation failed (check, golden
// verify), 2 bad input or failure (one line "msa: error: ..." on stderr).
#ifndef MSA_TOOLS_MSA_CLI_H_
#define MSA_TOOLS_MSA_CLI_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "msa/msa.h"
#include "oracle/shard.h"

namespace CLI {
class App;
}  // namespace CLI

namespace msa {

struct CliStreams {
  std::ostream& out;
  std::ostream& err;
  bool show_progress = false;  // a live progress line on err (set when stderr is a terminal); without it,
                               // `msa recall` prints one line per setup on err instead
};

int RunCli(const std::vector<std::string>& args, const CliStreams& streams);

// A subcommand registers itself: it adds its CLI11 subcommand and flags to `app`, and a callback that sets
// `*action` to the work to run once the whole command line has parsed. Each *_command.cc defines one;
// kSubcommands in cli.cc lists them in the order `msa --help` shows.
using CliAction = std::function<int()>;
using AddSubcommandFn = void (*)(CLI::App& app, const CliStreams& streams, CliAction* action);
void AddRunCommand(CLI::App& app, const CliStreams& streams, CliAction* action);      // run_command.cc
void AddCheckCommand(CLI::App& app, const CliStreams& streams, CliAction* action);    // check_command.cc
void AddGoldenCommand(CLI::App& app, const CliStreams& streams, CliAction* action);   // golden_command.cc
void AddRecallCommand(CLI::App& app, const CliStreams& streams, CliAction* action);   // recall_command.cc
void AddExplainCommand(CLI::App& app, const CliStreams& streams, CliAction* action);  // explain_command.cc
void AddCostCommand(CLI::App& app, const CliStreams& streams, CliAction* action);     // cost_command.cc

// Helpers shared by the subcommands.
// Prints "msa: error: <message>" and returns 2.
int CliFail(const CliStreams& streams, const std::string& message);
// The named backend, or an error listing the compiled-in ones.
Status LookupBackend(const std::string& name, const Backend** backend);
// Fails early (before long work) when a file could not be created at `path` later; `flag` names the option.
Status CheckOutputPath(const std::string& flag, const std::string& path);
// Adds the --threads option that every long-running subcommand takes.
void AddThreadsOption(CLI::App* command, int* threads);
// Sets the OpenMP thread count when threads > 0.
void SetThreads(int threads);

// --shard I/N|auto and --shard-count N, for the subcommands that split their work into static shards.
struct ShardFlags {
  std::string shard = "0/1";
  int shard_count = 0;  // N for --shard auto where the launcher does not give it
};
void AddShardOptions(CLI::App* command, ShardFlags* flags, const std::string& what);
// The shard the flags name; for auto, the launcher's, said on `out` as "<command>: shard 1/3 from torchrun: ...".
Status ChooseShard(const ShardFlags& flags, const std::string& command, std::ostream& out, Shard* shard);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_CLI_H_
