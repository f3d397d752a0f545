// attend=fused-decode's step (gpu/attend/fused_decode.cu: block scores, top-k and split-k in one launch per (query,
// group) cluster) against the same plan's stages run apart (index mma or wgmma, topk=cta, split-k) through the device
// pipeline (gpu/common/pipeline.h StepOnDevice): the selection, out, lse and the non-finite-score flag bit for bit, on
// decode batches built for its edges. Without a usable sm_90a device the step test skips saying why; the check of the
// cases themselves runs anyway.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/kernel_fits.h"
#include "gpu/common/kernel_plan.h"
#include "msa/forced_blocks.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_query.h"
#include "tests/gpu_device_step.h"
#endif

namespace msa::gpu_test {
namespace {

struct FusedCase {
  std::string name;
  Config config;
  std::vector<int32_t> q_lens, k_lens;  // per sequence
  bool overflow = false;                // one (query, group)'s index query scaled until its dots overflow
};

std::vector<FusedCase> FusedCases() {
  std::vector<FusedCase> cases;
  cases.push_back({"m3_4k", M3Config(), {1}, {4096}});
  // Rows of 1 key, part of a block, one block and a key, 16 blocks, and 64 blocks (4 for each of the 16 CTAs).
  cases.push_back({"m3_rows", M3Config(), {1, 1, 1, 1, 1}, {1, 100, 129, 2048, 8192}});
  cases.push_back({"m3_multi_token", M3Config(), {3, 2}, {300, 5000}});
  Config small = M3Config(Precision::kFp16);
  small.num_q_heads = 32;  // groups of 8 heads
  small.top_k = 8;         // clusters of 8, 4 blocks for each CTA at 4K
  cases.push_back({"fp16_top8_group8", small, {1, 1}, {4096, 1000}});
  Config forced = M3Config();
  forced.init_blocks = 1;
  forced.local_blocks = 2;
  cases.push_back({"forced_init1_local2", forced, {1, 1, 1}, {3000, 256, 129}});
  Config bk64 = M3Config();
  bk64.block_size = 64;
  cases.push_back({"block64", bk64, {1, 1}, {4096, 2000}});
  cases.push_back({"overflow", M3Config(), {1, 1}, {4096, 700}, true});
  return cases;
}

// Runs without a device: every case is a valid decode batch that FusedDecodeShapeFits takes, and together they reach
// the kernel's edges: rows with fewer visible blocks than top_k (-1 slots), rows whose CTAs score 4 blocks each,
// partial local blocks, more than one query in a sequence, forced init and local blocks, blocks of 64 keys.
TEST(GpuFusedDecode, CasesReachTheKernelsEdges) {
  bool short_row = false, full_row = false, partial_local = false, multi_query = false, forced = false, bk64 = false;
  for (const FusedCase& c : FusedCases()) {
    ASSERT_TRUE(ValidateConfig(c.config).ok()) << c.name;
    ASSERT_EQ(c.q_lens.size(), c.k_lens.size()) << c.name;
    const int64_t bk = c.config.block_size, top_k = c.config.top_k;
    for (size_t b = 0; b < c.q_lens.size(); ++b) {
      ASSERT_LE(c.q_lens[b], c.k_lens[b]) << c.name;
      const int64_t visible = (c.k_lens[b] - 1) / bk + 1;
      ASSERT_TRUE(gpu::FusedDecodeShapeFits(gpu::AttendGeometryOf(c.config, 1), c.config.index_head_dim, visible))
          << c.name;
      short_row = short_row || visible < top_k;
      full_row = full_row || visible == top_k * gpu::kFusedDecodeMaxBlocksPerCta;
      partial_local = partial_local || c.k_lens[b] % bk != 0;
      multi_query = multi_query || c.q_lens[b] > 1;
    }
    forced = forced || c.config.init_blocks > 0 || c.config.local_blocks > 1;
    bk64 = bk64 || bk == 64;
  }
  EXPECT_TRUE(short_row && full_row && partial_local && multi_query && forced && bk64);
}

#if defined(MSA_HAVE_CUDA)
// Every case at index mma and wgmma: the fused step's selection, out, lse and first bad (query, group) are the
// separate stages' bits. The separate selection is also checked against SPEC section 2's shape (the local block last,
// -1 padding) and the outputs for NaN (a poisoned value left unwritten), so that two equal wrong answers fail too.
TEST(GpuFusedDecode, OneLaunchGivesTheSeparateStagesBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  for (const FusedCase& c : FusedCases()) {
    const LengthsBatch lengths(c.q_lens, c.k_lens);
    const Batch batch = lengths.batch();
    StepInputs inputs;
    MakeInputs(c.config, batch, c.overflow, &inputs);
    for (const char* index : {"mma", "wgmma"}) {
      const std::string apart = std::string("index=") + index + ",topk=cta,attend=split-k";
      gpu::KernelPlan requested, separate, fused;
      ASSERT_TRUE(gpu::ParseKernelPlan(apart, &requested).ok());
      const gpu::KernelShapes shapes = gpu::ShapesOf(c.config, batch);
      if (!gpu::PlanKernels(c.config, shapes, gpu::CurrentDeviceCaps(), requested, &separate).ok()) continue;
      requested.attend = gpu::AttendKernel::kFusedDecode;
      const Status planned = gpu::PlanKernels(c.config, shapes, gpu::CurrentDeviceCaps(), requested, &fused);
      ASSERT_TRUE(planned.ok()) << c.name << ": " << planned.message();  // split-k runs, so fused-decode must
      StepOutputs expected, got;
      ASSERT_TRUE(RunStep(c.config, batch, separate, inputs, gpu::OutputFormat::kFp64, &expected).ok()) << c.name;
      ASSERT_TRUE(RunStep(c.config, batch, fused, inputs, gpu::OutputFormat::kFp64, &got).ok()) << c.name;
      const std::string what = c.name + " at index=" + index;
      EXPECT_EQ(BitDiffs(expected.topk, got.topk), 0) << what << ": topk";
      EXPECT_EQ(BitDiffs(expected.out, got.out), 0) << what << ": out";
      EXPECT_EQ(BitDiffs(expected.lse, got.lse), 0) << what << ": lse";
      EXPECT_EQ(expected.bad_row, got.bad_row) << what << ": the first non-finite (query, group)";
      const int64_t top_k = c.config.top_k, total_q = batch.total_q();
      const int64_t last_row = (total_q - 1) * c.config.num_kv_heads + 1;
      EXPECT_EQ(expected.bad_row, c.overflow ? uint64_t(last_row) : ~0ull) << what;
      if (c.overflow) continue;  // scores past fp32: the selection and outputs carry no meaning, only their bits
      for (int64_t row = 0; row < c.config.num_kv_heads * total_q; ++row) {
        const int64_t t = row % total_q;
        int64_t b = 0;
        while (batch.cu_seqlens_q[b + 1] <= t) ++b;
        const int64_t pos = c.k_lens[b] - c.q_lens[b] + (t - batch.cu_seqlens_q[b]);
        const int64_t visible = pos / c.config.block_size + 1, valid = std::min(visible, top_k);
        const int32_t* slots = &expected.topk[size_t(row * top_k)];
        EXPECT_EQ(slots[valid - 1], int32_t(visible - 1)) << what << ": row " << row << " ends with its local block";
        for (int64_t s = valid; s < top_k; ++s) EXPECT_EQ(slots[s], -1) << what << ": row " << row;
      }
      for (double x : expected.out) ASSERT_FALSE(std::isnan(x)) << what << ": out left unwritten";
      for (double x : expected.lse) ASSERT_FALSE(std::isnan(x)) << what << ": lse left unwritten";
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "attend=split-k does not run on this device (needs sm_90a clusters)";
  std::printf("fused-decode = separate stages on %lld runs\n", static_cast<long long>(compared));
}
#endif

}  // namespace
}  // namespace msa::gpu_test
