// Golden suites: a directory holding, per case, the inputs and the reference outputs as
// safetensors files (SPEC section 7), and a MANIFEST.json with every case's config, lengths, dtype, seed and
// the SHA-256 of every file. Other implementations read the files; `msa golden verify` recomputes them.
//
// Layout: D/MANIFEST.json, D/<case name>/inputs.safetensors, D/<case name>/outputs.safetensors.
#ifndef MSA_ORACLE_GOLDEN_H_
#define MSA_ORACLE_GOLDEN_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "msa/msa.h"
#include "oracle/cases.h"

namespace msa {

inline constexpr int kGoldenFormatVersion = 1;
inline constexpr const char* kGoldenManifest = "MANIFEST.json";
inline constexpr const char* kGoldenInputs = "inputs.safetensors";
inline constexpr const char* kGoldenOutputs = "outputs.safetensors";

// The cases of a suite: "smoke" = CanonicalCases() (small), "full" = smoke + LargeCases() (M3-sized as well),
// "dialects" = DialectCases() (the cases the dialect emulations are judged on), "training" = the cases tagged
// kTagTraining (with dout: their outputs hold the backward and the KL). False for any other name.
bool GoldenSuite(std::string_view suite, std::vector<TestCase>* cases);
// The suites' names, in that order, and as a message lists them ("smoke, full, dialects, training").
inline constexpr const char* kGoldenSuiteNames[] = {"smoke", "full", "dialects", "training"};
std::string GoldenSuiteList();

// Called after each case with its position (0-based), the case count, its name and the seconds it took.
using GoldenCaseDone = std::function<void(int index, int count, const std::string& name, double seconds)>;

// Writes `cases` under `dir` (created with its parents when missing): per case the inputs and the reference
// backend's outputs, then MANIFEST.json (labelled `suite`) last. Every file is written atomically, and an
// existing MANIFEST.json is removed first, so a failed run never leaves a manifest naming missing files.
// Precondition: case names are distinct.
Status GenerateGolden(const std::string& dir, std::string_view suite, const std::vector<TestCase>& cases,
                      const GoldenCaseDone& on_case = {});

struct GoldenCaseResult {
  std::string name;
  bool passed = false;
  std::string reason;  // one line: why it failed, or how it passed
  std::string detail;  // the oracle's report (FormatVerdict) when a judged case failed, else empty
  double seconds = 0;
};

struct GoldenVerifyResult {
  std::string suite;                    // as the manifest records it
  std::vector<GoldenCaseResult> cases;  // in manifest order
  int failed() const;
};

// Verifies the suite in `dir` with `backend` run at `precision`. Per case, in order: the SHA-256 of every
// file the manifest lists (a missing or changed file fails the case), the outputs file's inputs_sha256,
// then the recomputed outputs against the stored ones: bit-identical tensors and outputs_sha256 when
// `precision` is kExact, else msa::Judge (SPEC section 5) with the stored outputs as the reference.
// A non-OK Status means bad input: no readable manifest, a field missing or malformed, or an unavailable
// backend. Failed cases are results, not errors. `on_case` sees each result as it is decided.
Status VerifyGolden(const std::string& dir, const Backend& backend, Precision precision, GoldenVerifyResult* result,
                    const std::function<void(int index, int count, const GoldenCaseResult&)>& on_case = {});

}  // namespace msa

#endif  // MSA_ORACLE_GOLDEN_H_
