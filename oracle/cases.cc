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

}  // namespace

ProblemSpec MakeSpec(int hq, int hkv, int dim, int block_size, int top_k, int init_blocks, Pooling pooling,
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

std::string CaseName(const std::string& kind, const ProblemSpec& spec) {
  const Config& c = spec.config;
  return kind + "_b" + std::to_string(spec.lengths.size()) + "_hq" + std::to_string(c.num_q_heads) + "_hkv" +
         std::to_string(c.num_kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size) +
         "_k" + std::to_string(c.top_k) + "_i" + std::to_string(c.init_blocks) +
         (c.local_blocks == 1 ? "" : "_l" + std::to_string(c.local_blocks)) + "_" +
         std::string(PoolingName(c.pooling)) + "_" + Lower(DTypeName(spec.dtype));
}

std::vector<TestCase> CanonicalCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  constexpr Pooling kMax = Pooling::kMax, kLse = Pooling::kLse, kMean = Pooling::kMean;
  // Prefill at the boundary lengths around Bk = 16: 1, 2, Bk-1, Bk, Bk+1, 2Bk+1, in one ragged batch.
  add("prefill", MakeSpec(4, 2, 32, 16, 3, 0, kMax, {{1, 1}, {2, 2}, {15, 15}, {16, 16}, {17, 17}, {33, 33}},
                      DType::kF64, 1));
  add("prefill", MakeSpec(8, 2, 32, 16, 4, 0, kLse, {{129, 129}}, DType::kF32, 2));
  add("prefill", MakeSpec(8, 2, 32, 16, 4, 0, kMean, {{129, 129}}, DType::kBF16, 3));
  // Chunked prefill: queries are the causal suffix of a longer key sequence.
  add("chunked", MakeSpec(4, 1, 64, 32, 4, 0, kMax, {{64, 200}, {31, 97}}, DType::kBF16, 4));
  // Decode: q_len 1..16 over longer contexts.
  {
    std::vector<std::pair<int32_t, int32_t>> lengths;
    for (int32_t q_len = 1; q_len <= 16; ++q_len) lengths.push_back({q_len, 40 + 23 * q_len});
    add("decode", MakeSpec(8, 2, 16, 8, 5, 0, kMax, lengths, DType::kF16, 5));
  }
  // Ragged batch with an empty sequence and a sequence with no queries.
  add("ragged", MakeSpec(6, 3, 24, 8, 4, 1, kLse, {{0, 0}, {0, 30}, {45, 70}, {9, 9}}, DType::kF64, 6));
  // Init ("sink") blocks forced in.
  add("init", MakeSpec(4, 2, 16, 8, 5, 2, kMax, {{80, 80}}, DType::kF32, 7));
  // Several forced local blocks (local_blocks 3) with an init block, over sequences short enough that the
  // forced sets overlap (k_len 5 and 17: one and three blocks) and a chunk past many blocks.
  {
    ProblemSpec spec = MakeSpec(4, 2, 16, 8, 6, 1, kMax, {{5, 5}, {17, 17}, {24, 90}}, DType::kF32, 13);
    spec.config.local_blocks = 3;
    add("local", spec);
    spec.config.pooling = kLse;
    spec.config.local_blocks = 2;
    spec.seed = 14;
    add("local", spec);
  }
  // Ties: index inputs in {-1, 0, 1}, so many block scores are exactly equal (lowest id wins).
  {
    ProblemSpec spec = MakeSpec(4, 2, 8, 4, 4, 0, kMax, {{60, 60}}, DType::kF64, 8);
    spec.few_valued_index = true;
    add("ties", spec);
    spec.config.pooling = kMean;
    add("ties", spec);
  }
  // All-equal scores: q and index_q are zero, so every block ties (the lowest ids win) and attention is
  // uniform over the selected keys.
  {
    ProblemSpec spec = MakeSpec(4, 2, 8, 4, 4, 0, kMax, {{37, 60}}, DType::kF64, 11);
    spec.query_scale = 0.0;
    add("ties_equal", spec);
  }
  // Large logits: q and index_q scaled by 100, so |scores| reach about 1e4 and softmax is one-hot.
  {
    ProblemSpec spec = MakeSpec(4, 2, 32, 8, 4, 0, kLse, {{50, 50}}, DType::kF64, 9);
    spec.query_scale = 100.0;
    add("large_logits", spec);
  }
  // M3 shapes (Hq 64, Hkv 4, D 128, Bk 128, top_k 16) in a multi-token decode over 4096 keys.
  add("m3_decode", MakeSpec(64, 4, 128, 128, 16, 0, kMax, {{4, 4096}}, DType::kBF16, 10));
  // The fp8 index mode (index_format e4m3) at M3 dims: a prefill past two blocks, a decode and a decode chunk.
  {
    ProblemSpec spec = MakeSpec(64, 4, 128, 128, 16, 0, kMax, {{300, 300}, {1, 5000}, {16, 1100}}, DType::kBF16, 12);
    spec.config.index_format = IndexFormat::kE4M3;
    add("m3_e4m3", spec);
  }
  // fp16 block scores (score_format fp16, the official use_fp16_score) at M3 dims: a prefill past two blocks
  // and a multi-token decode. Few-valued index inputs make exactly tied fp16 scores (id order decides).
  {
    ProblemSpec spec = MakeSpec(16, 4, 128, 128, 16, 0, kMax, {{260, 260}, {4, 3000}}, DType::kBF16, 15);
    spec.config.score_format = ScoreFormat::kFp16;
    add("m3_fp16_scores", spec);
    spec = MakeSpec(4, 2, 16, 8, 4, 1, kMax, {{70, 70}}, DType::kF16, 16);
    spec.config.score_format = ScoreFormat::kFp16;
    spec.few_valued_index = true;
    add("fp16_scores_ties", spec);
  }
  return cases;
}

