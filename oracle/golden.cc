#include "oracle/golden.h"

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

#include "io/file_contract.h"
#include "io/sha256.h"
#include "oracle/compare.h"
#include "oracle/golden_files.h"

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

// ---- the manifest, read back ----------------------------------------------------------------------------

struct Manifest {
  std::string suite;
  std::vector<GoldenEntry> cases;
};

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
    GoldenEntry entry;
    MSA_RETURN_IF_ERROR(ParseGoldenEntry(json["cases"][i], path + ": cases[" + std::to_string(i) + "]", &entry));
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

void VerifyCase(const fs::path& dir, const GoldenEntry& entry, const Backend& backend, Precision precision,
                GoldenCaseResult* result) {
  result->reason = CheckGoldenFiles(dir, entry);
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
  // Each suite: the cases of each tag in turn, in case-list order within each.
  struct SuiteParts {
    const char* name;
    uint32_t parts[2];
  };
  static constexpr SuiteParts kSuites[] = {{"smoke", {kTagCanonical, 0}},
                                           {"full", {kTagCanonical, kTagLarge}},
                                           {"dialects", {kTagDialects, 0}},
                                           {"training", {kTagTraining, 0}},
                                           {"long", {kTagLong, 0}}};
  static_assert(std::size(kSuites) == std::size(kGoldenSuiteNames));
  for (const SuiteParts& definition : kSuites) {
    if (suite != definition.name) continue;
    cases->clear();
    for (const uint32_t tag : definition.parts) {
      if (tag == 0) continue;
      for (TestCase& test_case : CasesTagged(tag)) cases->push_back(std::move(test_case));
    }
    return true;
  }
  return false;
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
