#include "oracle/golden.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/file_contract.h"
#include "io/sha256.h"
#include "oracle/compare.h"

#ifndef MSA_VERSION
#define MSA_VERSION "unknown"
#endif

namespace msa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// ---- generate -------------------------------------------------------------------------------------------

// The manifest entry of one case: what made it (config, lengths, dtype, seed, value options) and its files.
Json ManifestEntry(const TestCase& test_case, const std::string& inputs_sha256, const std::string& outputs_sha256) {
  const ProblemSpec& spec = test_case.spec;
  const Config& c = spec.config;
  Json config;
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
  Json lengths = Json::array();
  for (const auto& [q_len, k_len] : spec.lengths) lengths.push_back(Json::array({q_len, k_len}));
  Json entry;
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
  entry["files"] = {{kGoldenInputs, inputs_sha256}, {kGoldenOutputs, outputs_sha256}};
  return entry;
}

// Writes dir/<name>/inputs.safetensors and outputs.safetensors (the reference's) and returns the entry.
Status GenerateCase(const fs::path& dir, const TestCase& test_case, Json* entry) {
  const fs::path case_dir = dir / test_case.name;
  std::error_code error;
  fs::create_directories(case_dir, error);
  if (error) return IoError(case_dir.string() + ": cannot create the directory: " + error.message());
  const Problem problem = GenerateProblem(test_case.spec);
  const std::string inputs_path = (case_dir / kGoldenInputs).string();
  const std::string outputs_path = (case_dir / kGoldenOutputs).string();
  std::string inputs_sha256, outputs_sha256;
  MSA_RETURN_IF_ERROR(WriteSafetensors(inputs_path, ProblemToSafetensors(problem)));
  MSA_RETURN_IF_ERROR(Sha256OfFile(inputs_path, &inputs_sha256));
  const Backend& reference = *FindBackend("reference");
  Outputs outputs;
  if (Status status = RunBackend(reference, problem, &outputs); !status.ok()) {
    return Status(status.code(), test_case.name + ": " + status.message());
  }
  MSA_RETURN_IF_ERROR(
      WriteSafetensors(outputs_path, OutputsToSafetensors(problem, outputs, reference.name, inputs_sha256)));
  MSA_RETURN_IF_ERROR(Sha256OfFile(outputs_path, &outputs_sha256));
  *entry = ManifestEntry(test_case, inputs_sha256, outputs_sha256);
  return Status::Ok();
}

// ---- the manifest, read back ----------------------------------------------------------------------------

struct ManifestCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> files;  // (file name, SHA-256 hex)
};

struct Manifest {
  std::string suite;
  std::vector<ManifestCase> cases;
};

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

Status ParseManifestCase(const Json& json, const std::string& origin, ManifestCase* entry) {
  if (!json.is_object()) return InvalidArgument(origin + ": must be an object");
  if (!json.contains("name") || !json["name"].is_string() || !IsPlainName(json["name"].get<std::string>())) {
    return InvalidArgument(origin + ".name: missing, or not a plain directory name (letters, digits, . _ -)");
  }
  entry->name = json["name"].get<std::string>();
  if (!json.contains("files") || !json["files"].is_object()) {
    return InvalidArgument(origin + ".files: missing, or not an object {file name: SHA-256}");
  }
  for (const auto& [file, hash] : json["files"].items()) {
    if (!IsPlainName(file) || !hash.is_string() || !IsSha256Hex(hash.get<std::string>())) {
      return InvalidArgument(origin + ".files[\"" + file +
                             "\"]: must map a plain file name to 64 lower-case hex digits");
    }
    entry->files.emplace_back(file, hash.get<std::string>());
  }
  for (const char* required : {kGoldenInputs, kGoldenOutputs}) {
    if (!json["files"].contains(required)) return InvalidArgument(origin + ".files[\"" + required + "\"] is missing");
  }
  return Status::Ok();
}

