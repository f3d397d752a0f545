// The per-tile route of the main branch (gpu/common/union_tile_plan.h): the threshold worked by hand for M3 on the
// H200's measured ceilings, a small plan worked by hand (unions, routes, a tile spanning two sequences), and the routes
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

constexpr UnionTileCeilings kH200 = kH200Ceilings;  // 773.0 TFLOP/s bf16 GEMM, 4253 GB/s copy

TEST(UnionTilePlan, ThresholdWorkedByHandForM3) {
  // K: 128 selected blocks x 16 heads x (256 + 2 * (256 + 8)) B = 1,605,632 B -> 377.53 ns at 4253 GB/s.
  // U: 8 queries x 16 heads x 128 keys x 256 x 2 = 8,388,608 FLOPs per union block -> 10.852 ns at 773 TFLOP/s.
  // 377.53 / 10.852 = 34.79: U wins up to a union of 34 blocks.
  const UnionTileRouting routing = UnionTileRoutingOf(M3(), kH200);
  EXPECT_EQ(MaxUnionForPathU(routing, 8, 128), 34);
  // Rows of half the blocks halve K's traffic: 17.39 -> 17.
  EXPECT_EQ(MaxUnionForPathU(routing, 8, 64), 17);
}

TEST(UnionTilePlan, SmallPlanWorkedByHand) {
  // 16 heads in one group (8 queries a tile), top_k 2, block_size 4; sequences of 10 and 3 queries over 10 and 3
  // keys: sequence 0 has blocks 0-2, sequence 1 starts at global block 3. Tiles [0, 8) and [8, 13), the second
  // spanning both sequences.
  const Config config = ConfigOf(16, 1, 4, 4, 2);
  const std::vector<int32_t> cu_q = {0, 10, 13}, cu_k = {0, 10, 13};
  const std::vector<int32_t> topk = {
      0, -1, 0, -1, 0, -1, 0, -1, 0, 1,  0, 1, 0, 1, 0, 1,  // tile 0: union {0, 1}, 12 selected
      2, 0,  1, 2,  0, -1, 0, -1, 0, -1,                    // tile 1: {0, 1, 2} and sequence 1's {0} = global 3: 7
  };
  // K bytes per selected block: 16 heads x (8 + 2 (8 + 8)) = 640; U FLOPs per union block and query: 16 x 4 x 8 x 2
  // = 1024. With copy = 1 B/s and gemm = c FLOP/s: max union = floor(640 c selected / (1024 queries)).
  const UnionTileRouting one = UnionTileRoutingOf(config, {1.0, 1.0});
  EXPECT_EQ(MaxUnionForPathU(one, 8, 12), 0);  // 7680 / 8192
  EXPECT_EQ(MaxUnionForPathU(UnionTileRoutingOf(config, {100.0, 1.0}), 8, 12), 93);
  UnionTilePlan plan;
  PlanUnionTiles(config, Batch{cu_q, cu_k}, topk.data(), {1.0, 1.0}, &plan);
  EXPECT_EQ(plan.num_tiles, 2);
  EXPECT_EQ(plan.path_u, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(plan.union_offsets, (std::vector<int64_t>{0, 0, 0}));
  // c = 3: tile 0 floor(2.81) = 2 >= its union of 2 (U); tile 1 floor(3 x 640 x 7 / 5120) = 2 < 4 (K).
  PlanUnionTiles(config, Batch{cu_q, cu_k}, topk.data(), {3.0, 1.0}, &plan);
  EXPECT_EQ(plan.path_u, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(plan.union_offsets, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(plan.union_blocks, (std::vector<int32_t>{0, 1}));
  PlanUnionTiles(config, Batch{cu_q, cu_k}, topk.data(), {100.0, 1.0}, &plan);
  EXPECT_EQ(plan.path_u, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(plan.union_offsets, (std::vector<int64_t>{0, 2, 6}));
  EXPECT_EQ(plan.union_blocks, (std::vector<int32_t>{0, 1, 0, 1, 2, 3}));
  EXPECT_EQ(plan.u_tiles(), 2);
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
