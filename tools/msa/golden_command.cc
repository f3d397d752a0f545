// `msa golden generate`, `merge` and `verify`: progress and verdict lines over oracle/golden.h.
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

struct GoldenGenerateFlags {
  std::string suite = "smoke";
  std::string dir;
  ShardFlags shard;
  std::string backend = "reference";
  bool resume = false;
  int threads = 0;
};
struct GoldenMergeFlags {
  std::string dir;
  std::vector<std::string> shard_dirs;
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

// "(0.42 cases/s, ETA 31 s)" after `done` of `count` cases in `seconds` (cases reused count as done).
std::string RateAndEta(int done, int count, double seconds) {
  char text[64];
  const double rate = seconds > 0 ? done / seconds : 0;
  if (rate > 0) {
    std::snprintf(text, sizeof(text), "(%.3g cases/s, ETA %.0f s)", rate, (count - done) / rate);
  } else {
    std::snprintf(text, sizeof(text), "(ETA unknown)");
  }
  return text;
}

int GoldenGenerateCommand(const GoldenGenerateFlags& flags, const CliStreams& streams) {
  std::vector<TestCase> cases;
  if (!GoldenSuite(flags.suite, &cases)) {
    return CliFail(streams, "--suite " + flags.suite + ": unknown suite (known: " + GoldenSuiteList() + ")");
  }
  std::ostream& out = streams.out;
  GoldenGenerateOptions options;
  options.resume = flags.resume;
  if (Status status = ChooseShard(flags.shard, "msa golden generate", out, &options.shard); !status.ok()) {
    return CliFail(streams, status.message());
  }
  if (Status status = LookupBackend(flags.backend, &options.backend); !status.ok()) {
    return CliFail(streams, "--backend " + flags.backend + ": " + status.message());
  }
  SetThreads(flags.threads);
  int in_shard = 0;
  for (size_t p = 0; p < cases.size(); ++p) in_shard += options.shard.Holds(int64_t(p)) ? 1 : 0;
  out << "msa golden generate: suite " << flags.suite << ", shard " << options.shard.ToString() << ": " << in_shard
      << " of " << cases.size() << " cases, backend " << options.backend->name << " (exact), " << omp_get_max_threads()
      << " threads, into " << flags.dir << "\n"
      << std::flush;
  const auto start = std::chrono::steady_clock::now();
  const Status status = GenerateGolden(flags.dir, flags.suite, cases, options, [&](const GoldenCaseEvent& event) {
    out << Counter(event.done - 1, event.count) << " " << event.name << " "
        << (event.reused ? "kept (its files match the shard record)" : Seconds(event.seconds)) << " "
        << RateAndEta(event.done, event.count, SecondsSince(start)) << "\n"
        << std::flush;
  });
  if (!status.ok()) return CliFail(streams, status.message());
  const std::filesystem::path written =
      std::filesystem::path(flags.dir) /
      (options.shard.whole() ? std::string(kGoldenManifest) : GoldenShardRecordName(options.shard));
  out << "wrote " << written.string() << ": " << in_shard << " cases in " << Seconds(SecondsSince(start))
      << (options.shard.whole() ? "" : " (merge the shards with msa golden merge)") << "\n";
  return 0;
}

int GoldenMergeCommand(const GoldenMergeFlags& flags, const CliStreams& streams) {
  std::string summary;
  if (Status status = MergeGolden(flags.dir, flags.shard_dirs, &summary); !status.ok()) {
    return CliFail(streams, status.message());
  }
  streams.out << "msa golden merge: " << summary << "\nwrote "
              << (std::filesystem::path(flags.dir) / kGoldenManifest).string() << "\n";
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
  CLI::App* golden_command = app.add_subcommand("golden", "Golden suites: generate, merge, verify");
  golden_command->require_subcommand(1);
  const auto generate = std::make_shared<GoldenGenerateFlags>();
  CLI::App* generate_command = golden_command->add_subcommand(
      "generate", "Write a suite's inputs, exact outputs and MANIFEST.json (or, for one shard, its SHARD record)");
  generate_command->add_option("--suite", generate->suite, GoldenSuiteList())
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kGoldenSuiteNames), std::end(kGoldenSuiteNames))))
      ->capture_default_str();
  generate_command->add_option("--dir", generate->dir, "directory to write (created if missing)")->required();
  AddShardOptions(generate_command, &generate->shard, "cases");
  generate_command
      ->add_option("--backend", generate->backend,
                   "the exact backend that computes the outputs (all give the reference's bits and the same files)")
      ->capture_default_str();
  generate_command->add_flag("--resume", generate->resume,
                             "keep the cases an earlier run of this shard finished (their SHA-256 checked)");
  AddThreadsOption(generate_command, &generate->threads);
  generate_command->callback([generate, &streams, action] {
    *action = [generate, &streams] { return GoldenGenerateCommand(*generate, streams); };
  });
  const auto merge = std::make_shared<GoldenMergeFlags>();
  CLI::App* merge_command = golden_command->add_subcommand(
      "merge", "Merge the shards of golden generate --shard into the MANIFEST.json one run would write");
  merge_command->add_option("--dir", merge->dir, "the merged suite's directory (may be one of the shard dirs)")
      ->required();
  merge_command->add_option("shard_dirs", merge->shard_dirs, "directories holding SHARD-<I>-of-<N>.json records")
      ->required();
  merge_command->callback(
      [merge, &streams, action] { *action = [merge, &streams] { return GoldenMergeCommand(*merge, streams); }; });
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
