// Hand-worked cases for the reference: every expected value below is derived in the comment beside it,
// from SPEC sections 2-3, never from running the code.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/problem.h"
#include "reference/reference.h"

namespace msa {
namespace {

const Backend& Reference() { return *FindBackend("reference"); }

// One decode query (q_len = 1) over k_len keys, one head everywhere, D = Dv = Di = 1, index_q = 1 and
// index_scale = 1, so the token score of key s is exactly index_k[s].
Problem ScalarScoreProblem(const std::vector<double>& index_k, int block_size, int top_k, Pooling pooling,
                           int init_blocks = 0, int local_blocks = 1, ScoreFormat score_format = ScoreFormat::kNative) {
  ProblemSpec spec;
  spec.config.num_q_heads = spec.config.num_kv_heads = 1;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 1;
  spec.config.block_size = block_size;
  spec.config.top_k = top_k;
  spec.config.init_blocks = init_blocks;
  spec.config.local_blocks = local_blocks;
  spec.config.score_format = score_format;
  spec.config.pooling = pooling;
  spec.config.index_scale = 1.0;
  spec.lengths = {{1, int32_t(index_k.size())}};
  Problem problem = GenerateProblem(spec);
  SetElement(problem.index_q, 0, 0, 0, 1.0);
  for (size_t s = 0; s < index_k.size(); ++s) SetElement(problem.index_k, int64_t(s), 0, 0, index_k[s]);
  return problem;
}

Outputs RunReference(const Problem& problem) {
  Outputs outputs;
  const Status status = RunBackend(Reference(), problem, &outputs);
  EXPECT_TRUE(status.ok()) << status.message();
  return outputs;
}

// Keys 0..6 with Bk = 2: blocks 0 = {0,1}, 1 = {2,3}, 2 = {4,5}, 3 = {6} (local, partial).
// The query sits at position 6 (q_len 1, k_len 7), so all four blocks are visible.
const std::vector<double> kSevenKeys = {1, 5, 4.5, 4.5, 4, 4, 0};

TEST(ReferenceHand, MaxPoolingRanksByBlockMax) {
  // max: b0 = max(1, 5) = 5, b1 = 4.5, b2 = 4, b3 = 0 (local).
  // top_k 3 = local + 2 history blocks: the two best are b0 (5), b1 (4.5); local last.
  const Outputs outputs = RunReference(ScalarScoreProblem(kSevenKeys, 2, 3, Pooling::kMax));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(outputs.block_scores, (std::vector<double>{5, 4.5, 4, 0}));
}

TEST(ReferenceHand, LsePoolingRewardsManyHighTokens) {
  // lse: b0 = log(e^1 + e^5) = 5 + log(1 + e^-4) = 5.01815, b1 = log(2 e^4.5) = 4.5 + log 2 = 5.19315,
  //      b2 = 4 + log 2 = 4.69315. Ranked: b1, b0, b2; top_k 3 keeps b1, b0, then local b3.
  const Outputs outputs = RunReference(ScalarScoreProblem(kSevenKeys, 2, 3, Pooling::kLse));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{1, 0, 3}));
  EXPECT_NEAR(outputs.block_scores[0], 5.0 + std::log1p(std::exp(-4.0)), 1e-15);
  EXPECT_NEAR(outputs.block_scores[1], 4.5 + std::log(2.0), 1e-15);
  EXPECT_NEAR(outputs.block_scores[2], 4.0 + std::log(2.0), 1e-15);
  EXPECT_EQ(outputs.block_scores[3], 0.0);  // one key: log(e^0) = 0
}

TEST(ReferenceHand, MeanPoolingUsesTheMeanKey) {
  // mean: b0 = (1+5)/2 = 3, b1 = 4.5, b2 = 4, local b3 = 0. Ranked: b1, b2, b0 -> keep b1, b2, then b3.
  const Outputs outputs = RunReference(ScalarScoreProblem(kSevenKeys, 2, 3, Pooling::kMean));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(outputs.block_scores, (std::vector<double>{3, 4.5, 4, 0}));
}

TEST(ReferenceHand, MeanPoolingOfThePartialLocalBlockCountsVisibleKeysOnly) {
  // Keys 0..4, Bk = 4, query at position 4: block 1 = {4} only (keys 5..7 do not exist yet), so its mean is
  // index_k[4] = 8 exactly, not 8/4.
  const Outputs outputs = RunReference(ScalarScoreProblem({1, 1, 1, 1, 8}, 4, 2, Pooling::kMean));
  EXPECT_EQ(outputs.block_scores, (std::vector<double>{1, 8}));
}

