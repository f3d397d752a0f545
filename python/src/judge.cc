// mo.check: the caller's inputs and outputs become the two safetensors images `msa check` would read (the same
// bytes it finds in the files dumped on failure), judged by the same code (oracle/candidate.h CheckCandidate).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "io/file_contract.h"
#include "io/sha256.h"
#include "oracle/candidate.h"
#include "python/src/arrays.h"
#include "python/src/gil.h"
#include "python/src/module.h"

namespace msa::python {
namespace {

// The file contract's inputs (SPEC section 7), training's dout and dlse among them.
constexpr const char* kInputNames[] = {"q",    "k",   "v", "index_q", "index_k", "cu_seqlens_q", "cu_seqlens_k",
                                       "dout", "dlse"};
constexpr const char* kRuleNames[] = {"precision", "score_precision", "order", "topk_layout", "lse_base"};
// The rules a candidate's __metadata__ may carry (SPEC section 7): written into a dumped outputs file.
constexpr const char* kMetadataRules[] = {"score_precision", "order", "topk_layout", "lse_base"};

template <size_t N>
std::string Listed(const char* const (&names)[N]) {
  std::string text;
  for (const char* name : names) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

template <size_t N>
bool Known(const std::string& name, const char* const (&names)[N]) {
  for (const char* known : names) {
    if (name == known) return true;
  }
  return false;
}

// The tensors of a dict {name: array} as a safetensors image, names checked against `known`.
template <size_t N>
SafetensorsFile ImageOf(const nb::dict& arrays, const char* what, const char* const (&known)[N]) {
  SafetensorsFile file;
  for (const auto& [key, value] : arrays) {
    const std::string name = nb::cast<std::string>(key);
    if (!Known(name, known)) {
      throw nb::value_error(
          (std::string(what) + ": unknown tensor \"" + name + "\" (known: " + Listed(known) + ")").c_str());
    }
    file.tensors.push_back(ToSafetensors(nb::cast<Array>(value), name));
  }
  return file;
}

// A keyword argument as the judge's reports spell it: "order=".
std::string KeywordSpelling(std::string_view key) { return std::string(key) + "="; }

struct Dumped {
  std::string inputs, outputs;
};

// Writes the two images where `msa check` can read them again: the outputs with the caller's rules as metadata.
Status Dump(const std::string& dir, const SafetensorsFile& inputs, SafetensorsFile outputs, const CandidateRules& rules,
            Dumped* dumped) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create the directory: " + error.message());
  dumped->inputs = (std::filesystem::path(dir) / "inputs.safetensors").string();
  dumped->outputs = (std::filesystem::path(dir) / "outputs.safetensors").string();
  MSA_RETURN_IF_ERROR(WriteSafetensors(dumped->inputs, inputs));
  const std::pair<const char*, const std::string*> settings[] = {{"score_precision", &rules.score_precision},
                                                                 {"order", &rules.order},
                                                                 {"topk_layout", &rules.topk_layout},
                                                                 {"lse_base", &rules.lse_base}};
  static_assert(std::size(settings) == std::size(kMetadataRules));
  for (const auto& [key, value] : settings) {
    if (!value->empty()) outputs.metadata[key] = *value;
  }
  std::string inputs_sha256;
  MSA_RETURN_IF_ERROR(Sha256OfFile(dumped->inputs, &inputs_sha256));
  outputs.metadata["inputs_sha256"] = inputs_sha256;
  return WriteSafetensors(dumped->outputs, outputs);
}

nb::dict CheckBinding(const std::string& config_json, const nb::dict& inputs, const nb::dict& outputs,
                      const nb::dict& rule_settings, std::optional<double> tau, std::optional<std::string> dump_dir) {
  SafetensorsFile input_image = ImageOf(inputs, "inputs", kInputNames);
  input_image.metadata["msa_config"] = config_json;
  const SafetensorsFile output_image = ImageOf(outputs, "outputs", kCandidateOutputNames);
  CandidateRules rules;
  rules.spell = &KeywordSpelling;
  std::string* const settings[] = {&rules.precision, &rules.score_precision, &rules.order, &rules.topk_layout,
                                   &rules.lse_base};
  for (size_t i = 0; i < std::size(kRuleNames); ++i) {
    if (rule_settings.contains(kRuleNames[i])) *settings[i] = nb::cast<std::string>(rule_settings[kRuleNames[i]]);
  }

  Verdict verdict;
  Dumped dumped;
  {
    WithoutGil unlocked;
    Problem problem;
    ThrowIfError(ProblemFromSafetensors(input_image, "inputs", &problem));
    if (Status status = ValidateProblem(problem); !status.ok()) {
      ThrowIfError(Status(status.code(), "inputs: " + status.message()));
    }
    ThrowIfError(CheckCandidate(problem, output_image, "outputs", rules, tau, &verdict));
    if (!verdict.passed() && dump_dir) ThrowIfError(Dump(*dump_dir, input_image, output_image, rules, &dumped));
  }
  nb::dict result;
  result["passed"] = verdict.passed();
  result["report"] = FormatVerdict(verdict, &KeywordSpelling);
  result["json"] = VerdictToJson(verdict);
  result["dumped"] =
      dumped.inputs.empty() ? nb::object(nb::none()) : nb::object(nb::make_tuple(dumped.inputs, dumped.outputs));
  return result;
}

}  // namespace

void AddJudgeFunctions(nb::module_& m) {
  m.def("check", &CheckBinding, "config_json"_a, "inputs"_a, "outputs"_a, "rules"_a, "tau"_a.none(),
        "dump_dir"_a.none());
}

}  // namespace msa::python
