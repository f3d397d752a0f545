// GenerateGolden: a shard of a suite's cases, each written whole or not at all, with a record rewritten after
// every case so that a rerun can keep what a killed run finished.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <utility>

#include "io/file_contract.h"
#include "io/sha256.h"
#include "oracle/golden.h"
#include "oracle/golden_files.h"

#ifndef MSA_VERSION
#define MSA_VERSION "unknown"
#endif

namespace msa {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Writes the inputs and `backend`'s exact outputs of one case into `case_dir` and returns its manifest entry.
Status WriteCaseFiles(const fs::path& case_dir, const TestCase& test_case, const Backend& backend, GoldenEntry* entry) {
  const Problem problem = GenerateProblem(test_case.spec);
  const std::string inputs_path = (case_dir / kGoldenInputs).string();
  const std::string outputs_path = (case_dir / kGoldenOutputs).string();
  std::string inputs_sha256, outputs_sha256;
  MSA_RETURN_IF_ERROR(WriteSafetensors(inputs_path, ProblemToSafetensors(problem)));
  MSA_RETURN_IF_ERROR(Sha256OfFile(inputs_path, &inputs_sha256));
  Outputs outputs;
  Problem exact = problem;
  exact.config.precision = Precision::kExact;
  if (Status status = RunBackend(backend, exact, &outputs); !status.ok()) {
    return Status(status.code(), test_case.name + ": backend " + std::string(backend.name) + ": " + status.message());
  }
  outputs.kernel_plan.clear();  // the file holds the function's values, not how a backend got them
  MSA_RETURN_IF_ERROR(WriteSafetensors(outputs_path, OutputsToSafetensors(exact, outputs, "reference", inputs_sha256)));
  MSA_RETURN_IF_ERROR(Sha256OfFile(outputs_path, &outputs_sha256));
  GoldenJson json = GoldenCaseDefinition(test_case);
  json["files"] = {{kGoldenInputs, inputs_sha256}, {kGoldenOutputs, outputs_sha256}};
  return ParseGoldenEntry(json, test_case.name, entry);
}

// Writes dir/<name> whole: the files go into a temporary directory beside it, renamed over it once complete.
Status GenerateCase(const fs::path& dir, const TestCase& test_case, const Backend& backend, GoldenEntry* entry) {
  const fs::path case_dir = dir / test_case.name;
  const fs::path partial = dir / ("." + test_case.name + ".partial." + std::to_string(getpid()));
  std::error_code error;
  fs::remove_all(partial, error);
  fs::create_directories(partial, error);
  if (error) return IoError(partial.string() + ": cannot create the directory: " + error.message());
  Status status = WriteCaseFiles(partial, test_case, backend, entry);
  if (status.ok()) {
    fs::remove_all(case_dir, error);
    if (!error) fs::rename(partial, case_dir, error);
    if (error) status = IoError(case_dir.string() + ": cannot move the finished case into place: " + error.message());
  }
  if (!status.ok()) fs::remove_all(partial, error);
  return status;
}

// `preferred` where it runs the case in exact mode, else the reference.
const Backend& CaseBackend(const Backend& preferred, const TestCase& test_case) {
  Config exact = test_case.spec.config;
  exact.precision = Precision::kExact;
  if (BackendRuns(preferred, exact, test_case.spec.training).ok()) return preferred;
  return *FindBackend("reference");
}

// The cases of an earlier record of this very shard and suite whose files still match it, by position.
std::set<int64_t> ReusableCases(const fs::path& dir, const fs::path& record_path, const GoldenShardRecord& fresh,
                                GoldenShardRecord* record) {
  std::set<int64_t> reusable;
  GoldenShardRecord old;
  std::error_code error;
  if (!fs::exists(record_path, error) || !ReadGoldenShardRecord(record_path, &old).ok()) return reusable;
  if (old.msa_version != fresh.msa_version || old.suite != fresh.suite || old.suite_sha256 != fresh.suite_sha256 ||
      old.shard.index != fresh.shard.index || old.shard.count != fresh.shard.count) {
    return reusable;
  }
  for (GoldenShardRecord::Case& done : old.cases) {
    if (!CheckGoldenFiles(dir, done.entry).empty()) continue;
    reusable.insert(done.position);
    record->cases.push_back(std::move(done));
  }
  return reusable;
}

}  // namespace

Status GenerateGolden(const std::string& dir, std::string_view suite, const std::vector<TestCase>& cases,
                      const GoldenGenerateOptions& options, const GoldenCaseDone& on_case) {
  const Backend& backend = options.backend != nullptr ? *options.backend : *FindBackend("reference");
  if (!backend.is_available()) {
    return Unsupported("backend " + std::string(backend.name) + " is compiled in but not available on this machine");
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create the directory: " + error.message());
  const fs::path manifest_path = fs::path(dir) / kGoldenManifest;
  if (options.shard.whole()) {
    fs::remove(manifest_path, error);
    if (error) return IoError(manifest_path.string() + ": cannot remove the old manifest: " + error.message());
  }
  GoldenShardRecord record;
  record.msa_version = MSA_VERSION;
  record.suite = std::string(suite);
  record.suite_sha256 = GoldenSuiteSha256(cases);
  record.case_count = int64_t(cases.size());
  record.shard = options.shard;
  const fs::path record_path = fs::path(dir) / GoldenShardRecordName(options.shard);
  const std::set<int64_t> reusable =
      options.resume ? ReusableCases(dir, record_path, record, &record) : std::set<int64_t>{};
  MSA_RETURN_IF_ERROR(WriteGoldenShardRecord(record_path, record));

  std::vector<int64_t> positions;
  for (int64_t p = 0; p < int64_t(cases.size()); ++p) {
    if (options.shard.Holds(p)) positions.push_back(p);
  }
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t position = positions[i];
    const Clock::time_point start = Clock::now();
    const bool reused = reusable.count(position) != 0;
    if (!reused) {
      const Backend& runner = CaseBackend(backend, cases[position]);
      GoldenShardRecord::Case done{position, std::string(runner.name), {}};
      MSA_RETURN_IF_ERROR(GenerateCase(dir, cases[position], runner, &done.entry));
      const auto after = std::find_if(record.cases.begin(), record.cases.end(),
                                      [position](const auto& c) { return c.position > position; });
      record.cases.insert(after, std::move(done));
      MSA_RETURN_IF_ERROR(WriteGoldenShardRecord(record_path, record));
    }
    if (on_case) {
      on_case({int(i) + 1, int(positions.size()), cases[position].name,
               std::chrono::duration<double>(Clock::now() - start).count(), reused});
    }
  }
  record.complete = true;
  MSA_RETURN_IF_ERROR(WriteGoldenShardRecord(record_path, record));
  if (!options.shard.whole()) return Status::Ok();
  std::vector<GoldenEntry> entries;
  for (const GoldenShardRecord::Case& done : record.cases) entries.push_back(done.entry);
  MSA_RETURN_IF_ERROR(WriteGoldenManifest(dir, record.msa_version, record.suite, entries));
  fs::remove(record_path, error);
  if (error) return IoError(record_path.string() + ": cannot remove the finished run's record: " + error.message());
  return Status::Ok();
}

}  // namespace msa
