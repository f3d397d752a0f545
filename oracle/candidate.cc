#include "oracle/candidate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace msa {
namespace {

// Widens a supplied output tensor after checking its shape and dtype (integer: I32 or I64, else a float dtype).
Status TakeOutput(const SafetensorsTensor& tensor, const std::string& origin, const std::vector<int64_t>& shape,
                  bool integer, std::vector<double>* values) {
  if (tensor.shape != shape) {
    return InvalidArgument(origin + ": tensor \"" + tensor.name + "\" has shape " + ShapeString(tensor.shape) +
                           ": must be " + ShapeString(shape));
  }
  const bool ok_dtype =
      integer ? (tensor.dtype == DType::kI32 || tensor.dtype == DType::kI64) : IsFloating(tensor.dtype);
  if (!ok_dtype) {
    return InvalidArgument(origin + ": tensor \"" + tensor.name + "\" has dtype " +
                           std::string(DTypeName(tensor.dtype)) +
                           (integer ? ": must be I32 or I64" : ": must be F64, F32, BF16 or F16"));
  }
  values->resize(tensor.num_elements());
  for (int64_t i = 0; i < int64_t(values->size()); ++i)
    (*values)[i] = LoadAsDouble(tensor.bytes.data(), tensor.dtype, i);
  return Status::Ok();
}

Precision PrecisionOfDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Precision::kFp32;
    case DType::kBF16:
      return Precision::kBf16;
    case DType::kF16:
      return Precision::kFp16;
    default:
      return Precision::kExact;
  }
}

// One rule of the candidate's format: the caller's setting when given, else the outputs' __metadata__ key, else
// `fallback`. `parse` reads a name; `names` lists the valid ones for the message.
template <typename T>
Status ChooseRule(const std::string& setting, const CandidateRules& rules, const SafetensorsFile& file, const char* key,
                  const std::string& origin, bool (*parse)(std::string_view, T*), const char* names,
                  const Chosen<T>& fallback, Chosen<T>* chosen) {
  *chosen = fallback;
  if (!setting.empty()) {
    if (!parse(setting, &chosen->value))
      return InvalidArgument(RuleSetting(rules.spell, key, setting) + ": must be " + names);
    chosen->from = rules.spell(key);
    return Status::Ok();
  }
  const auto entry = file.metadata.find(key);
  if (entry == file.metadata.end()) return Status::Ok();
  if (!parse(entry->second, &chosen->value)) {
    return InvalidArgument(origin + ": __metadata__[\"" + key + "\"] = \"" + entry->second + "\": must be " + names);
  }
  chosen->from = std::string("metadata ") + key;
  return Status::Ok();
}

Status ReadTopk(const SafetensorsTensor& topk, const std::string& origin, const Problem& problem,
                const CandidateRules& rules, const Chosen<TopkLayout>& layout, std::vector<int32_t>* ids) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), hidx = c.num_kv_heads;
  const std::vector<int64_t> head_major = {hidx, total_q, c.top_k}, query_major = {total_q, hidx, c.top_k};
  const bool query = layout.value == TopkLayout::kQueryMajor;
  const std::vector<int64_t>& want = query ? query_major : head_major;
  const std::vector<int64_t>& other = query ? head_major : query_major;
  if (topk.shape != want && topk.shape == other) {
    const std::string other_name(TopkLayoutName(query ? TopkLayout::kHeadMajor : TopkLayout::kQueryMajor));
    return InvalidArgument(origin + ": tensor \"topk_indices\" has shape " + ShapeString(topk.shape) + ", the " +
                           other_name + " layout, but the layout is " + std::string(TopkLayoutName(layout.value)) +
                           " (" + layout.from + ", shape " + ShapeString(want) + "): pass " +
                           RuleSetting(rules.spell, "topk_layout", other_name) +
                           " or set __metadata__[\"topk_layout\"]");
  }
  std::vector<double> values;
  MSA_RETURN_IF_ERROR(TakeOutput(topk, origin, want, true, &values));
  ids->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < -1 || values[i] > INT32_MAX) {
      return InvalidArgument(origin + ": topk_indices element " + std::to_string(i) + " = " +
                             std::to_string(int64_t(values[i])) + ": must be a block id or -1");
    }
    (*ids)[i] = int32_t(values[i]);
  }
  return Status::Ok();
}

}  // namespace

