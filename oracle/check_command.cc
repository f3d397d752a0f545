// `msa check`: judge an outside implementation's outputs against the FP64 reference on the same inputs.
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "oracle/cli.h"
#include "oracle/compare.h"
#include "oracle/file_contract.h"
#include "oracle/precision.h"

namespace msa {
namespace {

// Widens a supplied output tensor after checking its shape; `dtype_rule` tells which dtypes are accepted.
Status TakeOutput(const SafetensorsFile& file, const std::string& origin, const char* name,
                  const std::vector<int64_t>& shape, bool integer, std::vector<double>* values) {
  const SafetensorsTensor* tensor = file.Find(name);
  if (tensor->shape != shape) {
    std::string want = "[", got = "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    for (size_t i = 0; i < tensor->shape.size(); ++i) got += (i ? ", " : "") + std::to_string(tensor->shape[i]);
    return InvalidArgument(origin + ": tensor \"" + name + "\" has shape " + got + "]: must be " + want + "]");
  }
  const bool ok_dtype = integer ? (tensor->dtype == DType::kI32 || tensor->dtype == DType::kI64) : IsFloating(tensor->dtype);
  if (!ok_dtype) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" has dtype " + std::string(DTypeName(tensor->dtype)) +
                           (integer ? ": must be I32 or I64" : ": must be F64, F32, BF16 or F16"));
  }
  values->resize(tensor->num_elements());
  for (int64_t i = 0; i < int64_t(values->size()); ++i) (*values)[i] = LoadAsDouble(tensor->bytes.data(), tensor->dtype, i);
  return Status::Ok();
}

Precision PrecisionOfDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return Precision::kFp32;
    case DType::kBF16: return Precision::kBf16;
    case DType::kF16: return Precision::kFp16;
    default: return Precision::kExact;
  }
}

Status ReadCandidate(const std::string& path, const Problem& problem, Candidate* candidate, DType* out_dtype,
                     std::string* their_inputs_sha256) {
  SafetensorsFile file;
  MSA_RETURN_IF_ERROR(ReadSafetensors(path, &file));
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q();
  const int64_t hidx = c.num_kv_heads, hq = c.num_q_heads;
  std::vector<double> values;
  if (file.Find("topk_indices") != nullptr) {
    MSA_RETURN_IF_ERROR(TakeOutput(file, path, "topk_indices", {hidx, total_q, c.top_k}, true, &values));
    std::vector<int32_t> ids(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < -1 || values[i] > INT32_MAX) {
        return InvalidArgument(path + ": topk_indices element " + std::to_string(i) + " = " + std::to_string(int64_t(values[i])) +
                               ": must be a block id or -1");
      }
      ids[i] = int32_t(values[i]);
    }
    candidate->topk_indices = std::move(ids);
  }
  const struct {
    const char* name;
    std::vector<int64_t> shape;
    std::optional<std::vector<double>>* slot;
  } float_outputs[] = {{"out", {total_q, hq, c.value_dim}, &candidate->out},
                       {"lse", {total_q, hq}, &candidate->lse},
                       {"index_lse", {hidx, total_q}, &candidate->index_lse}};
  *out_dtype = DType::kF64;
  for (const auto& output : float_outputs) {
    if (file.Find(output.name) == nullptr) continue;
    MSA_RETURN_IF_ERROR(TakeOutput(file, path, output.name, output.shape, false, &values));
    *output.slot = values;
    const DType dtype = file.Find(output.name)->dtype;
    if (output.slot == &candidate->out || (output.slot == &candidate->lse && !candidate->out)) *out_dtype = dtype;
    if (output.slot != &candidate->out) {  // lse or index_lse: remember the coarsest format they came in
      const Precision stored = PrecisionOfDType(dtype);
      if (SignificandBits(stored) < SignificandBits(candidate->lse_stored_as)) candidate->lse_stored_as = stored;
    }
  }
  if (!candidate->topk_indices && !candidate->out && !candidate->lse && !candidate->index_lse) {
    return InvalidArgument(path + ": supplies none of topk_indices, out, lse, index_lse: nothing to check");
  }
  const auto sha = file.metadata.find("inputs_sha256");
  if (sha != file.metadata.end()) *their_inputs_sha256 = sha->second;
  return Status::Ok();
}

// Writes `text` to path + ".tmp.<pid>" and renames it into place.
Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream file(temporary, std::ios::binary);
    file << text;
    if (!file.flush()) {
      std::remove(temporary.c_str());
      return IoError(path + ": cannot write");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return IoError(path + ": cannot rename " + temporary + " into place");
  }
  return Status::Ok();
}

}  // namespace

int CheckCommand(const CheckOptions& options, const CliStreams& streams) {
  SetThreads(options.threads);
  Precision precision = Precision::kExact;
  if (!options.precision.empty() && !ParsePrecision(options.precision, &precision)) {
    return CliFail(streams, "--precision " + options.precision + ": must be exact, fp32, bf16 or fp16");
  }
  if (!options.json.empty()) {
    if (Status status = CheckOutputPath("--json", options.json); !status.ok()) return CliFail(streams, status.message());
  }
  Problem problem;
  std::string inputs_sha256, their_inputs_sha256;
  if (Status status = LoadProblem(options.inputs, &problem, &inputs_sha256); !status.ok()) {
    return CliFail(streams, status.message());
  }
  Candidate candidate;
  DType out_dtype;
  if (Status status = ReadCandidate(options.outputs, problem, &candidate, &out_dtype, &their_inputs_sha256);
      !status.ok()) {
    return CliFail(streams, status.message());
  }
  if (options.precision.empty()) precision = PrecisionOfDType(out_dtype);

  Outputs reference;
  if (Status status = RunBackend(*FindBackend("reference"), problem, &reference); !status.ok()) {
    return CliFail(streams, status.message());
  }
  JudgeOptions judge_options;
  judge_options.precision = precision;
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
    if (Status status = WriteTextFile(options.json, VerdictToJson(verdict)); !status.ok()) {
      return CliFail(streams, status.message());
    }
  }
  return verdict.passed() ? 0 : 1;
}

}  // namespace msa
