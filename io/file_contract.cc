#include "io/file_contract.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/sha256.h"

#ifndef MSA_VERSION
#define MSA_VERSION "unknown"
#endif

namespace msa {
namespace {

// A JSON value (or a string, quoted) spelled for a one-line message: escaped, invalid UTF-8 replaced, cut short.
std::string Brief(const nlohmann::json& value) {
  constexpr size_t kMaxChars = 64;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

constexpr const char* kInputTensors = "q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k";

Status TakeFloatTensor(const SafetensorsFile& file, const std::string& origin, const char* name,
                       SafetensorsTensor* tensor) {
  const SafetensorsTensor* found = file.Find(name);
  if (found == nullptr) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" is missing: inputs must hold " + kInputTensors);
  }
  if (found->shape.size() != 3) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" has shape " + ShapeString(found->shape) +
                           ": must be rank 3 [rows, heads, dim]");
  }
  if (!IsFloating(found->dtype)) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" has dtype " + std::string(DTypeName(found->dtype)) +
                           ": must be F64, F32, BF16 or F16");
  }
  // Head counts and dims become int fields of the config: they must fit.
  for (size_t axis = 1; axis < 3; ++axis) {
    if (found->shape[axis] > INT32_MAX) {
      return InvalidArgument(origin + ": tensor \"" + name + "\" has shape " + ShapeString(found->shape) + ": its " +
                             (axis == 1 ? "head count" : "head dim") + " must be at most " + std::to_string(INT32_MAX));
    }
  }
  *tensor = *found;
  return Status::Ok();
}

// Training's optional inputs (SPEC section 7): a float tensor of rank `rank` when present.
Status TakeGradient(const SafetensorsFile& file, const std::string& origin, const char* name, size_t rank,
                    const char* shape_text, std::optional<SafetensorsTensor>* tensor) {
  const SafetensorsTensor* found = file.Find(name);
  if (found == nullptr) return Status::Ok();
  if (found->shape.size() != rank || !IsFloating(found->dtype)) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" is " + std::string(DTypeName(found->dtype)) + " " +
                           ShapeString(found->shape) + ": must be a float tensor " + shape_text);
  }
  *tensor = *found;
  return Status::Ok();
}

Status TakePrefixSums(const SafetensorsFile& file, const std::string& origin, const char* name,
                      std::vector<int32_t>* values) {
  const SafetensorsTensor* found = file.Find(name);
  if (found == nullptr) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" is missing: inputs must hold " + kInputTensors);
  }
  if (found->dtype != DType::kI32 || found->shape.size() != 1) {
    return InvalidArgument(origin + ": tensor \"" + name + "\" is " + std::string(DTypeName(found->dtype)) + " " +
                           ShapeString(found->shape) + ": must be I32 [B+1]");
  }
  values->resize(found->shape[0]);
  std::memcpy(values->data(), found->bytes.data(), found->bytes.size());
  return Status::Ok();
}

Status ReadIntField(const nlohmann::json& json, const std::string& origin, const char* key, bool required, int* value) {
  if (!json.contains(key)) {
    if (!required) return Status::Ok();
    return InvalidArgument(origin + ": msa_config." + key + " is missing");
  }
  const nlohmann::json& field = json[key];
  // An unsigned literal above INT64_MAX must not wrap into range through get<int64_t>().
  const bool fits = field.is_number_unsigned()  ? field.get<uint64_t>() <= uint64_t{INT32_MAX}
                    : field.is_number_integer() ? field.get<int64_t>() >= INT32_MIN && field.get<int64_t>() <= INT32_MAX
                                                : false;
  if (!fits) {
    return InvalidArgument(origin + ": msa_config." + key + " = " + Brief(field) + ": must be a 32-bit integer");
  }
  *value = field.get<int>();
  return Status::Ok();
}

