// The benchmarks' selection generators (bench/selections.h): every row they write is valid under the strict
// selection contract (the oracle's own checker), and each has the sharing it claims, measured against values
// worked out independently: the expected union of independent uniform draws, a page's rows identical, the
// overlap generators' adjacent overlap at their keep probability, and the order random > overlap50 > overlap90 >
// last >= pages in union size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/selections.h"
#include "bench/structured_index.h"
#include "oracle/problem.h"
#include "oracle/selection_contract.h"

namespace msa::bench {
namespace {

// A 2048-query prefill after 30K keys of context (about 250 candidates per row), and a short prefill from position
// 0 with sinks and two local blocks (rows with fewer blocks than top_k, padding, forced blocks that overlap).
std::vector<SelectionShape> Shapes() {
  SelectionShape long_context;
  long_context.num_groups = 2;
  long_context.top_k = 16;
  long_context.block_size = 128;
  long_context.q_len = 2048;
  long_context.pos0 = 30000;
  SelectionShape short_prefill;
  short_prefill.num_groups = 3;
  short_prefill.top_k = 6;
  short_prefill.block_size = 8;
  short_prefill.init_blocks = 1;
  short_prefill.local_blocks = 2;
  short_prefill.sequences = 2;
  short_prefill.q_len = 200;
  return {long_context, short_prefill};
}

std::vector<int32_t> Make(const SelectionGenerator& generator, const SelectionShape& shape, uint64_t seed = 7) {
  std::vector<int32_t> topk(size_t(shape.num_groups * shape.total_q() * shape.top_k), -7);
  generator.make(shape, generator.keep, seed, &topk);
  return topk;
}

TEST(BenchSelections, EveryRowOfEveryGeneratorIsValid) {
  for (const SelectionShape& shape : Shapes()) {
    Config config;
    config.top_k = int(shape.top_k);
    config.block_size = int(shape.block_size);
    config.init_blocks = int(shape.init_blocks);
    config.local_blocks = int(shape.local_blocks);
    for (const SelectionGenerator& generator : SelectionGenerators()) {
      const std::vector<int32_t> topk = Make(generator, shape);
      for (int64_t r = 0; r < shape.num_groups; ++r) {
        for (int64_t t = 0; t < shape.total_q(); ++t) {
          const int64_t visible = (shape.pos0 + t % shape.q_len) / shape.block_size + 1;
          const Status status =
              CheckSelectionRow(config, visible, topk.data() + (r * shape.total_q() + t) * shape.top_k);
          ASSERT_TRUE(status.ok()) << generator.name << " group " << r << " query " << t << ": " << status.message();
        }
      }
    }
  }
}

TEST(BenchSelections, RandomUnionMatchesIndependentDraws) {
  // Four rows of m = 15 independent uniform draws from C candidates, plus the shared local block: the expected
  // union is C (1 - (1 - m/C)^4) + 1. C grows by one per 128 queries; a 4-query tile shares its C.
  const SelectionShape shape = Shapes()[0];
  const std::vector<int32_t> topk = Make(*FindSelectionGenerator("random"), shape);
  double expected = 0;
  int64_t tiles = 0;
  for (int64_t first = 0; first < shape.q_len; first += 4) {
    const double candidates = double((shape.pos0 + first) / shape.block_size);
    expected += candidates * (1 - std::pow(1 - 15 / candidates, 4)) + 1;
    ++tiles;
  }
  expected /= double(tiles);
  EXPECT_NEAR(MeanUnionSize(shape, topk, 4), expected, 0.01 * expected);
  EXPECT_NEAR(MeanAdjacentOverlap(shape, topk), 15.0 / 240, 0.01);  // chance only: m / C
}

TEST(BenchSelections, EachGeneratorSharesWhatItClaims) {
  const SelectionShape shape = Shapes()[0];
  std::vector<double> union4;
  for (const char* name : {"random", "overlap50", "overlap90", "last", "pages"}) {
    const SelectionGenerator& generator = *FindSelectionGenerator(name);
    const std::vector<int32_t> topk = Make(generator, shape);
    union4.push_back(MeanUnionSize(shape, topk, 4));
    std::printf("%-9s mean union of 4 queries %.2f, of 8 %.2f, adjacent overlap %.3f\n", name, union4.back(),
                MeanUnionSize(shape, topk, 8), MeanAdjacentOverlap(shape, topk));
    if (generator.keep > 0) {
      EXPECT_NEAR(MeanAdjacentOverlap(shape, topk), generator.keep, 0.02) << name;
    }
  }
  for (size_t i = 1; i < union4.size(); ++i) EXPECT_GE(union4[i - 1], union4[i]) << i;
  EXPECT_GT(union4[0], 50);  // random: most of 4 x 15 draws distinct
  // pages: page edges fall at queries 80, 208, ... (30000 % 128 = 48), all multiples of 4, so no 4-query tile
  // crosses one and every tile holds one row: top_k blocks.
  EXPECT_DOUBLE_EQ(union4[4], 16.0);
  // last: the 15 most recent candidates and the local block; a tile crossing a block edge adds one block.
  EXPECT_LE(union4[3], 17.0);
  EXPECT_GE(union4[3], 16.0);
}

TEST(BenchSelections, SameSeedSameSelectionOtherSeedAnother) {
  const SelectionShape shape = Shapes()[1];
  for (const char* name : {"random", "overlap90"}) {
    const SelectionGenerator& generator = *FindSelectionGenerator(name);
    EXPECT_EQ(Make(generator, shape, 3), Make(generator, shape, 3)) << name;
    EXPECT_NE(Make(generator, shape, 3), Make(generator, shape, 4)) << name;
  }
  EXPECT_EQ(FindSelectionGenerator("nope"), nullptr);
}

// The indexer's own selection on a 4096-token causal prefill (Bk 32, top_k 8, 2 groups, Di 32), with the problem's
// i.i.d. index inputs or a structured kind in their place.
std::vector<int32_t> IndexerSelection(const std::string& kind, SelectionShape* shape) {
  ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 32;
  spec.config.block_size = 32;
  spec.config.top_k = 8;
  spec.lengths = {{4096, 4096}};
  spec.dtype = DType::kF32;
  spec.seed = 5;
  Problem problem = GenerateProblem(spec);
  if (kind != "iid") {
    IndexInputShape index_shape;
    index_shape.total_q = index_shape.total_k = 4096;
    index_shape.num_groups = 2;
    index_shape.index_dim = 32;
    std::vector<float> index_q, index_k;
    EXPECT_TRUE(MakeStructuredIndexInputs(kind, index_shape, 9, &index_q, &index_k));
    EXPECT_EQ(problem.index_q.bytes.size(), index_q.size() * 4);
    EXPECT_EQ(problem.index_k.bytes.size(), index_k.size() * 4);
    std::memcpy(problem.index_q.bytes.data(), index_q.data(), problem.index_q.bytes.size());
    std::memcpy(problem.index_k.bytes.data(), index_k.data(), problem.index_k.bytes.size());
  }
  Config exact = problem.config;
  exact.precision = Precision::kExact;
  Outputs outputs;
  outputs.Allocate(problem);
  const Status status = Select(*FastestBackend(exact), exact, problem.index_inputs(), outputs.selection_outputs());
  EXPECT_TRUE(status.ok()) << status.message();
  *shape = SelectionShape{2, 8, 32, 0, 1, 1, 4096, 0};
  return outputs.topk_indices;
}

TEST(BenchSelections, StructuredIndexInputsMakeTheIndexerCoherent) {
  SelectionShape shape;
  const double iid = MeanUnionSize(shape, IndexerSelection("iid", &shape), 4);
  for (const char* kind : kStructuredIndexKinds) {
    const std::vector<int32_t> topk = IndexerSelection(kind, &shape);
    const double structured = MeanUnionSize(shape, topk, 4);
    std::printf(
        "indexer on %-9s index inputs: mean union of 4 queries %.2f (i.i.d. inputs %.2f), adjacent overlap "
        "%.3f\n",
        kind, structured, iid, MeanAdjacentOverlap(shape, topk));
    EXPECT_LT(structured, 0.75 * iid) << kind;
    EXPECT_GT(MeanAdjacentOverlap(shape, topk), 0.5) << kind;
  }
  std::vector<float> q, k;
  EXPECT_FALSE(MakeStructuredIndexInputs("nope", IndexInputShape{}, 1, &q, &k));
}

}  // namespace
}  // namespace msa::bench
