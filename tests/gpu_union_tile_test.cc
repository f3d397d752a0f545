// Path U of the main branch (attend=union-tile, gpu/attend/union_tile.cu) and the two paths routed per tile
// (attend=routed, gpu/attend/union_route.cu), on both path-U kernels (union-tile, union-tile-ws). A union tile of
// consecutive queries walks the union of their selections, each row masked to its own blocks. Tested here: a row's out
// and lse bits depend on its own selection only, not on which blocks its tile's other queries chose; the device planner
// routes every tile as the host planner (gpu/common/union_tile_plan.h) does; and attend=routed gives each row the bits
// of the path its tile took (path U's or kv-outer-wgmma-p16's). gpu_plans_test judges both kernels' outputs against the
// reference under the oracle. Without a usable sm_90a device the tests skip saying why.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bench/selections.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/union_tile_plan.h"
#include "oracle/cases.h"
#include "oracle/problem.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_buffer.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/kernels.h"
#endif

namespace msa::gpu_test {
namespace {

// Every odd query keeps only the first block of each of its rows: still a valid selection (SPEC section 2 asks a
// row for at least one block), and the union of every tile with an odd query in it changes.
std::vector<int32_t> OddQueriesKeepOneBlock(const Problem& problem, std::vector<int32_t> topk) {
  const int64_t total_q = problem.batch().total_q(), top_k = problem.config.top_k;
  for (int64_t r = 0; r < problem.config.num_kv_heads; ++r) {
    for (int64_t t = 1; t < total_q; t += 2) {
      for (int64_t slot = 1; slot < top_k; ++slot) topk[size_t((r * total_q + t) * top_k + slot)] = -1;
    }
  }
  return topk;
}

// The cases every test here walks: the plan cases, every other case, and a prefill of M3's group of 16 heads with
// 702 union tiles (2801 queries: the last tile holds one), 5.3 per multiprocessor of an H200: union-tile-ws's
// persistent CTAs take several tiles each, some at least 5, so that each of their two union tables is reused twice.
std::vector<TestCase> UnionTestCases() {
  std::vector<TestCase> cases = CasesTagged(kTagGpuPlans);
  for (TestCase& c : AllCases()) cases.push_back(std::move(c));
  cases.push_back(MakeCase({.kind = "union_many_tiles",
                            .hq = 32,
                            .hkv = 2,
                            .dim = 128,
                            .block_size = 128,
                            .top_k = 16,
                            .pooling = Pooling::kMax,
                            .lengths = {{2500, 9000}, {301, 3000}},
                            .dtype = DType::kBF16,
                            .seed = 510}));
  return cases;
}

// The main branch alone under attend=`kernel` on the given selection [Hidx, total_q, top_k].
Status AttendUnder(const Problem& problem, const char* kernel, const std::vector<int32_t>& topk, Outputs* outputs) {
  const ScopedPlan plan("attend", kernel);
  outputs->Allocate(problem);
  return Attend(*Gpu(), problem.config, problem.attention_inputs(), SelectionView{topk.data()},
                outputs->attention_outputs());
}

TEST(GpuUnionTile, ARowsBitsDependOnItsOwnSelectionOnly) {
  MSA_REQUIRE_GPU();
  int64_t compared_rows = 0, cases = 0;
  const std::vector<TestCase> test_cases = UnionTestCases();
  for (const TestCase& test_case : test_cases) {
    Problem problem = GenerateProblem(test_case.spec);
    for (const auto& [precision, kernel] :
         {std::pair{Precision::kBf16, "union-tile"}, std::pair{Precision::kFp16, "union-tile"},
          std::pair{Precision::kBf16, "union-tile-ws"}}) {
      problem.config.precision = precision;
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision)) + " on " + kernel;
      if (!Runnable(problem, std::string("attend=") + kernel)) continue;
      Outputs selected;
      ASSERT_TRUE(RunBackend(*Gpu(), problem, &selected).ok()) << what;
      Outputs whole, thinned;
      Status status = AttendUnder(problem, kernel, selected.topk_indices, &whole);
      ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      const std::vector<int32_t> thinned_topk = OddQueriesKeepOneBlock(problem, selected.topk_indices);
      status = AttendUnder(problem, kernel, thinned_topk, &thinned);
      ASSERT_TRUE(status.ok()) << what << " (thinned): " << status.message();
      const int64_t total_q = problem.batch().total_q(), hq = problem.config.num_q_heads;
      const int64_t dv = problem.config.value_dim;
      int64_t moved = 0;
      for (int64_t t = 0; t < total_q; t += 2) {
        for (int64_t head = 0; head < hq; ++head) {
          const int64_t row = t * hq + head;
          moved += !SameRow(whole.out, thinned.out, row, dv) || !SameRow(whole.lse, thinned.lse, row, 1);
          ++compared_rows;
        }
      }
      EXPECT_EQ(moved, 0) << what << ": even queries' rows changed when only odd queries' selections did";
      // The thinned odd rows must have moved somewhere, or the comparison above proved nothing about masking.
      if (thinned_topk != selected.topk_indices) {
        EXPECT_NE(BitDiffs(whole.out, thinned.out), 0) << what << ": thinning the odd queries changed nothing";
      }
      ++cases;
    }
  }
  std::printf("union-tile: %lld (query, head) rows unchanged over %lld case runs\n",
              static_cast<long long>(compared_rows), static_cast<long long>(cases));
  if (cases == 0) GTEST_SKIP() << "attend=union-tile does not run on this device (needs sm_90a)";
}

