// `msa golden generate` and `msa golden verify`: progress and verdict lines over oracle/golden.h.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "oracle/golden.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

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

}  // namespace

int GoldenGenerateCommand(const GoldenGenerateOptions& options, const CliStreams& streams) {
  std::vector<TestCase> cases;
  if (!GoldenSuite(options.suite, &cases)) {
    return CliFail(streams, "--suite " + options.suite + ": unknown suite (known: smoke, full, dialects)");
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

}  // namespace msa