Status ReadManifest(const fs::path& dir, Manifest* manifest) {
  const std::string path = (dir / kGoldenManifest).string();
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return IoError(path + ": cannot open: " + std::strerror(errno) +
                   " (--dir must be a directory written by msa golden generate)");
  }
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& error) {
    return InvalidArgument(path + ": not valid JSON: " + error.what());
  }
  if (!json.is_object()) return InvalidArgument(path + ": must be a JSON object");
  const std::string version = json.contains("format_version") ? json["format_version"].dump() : "(missing)";
  if (version != std::to_string(kGoldenFormatVersion)) {
    return InvalidArgument(path + ": format_version = " + version + ": this msa reads format_version " +
                           std::to_string(kGoldenFormatVersion));
  }
  if (!json.contains("suite") || !json["suite"].is_string()) {
    return InvalidArgument(path + ": suite: missing, or not a string");
  }
  if (!json.contains("cases") || !json["cases"].is_array() || json["cases"].empty()) {
    return InvalidArgument(path + ": cases: missing, or not a non-empty array");
  }
  manifest->suite = json["suite"].get<std::string>();
  std::set<std::string> names;
  for (size_t i = 0; i < json["cases"].size(); ++i) {
    ManifestCase entry;
    MSA_RETURN_IF_ERROR(ParseManifestCase(json["cases"][i], path + ": cases[" + std::to_string(i) + "]", &entry));
    if (!names.insert(entry.name).second) return InvalidArgument(path + ": case " + entry.name + " is listed twice");
    manifest->cases.push_back(std::move(entry));
  }
  return Status::Ok();
}

// ---- verify ---------------------------------------------------------------------------------------------

// Where two same-shaped tensors differ bitwise: the count and the first element with both values.
std::string DescribeDifference(const SafetensorsTensor& stored, const SafetensorsTensor& recomputed) {
  const int64_t size = DTypeSize(stored.dtype), count = stored.num_elements();
  int64_t differing = 0, first = -1;
  for (int64_t e = 0; e < count; ++e) {
    if (std::memcmp(&stored.bytes[e * size], &recomputed.bytes[e * size], size) == 0) continue;
    if (differing++ == 0) first = e;
  }
  std::vector<int64_t> index(stored.shape.size());  // `first` as a C-order position in the shape
  int64_t rest = first;
  for (size_t axis = index.size(); axis-- > 0;) {
    index[axis] = rest % stored.shape[axis];
    rest /= stored.shape[axis];
  }
  return stored.name + ": " + std::to_string(differing) + " of " + std::to_string(count) +
         " elements differ, first at " + ShapeString(index) + ": " +
         Format("%.17g", LoadAsDouble(recomputed.bytes.data(), stored.dtype, first)) + " recomputed, " +
         Format("%.17g", LoadAsDouble(stored.bytes.data(), stored.dtype, first)) + " stored";
}

std::string Metadata(const SafetensorsFile& file, const std::string& key) {
  const auto entry = file.metadata.find(key);
  return entry == file.metadata.end() ? "(none)" : entry->second;
}

// Exact precision: every tensor and the outputs_sha256 of the recomputed file equal the stored ones.
void CompareBits(const SafetensorsFile& stored, const SafetensorsFile& recomputed, GoldenCaseResult* result) {
  for (const SafetensorsTensor& tensor : recomputed.tensors) {
    const SafetensorsTensor* old = stored.Find(tensor.name);
    if (old == nullptr) {
      result->reason = std::string(kGoldenOutputs) + " has no tensor " + tensor.name;
      return;
    }
    if (old->dtype != tensor.dtype || old->shape != tensor.shape) {
      result->reason = tensor.name + ": stored " + std::string(DTypeName(old->dtype)) + " " + ShapeString(old->shape) +
                       ", recomputed " + std::string(DTypeName(tensor.dtype)) + " " + ShapeString(tensor.shape);
      return;
    }
    if (old->bytes != tensor.bytes) {
      result->reason = DescribeDifference(*old, tensor);
      return;
    }
  }
  const std::string stored_hash = Metadata(stored, "outputs_sha256");
  const std::string recomputed_hash = Metadata(recomputed, "outputs_sha256");
  if (stored_hash != recomputed_hash) {
    result->reason = "outputs_sha256 " + recomputed_hash + " recomputed, " + stored_hash + " stored";
    return;
  }
  result->passed = true;
  result->reason = "bit-identical (outputs_sha256 " + recomputed_hash.substr(0, 16) + "...)";
}

