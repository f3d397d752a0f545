// `msa check`: judge an outside implementation's outputs against the FP64 reference on the same inputs.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"
#include "io/file_contract.h"
#include "oracle/compare.h"
#include "oracle/precision.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

// Each empty rule option takes the outputs' __metadata__ key of the same name, else its default (SPEC section 5).
struct CheckOptions {
  std::string inputs;
  std::string outputs;
  std::string precision;        // every float output judged at it; empty: each at its own dtype (F64 exact, ...)
  std::string score_precision;  // the arithmetic of their ranked scores; default exact for an FP64 candidate, else fp32
  std::string order;            // strict | any (default strict)
  std::string topk_layout;      // head_major | query_major (default head_major)
  std::string lse_base;         // e | 2 (default e)
  std::optional<double> tau;
  std::string json;  // empty: no JSON report
  int threads = 0;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Widens a supplied output tensor after checking its shape and dtype (integer: I32 or I64, else a float dtype).
Status TakeOutput(const SafetensorsTensor& tensor, const std::string& origin, const std::vector<int64_t>& shape,
                  bool integer, std::vector<double>* values) {
  if (tensor.shape != shape) {
    return InvalidArgument(origin + ": tensor \"" + tensor.name + "\" has shape " + ShapeText(tensor.shape) +
                           ": must be " + ShapeText(shape));
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

// One rule of the candidate's format: the flag when given, else the outputs' __metadata__ key, else `fallback`.
// `parse` reads a name; `names` lists the valid ones for the message.
template <typename T>
Status ChooseRule(const std::string& flag_value, const char* flag, const SafetensorsFile& file, const char* key,
                  const std::string& origin, bool (*parse)(std::string_view, T*), const char* names,
                  const Chosen<T>& fallback, Chosen<T>* chosen) {
  *chosen = fallback;
  if (!flag_value.empty()) {
    if (!parse(flag_value, &chosen->value))
      return InvalidArgument(std::string(flag) + " " + flag_value + ": must be " + names);
    chosen->from = flag;
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

// Reads their outputs file into `candidate` and the rules its format sets into `format`.
Status ReadCandidate(const CheckOptions& options, const Problem& problem, Candidate* candidate, CandidateFormat* format,
                     std::string* their_inputs_sha256) {
  const std::string& path = options.outputs;
  SafetensorsFile file;
  MSA_RETURN_IF_ERROR(ReadSafetensors(path, &file));
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q();
  const int64_t hidx = c.num_kv_heads, hq = c.num_q_heads;
  MSA_RETURN_IF_ERROR(ChooseRule(options.order, "--order", file, "order", path, &ParseSelectionOrder, "strict or any",
                                 {SelectionOrder::kStrict, "default: the local block in the last valid slot"},
                                 &format->order));
  MSA_RETURN_IF_ERROR(ChooseRule(options.topk_layout, "--topk-layout", file, "topk_layout", path, &ParseTopkLayout,
                                 "head_major or query_major",
                                 {TopkLayout::kHeadMajor, "default: [Hidx, total_q, top_k]"}, &format->topk_layout));
  MSA_RETURN_IF_ERROR(ChooseRule(options.lse_base, "--lse-base", file, "lse_base", path, &ParseLseBase, "e or 2",
                                 {LseBase::kE, "default: natural log"}, &format->lse_base));

  std::vector<double> values;
  if (const SafetensorsTensor* topk = file.Find("topk_indices"); topk != nullptr) {
    const std::vector<int64_t> head_major = {hidx, total_q, c.top_k}, query_major = {total_q, hidx, c.top_k};
    const bool query = format->topk_layout.value == TopkLayout::kQueryMajor;
    const std::vector<int64_t>& want = query ? query_major : head_major;
    const std::vector<int64_t>& other = query ? head_major : query_major;
    if (topk->shape != want && topk->shape == other) {
      const std::string other_name(TopkLayoutName(query ? TopkLayout::kHeadMajor : TopkLayout::kQueryMajor));
      return InvalidArgument(path + ": tensor \"topk_indices\" has shape " + ShapeText(topk->shape) + ", the " +
                             other_name + " layout, but the layout is " +
                             std::string(TopkLayoutName(format->topk_layout.value)) + " (" + format->topk_layout.from +
                             ", shape " + ShapeText(want) + "): pass --topk-layout " + other_name +
                             " or set __metadata__[\"topk_layout\"]");
    }
    MSA_RETURN_IF_ERROR(TakeOutput(*topk, path, want, true, &values));
    std::vector<int32_t> ids(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < -1 || values[i] > INT32_MAX) {
        return InvalidArgument(path + ": topk_indices element " + std::to_string(i) + " = " +
                               std::to_string(int64_t(values[i])) + ": must be a block id or -1");
      }
      ids[i] = int32_t(values[i]);
    }
    candidate->topk_indices = std::move(ids);
  }

  Precision forced_precision = Precision::kExact;
  if (!options.precision.empty() && !ParsePrecision(options.precision, &forced_precision)) {
    return InvalidArgument("--precision " + options.precision + ": must be exact, fp32, bf16 or fp16");
  }
  const struct {
    const char* name;
    std::vector<int64_t> shape;
    std::optional<std::vector<double>>* slot;
    Chosen<Precision>* precision;
  } float_outputs[] = {{"out", {total_q, hq, c.value_dim}, &candidate->out, &format->out},
                       {"lse", {total_q, hq}, &candidate->lse, &format->lse},
                       {"index_lse", {hidx, total_q}, &candidate->index_lse, &format->index_lse}};
  bool all_exact = true, any_float = false;
  for (const auto& output : float_outputs) {
    const SafetensorsTensor* tensor = file.Find(output.name);
    if (tensor == nullptr) continue;
    MSA_RETURN_IF_ERROR(TakeOutput(*tensor, path, output.shape, false, &values));
    *output.slot = values;
    *output.precision =
        options.precision.empty()
            ? Chosen<Precision>{PrecisionOfDType(tensor->dtype), "its dtype " + std::string(DTypeName(tensor->dtype))}
            : Chosen<Precision>{forced_precision, "--precision"};
    any_float = true;
    all_exact = all_exact && output.precision->value == Precision::kExact;
  }
  if (!candidate->topk_indices && !any_float) {
    return InvalidArgument(path + ": supplies none of topk_indices, out, lse, index_lse: nothing to check");
  }
  const Chosen<Precision> score_default =
      any_float && all_exact
          ? Chosen<Precision>{Precision::kExact, "default for an FP64 candidate"}
          : Chosen<Precision>{Precision::kFp32, any_float ? "default for a non-FP64 candidate: kernels accumulate "
                                                            "index scores in fp32"
                                                          : "default with ids alone: kernels accumulate index scores "
                                                            "in fp32"};
  MSA_RETURN_IF_ERROR(ChooseRule(options.score_precision, "--score-precision", file, "score_precision", path,
                                 &ParsePrecision, "exact, fp32, bf16 or fp16", score_default, &format->score));
  const auto sha = file.metadata.find("inputs_sha256");
  if (sha != file.metadata.end()) *their_inputs_sha256 = sha->second;
  return Status::Ok();
}

int CheckCommand(const CheckOptions& options, const CliStreams& streams) {
  SetThreads(options.threads);
  if (!options.json.empty()) {
    if (Status status = CheckOutputPath("--json", options.json); !status.ok())
      return CliFail(streams, status.message());
  }
  Problem problem;
  std::string inputs_sha256, their_inputs_sha256;
  if (Status status = LoadProblem(options.inputs, &problem, &inputs_sha256); !status.ok()) {
    return CliFail(streams, status.message());
  }
  Candidate candidate;
  CandidateFormat format;
  if (Status status = ReadCandidate(options, problem, &candidate, &format, &their_inputs_sha256); !status.ok()) {
    return CliFail(streams, status.message());
  }

  Outputs reference;
  if (Status status = RunReference(problem, &reference); !status.ok()) return CliFail(streams, status.message());
  JudgeOptions judge_options;
  judge_options.format = format;
  judge_options.exact_bits = false;  // an outside FP64 implementation may sum in any order
  judge_options.tau = options.tau;
  Verdict verdict;
  if (Status status = Judge(problem, reference, candidate, judge_options, &verdict); !status.ok()) {
    return CliFail(streams, options.outputs + ": " + status.message());
  }

  streams.out << "msa check: " << options.outputs << " against the FP64 reference on " << options.inputs << "\n";
  if (!their_inputs_sha256.empty() && their_inputs_sha256 != inputs_sha256) {
    streams.out << "  note: the outputs record inputs_sha256 " << their_inputs_sha256 << ", but " << options.inputs
                << " hashes to " << inputs_sha256 << "\n";
  }
  streams.out << FormatVerdict(verdict);
  if (!options.json.empty()) {
    if (Status status = WriteFileAtomically(options.json, VerdictToJson(verdict)); !status.ok()) {
      return CliFail(streams, status.message());
    }
  }
  return verdict.passed() ? 0 : 1;
}

}  // namespace

void AddCheckCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<CheckOptions>();
  CLI::App* command =
      app.add_subcommand("check",
                         "Judge an implementation's outputs (any subset of topk_indices, out, lse, index_lse) against "
                         "the FP64 reference computed on the same inputs. Exit 0 pass, 1 fail, 2 bad input");
  command->add_option("--inputs", options->inputs, "inputs file (safetensors, file contract v1)")->required();
  command->add_option("--outputs", options->outputs, "their outputs file (safetensors)")->required();
  command->add_option("--precision", options->precision,
                      "exact | fp32 | bf16 | fp16: judge every float output at it (default: each at its own "
                      "dtype, F64 exact, F32 fp32, BF16 bf16, F16 fp16)");
  command->add_option("--score-precision", options->score_precision,
                      "exact | fp32 | bf16 | fp16: the arithmetic of their ranked index scores, which sets tau "
                      "(default: metadata score_precision, else exact for an all-F64 candidate, else fp32: "
                      "kernels accumulate index scores in fp32)");
  command->add_option("--order", options->order,
                      "strict | any: strict wants the local block in the last valid slot, any reads the valid "
                      "prefix as a set (default: metadata order, else strict)");
  command->add_option("--topk-layout", options->topk_layout,
                      "head_major [Hidx, total_q, top_k] | query_major [total_q, Hidx, top_k] (default: "
                      "metadata topk_layout, else head_major)");
  command->add_option("--lse-base", options->lse_base,
                      "e | 2: the base of their lse and index_lse (default: metadata lse_base, else e)");
  command->add_option("--tau", options->tau, "selection tolerance (default: from a naive evaluation)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--json", options->json, "also write the report as JSON to this file");
  AddThreadsOption(command, &options->threads);
  command->callback(
      [options, &streams, action] { *action = [options, &streams] { return CheckCommand(*options, streams); }; });
}

}  // namespace msa
