// The one list of test cases (oracle/cases.h): every shape a test, a golden suite or a benchmark runs.
#include <cmath>

#include "oracle/cases.h"

namespace msa {
namespace {

constexpr Pooling kMax = Pooling::kMax, kLse = Pooling::kLse, kMean = Pooling::kMean;
constexpr DType kF64 = DType::kF64, kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;
constexpr ScoreFormat kFp16Scores = ScoreFormat::kFp16;

// The sequences of the forced-block cases: 1 to 10 visible blocks of Bk = 4, so the forced sets overlap each other
// on the short ones and leave room for ranked candidates on the long ones.
const std::vector<std::pair<int32_t, int32_t>> kShortAndLong = {{1, 1}, {4, 4}, {3, 9}, {5, 13}, {2, 21}, {8, 40}};
// A score k * (1 + 2^-11) with |k| a power of two lies halfway between two binary16 values.
const double kMidpointScale = 1 + std::ldexp(1.0, -11);
// Decode batches for the gpu tests: sequences of one query (and one of none) over a single key to thousands, and the
// same mixed with sequences of 3, 5 and 16 queries (q_len 16 over 16 keys among them).
const std::vector<std::pair<int32_t, int32_t>> kGpuDecodeShortAndLong = {
    {1, 1}, {1, 5}, {1, 63}, {1, 64}, {1, 65}, {1, 130}, {0, 90}, {1, 700}, {1, 2000}, {1, 4097}};
const std::vector<std::pair<int32_t, int32_t>> kGpuDecodeMixed = {{1, 1},    {16, 16}, {1, 5},   {16, 700},
                                                                  {0, 90},   {1, 64},  {3, 130}, {16, 2000},
                                                                  {1, 4097}, {5, 5},   {1, 129}, {16, 257}};

std::vector<CaseEntry> BuildList() {
  std::vector<std::pair<int32_t, int32_t>> decode_lengths;  // q_len 1..16 over longer contexts
  for (int32_t q_len = 1; q_len <= 16; ++q_len) decode_lengths.push_back({q_len, 40 + 23 * q_len});
  const uint32_t canonical = kTagCanonical;
  std::vector<std::pair<int32_t, int32_t>> gpu_m3_lists, gpu_m3_batch, gpu_long_decode;
  for (int32_t i = 0; i < 12; ++i) gpu_m3_lists.push_back({1, 128 + 997 * i});
  for (int32_t i = 0; i < 8; ++i) gpu_m3_batch.push_back({i % 3 == 0 ? 16 : 1, 128 + 997 * i});
  for (int32_t q_len = 1; q_len <= 16; ++q_len) gpu_long_decode.push_back({q_len, 8192 + 61 * q_len});
  // One case per entry, its fields packed as a table row.
  // clang-format off
  return {
      // ---- canonical: small, every feature ----
      // Prefill at the boundary lengths around Bk = 16: 1, 2, Bk-1, Bk, Bk+1, 2Bk+1, in one ragged batch.
      {.kind = "prefill", .hq = 4, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 3, .pooling = kMax,
       .lengths = {{1, 1}, {2, 2}, {15, 15}, {16, 16}, {17, 17}, {33, 33}}, .dtype = kF64, .seed = 1, .tags = canonical},
      {.kind = "prefill", .hq = 8, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 4, .pooling = kLse,
       .lengths = {{129, 129}}, .dtype = kF32, .seed = 2, .tags = canonical},
      {.kind = "prefill", .hq = 8, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 4, .pooling = kMean,
       .lengths = {{129, 129}}, .dtype = kBF16, .seed = 3, .tags = canonical},
      // Chunked prefill: queries are the causal suffix of a longer key sequence.
      {.kind = "chunked", .hq = 4, .hkv = 1, .dim = 64, .block_size = 32, .top_k = 4, .pooling = kMax,
       .lengths = {{64, 200}, {31, 97}}, .dtype = kBF16, .seed = 4, .tags = canonical},
      {.kind = "decode", .hq = 8, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 5, .pooling = kMax,
       .lengths = decode_lengths, .dtype = kF16, .seed = 5, .tags = canonical},
      // Ragged batch with an empty sequence and a sequence with no queries.
      {.kind = "ragged", .hq = 6, .hkv = 3, .dim = 24, .block_size = 8, .top_k = 4, .init_blocks = 1, .pooling = kLse,
       .lengths = {{0, 0}, {0, 30}, {45, 70}, {9, 9}}, .dtype = kF64, .seed = 6, .tags = canonical},
      // Init ("sink") blocks forced in.
      {.kind = "init", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 5, .init_blocks = 2, .pooling = kMax,
       .lengths = {{80, 80}}, .dtype = kF32, .seed = 7, .tags = canonical},
      // Several forced local blocks with an init block, over sequences short enough that the forced sets overlap
      // (k_len 5 and 17: one and three blocks) and a chunk past many blocks.
      {.kind = "local", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 6, .init_blocks = 1, .local_blocks = 3,
       .pooling = kMax, .lengths = {{5, 5}, {17, 17}, {24, 90}}, .dtype = kF32, .seed = 13, .tags = canonical},
      {.kind = "local", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 6, .init_blocks = 1, .local_blocks = 2,
       .pooling = kLse, .lengths = {{5, 5}, {17, 17}, {24, 90}}, .dtype = kF32, .seed = 14, .tags = canonical},
      // Ties: index inputs in {-1, 0, 1}, so many block scores are exactly equal (lowest id wins).
      {.kind = "ties", .hq = 4, .hkv = 2, .dim = 8, .block_size = 4, .top_k = 4, .pooling = kMax,
       .lengths = {{60, 60}}, .dtype = kF64, .seed = 8, .few_valued_index = true, .tags = canonical},
      {.kind = "ties", .hq = 4, .hkv = 2, .dim = 8, .block_size = 4, .top_k = 4, .pooling = kMean,
       .lengths = {{60, 60}}, .dtype = kF64, .seed = 8, .few_valued_index = true, .tags = canonical},
      // All-equal scores: q and index_q are zero, so every block ties (the lowest ids win) and attention is
      // uniform over the selected keys.
      {.kind = "ties_equal", .hq = 4, .hkv = 2, .dim = 8, .block_size = 4, .top_k = 4, .pooling = kMax,
       .lengths = {{37, 60}}, .dtype = kF64, .seed = 11, .query_scale = 0.0, .tags = canonical},
      // Large logits: q and index_q scaled by 100, so |scores| reach about 1e4 and softmax is one-hot.
      {.kind = "large_logits", .hq = 4, .hkv = 2, .dim = 32, .block_size = 8, .top_k = 4, .pooling = kLse,
       .lengths = {{50, 50}}, .dtype = kF64, .seed = 9, .query_scale = 100.0, .tags = canonical},
      // M3 shapes (Hq 64, Hkv 4, D 128, Bk 128, top_k 16) in a multi-token decode over 4096 keys.
      {.kind = "m3_decode", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{4, 4096}}, .dtype = kBF16, .seed = 10, .tags = canonical},
      // The fp8 index mode at M3 dims: a prefill past two blocks, a decode and a decode chunk.
      {.kind = "m3_e4m3", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{300, 300}, {1, 5000}, {16, 1100}}, .dtype = kBF16, .seed = 12, .index_format = IndexFormat::kE4M3,
       .tags = canonical},
      // fp16 block scores (the official use_fp16_score) at M3 dims: a prefill past two blocks and a multi-token
      // decode; then few-valued index inputs, whose fp16 scores tie exactly (id order decides).
      {.kind = "m3_fp16_scores", .hq = 16, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{260, 260}, {4, 3000}}, .dtype = kBF16, .seed = 15, .score_format = kFp16Scores, .tags = canonical},
      {.kind = "fp16_scores_ties", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 4, .init_blocks = 1,
       .pooling = kMax, .lengths = {{70, 70}}, .dtype = kF16, .seed = 16, .few_valued_index = true,
       .score_format = kFp16Scores, .tags = canonical},

