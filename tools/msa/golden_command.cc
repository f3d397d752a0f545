// `msa golden generate` and `msa golden verify`: progress and verdict lines over oracle/golden.h.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "oracle/golden.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

struct GoldenGenerateOptions {
  std::string suite = "smoke";  // smoke | full
  std::string dir;
  int threads = 0;
};
struct GoldenVerifyOptions {
  std::string dir;
  std::string backend = "reference";
  std::string precision = "exact";
  int threads = 0;
};

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s", seconds);
  return text;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "[3/14]" for the case at index 2 of 14.
std::string Counter(int index, int count) {
  char text[32];
  std::snprintf(text, sizeof(text), "[%d/%d]", index + 1, count);
  return text;
}

int GoldenGenerateCommand(const GoldenGenerateOptions& options, const CliStreams& streams) {
  std::vector<TestCase> cases;
  if (!GoldenSuite(options.suite, &cases)) {
    return CliFail(streams, "--suite " + options.suite + ": unknown suite (known: " + GoldenSuiteList() + ")");
  }
  SetThreads(options.threads);
  std::ostream& out = streams.out;
  out << "msa golden generate: suite " << options.suite << ", " << cases.size() << " cases, backend reference, "
      << omp_get_max_threads() << " threads, into " << options.dir << "\n";
  const auto start = std::chrono::steady_clock::now();
  const Status status = GenerateGolden(
      options.dir, options.suite, cases, [&out](int index, int count, const std::string& name, double s) {
        out << Counter(index, count) << " " << name << " " << Seconds(s) << "\n" << std::flush;
      });
  if (!status.ok()) return CliFail(streams, status.message());
  out << "wrote " << (std::filesystem::path(options.dir) / kGoldenManifest).string() << ": " << cases.size()
      << " cases in " << Seconds(SecondsSince(start)) << "\n";
  return 0;
}

int GoldenVerifyCommand(const GoldenVerifyOptions& options, const CliStreams& streams) {
  const Backend* backend = nullptr;
  if (Status status = LookupBackend(options.backend, &backend); !status.ok()) return CliFail(streams, status.message());
  // exact (every backend's FP64 mode): outputs must equal the stored reference bit for bit; else the oracle rules.
  Precision precision;
  if (!ParsePrecision(options.precision, &precision)) {
    return CliFail(streams, "--precision " + options.precision + ": must be exact, fp32, bf16 or fp16");
  }
  SetThreads(options.threads);
  std::ostream& out = streams.out;
  const auto start = std::chrono::steady_clock::now();
  GoldenVerifyResult result;
  const Status status =
      VerifyGolden(options.dir, *backend, precision, &result, [&](int index, int count, const GoldenCaseResult& r) {
        if (index == 0) {  // the manifest was good: no output at all on bad input, only the error line
          out << "msa golden verify: " << options.dir << ", backend " << backend->name << ", precision "
              << PrecisionName(precision) << ", " << omp_get_max_threads() << " threads\n";
        }
        out << Counter(index, count) << " " << (r.passed ? "PASS " : "FAIL ") << r.name << " " << Seconds(r.seconds)
            << ": " << r.reason << "\n";
        std::istringstream detail(r.detail);
        for (std::string line; std::getline(detail, line);) out << "      " << line << "\n";
        out << std::flush;
      });
  if (!status.ok()) return CliFail(streams, status.message());
  const int failed = result.failed(), total = int(result.cases.size());
  out << (failed == 0 ? "PASS" : "FAIL") << ": suite " << result.suite << ", " << total - failed << " of " << total
      << " cases passed, " << failed << " failed, backend " << backend->name << ", " << Seconds(SecondsSince(start))
      << "\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace

void AddGoldenCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  CLI::App* golden_command = app.add_subcommand("golden", "Golden suites: generate, verify");
  golden_command->require_subcommand(1);
  const auto generate = std::make_shared<GoldenGenerateOptions>();
  CLI::App* generate_command =
      golden_command->add_subcommand("generate", "Write a suite's inputs, reference outputs and MANIFEST.json");
  generate_command->add_option("--suite", generate->suite, "smoke | full | dialects")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kGoldenSuiteNames), std::end(kGoldenSuiteNames))))
      ->capture_default_str();
  generate_command->add_option("--dir", generate->dir, "directory to write (created if missing)")->required();
  AddThreadsOption(generate_command, &generate->threads);
  generate_command->callback([generate, &streams, action] {
    *action = [generate, &streams] { return GoldenGenerateCommand(*generate, streams); };
  });
  const auto verify = std::make_shared<GoldenVerifyOptions>();
  CLI::App* verify_command = golden_command->add_subcommand(
      "verify", "Recompute a golden suite with a backend and compare. Exit 0 pass, 1 fail, 2 bad input");
  verify_command->add_option("--dir", verify->dir, "a directory written by golden generate")->required();
  verify_command->add_option("--backend", verify->backend, "backend name")->capture_default_str();
  verify_command
      ->add_option("--precision", verify->precision, "exact (bit-identical) | fp32 | bf16 | fp16 (the oracle rules)")
      ->check(CLI::IsMember({"exact", "fp32", "bf16", "fp16"}))
      ->capture_default_str();
  AddThreadsOption(verify_command, &verify->threads);
  verify_command->callback(
      [verify, &streams, action] { *action = [verify, &streams] { return GoldenVerifyCommand(*verify, streams); }; });
}

}  // namespace msa
