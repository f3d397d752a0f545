// The configuration of one MSA layer (SPEC sections 1-3) and its validation.
#ifndef MSA_CONFIG_H_
#define MSA_CONFIG_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "msa/status.h"

namespace msa {

// How a block's token scores become one block score (SPEC section 2).
enum class Pooling {
  kMax,   // MSA: max of the visible token scores ("pool after")
  kLse,   // logsumexp of the visible token scores ("pool after")
  kMean,  // dot with the mean of the block's visible index keys ("pool before", MoBA / Qwen style)
};

// Which arithmetic a backend uses. kExact is the canonical FP64 order of SPEC section 4.
enum class Precision { kExact, kFp32, kBf16, kFp16 };

// The number format of the index branch's inputs. kE4M3: index_q and index_k are rounded (to nearest, ties to
// even) to fp8 E4M3 values (OCP E4M3FN: 3 significand bits after the leading one, exponents -6..8, subnormals
// down to 2^-9, largest finite 448, no infinities) before any backend sees them; the index branch then runs as
// usual on those values, in every precision. Values outside [-448, 448] or not finite are refused.
// SPEC v1 has kNative only.
enum class IndexFormat { kNative, kE4M3 };
inline constexpr double kE4M3Max = 448;

// The number format of the ranked block scores (SPEC sections 2 and 4). kFp16 (the official kernels'
// use_fp16_score; max pooling only): each block's exact max M[b] is rounded to binary16 (nearest, ties to even)
// and ranking uses those values, equal ones by block id ascending; block_scores holds them, and index_lse is the
// logsumexp over the selected blocks of fp16(M[b]) + log(sum of exp(x[s] - M[b]) over the block's visible keys).
// An fp16(M[b]) that overflows binary16 is refused.
enum class ScoreFormat { kNative, kFp16 };

// The one of `values` whose name (name_of(value)) is `name`, into *value; false when none is. What every
// Parse<Enum> below is.
template <typename T, typename NameOf>
bool ParseByName(std::string_view name, std::initializer_list<T> values, NameOf name_of, T* value) {
  for (T candidate : values) {
    if (name_of(candidate) == name) {
      *value = candidate;
      return true;
    }
  }
  return false;
}

std::string_view PoolingName(Pooling pooling);
bool ParsePooling(std::string_view name, Pooling* pooling);
std::string_view PrecisionName(Precision precision);
bool ParsePrecision(std::string_view name, Precision* precision);
std::string_view IndexFormatName(IndexFormat format);  // "native", "e4m3"
bool ParseIndexFormat(std::string_view name, IndexFormat* format);
std::string_view ScoreFormatName(ScoreFormat format);  // "native", "fp16"
bool ParseScoreFormat(std::string_view name, ScoreFormat* format);
// The nearest E4M3 value to a finite x with |x| <= kE4M3Max, ties to even (exact: scaling by powers of two and
// floor only). The sign of zero is kept.
double RoundToE4M3(double x);
// The nearest binary16 value to x, ties to even, rounded once from the double (no detour through float); +-inf
// beyond the binary16 range (|x| >= 65520). What score_format fp16 ranks.
double RoundToBinary16(double x);

struct Config {
  int num_q_heads = 64;      // Hq
  int num_kv_heads = 4;      // Hkv == Hidx: one index-query head per GQA group
  int head_dim = 128;        // D, of q and k
  int value_dim = 128;       // Dv
  int index_head_dim = 128;  // Di, of index_q and index_k
  int block_size = 128;      // Bk, keys per block
  int top_k = 16;            // selected blocks per (query, group), forced blocks included
  int init_blocks = 0;       // "sink" blocks 0..init_blocks-1 always selected (M3: 0)
  int local_blocks = 1;      // the last local_blocks visible blocks always selected, the local block last (M3: 1)
  Pooling pooling = Pooling::kMax;
  std::optional<double> softmax_scale;  // default 1 / sqrt(D)
  std::optional<double> index_scale;    // default 1 / sqrt(Di)
  Precision precision = Precision::kExact;
  IndexFormat index_format = IndexFormat::kNative;
  ScoreFormat score_format = ScoreFormat::kNative;

  int group_size() const { return num_q_heads / num_kv_heads; }  // G
  double SoftmaxScale() const;  // softmax_scale, or 1.0 / sqrt(double(D)) (two IEEE roundings)
  double IndexScale() const;    // index_scale, or 1.0 / sqrt(double(Di))
};

// The largest top_k accepted: 2^20 blocks (a 128M-token context at Bk = 128). Output rows hold top_k slots, so
// an unbounded top_k would let a tiny file ask for any amount of memory.
inline constexpr int kMaxTopK = 1 << 20;

// The refusal of score_format fp16 when a block score of (query, group) overflows binary16: one message for every
// backend.
Status Fp16ScoreOverflow(int64_t query, int64_t group);

// Checks the config alone: positive sizes, Hq % Hkv == 0, 1 <= top_k <= kMaxTopK, local_blocks >= 1 and top_k
// covers the forced blocks (init_blocks + local_blocks), finite scales, score_format fp16 only with max pooling.
Status ValidateConfig(const Config& config);

// The config as the JSON object of the file contract (SPEC section 7): block_size, top_k, init_blocks,
// pooling, softmax_scale, index_scale (scales only when set), precision (only when not exact), index_format
// and score_format (only when not native), local_blocks (only when not 1): a v1 config keeps its bytes. Head counts and
// dims come from the shapes.
std::string ConfigToJson(const Config& config);
std::string DescribeConfig(const Config& config);  // one line for humans

}  // namespace msa

#endif  // MSA_CONFIG_H_