Status ReadScaleField(const nlohmann::json& json, const std::string& origin, const char* key,
                      std::optional<double>* value) {
  if (!json.contains(key) || json[key].is_null()) return Status::Ok();
  if (!json[key].is_number()) {
    return InvalidArgument(origin + ": msa_config." + key + " = " + Brief(json[key]) + ": must be a number");
  }
  *value = json[key].get<double>();
  return Status::Ok();
}

}  // namespace

Status ConfigFromJson(const std::string& text, const std::string& origin, Config* config) {
  // Nothing nested is valid here; refusing deep values while parsing keeps Brief (nlohmann's dump recurses)
  // from overflowing the stack on them.
  constexpr int kMaxDepth = 16;
  bool too_deep = false;
  const nlohmann::json::parser_callback_t limit_depth = [&](int depth, nlohmann::json::parse_event_t event,
                                                            nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      too_deep = true;
      return false;
    }
    return true;
  };
  const nlohmann::json json = nlohmann::json::parse(text, limit_depth, /*allow_exceptions=*/false);
  if (too_deep && !json.is_discarded()) {
    return InvalidArgument(origin + ": __metadata__[\"msa_config\"] nests JSON arrays or objects more than " +
                           std::to_string(kMaxDepth) +
                           " levels deep: must be a flat JSON object (block_size, top_k, "
                           "init_blocks, pooling, ...)");
  }
  if (json.is_discarded() || !json.is_object()) {
    return InvalidArgument(origin + ": __metadata__[\"msa_config\"] = " + Brief(nlohmann::json(text)) +
                           ": must be a JSON object (block_size, top_k, init_blocks, pooling, ...)");
  }
  for (const auto& [key, value] : json.items()) {
    static const char* kKnown[] = {"block_size",    "top_k",       "init_blocks", "local_blocks", "pooling",
                                   "softmax_scale", "index_scale", "precision",   "index_format", "score_format"};
    const std::string& name = key;  // clang 14 cannot capture a structured binding in a lambda
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return name == k; }) ==
        std::end(kKnown)) {
      return InvalidArgument(origin + ": msa_config." + key + " = " + Brief(value) +
                             ": not a known key (known: block_size, top_k, init_blocks, local_blocks, pooling, "
                             "softmax_scale, index_scale, precision, index_format, score_format)");
    }
  }
  MSA_RETURN_IF_ERROR(ReadIntField(json, origin, "block_size", true, &config->block_size));
  MSA_RETURN_IF_ERROR(ReadIntField(json, origin, "top_k", true, &config->top_k));
  MSA_RETURN_IF_ERROR(ReadIntField(json, origin, "init_blocks", false, &config->init_blocks));
  MSA_RETURN_IF_ERROR(ReadIntField(json, origin, "local_blocks", false, &config->local_blocks));
  if (!json.contains("pooling")) return InvalidArgument(origin + ": msa_config.pooling is missing");
  if (!json["pooling"].is_string() || !ParsePooling(json["pooling"].get<std::string>(), &config->pooling)) {
    return InvalidArgument(origin + ": msa_config.pooling = " + Brief(json["pooling"]) +
                           ": must be \"max\", \"lse\" or \"mean\"");
  }
  if (json.contains("precision") &&
      (!json["precision"].is_string() || !ParsePrecision(json["precision"].get<std::string>(), &config->precision))) {
    return InvalidArgument(origin + ": msa_config.precision = " + Brief(json["precision"]) +
                           ": must be \"exact\", \"fp32\", \"bf16\" or \"fp16\"");
  }
  if (json.contains("index_format") &&
      (!json["index_format"].is_string() ||
       !ParseIndexFormat(json["index_format"].get<std::string>(), &config->index_format))) {
    return InvalidArgument(origin + ": msa_config.index_format = " + Brief(json["index_format"]) +
                           ": must be \"native\" or \"e4m3\"");
  }
  if (json.contains("score_format") &&
      (!json["score_format"].is_string() ||
       !ParseScoreFormat(json["score_format"].get<std::string>(), &config->score_format))) {
    return InvalidArgument(origin + ": msa_config.score_format = " + Brief(json["score_format"]) +
                           ": must be \"native\" or \"fp16\"");
  }
  MSA_RETURN_IF_ERROR(ReadScaleField(json, origin, "softmax_scale", &config->softmax_scale));
  MSA_RETURN_IF_ERROR(ReadScaleField(json, origin, "index_scale", &config->index_scale));
  // The config's own rules (block_size >= 1, top_k covers the forced blocks, scales finite and positive),
  // checked with valid stand-in head counts and dims (they come from the shapes later), so that every
  // message here names an msa_config field.
  Config fields = *config;
  fields.num_q_heads = fields.num_kv_heads = fields.head_dim = fields.value_dim = fields.index_head_dim = 1;
  if (Status status = ValidateConfig(fields); !status.ok()) {
    return InvalidArgument(origin + ": msa_config." + status.message());
  }
  return Status::Ok();
}

