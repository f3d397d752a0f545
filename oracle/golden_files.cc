#include "oracle/golden_files.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "io/atomic_file.h"
#include "io/sha256.h"
#include "oracle/golden.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

// A name that stays inside its directory: letters, digits, '.', '_', '-', and not "." or "..".
bool IsPlainName(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// An integer field of `json` in [low, high]; errors name `origin` and the field.
Status IntegerField(const GoldenJson& json, const std::string& origin, const char* field, int64_t low, int64_t high,
                    int64_t* value) {
  if (!json.contains(field) || !json[field].is_number_integer() || json[field].get<int64_t>() < low ||
      json[field].get<int64_t>() > high) {
    return InvalidArgument(origin + "." + field + ": missing, or not an integer in [" + std::to_string(low) + ", " +
                           std::to_string(high) + "]");
  }
  *value = json[field].get<int64_t>();
  return Status::Ok();
}

Status StringField(const GoldenJson& json, const std::string& origin, const char* field, std::string* value) {
  if (!json.contains(field) || !json[field].is_string()) {
    return InvalidArgument(origin + "." + field + ": missing, or not a string");
  }
  *value = json[field].get<std::string>();
  return Status::Ok();
}

}  // namespace

GoldenJson GoldenCaseDefinition(const TestCase& test_case) {
  const ProblemSpec& spec = test_case.spec;
  const Config& c = spec.config;
  GoldenJson config;
  config["num_q_heads"] = c.num_q_heads;
  config["num_kv_heads"] = c.num_kv_heads;
  config["head_dim"] = c.head_dim;
  config["value_dim"] = c.value_dim;
  config["index_head_dim"] = c.index_head_dim;
  config["block_size"] = c.block_size;
  config["top_k"] = c.top_k;
  config["init_blocks"] = c.init_blocks;
  if (c.local_blocks != 1) config["local_blocks"] = c.local_blocks;  // v2 keys only where they differ from v1
  config["pooling"] = std::string(PoolingName(c.pooling));
  if (c.index_format != IndexFormat::kNative) config["index_format"] = std::string(IndexFormatName(c.index_format));
  if (c.score_format != ScoreFormat::kNative) config["score_format"] = std::string(ScoreFormatName(c.score_format));
  config["softmax_scale"] = c.SoftmaxScale();
  config["index_scale"] = c.IndexScale();
  GoldenJson lengths = GoldenJson::array();
  for (const auto& [q_len, k_len] : spec.lengths) lengths.push_back(GoldenJson::array({q_len, k_len}));
  GoldenJson entry;
  entry["name"] = test_case.name;
  entry["config"] = std::move(config);
  entry["lengths"] = std::move(lengths);  // (q_len, k_len) per sequence
  entry["dtype"] = std::string(DTypeName(spec.dtype));
  entry["seed"] = spec.seed;
  entry["query_scale"] = spec.query_scale;
  entry["few_valued_index"] = spec.few_valued_index;
  if (spec.training) {  // training cases only: the manifests of the other suites keep their bytes
    entry["training"] = true;
    entry["with_dlse"] = spec.with_dlse;
  }
  return entry;
}

std::string GoldenSuiteSha256(const std::vector<TestCase>& cases) {
  GoldenJson definitions = GoldenJson::array();
  for (const TestCase& test_case : cases) definitions.push_back(GoldenCaseDefinition(test_case));
  const std::string text = definitions.dump();
  return Sha256Hex(text.data(), text.size());
}

Status ParseGoldenEntry(const GoldenJson& json, const std::string& origin, GoldenEntry* entry) {
  if (!json.is_object()) return InvalidArgument(origin + ": must be an object");
  if (!json.contains("name") || !json["name"].is_string() || !IsPlainName(json["name"].get<std::string>())) {
    return InvalidArgument(origin + ".name: missing, or not a plain directory name (letters, digits, . _ -)");
  }
  entry->name = json["name"].get<std::string>();
  if (!json.contains("files") || !json["files"].is_object()) {
    return InvalidArgument(origin + ".files: missing, or not an object {file name: SHA-256}");
  }
  entry->files.clear();
  for (const auto& [file, hash] : json["files"].items()) {
    if (!IsPlainName(file) || !hash.is_string() || !IsSha256Hex(hash.get<std::string>())) {
      return InvalidArgument(origin + ".files[\"" + file +
                             "\"]: must map a plain file name to 64 lower-case hex digits");
    }
    entry->files.push_back({file, hash.get<std::string>()});
  }
  for (const char* required : {kGoldenInputs, kGoldenOutputs}) {
    if (!json["files"].contains(required)) return InvalidArgument(origin + ".files[\"" + required + "\"] is missing");
  }
  entry->json = json;
  return Status::Ok();
}

std::string CheckGoldenFiles(const fs::path& dir, const GoldenEntry& entry) {
  std::string problems;
  for (const auto& [file, expected] : entry.files) {
    const std::string shown = entry.name + "/" + file;
    const fs::path path = dir / entry.name / file;
    std::error_code error;
    std::string actual, problem;
    if (!fs::is_regular_file(path, error)) {
      problem = shown + " is missing";
    } else if (Status status = Sha256OfFile(path.string(), &actual); !status.ok()) {
      problem = status.message();
    } else if (actual != expected) {
      problem = shown + " is corrupted: its SHA-256 is " + actual + ", the manifest records " + expected;
    }
    if (!problem.empty()) problems += (problems.empty() ? "" : "; ") + problem;
  }
  return problems;
}

