// Golden suites: a directory holding, per case, the inputs and the reference outputs as
// safetensors files (SPEC section 7), and a MANIFEST.json with every case's config, lengths, dtype, seed and
// the SHA-256 of every file. Other implementations read the files; `msa golden verify` recomputes them.
//
// Layout: D/MANIFEST.json, D/<case name>/inputs.safetensors, D/<case name>/outputs.safetensors; a shard's run
// (GenerateGolden with a shard I/N) writes D/SHARD-<I>-of-<N>.json instead of the manifest, and MergeGolden joins
// the shards into the manifest one run writes (oracle/golden_files.h has both formats).
#ifndef MSA_ORACLE_GOLDEN_H_
#define MSA_ORACLE_GOLDEN_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "msa/msa.h"
#include "oracle/cases.h"
#include "oracle/shard.h"

namespace msa {

inline constexpr int kGoldenFormatVersion = 1;
inline constexpr const char* kGoldenManifest = "MANIFEST.json";
inline constexpr const char* kGoldenInputs = "inputs.safetensors";
inline constexpr const char* kGoldenOutputs = "outputs.safetensors";

// The cases of a suite: "smoke" = CanonicalCases() (small), "full" = smoke + LargeCases() (M3-sized as well),
// "dialects" = DialectCases() (the cases the dialect emulations are judged on), "training" = the cases tagged
// kTagTraining (with dout: their outputs hold the backward and the KL), "long" = the cases tagged kTagLong (an M3
// layer over 2^20 keys: 2.4 GB of inputs). False for any other name.
bool GoldenSuite(std::string_view suite, std::vector<TestCase>* cases);
// The suites' names, in that order, and as a message lists them ("smoke, full, dialects, training, long").
inline constexpr const char* kGoldenSuiteNames[] = {"smoke", "full", "dialects", "training", "long"};
std::string GoldenSuiteList();

// What GenerateGolden reports after each case of its shard: `done` of `count` finished, `reused` when a previous
// run's files were kept (resume), and the seconds it took.
struct GoldenCaseEvent {
  int done = 0, count = 0;
  std::string name;
  double seconds = 0;
  bool reused = false;
};
using GoldenCaseDone = std::function<void(const GoldenCaseEvent& event)>;

struct GoldenGenerateOptions {
  Shard shard;                       // the cases whose position p in `cases` has p % count == index
  const Backend* backend = nullptr;  // runs exact mode where it can (else the reference); null: the reference.
                                     // Exact backends give the reference's bits, and the files say "reference"
                                     // whichever ran, so their bytes (and the manifest) do not depend on it; the
                                     // shard record names the backend of each case.
  bool resume = false;               // keep the cases a previous run of this shard recorded, once their files'
                                     // SHA-256 match the record
};

// Writes the shard's cases under `dir` (created with its parents when missing): per case, the inputs and the
// exact outputs, written into a temporary directory renamed into place (a case is complete or absent), then
// dir/SHARD-<I>-of-<N>.json, rewritten after every case (oracle/golden_files.h). The whole run (shard 0/1) then
// writes MANIFEST.json (labelled `suite`) and removes its record; an existing MANIFEST.json is removed first, so
// a failed run never leaves a manifest naming missing files. Other shards are merged by MergeGolden.
// Precondition: case names are distinct.
Status GenerateGolden(const std::string& dir, std::string_view suite, const std::vector<TestCase>& cases,
                      const GoldenGenerateOptions& options = {}, const GoldenCaseDone& on_case = {});

// The record a shard's run leaves in its directory: "SHARD-1-of-3.json".
std::string GoldenShardRecordName(const Shard& shard);

// Merges the complete shard records found in `shard_dirs` into `out_dir`: MANIFEST.json byte-identical to the
// whole run's, each case's directory hard-linked (else copied) into `out_dir` when it lies elsewhere. Refuses,
// naming the records: shards of different msa versions, suites or shard counts, a shard twice (overlap), a
// shard missing, an incomplete shard, a case file whose SHA-256 differs from its record. `summary` says what
// was merged.
Status MergeGolden(const std::string& out_dir, const std::vector<std::string>& shard_dirs, std::string* summary);

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