TEST(ReferenceHand, AllEqualScoresSelectTheLowestIdsThenLocal) {
  // 10 keys, Bk = 2: 5 blocks, local = 4, all scores 0. Ties go to the lowest ids: b0, b1; local last.
  const std::vector<double> zeros(10, 0.0);
  EXPECT_EQ(RunReference(ScalarScoreProblem(zeros, 2, 3, Pooling::kMax)).topk_indices, (std::vector<int32_t>{0, 1, 4}));
  // top_k 6 > 5 visible blocks: every block, ranked (0..3), local last, one -1.
  EXPECT_EQ(RunReference(ScalarScoreProblem(zeros, 2, 6, Pooling::kMax)).topk_indices,
            (std::vector<int32_t>{0, 1, 2, 3, 4, -1}));
}

TEST(ReferenceHand, TiesBreakByIdAmongEqualScoresOnly) {
  // Blocks (Bk = 1): scores 2, 7, 2, 7, 2, local 0. Ranked: b1 (7), b3 (7), b0 (2), b2 (2), b4 (2).
  // top_k 4 keeps b1, b3, b0, then local b5.
  EXPECT_EQ(RunReference(ScalarScoreProblem({2, 7, 2, 7, 2, 0}, 1, 4, Pooling::kMax)).topk_indices,
            (std::vector<int32_t>{1, 3, 0, 5}));
}

TEST(ReferenceHand, InitBlocksComeAfterRankedAndBeforeLocal) {
  // Bk = 2, keys 0..8: b0 = 0, b1 = 5, b2 = 3, b3 = 4, local b4 = {8}. init_blocks 1 forces b0.
  // top_k 3 - |F| = 3 - 2 = 1 ranked candidate among b1..b3: b1 (5). Row: b1, then init b0, then local b4.
  const Outputs outputs = RunReference(ScalarScoreProblem({0, 0, 5, 5, 3, 3, 4, 4, 1}, 2, 3, Pooling::kMax, 1));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{1, 0, 4}));
}

TEST(ReferenceHand, InitBlocksCoveringTheLocalBlock) {
  // Keys 0..2, Bk = 2: 2 visible blocks, local = 1. init_blocks 3 > visible: the init blocks that exist and
  // are not local are {0}; row: init b0, local b1, -1 padding.
  const Outputs outputs = RunReference(ScalarScoreProblem({9, 9, 9}, 2, 4, Pooling::kMax, 3));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{0, 1, -1, -1}));
}

TEST(ReferenceHand, SeveralLocalBlocksComeLastAscendingAfterTheInitBlocks) {
  // Bk = 2, keys 0..10: b0 = 0, b1 = 5, b2 = 3, b3 = 4, b4 = 6, local b5 = {10}. init_blocks 1, local_blocks 2:
  // F = {b0} + {b4, b5}; ranked candidates b1..b3; top_k 5 - |F| = 2 of them: b1 (5), b3 (4).
  // Row: b1, b3, then init b0, then the other forced local block b4, then the local block b5 last.
  const Outputs outputs =
      RunReference(ScalarScoreProblem({0, 0, 5, 5, 3, 3, 4, 4, 6, 6, 1}, 2, 5, Pooling::kMax, 1, 2));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{1, 3, 0, 4, 5}));
}

TEST(ReferenceHand, LocalBlocksOverlappingTheInitBlocksCountOnce) {
  // Keys 0..4, Bk = 2: 3 visible blocks, local = 2. init_blocks 2, local_blocks 2: F = {b0, b1} + {b1, b2} =
  // {b0, b1, b2}, b1 once; no candidate is left. Row: init b0, forced local b1, local b2, -1 padding.
  const Outputs outputs = RunReference(ScalarScoreProblem({9, 9, 9, 9, 9}, 2, 5, Pooling::kMax, 2, 2));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{0, 1, 2, -1, -1}));
}