// union-tile-ws (bulk tensor copies of whole blocks, warp-specialized) gives union-tile's bits (cp.async of the seen
// keys, zero-filled), at bf16 and fp16, on the gpu's own selection and on the thinned one.
TEST(GpuUnionTile, WarpSpecializedKernelGivesThePlainKernelsBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  const std::vector<TestCase> test_cases = UnionTestCases();
  for (const TestCase& test_case : test_cases) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision));
      if (!Runnable(problem, "attend=union-tile-ws")) continue;
      Outputs selected;
      ASSERT_TRUE(RunBackend(*Gpu(), problem, &selected).ok()) << what;
      for (const std::vector<int32_t>& topk :
           {selected.topk_indices, OddQueriesKeepOneBlock(problem, selected.topk_indices)}) {
        Outputs plain, specialized;
        ASSERT_TRUE(AttendUnder(problem, "union-tile", topk, &plain).ok()) << what;
        ASSERT_TRUE(AttendUnder(problem, "union-tile-ws", topk, &specialized).ok()) << what;
        EXPECT_EQ(BitDiffs(plain.out, specialized.out), 0) << what << ": out";
        EXPECT_EQ(BitDiffs(plain.lse, specialized.lse), 0) << what << ": lse";
        ++compared;
      }
    }
  }
  std::printf("union-tile-ws = union-tile bit for bit on %lld runs\n", static_cast<long long>(compared));
  if (compared == 0) GTEST_SKIP() << "attend=union-tile-ws does not run on this device (needs sm_90a)";
}

TEST(GpuUnionTile, RoutedRowsHaveTheBitsOfTheirTilesPath) {
  MSA_REQUIRE_GPU();
  int64_t u_rows = 0, k_rows = 0, cases = 0;
  const std::vector<TestCase> test_cases = UnionTestCases();
  for (const TestCase& test_case : test_cases) {
    Problem problem = GenerateProblem(test_case.spec);
    problem.config.precision = Precision::kBf16;
    const std::string what = test_case.name;
    if (!Runnable(problem, "attend=routed")) continue;
    Outputs selected, routed, union_tile, kv_outer;
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &selected).ok()) << what;
    const std::vector<int32_t>& topk = selected.topk_indices;
    ASSERT_TRUE(AttendUnder(problem, "routed", topk, &routed).ok()) << what;
    ASSERT_TRUE(AttendUnder(problem, "union-tile", topk, &union_tile).ok()) << what;
    ASSERT_TRUE(AttendUnder(problem, "kv-outer-wgmma-p16", topk, &kv_outer).ok()) << what;
    gpu::UnionTilePlan plan;
    gpu::PlanUnionTiles(problem.config, problem.batch(), topk.data(), gpu::kH200Ceilings, &plan);
    const Config& config = problem.config;
    const int64_t total_q = problem.batch().total_q(), hq = config.num_q_heads, hkv = config.num_kv_heads;
    const int64_t group = hq / hkv, qpt = gpu::kUnionTileRows / group;
    int64_t wrong = 0;
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t head = 0; head < hq; ++head) {
        const bool on_u = plan.path_u[size_t(t / qpt * hkv + head / group)] != 0;
        const Outputs& path = on_u ? union_tile : kv_outer;
        const int64_t row = t * hq + head;
        wrong += !SameRow(path.out, routed.out, row, config.value_dim) || !SameRow(path.lse, routed.lse, row, 1);
        (on_u ? u_rows : k_rows) += 1;
      }
    }
    EXPECT_EQ(wrong, 0) << what << ": rows of attend=routed differ from the path their tile took";
    ++cases;
  }
  std::printf("routed: %lld rows on path U, %lld on path K over %lld cases\n", static_cast<long long>(u_rows),
              static_cast<long long>(k_rows), static_cast<long long>(cases));
  if (cases == 0) GTEST_SKIP() << "attend=routed does not run on this device (needs sm_90a)";
  EXPECT_GT(u_rows, 0) << "no case took path U: the comparison proved nothing about it";
  EXPECT_GT(k_rows, 0) << "no case took path K: the comparison proved nothing about it";
}