Status ReadCandidate(const SafetensorsFile& file, const std::string& origin, const Problem& problem,
                     const CandidateRules& rules, Candidate* candidate, CandidateFormat* format) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), total_k = problem.batch().total_k();
  const int64_t hidx = c.num_kv_heads, hq = c.num_q_heads;
  MSA_RETURN_IF_ERROR(ChooseRule(rules.order, rules, file, "order", origin, &ParseSelectionOrder, "strict or any",
                                 {SelectionOrder::kStrict, "default: the local block in the last valid slot"},
                                 &format->order));
  MSA_RETURN_IF_ERROR(ChooseRule(rules.topk_layout, rules, file, "topk_layout", origin, &ParseTopkLayout,
                                 "head_major or query_major",
                                 {TopkLayout::kHeadMajor, "default: [Hidx, total_q, top_k]"}, &format->topk_layout));
  MSA_RETURN_IF_ERROR(ChooseRule(rules.lse_base, rules, file, "lse_base", origin, &ParseLseBase, "e or 2",
                                 {LseBase::kE, "default: natural log"}, &format->lse_base));

  if (const SafetensorsTensor* topk = file.Find("topk_indices"); topk != nullptr) {
    std::vector<int32_t> ids;
    MSA_RETURN_IF_ERROR(ReadTopk(*topk, origin, problem, rules, format->topk_layout, &ids));
    candidate->topk_indices = std::move(ids);
  }

  Precision forced_precision = Precision::kExact;
  if (!rules.precision.empty() && !ParsePrecision(rules.precision, &forced_precision)) {
    return InvalidArgument(RuleSetting(rules.spell, "precision", rules.precision) +
                           ": must be exact, fp32, bf16 or fp16");
  }
  const struct {
    const char* name;
    std::vector<int64_t> shape;
    std::optional<std::vector<double>>* slot;
    Chosen<Precision>* precision;
  } float_outputs[] = {{"out", {total_q, hq, c.value_dim}, &candidate->out, &format->out},
                       {"lse", {total_q, hq}, &candidate->lse, &format->lse},
                       {"index_lse", {hidx, total_q}, &candidate->index_lse, &format->index_lse},
                       {"dq", {total_q, hq, c.head_dim}, &candidate->dq, &format->dq},
                       {"dk", {total_k, hidx, c.head_dim}, &candidate->dk, &format->dk},
                       {"dv", {total_k, hidx, c.value_dim}, &candidate->dv, &format->dv},
                       {"dqi", {total_q, hidx, c.index_head_dim}, &candidate->dqi, &format->dqi},
                       {"dki", {total_k, 1, c.index_head_dim}, &candidate->dki, &format->dki},
                       {"kl_loss", {}, &candidate->kl_loss, &format->kl_loss}};
  bool all_exact = true, any_float = false;
  std::vector<double> values;
  for (const auto& output : float_outputs) {
    const SafetensorsTensor* tensor = file.Find(output.name);
    if (tensor == nullptr) continue;
    MSA_RETURN_IF_ERROR(TakeOutput(*tensor, origin, output.shape, false, &values));
    *output.slot = values;
    *output.precision =
        rules.precision.empty()
            ? Chosen<Precision>{PrecisionOfDType(tensor->dtype), "its dtype " + std::string(DTypeName(tensor->dtype))}
            : Chosen<Precision>{forced_precision, rules.spell("precision")};
    any_float = true;
    all_exact = all_exact && output.precision->value == Precision::kExact;
  }
  if (!candidate->topk_indices && !any_float) {
    return InvalidArgument(origin +
                           ": supplies none of topk_indices, out, lse, index_lse (nor training's dq, dk, dv, "
                           "dqi, dki, kl_loss): nothing to check");
  }
  const Chosen<Precision> score_default =
      any_float && all_exact
          ? Chosen<Precision>{Precision::kExact, "default for an FP64 candidate"}
          : Chosen<Precision>{Precision::kFp32, any_float ? "default for a non-FP64 candidate: kernels accumulate "
                                                            "index scores in fp32"
                                                          : "default with ids alone: kernels accumulate index scores "
                                                            "in fp32"};
  return ChooseRule(rules.score_precision, rules, file, "score_precision", origin, &ParsePrecision,
                    "exact, fp32, bf16 or fp16", score_default, &format->score);
}

Status CheckCandidate(const Problem& problem, const SafetensorsFile& outputs, const std::string& origin,
                      const CandidateRules& rules, std::optional<double> tau, Verdict* verdict) {
  Candidate candidate;
  CandidateFormat format;
  MSA_RETURN_IF_ERROR(ReadCandidate(outputs, origin, problem, rules, &candidate, &format));
  Outputs reference;
  MSA_RETURN_IF_ERROR(RunReference(problem, &reference));
  JudgeOptions options;
  options.format = format;
  options.exact_bits = false;
  options.tau = tau;
  if (Status status = Judge(problem, reference, candidate, options, verdict); !status.ok()) {
    return Status(status.code(), origin + ": " + status.message());
  }
  return Status::Ok();
}

}  // namespace msa
