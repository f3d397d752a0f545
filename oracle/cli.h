// The `msa` command line tool. Exit codes: 0 success, 1 a judged implementation failed (check, golden
// verify), 2 bad input or failure (one line "msa: error: ..." on stderr).
#ifndef MSA_ORACLE_CLI_H_
#define MSA_ORACLE_CLI_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "msa/msa.h"

namespace msa {

struct CliStreams {
  std::ostream& out;
  std::ostream& err;
  bool show_progress = false;  // a live progress line on err (set when stderr is a terminal)
};

int RunCli(const std::vector<std::string>& args, const CliStreams& streams);

// Helpers shared by the subcommands.
// Prints "msa: error: <message>" and returns 2.
int CliFail(const CliStreams& streams, const std::string& message);
// The named backend, or an error listing the compiled-in ones.
Status LookupBackend(const std::string& name, const Backend** backend);
// Fails early (before long work) when a file could not be created at `path` later; `flag` names the option.
Status CheckOutputPath(const std::string& flag, const std::string& path);
// Sets the OpenMP thread count when threads > 0.
void SetThreads(int threads);

// `msa run` (oracle/run_command.cc).
struct RunOptions {
  std::string inputs;     // empty: the embedded default job
  std::string out;        // empty: no outputs file
  std::string backend;    // empty: the fastest available backend that supports the precision (FastestBackend)
  std::string precision;  // exact | fp32 | bf16 | fp16; empty: the inputs' msa_config.precision (default exact)
  int threads = 0;        // 0: OpenMP's default
  int mass_recall_queries = 256;
};
int RunCommand(const RunOptions& options, const CliStreams& streams);

// `msa check` (oracle/check_command.cc): judges an outside implementation's outputs.
struct CheckOptions {
  std::string inputs;
  std::string outputs;
  std::string precision;        // empty: from the dtype of their `out` (F64 exact rules, F32 fp32, ...)
  std::optional<double> tau;
  std::string json;             // empty: no JSON report
  int threads = 0;
};
int CheckCommand(const CheckOptions& options, const CliStreams& streams);

// `msa golden generate` and `msa golden verify` (oracle/golden_command.cc).
struct GoldenGenerateOptions {
  std::string suite = "smoke";  // smoke | full
  std::string dir;
  int threads = 0;
};
int GoldenGenerateCommand(const GoldenGenerateOptions& options, const CliStreams& streams);

struct GoldenVerifyOptions {
  std::string dir;
  std::string backend = "reference";
  std::string precision = "exact";
  int threads = 0;
};
int GoldenVerifyCommand(const GoldenVerifyOptions& options, const CliStreams& streams);

}  // namespace msa

#endif  // MSA_ORACLE_CLI_H_
