// The JSON files of a golden directory (oracle/golden.h), shared by generate, merge and verify:
//   MANIFEST.json          {format, format_version, msa_version, suite, backend, cases: [entry...]}
//   SHARD-<I>-of-<N>.json  a shard's record: the suite's identity, and per finished case its position, its
//                          manifest entry and the backend that computed it; rewritten after every case, so a
//                          killed run leaves a record of what it finished.
// An entry is a case's definition (name, config, lengths, dtype, seed, value options) plus "files": {file name:
// SHA-256}. Internal to the golden code.
#ifndef MSA_ORACLE_GOLDEN_FILES_H_
#define MSA_ORACLE_GOLDEN_FILES_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "msa/status.h"
#include "oracle/cases.h"
#include "oracle/shard.h"

namespace msa {

using GoldenJson = nlohmann::ordered_json;

inline constexpr const char* kGoldenShardFormat = "msa-golden-shard";

// A case's manifest entry without "files".
GoldenJson GoldenCaseDefinition(const TestCase& test_case);
// SHA-256 over the definitions of `cases` in order: two runs with equal hashes generate the same cases.
std::string GoldenSuiteSha256(const std::vector<TestCase>& cases);

struct GoldenFileHash {
  std::string file, sha256;
};
struct GoldenEntry {
  std::string name;
  std::vector<GoldenFileHash> files;
  GoldenJson json;  // the whole entry, as MANIFEST.json lists it
};
// Checks an entry's name (a plain directory name), its files (plain names to 64 lower-case hex digits) and that
// both golden files are listed; `origin` prefixes errors ("MANIFEST.json: cases[3]").
Status ParseGoldenEntry(const GoldenJson& json, const std::string& origin, GoldenEntry* entry);

// The SHA-256 of every file the entry lists under dir/<name>; empty when all match, else a description of each
// missing or changed file.
std::string CheckGoldenFiles(const std::filesystem::path& dir, const GoldenEntry& entry);

struct GoldenShardRecord {
  struct Case {
    int64_t position = 0;     // in the suite's case list
    std::string computed_by;  // the exact backend that ran it
    GoldenEntry entry;
  };
  std::string msa_version, suite, suite_sha256;
  int64_t case_count = 0;  // in the whole suite
  Shard shard;
  bool complete = false;
  std::vector<Case> cases;  // in position order
};

// The records (SHARD-*-of-*.json) in `dir`, by name.
std::vector<std::filesystem::path> FindGoldenShardRecords(const std::filesystem::path& dir);
Status WriteGoldenShardRecord(const std::filesystem::path& path, const GoldenShardRecord& record);
Status ReadGoldenShardRecord(const std::filesystem::path& path, GoldenShardRecord* record);

// Writes dir/MANIFEST.json atomically: the entries in the order given, labelled `suite` and `msa_version`.
Status WriteGoldenManifest(const std::filesystem::path& dir, const std::string& msa_version, const std::string& suite,
                           const std::vector<GoldenEntry>& entries);

}  // namespace msa

#endif  // MSA_ORACLE_GOLDEN_FILES_H_