TEST(ReferenceHand, Fp16ScoresRankTheRoundedMaximaWithTheIdTieRule) {
  // Bk = 1, index_scale 1: block b's score is key b's value. Near 2, binary16 values are 2^-9 apart:
  // 2 + 2^-11 is below the midpoint 2 + 2^-10 and rounds to 2; 2 + 3 * 2^-11 is above it and rounds to 2 + 2^-9.
  // Blocks: b0 = 2, b1 = 2 + 2^-11, b2 = 2 + 3 * 2^-11, b3 = 1 (local). Native ranks b2, b1, b0; fp16 ranks
  // fp16(b2) = 2 + 2^-9, then b0 and b1 tied at 2 (lowest id first): with top_k 3, native keeps {b2, b1}
  // and fp16 keeps {b2, b0}, and block_scores holds the rounded values.
  const std::vector<double> keys = {2, 2 + std::ldexp(1, -11), 2 + 3 * std::ldexp(1, -11), 1};
  EXPECT_EQ(RunReference(ScalarScoreProblem(keys, 1, 3, Pooling::kMax)).topk_indices, (std::vector<int32_t>{2, 1, 3}));
  const Outputs fp16 = RunReference(ScalarScoreProblem(keys, 1, 3, Pooling::kMax, 0, 1, ScoreFormat::kFp16));
  EXPECT_EQ(fp16.topk_indices, (std::vector<int32_t>{2, 0, 3}));
  EXPECT_EQ(fp16.block_scores, (std::vector<double>{2, 2, 2 + std::ldexp(1, -9), 1}));
  // index_lse (SPEC section 4): one key per block, so each l_b = fp16(M[b]) + log(exp(0)) = fp16(M[b]):
  // logsumexp of {2 + 2^-9, 2, 1} (blocks b2, b0, b3).
  const double expected = std::log(std::exp(2 + std::ldexp(1, -9)) + std::exp(2.0) + std::exp(1.0));
  EXPECT_NEAR(fp16.index_lse[0], expected, 4e-15 * expected);
}

TEST(ReferenceHand, Fp16IndexLseAddsTheRoundedMaxToEachBlocksShiftedSum) {
  // Bk = 2, keys {0.1, 2.0003, 1, 1.5, 0.25}: b0 max 2.0003 (fp16: 2, the nearest binary16), b1 max 1.5 (exact
  // in binary16), local b2 = {0.25}. top_k 3 selects all three. l_b0 = 2 + log(e^(0.1 - 2.0003) + 1),
  // l_b1 = 1.5 + log(e^(1 - 1.5) + 1), l_b2 = 0.25; index_lse = log(e^l_b0 + e^l_b1 + e^l_b2).
  const Outputs outputs =
      RunReference(ScalarScoreProblem({0.1, 2.0003, 1, 1.5, 0.25}, 2, 3, Pooling::kMax, 0, 1, ScoreFormat::kFp16));
  const double l0 = 2 + std::log(std::exp(0.1 - 2.0003) + 1), l1 = 1.5 + std::log(std::exp(-0.5) + 1), l2 = 0.25;
  const double expected = std::log(std::exp(l0) + std::exp(l1) + std::exp(l2));
  EXPECT_NEAR(outputs.index_lse[0], expected, 8e-15 * expected);
  EXPECT_EQ(outputs.block_scores, (std::vector<double>{2, 1.5, 0.25}));
}

TEST(ReferenceHand, Fp16ScoresBeyondBinary16AreRefused) {
  // 70000 > 65504, the largest binary16: score_format fp16 cannot rank it.
  const Problem problem = ScalarScoreProblem({70000, 1}, 1, 2, Pooling::kMax, 0, 1, ScoreFormat::kFp16);
  Outputs outputs;
  const Status status = RunBackend(Reference(), problem, &outputs);
  EXPECT_EQ(status.message(),
            "block score of query 0, group 0 overflows binary16 (|score| >= 65520): score_format fp16 cannot "
            "represent it");
}

TEST(ReferenceHand, IndexLseOverSelectedVisibleKeys) {
  // kSevenKeys, max pooling, top_k 3 selects b0 {1, 5}, b1 {4.5, 4.5}, local b3 {0}. index_lse =
  // log(e^1 + e^5 + 2 e^4.5 + e^0).
  const Outputs outputs = RunReference(ScalarScoreProblem(kSevenKeys, 2, 3, Pooling::kMax));
  const double expected = std::log(std::exp(1.0) + std::exp(5.0) + 2 * std::exp(4.5) + 1.0);
  EXPECT_NEAR(outputs.index_lse[0], expected, 4e-15 * expected);
}

// Prefill of length L with Bk = 4, top_k 2: query i sees blocks 0..i/4; valid = min(i/4 + 1, 2) ids,
// local block i/4 last, -1 after; block_scores is -inf past the visible blocks.
class BoundaryLength : public testing::TestWithParam<int> {};

