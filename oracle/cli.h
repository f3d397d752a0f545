// The `msa` command line tool. Exit codes: 0 success, 2 bad input or failure (one-line reason on stderr).
#ifndef MSA_ORACLE_CLI_H_
#define MSA_ORACLE_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace msa {

struct CliStreams {
  std::ostream& out;
  std::ostream& err;
  bool show_progress = false;  // a live progress line on err (set when stderr is a terminal)
};

int RunCli(const std::vector<std::string>& args, const CliStreams& streams);

// `msa run`: see cli.cc for the options.
struct RunOptions {
  std::string inputs;   // empty: the embedded default job
  std::string out;      // empty: no outputs file
  std::string backend = "reference";
  int threads = 0;      // 0: OpenMP's default
  int mass_recall_queries = 256;
};
int RunCommand(const RunOptions& options, const CliStreams& streams);

}  // namespace msa

#endif  // MSA_ORACLE_CLI_H_
