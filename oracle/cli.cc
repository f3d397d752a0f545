// Argument parsing and dispatch for `msa`. Every failure is one line "msa: error: ..." and exit code 2.
#include "oracle/cli.h"

#include <exception>
#include <new>

#include <CLI/CLI.hpp>

namespace msa {

int RunCli(const std::vector<std::string>& args, const CliStreams& streams) {
  CLI::App app{"msa: reference simulator and correctness oracle for MiniMax Sparse Attention", "msa"};
  app.require_subcommand(1);
  RunOptions run;
  CLI::App* run_command = app.add_subcommand(
      "run", "Compute every output of SPEC section 7; with no --inputs, run the embedded default job");
  run_command->add_option("--inputs", run.inputs, "inputs file (safetensors, file contract v1)");
  run_command->add_option("--out", run.out, "outputs file to write (safetensors)");
  run_command->add_option("--backend", run.backend, "backend name")->capture_default_str();
  run_command->add_option("--threads", run.threads, "OpenMP threads (default: all cores)")
      ->check(CLI::Range(1, 4096));
  run_command->add_option("--mass-recall-queries", run.mass_recall_queries,
                          "queries sampled for attention-mass recall")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();

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
      streams.err << "msa: error: no subcommand given: must be one of: run (see msa --help)\n";
      return 2;
    }
    streams.err << "msa: error: " << error.what() << " (see msa --help)\n";
    return 2;
  }
  if (!run_command->parsed()) {
    streams.err << "msa: error: no subcommand given: must be one of: run (see msa --help)\n";
    return 2;
  }
  try {
    return RunCommand(run, streams);
  } catch (const std::bad_alloc&) {
    streams.err << "msa: error: out of memory\n";
  } catch (const std::exception& error) {  // a bug: the library reports bad input through Status
    streams.err << "msa: error: internal error: " << error.what() << "\n";
  }
  return 2;
}

}  // namespace msa