TEST_P(BoundaryLength, SlotsFollowTheContract) {
  const int length = GetParam(), block_size = 4, top_k = 2;
  ProblemSpec spec;
  spec.config.num_q_heads = 2;
  spec.config.num_kv_heads = 1;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 3;
  spec.config.block_size = block_size;
  spec.config.top_k = top_k;
  spec.lengths = {{length, length}};
  spec.seed = uint64_t(length);
  const Problem problem = GenerateProblem(spec);
  const Outputs outputs = RunReference(problem);
  const int64_t max_blocks = (length + block_size - 1) / block_size;
  for (int i = 0; i < length; ++i) {
    const int visible = i / block_size + 1;
    const int valid = std::min(visible, top_k);
    const int32_t* row = &outputs.topk_indices[i * top_k];
    EXPECT_EQ(row[valid - 1], i / block_size) << "query " << i << ": local block is not last";
    for (int slot = 0; slot < valid; ++slot) EXPECT_GE(row[slot], 0) << "query " << i;
    for (int slot = valid; slot < top_k; ++slot) EXPECT_EQ(row[slot], -1) << "query " << i;
    for (int64_t b = 0; b < max_blocks; ++b) {
      const double score = outputs.block_scores[i * max_blocks + b];
      if (b < visible) {
        EXPECT_TRUE(std::isfinite(score)) << "query " << i << " block " << b;
      } else {
        EXPECT_EQ(score, -std::numeric_limits<double>::infinity()) << "query " << i << " block " << b;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneTwoAndAroundTheBlock, BoundaryLength, testing::Values(1, 2, 3, 4, 5, 9),
                         [](const testing::TestParamInfo<int>& info) {
                           return std::string("L").append(std::to_string(info.param));
                         });

// Main branch, hand-worked: one query, D = 1, q = 1, softmax_scale = 1, so scores equal the keys.
Problem ScalarAttentionProblem(const std::vector<double>& keys, const std::vector<double>& values, int block_size,
                               int top_k, const std::vector<double>& index_keys) {
  Problem problem = ScalarScoreProblem(index_keys, block_size, top_k, Pooling::kMax);
  problem.config.softmax_scale = 1.0;
  SetElement(problem.q, 0, 0, 0, 1.0);
  for (size_t s = 0; s < keys.size(); ++s) {
    SetElement(problem.k, int64_t(s), 0, 0, keys[s]);
    SetElement(problem.v, int64_t(s), 0, 0, values[s]);
  }
  return problem;
}

TEST(ReferenceHand, EqualScoresAverageTheValues) {
  // Two keys with score 0 in one block: p = (1, 1), l = 2, out = (4 + 8) / 2 = 6 exactly, lse = log 2.
  const Outputs outputs = RunReference(ScalarAttentionProblem({0, 0}, {4, 8}, 2, 1, {0, 0}));
  EXPECT_EQ(outputs.out[0], 6.0);
  EXPECT_NEAR(outputs.lse[0], 0.6931471805599453, 1.2e-16);  // ln 2, correctly rounded
}

TEST(ReferenceHand, AttentionSeesOnlyTheSelectedBlocks) {
  // Bk = 2, keys 0..4 (query at 4): blocks b0 {0,1}, b1 {2,3}, local b2 {4}. Index keys make b0 score 1 and
  // b1 score 0, so top_k 2 keeps b0 and local b2 and drops b1. Main keys all 0 (equal scores), values
  // 1, 2, 100, 100, 3: out = mean of the kept values (1 + 2 + 3) / 3 = 2, lse = log 3.
  const Outputs outputs =
      RunReference(ScalarAttentionProblem({0, 0, 0, 0, 0}, {1, 2, 100, 100, 3}, 2, 2, {1, 1, 0, 0, 0}));
  EXPECT_EQ(outputs.topk_indices, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(outputs.out[0], 2.0);
  EXPECT_NEAR(outputs.lse[0], std::log(3.0), 2.3e-16);
}

TEST(ReferenceHand, SoftmaxWeightsFromScores) {
  // Scores 0 and log 3 (as a double): weights 1/4, 3/4; values 4, 8: out = 1 + 6 = 7, lse = log 4.
  const double log3 = std::log(3.0);
  const Outputs outputs = RunReference(ScalarAttentionProblem({0, log3}, {4, 8}, 2, 1, {0, 0}));
  EXPECT_NEAR(outputs.out[0], 7.0, 4e-15);
  EXPECT_NEAR(outputs.lse[0], std::log(4.0), 4e-16);
}

}  // namespace
}  // namespace msa