std::vector<TestCase> LargeCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  constexpr Pooling kMax = Pooling::kMax, kLse = Pooling::kLse, kMean = Pooling::kMean;
  // M3 dims (D 128, Bk 128, top_k 16, Hkv 4) with 8 query heads (M3: 64) so the FP64 reference stays quick.
  add("m3_prefill", MakeSpec(8, 4, 128, 128, 16, 0, kMax, {{4096, 4096}}, DType::kBF16, 101));
  add("m3_prefill", MakeSpec(8, 4, 128, 128, 16, 0, kLse, {{2048, 2048}, {16, 6000}}, DType::kF16, 102));
  add("m3_chunked", MakeSpec(8, 4, 128, 128, 16, 0, kMean, {{1024, 3000}}, DType::kF32, 103));
  // Full M3 heads decoding q_len 1, 7 and 16 over contexts up to 16K keys.
  add("m3_decode", MakeSpec(64, 4, 128, 128, 16, 0, kMax, {{1, 16384}, {7, 2049}, {16, 8191}}, DType::kBF16, 104));
  // Large logits (|scores| about 1e4) and few-valued ties at M3 dims.
  {
    ProblemSpec spec = MakeSpec(8, 4, 128, 128, 16, 0, kMax, {{1024, 1024}}, DType::kBF16, 105);
    spec.query_scale = 100.0;
    add("m3_large_logits", spec);
  }
  {
    ProblemSpec spec = MakeSpec(8, 4, 128, 128, 16, 0, kMean, {{512, 2600}}, DType::kF64, 106);
    spec.few_valued_index = true;
    add("m3_ties", spec);
  }
  // A ragged batch of nine sequences: empty ones, boundary lengths around Bk = 64, decode and chunks.
  add("ragged", MakeSpec(8, 2, 64, 64, 8, 1, kLse,
                     {{0, 0}, {1, 1}, {63, 63}, {64, 64}, {65, 65}, {16, 1000}, {300, 777}, {0, 500}, {1, 2049}},
                     DType::kF64, 107));
  // A long chunk of queries over 8K keys with init blocks.
  add("chunked", MakeSpec(16, 2, 64, 64, 12, 2, kMax, {{512, 8192}}, DType::kF16, 108));
  return cases;
}

std::vector<TestCase> DialectCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  constexpr Pooling kMax = Pooling::kMax;
  // M3 dims (D = Di = 128, Bk 128, top_k 16, Hidx 4) with M3-scaled index scores: a decode batch of q_len 1, 4, 16
  // over thousands of keys, and a prefill past five blocks.
  add("dialect_m3_decode", MakeSpec(16, 4, 128, 128, 16, 0, kMax, {{1, 6000}, {4, 3000}, {16, 2500}}, DType::kBF16, 201));
  add("dialect_m3_prefill", MakeSpec(8, 4, 128, 128, 16, 0, kMax, {{700, 700}}, DType::kBF16, 202));
  // An init block and two forced local blocks (the knobs vLLM and SGLang expose), prefill and a chunk.
  {
    ProblemSpec spec = MakeSpec(4, 2, 32, 16, 6, 1, kMax, {{150, 150}, {10, 300}}, DType::kBF16, 203);
    spec.config.local_blocks = 2;
    add("dialect_init_local", spec);
  }
  // Large logits (|scores| about 1e4) in fp32: what separates pre-scaled q from scale-after-the-dot, and a
  // softmax that keeps its running max from one that does not.
  {
    ProblemSpec spec = MakeSpec(4, 2, 64, 16, 4, 0, kMax, {{120, 120}}, DType::kF32, 204);
    spec.query_scale = 100.0;
    add("dialect_large_logits", spec);
  }
  // total_q == Hidx (four decode queries, four groups): the shape cannot tell head-major from query-major.
  add("dialect_square", MakeSpec(16, 4, 64, 32, 4, 0, kMax, {{1, 300}, {1, 200}, {1, 150}, {1, 100}}, DType::kBF16, 205));
  // fp16 block scores (the official use_fp16_score) at M3 dims.
  {
    ProblemSpec spec = MakeSpec(16, 4, 128, 128, 16, 0, kMax, {{300, 300}, {4, 2000}}, DType::kBF16, 206);
    spec.config.score_format = ScoreFormat::kFp16;
    add("dialect_fp16_scores", spec);
  }
  // A chunked prefill with fp32 inputs (fp32 ports, log2-domain lse).
  add("dialect_chunked", MakeSpec(4, 2, 32, 16, 4, 0, kMax, {{40, 200}, {17, 17}}, DType::kF32, 207));
  return cases;
}

}  // namespace msa
