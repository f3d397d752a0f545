#include "msa/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "msa/tensor.h"

namespace msa {

std::string_view PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kMax:
      return "max";
    case Pooling::kLse:
      return "lse";
    case Pooling::kMean:
      return "mean";
  }
  return "?";
}

bool ParsePooling(std::string_view name, Pooling* pooling) {
  return ParseByName(name, {Pooling::kMax, Pooling::kLse, Pooling::kMean}, PoolingName, pooling);
}

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kExact:
      return "exact";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

bool ParsePrecision(std::string_view name, Precision* precision) {
  return ParseByName(name, {Precision::kExact, Precision::kFp32, Precision::kBf16, Precision::kFp16}, PrecisionName,
                     precision);
}

std::string_view IndexFormatName(IndexFormat format) { return format == IndexFormat::kE4M3 ? "e4m3" : "native"; }

bool ParseIndexFormat(std::string_view name, IndexFormat* format) {
  return ParseByName(name, {IndexFormat::kNative, IndexFormat::kE4M3}, IndexFormatName, format);
}

std::string_view ScoreFormatName(ScoreFormat format) { return format == ScoreFormat::kFp16 ? "fp16" : "native"; }

bool ParseScoreFormat(std::string_view name, ScoreFormat* format) {
  return ParseByName(name, {ScoreFormat::kNative, ScoreFormat::kFp16}, ScoreFormatName, format);
}

double RoundToE4M3(double x) {
  const double magnitude = std::fabs(x);
  if (magnitude == 0) return x;
  int exponent = 0;  // magnitude = f * 2^exponent, f in [0.5, 1): the leading bit has weight 2^(exponent - 1)
  std::frexp(magnitude, &exponent);
  // 3 significand bits after the leading one in the normal range (leading weight >= 2^-6), steps of 2^-9 below.
  const int step_exponent = std::max(exponent - 1, -6) - 3;
  const double steps = std::ldexp(magnitude, -step_exponent);  // exact: a power-of-two scaling
  double whole = std::floor(steps);
  const double fraction = steps - whole;  // exact: whole and steps share the binade's spacing or finer
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(whole, 2.0) != 0)) whole += 1;
  return std::copysign(std::ldexp(whole, step_exponent), x);
}

double RoundToBinary16(double x) { return F16ToDouble(DoubleToF16(x)); }

// 1 / sqrt(n): sqrt and division are correctly rounded IEEE operations, so this is the same everywhere.
static double InverseSqrt(int n) { return 1.0 / std::sqrt(double(n)); }

double Config::SoftmaxScale() const { return softmax_scale ? *softmax_scale : InverseSqrt(head_dim); }
double Config::IndexScale() const { return index_scale ? *index_scale : InverseSqrt(index_head_dim); }