// The stored reference outputs of `problem`, checked for names, dtypes and sizes.
Status StoredOutputs(const SafetensorsFile& file, const Problem& problem, Outputs* outputs) {
  outputs->Allocate(problem);
  const auto take = [&file](const char* name, DType dtype, void* data, size_t bytes) {
    const SafetensorsTensor* tensor = file.Find(name);
    if (tensor == nullptr || tensor->dtype != dtype || tensor->bytes.size() != bytes) {
      return InvalidArgument(std::string(kGoldenOutputs) + ": tensor " + name + " is missing or not " +
                             std::string(DTypeName(dtype)) + " of the inputs' shape");
    }
    std::memcpy(data, tensor->bytes.data(), bytes);
    return Status::Ok();
  };
  MSA_RETURN_IF_ERROR(
      take("topk_indices", DType::kI32, outputs->topk_indices.data(), outputs->topk_indices.size() * sizeof(int32_t)));
  const std::pair<const char*, std::vector<double>*> tensors[] = {{"block_scores", &outputs->block_scores},
                                                                  {"index_lse", &outputs->index_lse},
                                                                  {"out", &outputs->out},
                                                                  {"lse", &outputs->lse}};
  for (const auto& [name, values] : tensors) {
    MSA_RETURN_IF_ERROR(take(name, DType::kF64, values->data(), values->size() * sizeof(double)));
  }
  return Status::Ok();
}

// One line on a verdict: the selection's row counts and each tensor's worst error against its bound.
std::string SummarizeVerdict(const Verdict& verdict) {
  std::string text = "judged at " + std::string(PrecisionName(verdict.format.out.value)) + " (scores " +
                     std::string(PrecisionName(verdict.format.score.value)) + "):";
  const SelectionVerdict& s = verdict.selection;
  if (s.judged) {
    text += " selection " + std::to_string(s.identical_rows) + "/" + std::to_string(s.rows) + " rows identical, " +
            std::to_string(s.near_tie_rows) + " near-tie, " + std::to_string(s.violation_rows) + " violating, " +
            std::to_string(s.invalid_rows) + " invalid;";
  }
  for (const TensorVerdict& t : verdict.tensors) {
    if (!t.judged) continue;
    text += " " + t.name + " max error " + Format("%.3g", t.max_error) + " (bound " + Format("%.3g", t.bound) + ")" +
            (t.passed ? "" : " FAILED: " + std::to_string(t.mismatches) + " over") + ";";
  }
  text.pop_back();
  return text;
}

// Other precisions: msa::Judge with the stored outputs as the FP64 reference.
void JudgeAgainstStored(const Problem& problem, const SafetensorsFile& stored, Outputs recomputed, Precision precision,
                        GoldenCaseResult* result) {
  Outputs reference;
  if (Status status = StoredOutputs(stored, problem, &reference); !status.ok()) {
    result->reason = status.message();
    return;
  }
  Candidate candidate;
  candidate.topk_indices = std::move(recomputed.topk_indices);
  candidate.out = std::move(recomputed.out);
  candidate.lse = std::move(recomputed.lse);
  candidate.index_lse = std::move(recomputed.index_lse);
  JudgeOptions options;
  options.precision = precision;
  Verdict verdict;
  if (Status status = Judge(problem, reference, candidate, options, &verdict); !status.ok()) {
    result->reason = status.message();
    return;
  }
  result->passed = verdict.passed();
  result->reason = SummarizeVerdict(verdict);
  if (!result->passed) result->detail = FormatVerdict(verdict);
}

// The SHA-256 of every listed file; a description of each missing or changed one.
std::string CheckFileHashes(const fs::path& dir, const ManifestCase& entry) {
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
      problem = shown + " is corrupted: its SHA-256 is " + actual + ", MANIFEST.json records " + expected;
    }
    if (!problem.empty()) problems += (problems.empty() ? "" : "; ") + problem;
  }
  return problems;
}