namespace {

template <typename T>
SafetensorsTensor RawTensor(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<T>& data) {
  SafetensorsTensor tensor;
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.resize(data.size() * sizeof(T));
  std::memcpy(tensor.bytes.data(), data.data(), tensor.bytes.size());
  return tensor;
}

}  // namespace

Status ProblemFromSafetensors(const SafetensorsFile& file, const std::string& origin, Problem* problem) {
  Problem loaded;
  MSA_RETURN_IF_ERROR(TakeFloatTensor(file, origin, "q", &loaded.q));
  MSA_RETURN_IF_ERROR(TakeFloatTensor(file, origin, "k", &loaded.k));
  MSA_RETURN_IF_ERROR(TakeFloatTensor(file, origin, "v", &loaded.v));
  MSA_RETURN_IF_ERROR(TakeFloatTensor(file, origin, "index_q", &loaded.index_q));
  MSA_RETURN_IF_ERROR(TakeFloatTensor(file, origin, "index_k", &loaded.index_k));
  MSA_RETURN_IF_ERROR(TakePrefixSums(file, origin, "cu_seqlens_q", &loaded.cu_seqlens_q));
  MSA_RETURN_IF_ERROR(TakePrefixSums(file, origin, "cu_seqlens_k", &loaded.cu_seqlens_k));
  MSA_RETURN_IF_ERROR(TakeGradient(file, origin, "dout", 3, "[total_q, Hq, Dv]", &loaded.dout));
  MSA_RETURN_IF_ERROR(TakeGradient(file, origin, "dlse", 2, "[total_q, Hq]", &loaded.dlse));
  const auto config_entry = file.metadata.find("msa_config");
  if (config_entry == file.metadata.end()) {
    return InvalidArgument(origin +
                           ": __metadata__[\"msa_config\"] is missing: inputs must carry the config "
                           "(a JSON object with block_size, top_k, init_blocks, pooling)");
  }
  Config& config = loaded.config;
  MSA_RETURN_IF_ERROR(ConfigFromJson(config_entry->second, origin, &config));
  // Head counts and dims come from the shapes (TakeFloatTensor checked that they fit in int);
  // ValidateIndexInputs / ValidateAttentionInputs check them all.
  config.num_q_heads = int(loaded.q.shape[1]);
  config.head_dim = int(loaded.q.shape[2]);
  config.num_kv_heads = int(loaded.k.shape[1]);
  config.value_dim = int(loaded.v.shape[2]);
  config.index_head_dim = int(loaded.index_q.shape[2]);
  *problem = std::move(loaded);
  return Status::Ok();
}

Status LoadProblem(const std::string& path, Problem* problem, std::string* inputs_sha256) {
  SafetensorsFile file;
  MSA_RETURN_IF_ERROR(ReadSafetensors(path, &file));
  MSA_RETURN_IF_ERROR(ProblemFromSafetensors(file, path, problem));
  if (Status status = ValidateProblem(*problem); !status.ok()) {
    return Status(status.code(), path + ": " + status.message());  // a file-content error names the file
  }
  return Sha256OfFile(path, inputs_sha256);
}