namespace {

Status RequirePositive(const char* field, int value) {
  if (value >= 1) return Status::Ok();
  return InvalidArgument(std::string(field) + " = " + std::to_string(value) + ": must be at least 1");
}

// The shortest text that reads back as `value` ("0.5", "-1e-300", "nan", "inf").
std::string ShortestText(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

Status RequireFiniteScale(const char* field, const std::optional<double>& scale) {
  if (!scale || (std::isfinite(*scale) && *scale > 0)) return Status::Ok();
  return InvalidArgument(std::string(field) + " = " + ShortestText(*scale) + ": must be finite and positive");
}

}  // namespace

Status Fp16ScoreOverflow(int64_t query, int64_t group) {
  return InvalidArgument("block score of query " + std::to_string(query) + ", group " + std::to_string(group) +
                         " overflows binary16 (|score| >= 65520): score_format fp16 cannot represent it");
}

Status ValidateConfig(const Config& config) {
  MSA_RETURN_IF_ERROR(RequirePositive("num_q_heads (Hq)", config.num_q_heads));
  MSA_RETURN_IF_ERROR(RequirePositive("num_kv_heads (Hkv)", config.num_kv_heads));
  MSA_RETURN_IF_ERROR(RequirePositive("head_dim (D)", config.head_dim));
  MSA_RETURN_IF_ERROR(RequirePositive("value_dim (Dv)", config.value_dim));
  MSA_RETURN_IF_ERROR(RequirePositive("index_head_dim (Di)", config.index_head_dim));
  MSA_RETURN_IF_ERROR(RequirePositive("block_size", config.block_size));
  MSA_RETURN_IF_ERROR(RequirePositive("top_k", config.top_k));
  if (config.top_k > kMaxTopK) {
    return InvalidArgument("top_k = " + std::to_string(config.top_k) + ": must be at most " + std::to_string(kMaxTopK) +
                           " (every output row holds top_k slots; a top_k of at least "
                           "the visible blocks already selects everything)");
  }
  if (config.num_q_heads % config.num_kv_heads != 0) {
    return InvalidArgument("num_q_heads (Hq) = " + std::to_string(config.num_q_heads) +
                           ": must be a multiple of num_kv_heads (Hkv) = " + std::to_string(config.num_kv_heads) +
                           " (GQA: G = Hq / Hkv query heads share one kv head)");
  }
  if (config.init_blocks < 0) {
    return InvalidArgument("init_blocks = " + std::to_string(config.init_blocks) + ": must be at least 0");
  }
  MSA_RETURN_IF_ERROR(RequirePositive("local_blocks", config.local_blocks));
  const int64_t forced = int64_t{config.init_blocks} + config.local_blocks;  // no int overflow
  if (config.top_k < forced) {
    return InvalidArgument("top_k = " + std::to_string(config.top_k) + ": must be at least init_blocks + " +
                           "local_blocks = " + std::to_string(forced) +
                           " (the forced blocks: " + std::to_string(config.init_blocks) + " init blocks and " +
                           (config.local_blocks == 1 ? std::string("the local block")
                                                     : std::to_string(config.local_blocks) + " local blocks") +
                           ")");
  }
  if (config.score_format == ScoreFormat::kFp16 && config.pooling != Pooling::kMax) {
    return InvalidArgument("score_format = fp16 with pooling = " + std::string(PoolingName(config.pooling)) +
                           ": fp16 block scores are defined for max pooling only");
  }
  MSA_RETURN_IF_ERROR(RequireFiniteScale("softmax_scale", config.softmax_scale));
  MSA_RETURN_IF_ERROR(RequireFiniteScale("index_scale", config.index_scale));
  return Status::Ok();
}

std::string ConfigToJson(const Config& config) {
  nlohmann::ordered_json json;
  json["block_size"] = config.block_size;
  json["top_k"] = config.top_k;
  json["init_blocks"] = config.init_blocks;
  json["pooling"] = PoolingName(config.pooling);
  if (config.softmax_scale) json["softmax_scale"] = *config.softmax_scale;
  if (config.index_scale) json["index_scale"] = *config.index_scale;
  // exact is the default: files of exact-mode problems keep the contract's keys only.
  if (config.precision != Precision::kExact) json["precision"] = PrecisionName(config.precision);
  if (config.index_format != IndexFormat::kNative) json["index_format"] = IndexFormatName(config.index_format);
  if (config.score_format != ScoreFormat::kNative) json["score_format"] = ScoreFormatName(config.score_format);
  if (config.local_blocks != 1) json["local_blocks"] = config.local_blocks;
  return json.dump();
}

std::string DescribeConfig(const Config& config) {
  return "Hq=" + std::to_string(config.num_q_heads) + " Hkv=Hidx=" + std::to_string(config.num_kv_heads) +
         " D=" + std::to_string(config.head_dim) + " Dv=" + std::to_string(config.value_dim) +
         " Di=" + std::to_string(config.index_head_dim) + " Bk=" + std::to_string(config.block_size) +
         " top_k=" + std::to_string(config.top_k) + " init_blocks=" + std::to_string(config.init_blocks) +
         (config.local_blocks == 1 ? "" : " local_blocks=" + std::to_string(config.local_blocks)) +
         " pooling=" + std::string(PoolingName(config.pooling)) +
         " precision=" + std::string(PrecisionName(config.precision)) +
         (config.index_format == IndexFormat::kNative
              ? ""
              : " index_format=" + std::string(IndexFormatName(config.index_format))) +
         (config.score_format == ScoreFormat::kNative
              ? ""
              : " score_format=" + std::string(ScoreFormatName(config.score_format)));
}

}  // namespace msa
