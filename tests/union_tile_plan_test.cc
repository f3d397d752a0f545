// The per-tile route of the main branch (gpu/common/union_tile_plan.h): the threshold worked by hand for M3 on the
// H200's measured ceilings, a small plan worked by hand (unions, routes, tiles cut at sequence ends), and the routes
// the benchmarks' selections get (bench/selections.h): random ones to K, MiniMax's shared patterns to U.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/selections.h"
#include "gpu/common/union_tile_plan.h"

namespace msa::gpu {
namespace {

// D = Dv = Di = dim.
Config ConfigOf(int hq, int hkv, int dim, int block_size, int top_k) {
  Config config;
  config.num_q_heads = hq;
  config.num_kv_heads = hkv;
  config.head_dim = config.value_dim = config.index_head_dim = dim;
  config.block_size = block_size;
  config.top_k = top_k;
  return config;
}

Config M3() { return ConfigOf(64, 4, 128, 128, 16); }

// bench/results/gpu_selection_bench_2026-12-02: 773.0 TFLOP/s bf16 GEMM, 4253 GB/s copy.
constexpr UnionTileCeilings kH200{773.0e12, 4253.0e9};

TEST(UnionTilePlan, ThresholdWorkedByHandForM3) {
  // K: 128 selected blocks x 16 heads x (256 + 2 * (256 + 8)) B = 1,605,632 B -> 377.53 ns at 4253 GB/s.
  // U: 8 queries x 16 heads x 128 keys x 256 x 2 = 8,388,608 FLOPs per union block -> 10.852 ns at 773 TFLOP/s.
  // 377.53 / 10.852 = 34.79: U wins up to a union of 34 blocks.
  EXPECT_EQ(MaxUnionForPathU(M3(), 8, 128, kH200), 34);
  // Rows of half the blocks halve K's traffic: 17.39 -> 17.
  EXPECT_EQ(MaxUnionForPathU(M3(), 8, 64, kH200), 17);
}

TEST(UnionTilePlan, SmallPlanWorkedByHand) {
  // One group, top_k 2, sequences of 10 and 3 queries: tiles [0, 8), [8, 10), [10, 13).
  const Config config = ConfigOf(2, 1, 4, 4, 2);
  const std::vector<int32_t> cu_q = {0, 10, 13}, cu_k = {0, 10, 13};
  const std::vector<int32_t> topk = {
      0, -1, 0, -1, 0, -1, 0, -1, 0, 1, 0, 1, 0, 1, 0, 1,  // tile 0: union {0, 1}
      2, 0,  1, 2,                                         // tile 1: union {0, 1, 2}
      0, -1, 0, -1, 0, -1,                                 // tile 2 (sequence 2): union {0}
  };
  // Ceilings where U wins while union <= selected / 4: a tile's K bytes are selected * 2 * (8 + 2 * (8 + 8)) = 80
  // selected; U's FLOPs per block are queries * 2 * 4 * 8 * 2 = 128 queries. With copy = 1 B/s and gemm = 1
  // FLOP/s: max union = floor(80 selected / (128 queries)).
  const UnionTileCeilings ceilings{1.0, 1.0};
  EXPECT_EQ(MaxUnionForPathU(config, 8, 12, ceilings), 0);  // 960 / 1024
  const UnionTileCeilings generous{100.0, 1.0};             // x100: floor(8000 selected / (128 queries))
  EXPECT_EQ(MaxUnionForPathU(config, 8, 12, generous), 93);
  UnionTilePlan plan;
  PlanUnionTiles(config, Batch{cu_q, cu_k}, topk.data(), ceilings, &plan);
  EXPECT_EQ(plan.num_tiles, 3);
  EXPECT_EQ(plan.path_u, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(plan.union_offsets, (std::vector<int64_t>{0, 0, 0, 0}));
  PlanUnionTiles(config, Batch{cu_q, cu_k}, topk.data(), generous, &plan);
  EXPECT_EQ(plan.path_u, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(plan.union_offsets, (std::vector<int64_t>{0, 2, 5, 6}));
  EXPECT_EQ(plan.union_blocks, (std::vector<int32_t>{0, 1, 0, 1, 2, 0}));
  EXPECT_EQ(plan.u_tiles(), 3);
}

TEST(UnionTilePlan, RandomSelectionsGoToKAndSharedOnesToU) {
  bench::SelectionShape shape;
  shape.q_len = 2048;
  shape.pos0 = 30000;
  const Config config = M3();
  const std::vector<int32_t> cu = {0, int32_t(shape.q_len)}, cu_k = {0, int32_t(shape.pos0 + shape.q_len)};
  const struct {
    const char* selection;
    double min_u_share, max_u_share;
  } expected[] = {{"random", 0, 0}, {"overlap50", 0, 0.05}, {"overlap90", 0.9, 1}, {"last", 1, 1}, {"pages", 1, 1}};
  for (const auto& [name, low, high] : expected) {
    const bench::SelectionGenerator& generator = *bench::FindSelectionGenerator(name);
    std::vector<int32_t> topk(size_t(shape.num_groups * shape.total_q() * shape.top_k));
    generator.make(shape, generator.keep, 7, &topk);
    UnionTilePlan plan;
    PlanUnionTiles(config, Batch{cu, cu_k}, topk.data(), kH200, &plan);
    const double share = double(plan.u_tiles()) / double(plan.path_u.size());
    std::printf("%-9s mean 8-query union %.1f: %.1f%% of tiles on path U\n", name, bench::MeanUnionSize(shape, topk, 8),
                100 * share);
    EXPECT_GE(share, low) << name;
    EXPECT_LE(share, high) << name;
    UnionTilePlan again;
    PlanUnionTiles(config, Batch{cu, cu_k}, topk.data(), kH200, &again);
    EXPECT_EQ(again.path_u, plan.path_u) << name;
    EXPECT_EQ(again.union_blocks, plan.union_blocks) << name;
  }
}

}  // namespace
}  // namespace msa::gpu
