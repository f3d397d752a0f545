// The block-max kernels' grid (gpu/common/block_max_grid.h) on the CPU: its spans cover every key block of the
// longest row exactly once, one wave fills the device on decode, and on long chunks one span's keys stay within a
// quarter of the L2. Expected grids are worked by hand from the shapes (M3's index branch: Hidx 4, Di 128 bf16
// keys of 256 bytes, Bk 128, 128-row CTAs, one CTA per SM).
#include "gpu/common/block_max_grid.h"

#include <cstdint>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "gpu/common/device_caps.h"
#include "gpu/common/geometry.h"

namespace msa::gpu {
namespace {

constexpr int64_t kBf16KeyBytes = 256;

// The chunk of queries [pos0, pos0 + nq) of one causal sequence at M3's index shapes.
ChunkGeometry Chunk(int64_t pos0, int64_t nq) {
  ChunkGeometry g;
  g.nq = nq;
  g.pos0 = pos0;
  g.k_len = pos0 + nq;
  g.hidx = 4;
  g.di = 128;
  g.bk = 128;
  return g;
}

BlockMaxGrid Plan(const DeviceCaps& caps, const ChunkGeometry& g, int cta_rows = 128,
                  int64_t key_bytes = kBf16KeyBytes) {
  return PlanBlockMaxGrid(caps, g, cta_rows, /*ctas_per_sm=*/1, key_bytes);
}

TEST(BlockMaxGrid, LastChunkOfA1MPrefillTakesSpansOfAQuarterOfTheL2) {
  // Queries 983040..1048575 (16 chunks of 65536): 262144 rows = 2048 tiles of 128; the longest row sees blocks
  // 0..8191. A quarter of 50 MiB holds 13107200 / (128 keys x 256 B) = 400 blocks, so 8192 / 400 -> 21 spans of
  // ceil(8192 / 21) = 391 blocks (the last one 8192 - 20 x 391 = 372).
  const BlockMaxGrid plan = Plan(kH200Caps, Chunk(983040, 65536));
  EXPECT_EQ(plan.tiles_x, 2048);
  EXPECT_EQ(plan.splits, 21);
  EXPECT_EQ(plan.blocks_per_cta, 391);
  EXPECT_EQ(plan.sequences, 1);
}

TEST(BlockMaxGrid, E4m3KeysTakeSpansTwiceAsLong) {
  // 128-byte keys: 800 blocks in a quarter of the L2; 8192 / 800 -> 11 spans of ceil(8192 / 11) = 745.
  const BlockMaxGrid plan = Plan(kH200Caps, Chunk(983040, 65536), 128, 128);
  EXPECT_EQ(plan.splits, 11);
  EXPECT_EQ(plan.blocks_per_cta, 745);
}

TEST(BlockMaxGrid, AnUnknownL2LeavesALongChunkWhole) {
  DeviceCaps caps = kH200Caps;
  caps.l2_bytes = 0;
  const BlockMaxGrid plan = Plan(caps, Chunk(0, 131072));  // 4096 tiles fill 132 SMs: one span of 1024 blocks
  EXPECT_EQ(plan.tiles_x, 4096);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.blocks_per_cta, 1024);
}

TEST(BlockMaxGrid, ADecodeRowSplitsIntoOneWave) {
  // One query at position 4095: 4 rows in one 64-row tile, blocks 0..31; 132 SMs ask for 132 spans, capped at one
  // block each.
  const BlockMaxGrid one_block_each = Plan(kH200Caps, Chunk(4095, 1), 64);
  EXPECT_EQ(one_block_each.tiles_x, 1);
  EXPECT_EQ(one_block_each.splits, 32);
  EXPECT_EQ(one_block_each.blocks_per_cta, 1);
  // At position 262143 (2048 blocks): 132 spans of ceil(2048 / 132) = 16 blocks, 2048 / 16 = 128 of them.
  const BlockMaxGrid wave = Plan(kH200Caps, Chunk(262143, 1), 64);
  EXPECT_EQ(wave.splits, 128);
  EXPECT_EQ(wave.blocks_per_cta, 16);
}

RC_GTEST_PROP(BlockMaxGrid, SpansCoverTheBlocksOnceAndFitTheL2, ()) {
  const int64_t nq = *rc::gen::inRange<int64_t>(1, 1 << 17);
  const int64_t pos0 = *rc::gen::inRange<int64_t>(0, 1 << 21);
  const int cta_rows = *rc::gen::element(64, 128);
  const int64_t key_bytes = *rc::gen::element<int64_t>(128, 256);
  DeviceCaps caps = kH200Caps;
  caps.l2_bytes = *rc::gen::element<int64_t>(0, 40 << 20, 50 << 20);
  const ChunkGeometry g = Chunk(pos0, nq);
  const BlockMaxGrid plan = Plan(caps, g, cta_rows, key_bytes);
  const int64_t blocks = (pos0 + nq - 1) / 128 + 1;  // of the chunk's last query
  RC_ASSERT(plan.tiles_x * cta_rows >= nq * 4);
  RC_ASSERT((plan.tiles_x - 1) * cta_rows < nq * 4);
  RC_ASSERT(plan.splits >= 1 && plan.splits <= 65535);
  RC_ASSERT(plan.splits * plan.blocks_per_cta >= blocks);       // every block in a span
  RC_ASSERT((plan.splits - 1) * plan.blocks_per_cta < blocks);  // no span empty
  if (caps.l2_bytes > 0 && plan.blocks_per_cta > 1) {
    RC_ASSERT(plan.blocks_per_cta * 128 * key_bytes <= caps.l2_bytes / 4 ||
              plan.splits == 65535);  // a span fits a quarter of the L2 (up to the grid's y limit)
  }
}

TEST(RunningTopKGrid, ALongChunkKeepsTheL2SpansOfTheBlockMaxGrid) {
  // 21 spans of 391 blocks, as above: under kRunningTopKMaxSplits, so the same grid. Each of the chunk's 262144 rows
  // keeps top_k - 1 = 15 keys per span: 262144 x 21 x 15 list entries.
  ChunkGeometry g = Chunk(983040, 65536);
  g.top_k = 16;
  const BlockMaxGrid plan = PlanRunningTopKGrid(kH200Caps, g);
  EXPECT_EQ(plan.tiles_x, 2048);
  EXPECT_EQ(plan.splits, 21);
  EXPECT_EQ(plan.blocks_per_cta, 391);
  EXPECT_EQ(RunningTopKListEntries(kH200Caps, g), int64_t(262144) * 21 * 15);
}

TEST(RunningTopKGrid, ADecodeRowTakesAtMost32Spans) {
  // One query at position 262143: 4 rows in one tile, 2048 blocks. The wave rule asks for 132 spans (16 blocks each,
  // 128 spans); the merge takes at most 32, so spans of 2048 / 32 = 64 blocks.
  const BlockMaxGrid plan = PlanRunningTopKGrid(kH200Caps, Chunk(262143, 1));
  EXPECT_EQ(plan.tiles_x, 1);
  EXPECT_EQ(plan.splits, 32);
  EXPECT_EQ(plan.blocks_per_cta, 64);
}

TEST(RunningTopKGrid, ListsHoldTopKMinusOneKeysSinceTheLocalBlockIsForced) {
  EXPECT_EQ(RunningTopKListLength(16), 15);
  EXPECT_EQ(RunningTopKListLength(33), 32);
  EXPECT_EQ(RunningTopKListLength(1), 0);
}

RC_GTEST_PROP(RunningTopKGrid, SpansCoverEveryBlockOnceAndNeverExceed32, ()) {
  const int64_t pos0 = *rc::gen::inRange<int64_t>(0, int64_t(1) << 21);
  const int64_t nq = *rc::gen::inRange<int64_t>(1, 70000);
  const BlockMaxGrid plan = PlanRunningTopKGrid(kH200Caps, Chunk(pos0, nq));
  const int64_t num_blocks = (pos0 + nq - 1) / 128 + 1;
  RC_ASSERT(plan.splits >= 1);
  RC_ASSERT(plan.splits <= kRunningTopKMaxSplits);
  RC_ASSERT(plan.splits * plan.blocks_per_cta >= num_blocks);
  RC_ASSERT((plan.splits - 1) * plan.blocks_per_cta < num_blocks);
}

}  // namespace
}  // namespace msa::gpu