      // ---- large: the full golden suite; M3 dims with 8 query heads (M3: 64) so the FP64 reference stays quick
      {.kind = "m3_prefill", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{4096, 4096}}, .dtype = kBF16, .seed = 101, .tags = kTagLarge},
      {.kind = "m3_prefill", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kLse,
       .lengths = {{2048, 2048}, {16, 6000}}, .dtype = kF16, .seed = 102, .tags = kTagLarge},
      {.kind = "m3_chunked", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMean,
       .lengths = {{1024, 3000}}, .dtype = kF32, .seed = 103, .tags = kTagLarge},
      // Full M3 heads decoding q_len 1, 7 and 16 over contexts up to 16K keys.
      {.kind = "m3_decode", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{1, 16384}, {7, 2049}, {16, 8191}}, .dtype = kBF16, .seed = 104, .tags = kTagLarge},
      // Large logits (|scores| about 1e4) and few-valued ties at M3 dims.
      {.kind = "m3_large_logits", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{1024, 1024}}, .dtype = kBF16, .seed = 105, .query_scale = 100.0, .tags = kTagLarge},
      {.kind = "m3_ties", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMean,
       .lengths = {{512, 2600}}, .dtype = kF64, .seed = 106, .few_valued_index = true, .tags = kTagLarge},
      // A ragged batch of nine sequences: empty ones, boundary lengths around Bk = 64, decode and chunks.
      {.kind = "ragged", .hq = 8, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 8, .init_blocks = 1, .pooling = kLse,
       .lengths = {{0, 0}, {1, 1}, {63, 63}, {64, 64}, {65, 65}, {16, 1000}, {300, 777}, {0, 500}, {1, 2049}},
       .dtype = kF64, .seed = 107, .tags = kTagLarge},
      // A long chunk of queries over 8K keys with init blocks.
      {.kind = "chunked", .hq = 16, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 12, .init_blocks = 2,
       .pooling = kMax, .lengths = {{512, 8192}}, .dtype = kF16, .seed = 108, .tags = kTagLarge},

      // ---- long: the golden suite "long"; an M3 layer (64 query heads) decoding 16 queries over 2^20 keys
      {.kind = "m3_decode_1m", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{16, 1 << 20}}, .dtype = kBF16, .seed = 111, .tags = kTagLong},

      // ---- dialects (SPEC section 9) ----
      // M3 dims with M3-scaled index scores: a decode batch of q_len 1, 4, 16 over thousands of keys, and a
      // prefill past five blocks.
      {.kind = "dialect_m3_decode", .hq = 16, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{1, 6000}, {4, 3000}, {16, 2500}}, .dtype = kBF16, .seed = 201, .tags = kTagDialects},
      {.kind = "dialect_m3_prefill", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{700, 700}}, .dtype = kBF16, .seed = 202, .tags = kTagDialects},
      // An init block and two forced local blocks (the knobs vLLM and SGLang expose), prefill and a chunk.
      {.kind = "dialect_init_local", .hq = 4, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 6, .init_blocks = 1,
       .local_blocks = 2, .pooling = kMax, .lengths = {{150, 150}, {10, 300}}, .dtype = kBF16, .seed = 203,
       .tags = kTagDialects},
      // Large logits in fp32: what separates pre-scaled q from scale-after-the-dot, and a softmax that keeps its
      // running max from one that does not.
      {.kind = "dialect_large_logits", .hq = 4, .hkv = 2, .dim = 64, .block_size = 16, .top_k = 4, .pooling = kMax,
       .lengths = {{120, 120}}, .dtype = kF32, .seed = 204, .query_scale = 100.0, .tags = kTagDialects},
      // total_q == Hidx (four decode queries, four groups): the shape cannot tell head-major from query-major.
      {.kind = "dialect_square", .hq = 16, .hkv = 4, .dim = 64, .block_size = 32, .top_k = 4, .pooling = kMax,
       .lengths = {{1, 300}, {1, 200}, {1, 150}, {1, 100}}, .dtype = kBF16, .seed = 205, .tags = kTagDialects},
      // fp16 block scores (the official use_fp16_score) at M3 dims.
      {.kind = "dialect_fp16_scores", .hq = 16, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{300, 300}, {4, 2000}}, .dtype = kBF16, .seed = 206, .score_format = kFp16Scores,
       .tags = kTagDialects},
      // A chunked prefill with fp32 inputs (fp32 ports, log2-domain lse).
      {.kind = "dialect_chunked", .hq = 4, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 4, .pooling = kMax,
       .lengths = {{40, 200}, {17, 17}}, .dtype = kF32, .seed = 207, .tags = kTagDialects},

      // ---- forced blocks and fp16 score ties (the simd tests' edge cases) ----
      // local_blocks 2..5 with 0..2 init blocks: the forced sets overlap on the short sequences and leave no room
      // for a ranked candidate where top_k = init + local; every pooling mode, every dtype.
      {.kind = "simd_local_overlap", .dim = 8, .block_size = 4, .top_k = 2, .local_blocks = 2, .pooling = kMax,
       .lengths = kShortAndLong, .dtype = kF64, .seed = 601, .tags = kTagForcedAndFp16},
      {.kind = "simd_local_overlap", .dim = 8, .block_size = 4, .top_k = 6, .init_blocks = 1, .local_blocks = 3,
       .pooling = kMax, .lengths = kShortAndLong, .dtype = kF32, .seed = 602, .tags = kTagForcedAndFp16},
      {.kind = "simd_local_overlap", .dim = 8, .block_size = 4, .top_k = 5, .init_blocks = 2, .local_blocks = 3,
       .pooling = kLse, .lengths = kShortAndLong, .dtype = kBF16, .seed = 603, .tags = kTagForcedAndFp16},
      {.kind = "simd_local_overlap", .dim = 8, .block_size = 4, .top_k = 7, .init_blocks = 1, .local_blocks = 4,
       .pooling = kMean, .lengths = kShortAndLong, .dtype = kF16, .seed = 604, .tags = kTagForcedAndFp16},
      {.kind = "simd_local_overlap", .dim = 8, .block_size = 4, .top_k = 8, .init_blocks = 2, .local_blocks = 5,
       .pooling = kMax, .lengths = kShortAndLong, .dtype = kF32, .seed = 605, .tags = kTagForcedAndFp16},
      // fp16 block scores with ties the binary16 rounding makes or keeps (top_k = 3 + init + local):
      // midpoints: index inputs in {-1, 0, 1} and index_scale 1 + 2^-11 (ties to even; equal k tie exactly);
      {.kind = "simd_fp16_midpoints", .block_size = 4, .top_k = 6, .init_blocks = 1, .local_blocks = 2,
       .pooling = kMax, .lengths = {{40, 40}, {3, 25}}, .dtype = kF32, .seed = 606, .few_valued_index = true,
       .index_scale = kMidpointScale, .score_format = kFp16Scores, .tags = kTagForcedAndFp16},
      {.kind = "simd_fp16_midpoints", .block_size = 4, .top_k = 4, .pooling = kMax, .lengths = {{40, 40}, {3, 25}},
       .dtype = kBF16, .seed = 607, .few_valued_index = true, .index_scale = kMidpointScale,
       .score_format = kFp16Scores, .tags = kTagForcedAndFp16},
      // subnormal: scores around 4e-7, binary16 subnormals 2^-24 apart: distinct scores round to equal ones;
      {.kind = "simd_fp16_subnormal", .block_size = 4, .top_k = 5, .local_blocks = 2, .pooling = kMax,
       .lengths = {{40, 40}, {3, 25}}, .dtype = kF32, .seed = 608, .index_scale = 1e-7, .score_format = kFp16Scores,
       .tags = kTagForcedAndFp16},
      // zeros: scores around 1e-10 round to +0 or -0, which tie (the id decides);
      {.kind = "simd_fp16_zeros", .block_size = 4, .top_k = 5, .init_blocks = 1, .pooling = kMax,
       .lengths = {{40, 40}, {3, 25}}, .dtype = kF16, .seed = 609, .index_scale = 1e-10, .score_format = kFp16Scores,
       .tags = kTagForcedAndFp16},
      // large: scores around a thousand, binary16 values 0.5 to 2 apart.
      {.kind = "simd_fp16_large", .block_size = 4, .top_k = 6, .init_blocks = 1, .local_blocks = 2, .pooling = kMax,
       .lengths = {{40, 40}, {3, 25}}, .dtype = kF32, .seed = 610, .query_scale = 100, .index_scale = 2,
       .score_format = kFp16Scores, .tags = kTagForcedAndFp16},

      // ---- rows of more than 512 selected keys at small dims ----
      {.name = "long_rows_lse", .hq = 8, .hkv = 2, .dim = 32, .block_size = 32, .top_k = 20, .init_blocks = 1,
       .pooling = kLse, .lengths = {{24, 800}, {3, 1000}}, .dtype = kBF16, .seed = 501, .tags = kTagLongRows},
      {.name = "long_rows_mean", .hq = 12, .hkv = 3, .dim = 20, .block_size = 48, .top_k = 14, .pooling = kMean,
       .lengths = {{9, 700}}, .dtype = kF64, .seed = 502, .tags = kTagLongRows},

      // ---- M3-shaped problems for the fast backends ----
      {.name = "m3_prefill_4096", .hq = 16, .hkv = 2, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{4096, 4096}}, .dtype = kBF16, .seed = 201, .tags = kTagM3Size},
      {.name = "m3_chunked_lse", .hq = 16, .hkv = 2, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kLse,
       .lengths = {{1024, 3000}, {16, 5000}}, .dtype = kF16, .seed = 202, .tags = kTagM3Size},
      // Mean pooling with partial local blocks.
      {.name = "m3_mean", .hq = 16, .hkv = 2, .dim = 128, .block_size = 128, .top_k = 16, .init_blocks = 1,
       .pooling = kMean, .lengths = {{777, 2049}, {5, 300}}, .dtype = kF32, .seed = 203, .tags = kTagM3Size},
      {.name = "m3_decode", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{1, 16384}, {7, 2049}, {16, 8191}}, .dtype = kBF16, .seed = 204, .tags = kTagM3Size},
      // Blocks larger than a score chunk (Bk = 300 and 1000): blocks scored in pieces, then merged.
      {.name = "big_blocks_lse", .hq = 8, .hkv = 2, .dim = 64, .block_size = 300, .top_k = 3, .pooling = kLse,
       .lengths = {{900, 1400}}, .dtype = kF32, .seed = 205, .tags = kTagM3Size},
      {.name = "big_blocks_max", .hq = 4, .hkv = 1, .dim = 32, .block_size = 1000, .top_k = 2, .pooling = kMax,
       .lengths = {{300, 2600}}, .dtype = kBF16, .seed = 206, .tags = kTagM3Size},
      // Wide groups (G = 96 and 20): several and padded vectors of heads.
      {.name = "wide_group_96", .hq = 96, .hkv = 1, .dim = 32, .block_size = 64, .top_k = 12, .pooling = kMax,
       .lengths = {{40, 1200}}, .dtype = kF32, .seed = 207, .tags = kTagM3Size},
      {.name = "wide_group_20", .hq = 40, .hkv = 2, .dim = 24, .block_size = 64, .top_k = 10, .init_blocks = 1,
       .pooling = kLse, .lengths = {{30, 900}}, .dtype = kF16, .seed = 208, .tags = kTagM3Size},

      // ---- few rows over long keys: the index tile and the attention rows split over threads ----
      {.name = "decode_split", .hq = 16, .hkv = 2, .dim = 64, .block_size = 32, .top_k = 24, .init_blocks = 1,
       .pooling = kLse, .lengths = {{1, 3000}}, .dtype = kBF16, .seed = 301, .tags = kTagThreadSplit},
      {.name = "decode_split_mean", .hq = 8, .hkv = 1, .dim = 32, .block_size = 16, .top_k = 40, .pooling = kMean,
       .lengths = {{2, 2000}}, .dtype = kF16, .seed = 302, .tags = kTagThreadSplit},
      {.name = "decode_split_short", .hq = 16, .hkv = 2, .dim = 64, .block_size = 32, .top_k = 6, .init_blocks = 1,
       .pooling = kMax, .lengths = {{1, 3000}}, .dtype = kF64, .seed = 304, .tags = kTagThreadSplit},
      {.name = "big_blocks_split", .hq = 4, .hkv = 1, .dim = 32, .block_size = 600, .top_k = 3, .pooling = kLse,
       .lengths = {{2, 4000}}, .dtype = kF32, .seed = 303, .tags = kTagThreadSplit},

      // ---- the CPU benchmark's layer: one M3 GQA group (Hq 16, Hkv 1, D 128, Bk 128, top_k 16), F32 ----
      {.name = "bench_m3_group_8k", .hq = 16, .hkv = 1, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{8192, 8192}}, .dtype = kF32, .seed = 20261130 + 8192, .precision = Precision::kFp32,
       .tags = kTagBench},
      {.name = "bench_m3_group_32k", .hq = 16, .hkv = 1, .dim = 128, .block_size = 128, .top_k = 16,
       .pooling = kMax, .lengths = {{32768, 32768}}, .dtype = kF32, .seed = 20261130 + 32768,
       .precision = Precision::kFp32, .tags = kTagBench},

      // ---- the gpu backend's tests (tests/gpu_*_test.cc): each group steers the planner to one kernel or path ----
      // GatheredAttend: KV-outer and Q-outer both decline. D = Dv = Di = 192 (past 128; GatheredAttend's kDvTiles 32;
      // Di past BlockMaxScores' 128, so max pooling runs in LowpBlockScores): a prefill over 10 blocks and a decode
      // over 32. D = 20 (not a multiple of 8, zero-padded to 32; kDvTiles 4), lse pooling, an init block, 18 heads per
      // group (two head tiles, the second of 2 heads). top_k * Bk = 48 * 128 = 6144 gathered keys at D = 128: past
      // the shared memory Q-outer's layout can have on any current device (kDvTiles 16); top_k 48 ranks with
      // RankFloat, and the queries see 94 and 71 blocks, so the selection still drops blocks.
      {.kind = "lowp_attend_wide", .hq = 8, .hkv = 2, .dim = 192, .block_size = 32, .top_k = 4, .pooling = kMax,
       .lengths = {{300, 300}, {16, 1000}}, .dtype = kBF16, .seed = 201, .tags = kTagGpuGathered},
      {.kind = "lowp_attend_odd_dim", .hq = 36, .hkv = 2, .dim = 20, .block_size = 16, .top_k = 4, .init_blocks = 1,
       .pooling = kLse, .lengths = {{100, 100}, {7, 61}}, .dtype = kF16, .seed = 202, .tags = kTagGpuGathered},
      {.kind = "lowp_attend_many_keys", .hq = 8, .hkv = 2, .dim = 128, .block_size = 128, .top_k = 48,
       .pooling = kMax, .lengths = {{40, 12000}, {1, 9000}}, .dtype = kBF16, .seed = 203, .tags = kTagGpuGathered},
      // Exactly tied block maxima: index inputs in {-1, 0, 1} at Di = 16 make every token score an integer dot
      // (exact in fp32 accumulation, in any order) times index_scale 1/4, so the maxima crowd onto a few integers
      // and most rows hold more blocks at the threshold than the selection has room for. Bk 64, top_k 16 (16-key
      // top-k lists): a 256-query chunk over 64 blocks (two m-tiles per warp) and a 4-query decode over 625 blocks.
      // Bk 128, top_k 33 (32-key lists), an init block, one index head: 47 blocks and 1094 blocks.
      {.kind = "tied_max", .hq = 8, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .pooling = kMax,
       .lengths = {{256, 4096}, {4, 40000}}, .dtype = kBF16, .seed = 301, .few_valued_index = true,
       .tags = kTagGpuTiedBlockMax},
      {.kind = "tied_max", .hq = 4, .hkv = 1, .dim = 16, .block_size = 128, .top_k = 33, .init_blocks = 1,
       .pooling = kMax, .lengths = {{128, 6000}, {2, 140000}}, .dtype = kBF16, .seed = 302, .few_valued_index = true,
       .tags = kTagGpuTiedBlockMax},
      // index_q scaled to about 3e37: the dot products overflow to inf (bf16) or the inputs themselves are inf
      // (fp16); every index kernel must name the same first bad (query, group).
      {.kind = "index_overflow", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{300, 300}, {3, 2000}}, .dtype = kBF16, .seed = 401, .query_scale = 3e37,
       .tags = kTagGpuIndexOverflow},
      // index_scale above 1 (the index kernels' scaled bad-row check): index_scale 4 with every scaled score finite,
      // and index_scale 1e9 over dot products of about 1e31, finite in fp32 but not once scaled (bf16), or index_q
      // inputs past binary16's range (fp16): refused alike.
      {.kind = "index_scale_above_one", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16,
       .pooling = kMax, .lengths = {{300, 300}, {3, 2000}}, .dtype = kBF16, .seed = 402, .index_scale = 4,
       .tags = kTagGpuIndexOverflow},
      {.kind = "index_overflow_by_scale", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16,
       .pooling = kMax, .lengths = {{300, 300}, {3, 2000}}, .dtype = kBF16, .seed = 403, .query_scale = 1e30,
       .index_scale = 1e9, .tags = kTagGpuIndexOverflow},
      // RankTopKThreshold's paths: few rows over many candidates, so a chunk's rows are split over several warps and
      // merged (Bk 64, top_k 16: 2, 8 and 4 rows over 4687, 3125 and 625 blocks), the same with exact ties
      // everywhere (the splits and the merge must keep block id order), Bk 128 with top_k 33 (32-key lists), an init
      // block and one index head; then rows with fewer candidates than the selection takes, with two init blocks.
      {.kind = "topk_split", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .pooling = kMax,
       .lengths = {{1, 300000}, {4, 200000}, {2, 40000}}, .dtype = kBF16, .seed = 501, .tags = kTagGpuTopKSplit},
      {.kind = "topk_split_tied", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .pooling = kMax,
       .lengths = {{1, 300000}, {4, 200000}, {2, 40000}}, .dtype = kBF16, .seed = 502, .few_valued_index = true,
       .tags = kTagGpuTopKSplit},
      {.kind = "topk_split_tied", .hq = 4, .hkv = 1, .dim = 16, .block_size = 128, .top_k = 33, .init_blocks = 1,
       .pooling = kMax, .lengths = {{3, 400000}, {1, 70000}}, .dtype = kBF16, .seed = 503, .few_valued_index = true,
       .tags = kTagGpuTopKSplit},
      {.kind = "topk_short", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .init_blocks = 2,
       .pooling = kMax, .lengths = {{40, 40}, {5, 700}, {3, 130}, {1, 64}}, .dtype = kBF16, .seed = 504,
       .few_valued_index = true, .tags = kTagGpuTopKSplit},
      {.kind = "topk_short", .hq = 4, .hkv = 1, .dim = 16, .block_size = 64, .top_k = 33, .pooling = kMax,
       .lengths = {{70, 1000}, {2, 2100}}, .dtype = kBF16, .seed = 505, .tags = kTagGpuTopKSplit},
      // The KV-outer direct lists: top_k 1 to 32, 0 to 3 init blocks, sequences with fewer blocks than top_k (-1
      // slots, padding tiles), group sizes 1 to 32; M3 heads over 12 sequences of 128 to 11K keys; and a batch with
      // a sequence of 3 queries, where the planner refuses the direct lists.
      {.kind = "decode_lists", .hq = 16, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 8, .init_blocks = 1,
       .pooling = kMax, .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 601, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists", .hq = 8, .hkv = 4, .dim = 32, .block_size = 32, .top_k = 16, .init_blocks = 2,
       .pooling = kMax, .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 602, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists", .hq = 4, .hkv = 4, .dim = 16, .block_size = 16, .top_k = 32, .init_blocks = 3,
       .pooling = kMax, .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 603, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists", .hq = 4, .hkv = 2, .dim = 16, .block_size = 16, .top_k = 1, .pooling = kMax,
       .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 604, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists", .hq = 8, .hkv = 1, .dim = 32, .block_size = 64, .top_k = 16, .pooling = kLse,
       .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 605, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .init_blocks = 1,
       .pooling = kMax, .lengths = gpu_m3_lists, .dtype = kBF16, .seed = 606, .tags = kTagGpuDecodeLists},
      {.kind = "decode_lists_mixed", .hq = 8, .hkv = 2, .dim = 32, .block_size = 32, .top_k = 8, .init_blocks = 1,
       .pooling = kMax, .lengths = {{1, 300}, {3, 200}, {1, 40}, {1, 1000}}, .dtype = kBF16, .seed = 607,
       .tags = kTagGpuDecodeLists},
      // A group of 32 heads: split-k's tile past one m16 row tile (AttendTile on two warps).
      {.kind = "decode_lists", .hq = 64, .hkv = 2, .dim = 32, .block_size = 32, .top_k = 8, .init_blocks = 1,
       .pooling = kMax, .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 608, .tags = kTagGpuDecodeLists},
      // top_k 12: split-k's cluster of 12 CTAs (a non-portable size that is not a power of two).
      {.kind = "decode_lists", .hq = 32, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 12, .init_blocks = 1,
       .pooling = kMax, .lengths = kGpuDecodeShortAndLong, .dtype = kBF16, .seed = 612, .tags = kTagGpuDecodeLists},
      // The batched index branch (one block-max launch and one top-k for a whole decode batch): mixed k_len and
      // q_len 1 to 16, a sequence with no query, init blocks, top_k 8, 16 and 33, Hidx 1 to 4; M3 heads over 8
      // sequences; few rows over thousands of blocks (split top-k lists at their rows' offset in the batch) next to
      // short sequences; and index_q scaled to overflow (both paths name the same first bad row).
      {.kind = "decode_batch", .hq = 8, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 8, .init_blocks = 1,
       .pooling = kMax, .lengths = kGpuDecodeMixed, .dtype = kBF16, .seed = 701, .tags = kTagGpuDecodeBatch},
      {.kind = "decode_batch", .hq = 8, .hkv = 4, .dim = 32, .block_size = 128, .top_k = 16, .init_blocks = 2,
       .pooling = kMax, .lengths = kGpuDecodeMixed, .dtype = kBF16, .seed = 702, .tags = kTagGpuDecodeBatch},
      {.kind = "decode_batch", .hq = 4, .hkv = 1, .dim = 16, .block_size = 64, .top_k = 33, .pooling = kMax,
       .lengths = kGpuDecodeMixed, .dtype = kBF16, .seed = 703, .tags = kTagGpuDecodeBatch},
      {.kind = "decode_batch", .hq = 64, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = gpu_m3_batch, .dtype = kBF16, .seed = 704, .tags = kTagGpuDecodeBatch},
      {.kind = "decode_batch_split", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .init_blocks = 1,
       .pooling = kMax, .lengths = {{1, 300000}, {16, 100000}, {1, 1}, {16, 40}}, .dtype = kBF16, .seed = 705,
       .tags = kTagGpuDecodeBatch},
      {.kind = "decode_batch_overflow", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16,
       .pooling = kMax, .lengths = {{1, 300}, {16, 2000}, {1, 1}}, .dtype = kBF16, .seed = 706, .query_scale = 3e37,
       .tags = kTagGpuDecodeBatch},
      // local_blocks > 1 (SPEC section 2): forced sets that overlap (2 init and 3 local blocks over 1 to 5 blocks),
      // rows with nothing left to rank, rows with more candidates than room, long rows; per-sequence chunks, a decode
      // batch, split top-k lists, exact ties at top_k 33, top_k = init + local (no ranked candidate anywhere), top_k
      // 40 (RankFloat), Bk 16 with lse pooling (LowpBlockScores), and e4m3 index inputs with fp16 scores.
      {.kind = "local_prefill", .hq = 8, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 8, .init_blocks = 2,
       .local_blocks = 3, .pooling = kMax,
       .lengths = {{1, 1}, {5, 5}, {64, 64}, {65, 65}, {130, 130}, {300, 300}, {3, 700}, {64, 3000}},
       .dtype = kBF16, .seed = 801, .tags = kTagGpuLocalBlocks},
      {.kind = "local_decode", .hq = 8, .hkv = 4, .dim = 32, .block_size = 128, .top_k = 8, .init_blocks = 1,
       .local_blocks = 4, .pooling = kMax,
       .lengths = {{1, 1}, {16, 16}, {1, 5}, {16, 700}, {0, 90}, {1, 129}, {3, 385}, {16, 2000}, {1, 4097}, {16, 6000}},
       .dtype = kBF16, .seed = 802, .tags = kTagGpuLocalBlocks},
      {.kind = "local_split", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .init_blocks = 1,
       .local_blocks = 5, .pooling = kMax, .lengths = {{1, 300000}, {2, 40000}}, .dtype = kBF16, .seed = 803,
       .tags = kTagGpuLocalBlocks},
      {.kind = "local_tied", .hq = 4, .hkv = 1, .dim = 16, .block_size = 64, .top_k = 33, .init_blocks = 2,
       .local_blocks = 7, .pooling = kMax, .lengths = {{128, 6000}, {2, 140000}}, .dtype = kBF16, .seed = 804,
       .few_valued_index = true, .tags = kTagGpuLocalBlocks},
      {.kind = "local_all_forced", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 4, .init_blocks = 1,
       .local_blocks = 3, .pooling = kMax, .lengths = {{200, 200}, {1, 5000}}, .dtype = kBF16, .seed = 805,
       .tags = kTagGpuLocalBlocks},
      {.kind = "local_rank_float", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 40, .init_blocks = 3,
       .local_blocks = 6, .pooling = kMax, .lengths = {{1, 6000}, {300, 3000}}, .dtype = kBF16, .seed = 806,
       .tags = kTagGpuLocalBlocks},
      {.kind = "local_lse", .hq = 4, .hkv = 2, .dim = 16, .block_size = 16, .top_k = 6, .init_blocks = 1,
       .local_blocks = 2, .pooling = kLse, .lengths = {{100, 100}, {7, 61}, {1, 500}}, .dtype = kF16, .seed = 807,
       .tags = kTagGpuLocalBlocks},
      {.kind = "local_e4m3_fp16_scores", .hq = 16, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16,
       .local_blocks = 2, .pooling = kMax, .lengths = {{300, 300}, {4, 3000}, {16, 5000}}, .dtype = kBF16,
       .seed = 808, .index_format = IndexFormat::kE4M3, .score_format = kFp16Scores, .tags = kTagGpuLocalBlocks},
      // fp16 block scores at index_scale 1, over shapes for the per-sequence chunks, a decode batch, split top-k
      // lists, top_k 33, Bk 16 and top_k 40 (RankFloat); the test replaces the index inputs by ones whose binary16
      // block maxima tie by construction.
      {.kind = "fp16_ties_prefill", .hq = 8, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 8, .init_blocks = 1,
       .local_blocks = 2, .pooling = kMax, .lengths = {{64, 3000}, {1, 1}, {20, 20}}, .dtype = kBF16, .seed = 901,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      {.kind = "fp16_ties_decode", .hq = 8, .hkv = 4, .dim = 32, .block_size = 128, .top_k = 8, .pooling = kMax,
       .lengths = {{1, 1}, {16, 700}, {1, 4097}, {3, 385}, {16, 2000}, {8, 9000}}, .dtype = kBF16, .seed = 902,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      {.kind = "fp16_ties_split", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 16, .init_blocks = 1,
       .local_blocks = 3, .pooling = kMax, .lengths = {{1, 300000}, {4, 100000}}, .dtype = kBF16, .seed = 903,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      {.kind = "fp16_ties_k33", .hq = 4, .hkv = 1, .dim = 16, .block_size = 128, .top_k = 33, .init_blocks = 2,
       .pooling = kMax, .lengths = {{128, 6000}, {2, 140000}}, .dtype = kBF16, .seed = 904, .index_scale = 1.0,
       .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      {.kind = "fp16_ties_bk16", .hq = 4, .hkv = 2, .dim = 16, .block_size = 16, .top_k = 6, .init_blocks = 1,
       .local_blocks = 2, .pooling = kMax, .lengths = {{40, 2000}, {1, 3000}, {30, 30}}, .dtype = kF16, .seed = 905,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      {.kind = "fp16_ties_k40", .hq = 4, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 40, .init_blocks = 1,
       .local_blocks = 4, .pooling = kMax, .lengths = {{1, 20000}, {70, 3000}}, .dtype = kBF16, .seed = 906,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Ties},
      // fp16 block scores at index_scale 1 over a decode batch; the test writes index inputs that overflow binary16
      // in exactly one (query, group) row.
      {.kind = "fp16_overflow", .hq = 8, .hkv = 2, .dim = 16, .block_size = 64, .top_k = 8, .init_blocks = 1,
       .local_blocks = 2, .pooling = kMax, .lengths = {{1, 300}, {16, 2000}, {1, 1}}, .dtype = kBF16, .seed = 907,
       .index_scale = 1.0, .score_format = kFp16Scores, .tags = kTagGpuFp16Overflow},
      // M3 dims with 16 query heads: one sequence per q_len 1..16, each over 8K+ keys.
      {.kind = "decode_long", .hq = 16, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = gpu_long_decode, .dtype = kBF16, .seed = 77, .tags = kTagGpuLongDecode},
      // Every runnable kernel plan: a prefill with a ragged second sequence, a decode batch (one query per sequence,
      // one sequence without queries), a multi-token decode, rows past 1024 blocks (the threshold top-k's range), lse
      // and mean pooling, e4m3 index inputs, and a top_k * block_size past KV-outer's and Q-outer's limits.
      {.kind = "plan_prefill", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{300, 300}, {3, 2000}}, .dtype = kBF16, .seed = 501, .tags = kTagGpuPlans},
      {.kind = "plan_decode", .hq = 16, .hkv = 4, .dim = 64, .block_size = 64, .top_k = 8, .init_blocks = 1,
       .pooling = kMax, .lengths = {{1, 500}, {1, 3000}, {0, 100}, {1, 64}, {1, 1}}, .dtype = kBF16, .seed = 502,
       .tags = kTagGpuPlans},
      {.kind = "plan_multi_decode", .hq = 8, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 8, .pooling = kMax,
       .lengths = {{4, 900}, {2, 2500}}, .dtype = kBF16, .seed = 503, .tags = kTagGpuPlans},
      {.kind = "plan_long_rows", .hq = 4, .hkv = 2, .dim = 64, .block_size = 64, .top_k = 8, .pooling = kMax,
       .lengths = {{2, 66000}, {1, 70000}}, .dtype = kBF16, .seed = 504, .tags = kTagGpuPlans},
      {.kind = "plan_lse", .hq = 8, .hkv = 4, .dim = 64, .block_size = 64, .top_k = 8, .pooling = kLse,
       .lengths = {{100, 400}}, .dtype = kBF16, .seed = 505, .tags = kTagGpuPlans},
      {.kind = "plan_mean", .hq = 8, .hkv = 4, .dim = 64, .block_size = 64, .top_k = 8, .pooling = kMean,
       .lengths = {{100, 400}}, .dtype = kBF16, .seed = 506, .tags = kTagGpuPlans},
      {.kind = "plan_e4m3", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 16, .pooling = kMax,
       .lengths = {{200, 900}, {1, 700}}, .dtype = kBF16, .seed = 507, .index_format = IndexFormat::kE4M3,
       .tags = kTagGpuPlans},
      {.kind = "plan_wide_top_k", .hq = 8, .hkv = 4, .dim = 64, .block_size = 256, .top_k = 40, .pooling = kMax,
       .lengths = {{40, 9000}}, .dtype = kBF16, .seed = 508, .tags = kTagGpuPlans},
      // M3's group of 16 heads (8 queries a union tile) over enough blocks that some tiles' unions pass the route
      // threshold and others do not; the second sequence starts inside a tile.
      {.kind = "plan_union_tiles", .hq = 16, .hkv = 1, .dim = 64, .block_size = 64, .top_k = 8, .pooling = kMax,
       .lengths = {{597, 2600}, {40, 300}}, .dtype = kBF16, .seed = 509, .tags = kTagGpuPlans},

      // ---- training (SPEC section 8): dout, and dlse on some ----
      {.kind = "train_prefill", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 3, .pooling = kMax,
       .lengths = {{37, 37}}, .dtype = kF64, .seed = 901, .training = true, .with_dlse = true, .tags = kTagTraining},
      {.kind = "train_chunked", .hq = 4, .hkv = 1, .dim = 16, .block_size = 8, .top_k = 4, .pooling = kLse,
       .lengths = {{20, 70}, {7, 23}}, .dtype = kF32, .seed = 902, .training = true, .tags = kTagTraining},
      {.kind = "train_ragged", .hq = 6, .hkv = 3, .dim = 12, .block_size = 4, .top_k = 3, .init_blocks = 1,
       .pooling = kMean, .lengths = {{0, 0}, {0, 9}, {13, 21}, {5, 5}}, .dtype = kBF16, .seed = 903, .training = true,
       .with_dlse = true, .tags = kTagTraining},
      {.kind = "train_gqa", .hq = 8, .hkv = 2, .dim = 32, .block_size = 16, .top_k = 4, .pooling = kMax,
       .lengths = {{96, 96}}, .dtype = kF16, .seed = 904, .training = true, .tags = kTagTraining},
      {.kind = "train_large_logits", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 3, .pooling = kMax,
       .lengths = {{40, 40}}, .dtype = kF64, .seed = 905, .query_scale = 30, .training = true, .tags = kTagTraining},
      {.kind = "train_local", .hq = 4, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 5, .init_blocks = 1,
       .local_blocks = 2, .pooling = kMax, .lengths = {{24, 60}, {6, 6}}, .dtype = kF32, .seed = 906, .training = true,
       .with_dlse = true, .tags = kTagTraining},
      {.kind = "train_decode", .hq = 8, .hkv = 2, .dim = 16, .block_size = 8, .top_k = 4, .pooling = kMax,
       .lengths = {{1, 50}, {2, 51}, {3, 52}, {4, 53}}, .dtype = kF64, .seed = 907, .training = true,
       .tags = kTagTraining},
      {.kind = "train_m3_chunk", .hq = 8, .hkv = 4, .dim = 128, .block_size = 128, .top_k = 4, .pooling = kMax,
       .lengths = {{256, 1024}}, .dtype = kBF16, .seed = 908, .training = true, .tags = kTagTraining},
      // A few dozen elements per tensor: every gradient element is checked against finite differences and MPFR.
      {.kind = "train_tiny", .hq = 4, .hkv = 2, .dim = 6, .block_size = 4, .top_k = 3, .pooling = kMax,
       .lengths = {{5, 11}, {3, 3}}, .dtype = kF64, .seed = 911, .training = true, .with_dlse = true,
       .tags = kTagTrainingTiny},
      {.kind = "train_tiny", .hq = 2, .hkv = 1, .dim = 5, .block_size = 3, .top_k = 2, .init_blocks = 1,
       .pooling = kLse, .lengths = {{4, 10}}, .dtype = kF64, .seed = 912, .training = true, .tags = kTagTrainingTiny},
      {.kind = "train_tiny", .hq = 6, .hkv = 3, .dim = 4, .block_size = 2, .top_k = 3, .local_blocks = 2,
       .pooling = kMean, .lengths = {{3, 7}, {2, 2}}, .dtype = kF64, .seed = 913, .training = true,
       .with_dlse = true, .tags = kTagTrainingTiny},
  };
  // clang-format on
}

}  // namespace

const std::vector<CaseEntry>& CaseList() {
  static const std::vector<CaseEntry> list = BuildList();
  return list;
}

TestCase MakeCase(const CaseEntry& entry) {
  ProblemSpec spec = MakeSpec(entry.hq, entry.hkv, entry.dim, entry.block_size, entry.top_k, entry.init_blocks,
                              entry.pooling, entry.lengths, entry.dtype, entry.seed);
  Config& config = spec.config;
  config.local_blocks = entry.local_blocks;
  config.index_scale = entry.index_scale;
  config.index_format = entry.index_format;
  config.score_format = entry.score_format;
  config.precision = entry.precision;
  spec.query_scale = entry.query_scale;
  spec.few_valued_index = entry.few_valued_index;
  spec.training = entry.training;
  spec.with_dlse = entry.with_dlse;
  std::string name = entry.name != nullptr ? std::string(entry.name) : CaseName(entry.kind, spec);
  return {std::move(name), std::move(spec), entry.tags};
}

std::vector<TestCase> CasesTagged(uint32_t tags) {
  std::vector<TestCase> cases;
  for (const CaseEntry& entry : CaseList()) {
    if ((entry.tags & tags) != 0) cases.push_back(MakeCase(entry));
  }
  return cases;
}

TestCase CaseNamed(uint32_t tags, const std::string& name) {
  for (TestCase& test_case : CasesTagged(tags)) {
    if (test_case.name == name) return test_case;
  }
  return {};
}

}  // namespace msa