SafetensorsFile ProblemToSafetensors(const Problem& problem) {
  SafetensorsFile file;
  file.tensors = {problem.q,
                  problem.k,
                  problem.v,
                  problem.index_q,
                  problem.index_k,
                  RawTensor("cu_seqlens_q", DType::kI32, {int64_t(problem.cu_seqlens_q.size())}, problem.cu_seqlens_q),
                  RawTensor("cu_seqlens_k", DType::kI32, {int64_t(problem.cu_seqlens_k.size())}, problem.cu_seqlens_k)};
  if (problem.dout) file.tensors.push_back(*problem.dout);
  if (problem.dlse) file.tensors.push_back(*problem.dlse);
  file.metadata["msa_config"] = ConfigToJson(problem.config);
  return file;
}

std::string OutputsSha256(const Outputs& outputs) {
  Sha256 hasher;
  hasher.Update(outputs.topk_indices.data(), outputs.topk_indices.size() * sizeof(int32_t));
  for (const std::vector<double>* tensor : {&outputs.block_scores, &outputs.index_lse, &outputs.out, &outputs.lse}) {
    hasher.Update(tensor->data(), tensor->size() * sizeof(double));
  }
  // Training's outputs are empty without dout: a v1 outputs hash keeps its value.
  for (const std::vector<double>* tensor :
       {&outputs.dq, &outputs.dk, &outputs.dv, &outputs.dqi, &outputs.dki, &outputs.kl_loss}) {
    hasher.Update(tensor->data(), tensor->size() * sizeof(double));
  }
  return ToHex(hasher.Finish());
}

SafetensorsFile OutputsToSafetensors(const Problem& problem, const Outputs& outputs, std::string_view backend,
                                     const std::string& inputs_sha256) {
  const Config& c = problem.config;
  const int64_t hidx = c.num_kv_heads, total_q = problem.batch().total_q();
  const int64_t max_blocks = MaxBlocks(c, problem.batch());
  SafetensorsFile file;
  file.tensors = {RawTensor("topk_indices", DType::kI32, {hidx, total_q, c.top_k}, outputs.topk_indices),
                  RawTensor("block_scores", DType::kF64, {hidx, total_q, max_blocks}, outputs.block_scores),
                  RawTensor("index_lse", DType::kF64, {hidx, total_q}, outputs.index_lse),
                  RawTensor("out", DType::kF64, {total_q, c.num_q_heads, c.value_dim}, outputs.out),
                  RawTensor("lse", DType::kF64, {total_q, c.num_q_heads}, outputs.lse)};
  if (outputs.has_training()) {
    const int64_t total_k = problem.batch().total_k();
    file.tensors.insert(file.tensors.end(),
                        {RawTensor("dq", DType::kF64, {total_q, c.num_q_heads, c.head_dim}, outputs.dq),
                         RawTensor("dk", DType::kF64, {total_k, c.num_kv_heads, c.head_dim}, outputs.dk),
                         RawTensor("dv", DType::kF64, {total_k, c.num_kv_heads, c.value_dim}, outputs.dv),
                         RawTensor("dqi", DType::kF64, {total_q, hidx, c.index_head_dim}, outputs.dqi),
                         RawTensor("dki", DType::kF64, {total_k, 1, c.index_head_dim}, outputs.dki),
                         RawTensor("kl_loss", DType::kF64, {}, outputs.kl_loss)});
  }
  Config resolved = c;
  resolved.softmax_scale = c.SoftmaxScale();
  resolved.index_scale = c.IndexScale();
  file.metadata["msa_config"] = ConfigToJson(resolved);
  file.metadata["backend"] = std::string(backend);
  if (!outputs.kernel_plan.empty()) file.metadata["kernel_plan"] = outputs.kernel_plan;
  file.metadata["precision"] = std::string(PrecisionName(c.precision));
  file.metadata["version"] = MSA_VERSION;
  file.metadata["inputs_sha256"] = inputs_sha256;
  file.metadata["outputs_sha256"] = OutputsSha256(outputs);
  return file;
}

}  // namespace msa
