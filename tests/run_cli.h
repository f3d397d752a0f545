// Runs the `msa` command line in-process (RunCli) with string streams: what tests of the CLI assert on.
#ifndef MSA_TESTS_RUN_CLI_H_
#define MSA_TESTS_RUN_CLI_H_

#include <sstream>
#include <string>
#include <vector>

#include "tools/msa/cli.h"

namespace msa {

struct CliResult {
  int code = -1;         // the exit code RunCli returned
  std::string out, err;  // what it printed on each stream
};

// `msa args...`, without a progress line.
inline CliResult RunMsa(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliResult result;
  result.code = RunCli(args, {out, err, false});
  result.out = out.str();
  result.err = err.str();
  return result;
}

}  // namespace msa

#endif  // MSA_TESTS_RUN_CLI_H_