#if defined(MSA_HAVE_CUDA)
// RouteUnionTiles on the device against PlanUnionTiles on the host, on the benchmarks' selections (bench/
// selections.h) of an M3 prefill at ceilings that put the threshold below, at and above their unions.
TEST(GpuUnionTile, DevicePlannerRoutesEveryTileAsTheHostPlanner) {
  MSA_REQUIRE_GPU();
  bench::SelectionShape shape;
  shape.q_len = 2048;
  shape.pos0 = 30000;
  Config config;  // M3
  config.precision = Precision::kBf16;
  const int64_t total_q = shape.total_q();
  const std::vector<int32_t> cu_q = {0, int32_t(total_q)}, cu_k = {0, int32_t(shape.pos0 + shape.q_len)};
  const gpu::AttendGeometry g = gpu::AttendGeometryOf(config, total_q);
  if (!gpu::UnionTileFits(g, gpu::CurrentDeviceCaps())) GTEST_SKIP() << "path U needs an sm_90a device";
  gpu::DeviceBuffer<int32_t> topk, first_block;
  gpu::DeviceBuffer<uint8_t> route;
  ASSERT_TRUE(topk.Allocate(config.num_kv_heads * total_q * config.top_k, "topk").ok());
  ASSERT_TRUE(first_block.Allocate(total_q, "first_block").ok());
  ASSERT_TRUE(route.Allocate(gpu::UnionTileCount(g), "route").ok());
  ASSERT_EQ(cudaMemset(first_block.get(), 0, size_t(total_q) * 4), cudaSuccess);  // one sequence
  int64_t compared = 0, u_tiles = 0;
  for (const char* name : {"random", "overlap50", "overlap90", "last", "pages"}) {
    const bench::SelectionGenerator& generator = *bench::FindSelectionGenerator(name);
    std::vector<int32_t> host_topk(size_t(shape.num_groups * total_q * shape.top_k));
    generator.make(shape, generator.keep, 11, &host_topk);
    ASSERT_EQ(cudaMemcpy(topk.get(), host_topk.data(), host_topk.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (double scale : {0.25, 1.0, 4.0}) {
      const gpu::UnionTileCeilings ceilings{gpu::kH200Ceilings.gemm_flops_per_s * scale,
                                            gpu::kH200Ceilings.copy_bytes_per_s};
      gpu::UnionTilePlan plan;
      gpu::PlanUnionTiles(config, Batch{cu_q, cu_k}, host_topk.data(), ceilings, &plan);
      ASSERT_EQ(gpu::RouteUnionTiles(topk.get(), first_block.get(), g, gpu::UnionTileRoutingOf(config, ceilings),
                                     route.get()),
                cudaSuccess);
      std::vector<uint8_t> device_route(plan.path_u.size());
      ASSERT_EQ(cudaMemcpy(device_route.data(), route.get(), device_route.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(device_route, plan.path_u) << name << " at " << scale << "x the GEMM ceiling";
      compared += int64_t(plan.path_u.size());
      u_tiles += plan.u_tiles();
    }
  }
  std::printf("device route = host route on %lld tiles, %lld of them path U\n", static_cast<long long>(compared),
              static_cast<long long>(u_tiles));
  EXPECT_GT(u_tiles, 0);
  EXPECT_LT(u_tiles, compared);
}
#endif

}  // namespace
}  // namespace msa::gpu_test