std::string GoldenShardRecordName(const Shard& shard) {
  return "SHARD-" + std::to_string(shard.index) + "-of-" + std::to_string(shard.count) + ".json";
}

std::vector<fs::path> FindGoldenShardRecords(const fs::path& dir) {
  std::vector<fs::path> records;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("SHARD-", 0) == 0 && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      records.push_back(it->path());
    }
  }
  std::sort(records.begin(), records.end());
  return records;
}

Status WriteGoldenShardRecord(const fs::path& path, const GoldenShardRecord& record) {
  GoldenJson cases = GoldenJson::array();
  for (const GoldenShardRecord::Case& done : record.cases) {
    cases.push_back({{"position", done.position}, {"computed_by", done.computed_by}, {"entry", done.entry.json}});
  }
  GoldenJson json;
  json["format"] = kGoldenShardFormat;
  json["format_version"] = kGoldenFormatVersion;
  json["msa_version"] = record.msa_version;
  json["suite"] = record.suite;
  json["suite_sha256"] = record.suite_sha256;
  json["case_count"] = record.case_count;
  json["shard_index"] = record.shard.index;
  json["shard_count"] = record.shard.count;
  json["complete"] = record.complete;
  json["cases"] = std::move(cases);
  return WriteFileAtomically(path.string(), json.dump(1) + "\n");
}

Status ReadGoldenShardRecord(const fs::path& path, GoldenShardRecord* record) {
  const std::string origin = path.string();
  std::ifstream file(path, std::ios::binary);
  if (!file) return IoError(origin + ": cannot open: " + std::strerror(errno));
  GoldenJson json;
  try {
    json = GoldenJson::parse(std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>()));
  } catch (const GoldenJson::parse_error& error) {
    return InvalidArgument(origin + ": not valid JSON: " + error.what());
  }
  if (!json.is_object() || !json.contains("format") || json["format"] != kGoldenShardFormat) {
    return InvalidArgument(origin + ": not a shard record (its \"format\" is not \"" + kGoldenShardFormat + "\")");
  }
  int64_t version = 0, index = 0, count = 0;
  MSA_RETURN_IF_ERROR(IntegerField(json, origin, "format_version", 0, 1 << 30, &version));
  if (version != kGoldenFormatVersion) {
    return InvalidArgument(origin + ": format_version = " + std::to_string(version) + ": this msa reads " +
                           std::to_string(kGoldenFormatVersion));
  }
  MSA_RETURN_IF_ERROR(StringField(json, origin, "msa_version", &record->msa_version));
  MSA_RETURN_IF_ERROR(StringField(json, origin, "suite", &record->suite));
  MSA_RETURN_IF_ERROR(StringField(json, origin, "suite_sha256", &record->suite_sha256));
  MSA_RETURN_IF_ERROR(IntegerField(json, origin, "case_count", 1, int64_t(1) << 40, &record->case_count));
  MSA_RETURN_IF_ERROR(IntegerField(json, origin, "shard_count", 1, kMaxShards, &count));
  MSA_RETURN_IF_ERROR(IntegerField(json, origin, "shard_index", 0, count - 1, &index));
  record->shard = Shard{int(index), int(count)};
  if (!json.contains("complete") || !json["complete"].is_boolean()) {
    return InvalidArgument(origin + ".complete: missing, or not true/false");
  }
  record->complete = json["complete"].get<bool>();
  if (!json.contains("cases") || !json["cases"].is_array()) {
    return InvalidArgument(origin + ".cases: missing, or not an array");
  }
  record->cases.clear();
  for (size_t i = 0; i < json["cases"].size(); ++i) {
    const GoldenJson& done = json["cases"][i];
    const std::string where = origin + ": cases[" + std::to_string(i) + "]";
    GoldenShardRecord::Case entry;
    if (!done.is_object()) return InvalidArgument(where + ": must be an object");
    MSA_RETURN_IF_ERROR(IntegerField(done, where, "position", 0, record->case_count - 1, &entry.position));
    MSA_RETURN_IF_ERROR(StringField(done, where, "computed_by", &entry.computed_by));
    if (!done.contains("entry")) return InvalidArgument(where + ".entry: missing");
    MSA_RETURN_IF_ERROR(ParseGoldenEntry(done["entry"], where + ".entry", &entry.entry));
    if (!record->shard.Holds(entry.position)) {
      return InvalidArgument(where + ": case position " + std::to_string(entry.position) + " is not in shard " +
                             record->shard.ToString());
    }
    if (!record->cases.empty() && entry.position <= record->cases.back().position) {
      return InvalidArgument(where + ": positions must increase");
    }
    record->cases.push_back(std::move(entry));
  }
  return Status::Ok();
}

Status WriteGoldenManifest(const fs::path& dir, const std::string& msa_version, const std::string& suite,
                           const std::vector<GoldenEntry>& entries) {
  GoldenJson cases = GoldenJson::array();
  for (const GoldenEntry& entry : entries) cases.push_back(entry.json);
  GoldenJson manifest;
  manifest["format"] = "msa-golden";
  manifest["format_version"] = kGoldenFormatVersion;
  manifest["msa_version"] = msa_version;
  manifest["suite"] = suite;
  manifest["backend"] = "reference";  // the function the outputs are of; exact backends give its bits
  manifest["cases"] = std::move(cases);
  return WriteFileAtomically((dir / kGoldenManifest).string(), manifest.dump(2) + "\n");
}

}  // namespace msa
