#include "oracle/cases.h"

#include <algorithm>
#include <cctype>

namespace msa {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return lower;
}

ProblemSpec Spec(int hq, int hkv, int dim, int block_size, int top_k, int init_blocks, Pooling pooling,
                 std::vector<std::pair<int32_t, int32_t>> lengths, DType dtype, uint64_t seed) {
  ProblemSpec spec;
  Config& c = spec.config;
  c.num_q_heads = hq;
  c.num_kv_heads = hkv;
  c.head_dim = c.value_dim = c.index_head_dim = dim;
  c.block_size = block_size;
  c.top_k = top_k;
  c.init_blocks = init_blocks;
  c.pooling = pooling;
  spec.lengths = std::move(lengths);
  spec.dtype = dtype;
  spec.seed = seed;
  return spec;
}

}  // namespace

std::string CaseName(const std::string& kind, const ProblemSpec& spec) {
  const Config& c = spec.config;
  return kind + "_b" + std::to_string(spec.lengths.size()) + "_hq" + std::to_string(c.num_q_heads) + "_hkv" +
         std::to_string(c.num_kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size) +
         "_k" + std::to_string(c.top_k) + "_i" + std::to_string(c.init_blocks) + "_" +
         std::string(PoolingName(c.pooling)) + "_" + Lower(DTypeName(spec.dtype));
}

std::vector<TestCase> CanonicalCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  constexpr Pooling kMax = Pooling::kMax, kLse = Pooling::kLse, kMean = Pooling::kMean;
  // Prefill at the boundary lengths around Bk = 16: 1, 2, Bk-1, Bk, Bk+1, 2Bk+1, in one ragged batch.
  add("prefill", Spec(4, 2, 32, 16, 3, 0, kMax, {{1, 1}, {2, 2}, {15, 15}, {16, 16}, {17, 17}, {33, 33}},
                      DType::kF64, 1));
  add("prefill", Spec(8, 2, 32, 16, 4, 0, kLse, {{129, 129}}, DType::kF32, 2));
  add("prefill", Spec(8, 2, 32, 16, 4, 0, kMean, {{129, 129}}, DType::kBF16, 3));
  // Chunked prefill: queries are the causal suffix of a longer key sequence.
  add("chunked", Spec(4, 1, 64, 32, 4, 0, kMax, {{64, 200}, {31, 97}}, DType::kBF16, 4));
  // Decode: q_len 1..16 over longer contexts.
  {
    std::vector<std::pair<int32_t, int32_t>> lengths;
    for (int32_t q_len = 1; q_len <= 16; ++q_len) lengths.push_back({q_len, 40 + 23 * q_len});
    add("decode", Spec(8, 2, 16, 8, 5, 0, kMax, lengths, DType::kF16, 5));
  }
  // Ragged batch with an empty sequence and a sequence with no queries.
  add("ragged", Spec(6, 3, 24, 8, 4, 1, kLse, {{0, 0}, {0, 30}, {45, 70}, {9, 9}}, DType::kF64, 6));
  // Init ("sink") blocks forced in.
  add("init", Spec(4, 2, 16, 8, 5, 2, kMax, {{80, 80}}, DType::kF32, 7));
  // Ties: index inputs in {-1, 0, 1}, so many block scores are exactly equal (lowest id wins).
  {
    ProblemSpec spec = Spec(4, 2, 8, 4, 4, 0, kMax, {{60, 60}}, DType::kF64, 8);
    spec.few_valued_index = true;
    add("ties", spec);
    spec.config.pooling = kMean;
    add("ties", spec);
  }
  // Large logits: q and index_q scaled by 100, so |scores| reach about 1e4 and softmax is one-hot.
  {
    ProblemSpec spec = Spec(4, 2, 32, 8, 4, 0, kLse, {{50, 50}}, DType::kF64, 9);
    spec.query_scale = 100.0;
    add("large_logits", spec);
  }
  // M3 shapes (Hq 64, Hkv 4, D 128, Bk 128, top_k 16) in a multi-token decode over 4096 keys.
  add("m3_decode", Spec(64, 4, 128, 128, 16, 0, kMax, {{4, 4096}}, DType::kBF16, 10));
  return cases;
}

}  // namespace msa