void VerifyCase(const fs::path& dir, const ManifestCase& entry, const Backend& backend, Precision precision,
                GoldenCaseResult* result) {
  result->reason = CheckFileHashes(dir, entry);
  if (!result->reason.empty()) return;
  const fs::path case_dir = dir / entry.name;
  Problem problem;
  std::string inputs_sha256;
  SafetensorsFile stored;
  if (Status status = LoadProblem((case_dir / kGoldenInputs).string(), &problem, &inputs_sha256); !status.ok()) {
    result->reason = status.message();
    return;
  }
  if (Status status = ReadSafetensors((case_dir / kGoldenOutputs).string(), &stored); !status.ok()) {
    result->reason = status.message();
    return;
  }
  if (Metadata(stored, "inputs_sha256") != inputs_sha256) {
    result->reason = std::string(kGoldenOutputs) + " records inputs_sha256 " + Metadata(stored, "inputs_sha256") +
                     ", but " + kGoldenInputs + " has " + inputs_sha256;
    return;
  }
  problem.config.precision = precision;
  Outputs recomputed;
  if (Status status = RunBackend(backend, problem, &recomputed); !status.ok()) {
    result->reason = "backend " + std::string(backend.name) + ": " + status.message();
    return;
  }
  if (precision == Precision::kExact) {
    CompareBits(stored, OutputsToSafetensors(problem, recomputed, backend.name, inputs_sha256), result);
  } else {
    JudgeAgainstStored(problem, stored, std::move(recomputed), precision, result);
  }
}

}  // namespace

std::string GoldenSuiteList() {
  std::string list;
  for (const char* name : kGoldenSuiteNames) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

bool GoldenSuite(std::string_view suite, std::vector<TestCase>* cases) {
  if (suite == "dialects") {
    *cases = DialectCases();
    return true;
  }
  if (suite == "training") {
    *cases = CasesTagged(kTagTraining);
    return true;
  }
  if (suite != "smoke" && suite != "full") return false;
  *cases = CanonicalCases();
  if (suite == "full") {
    for (TestCase& test_case : LargeCases()) cases->push_back(std::move(test_case));
  }
  return true;
}

Status GenerateGolden(const std::string& dir, std::string_view suite, const std::vector<TestCase>& cases,
                      const GoldenCaseDone& on_case) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create the directory: " + error.message());
  const fs::path manifest_path = fs::path(dir) / kGoldenManifest;
  fs::remove(manifest_path, error);
  if (error) return IoError(manifest_path.string() + ": cannot remove the old manifest: " + error.message());
  Json entries = Json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Clock::time_point start = Clock::now();
    Json entry;
    MSA_RETURN_IF_ERROR(GenerateCase(dir, cases[i], &entry));
    entries.push_back(std::move(entry));
    if (on_case) on_case(int(i), int(cases.size()), cases[i].name, SecondsSince(start));
  }
  Json manifest;
  manifest["format"] = "msa-golden";
  manifest["format_version"] = kGoldenFormatVersion;
  manifest["msa_version"] = MSA_VERSION;
  manifest["suite"] = std::string(suite);
  manifest["backend"] = "reference";
  manifest["cases"] = std::move(entries);
  return WriteFileAtomically(manifest_path.string(), manifest.dump(2) + "\n");
}

int GoldenVerifyResult::failed() const {
  int count = 0;
  for (const GoldenCaseResult& result : cases) count += result.passed ? 0 : 1;
  return count;
}

Status VerifyGolden(const std::string& dir, const Backend& backend, Precision precision, GoldenVerifyResult* result,
                    const std::function<void(int index, int count, const GoldenCaseResult&)>& on_case) {
  if (!backend.is_available()) {
    return Unsupported("backend " + std::string(backend.name) + " is compiled in but not available on this machine");
  }
  Manifest manifest;
  MSA_RETURN_IF_ERROR(ReadManifest(dir, &manifest));
  result->suite = manifest.suite;
  result->cases.clear();
  for (size_t i = 0; i < manifest.cases.size(); ++i) {
    const Clock::time_point start = Clock::now();
    GoldenCaseResult case_result;
    case_result.name = manifest.cases[i].name;
    VerifyCase(dir, manifest.cases[i], backend, precision, &case_result);
    case_result.seconds = SecondsSince(start);
    result->cases.push_back(std::move(case_result));
    if (on_case) on_case(int(i), int(manifest.cases.size()), result->cases.back());
  }
  return Status::Ok();
}

}  // namespace msa
