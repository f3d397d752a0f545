// The gpu backend's kernel pairs documented to give the same bits, each compared bit for bit where the planner runs
// both (a pair it refuses on this device is skipped, never compared with itself), on the cases built for it:
// index=wgmma vs mma (max-pooling canonical, large and tied cases; the same refusal of overflowing index scores),
// topk=threshold and cta vs warp (split rows, exact ties, short rows), lists=direct vs general (decode batches),
// batch=batched vs per-sequence (decode batches, overflow refused alike); and on local_blocks > 1 and fp16 block
// scores, every forced index-branch plan giving the default's selection bits and every forced main-branch kernel
// within the oracle's bound. tests/gpu_plans_test.cc runs every runnable plan on its own shapes; these add the shapes
// that reach each pair's edge cases. Without a usable CUDA device the device tests skip saying why; the checks of the
// cases themselves run anyway.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "msa/forced_blocks.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "reference/reference.h"
#include "tests/gpu_test_support.h"

namespace msa::gpu_test {
namespace {

// The gpu's outputs of `problem` with the plan's index=kernel (gpu/common/kernel_plan.h).
Status RunWithIndexKernel(const Problem& problem, const char* kernel, Outputs* outputs) {
  const ScopedPlan plan("index", kernel);
  return RunBackend(*Gpu(), problem, outputs);
}

// index=wgmma (BlockMaxScoresWgmma, gpu/index/block_max_wgmma.cu) gives the same bits as the mma.sync
// kernel BlockMaxScores on every max-pooling case (canonical, large and tied ones, bf16 and fp16): the block
// scores, hence the selection, index_lse and the main branch. Its errors are the same too: index_q scaled to
// about 3e37 makes dot products overflow to inf (bf16) or the inputs themselves inf (fp16), and both kernels must
// name the same first bad (query, group); index scales above 1 take the wgmma kernel's scaled check, once with every
// scaled score finite and once with finite dots that overflow when scaled. On a device other than sm_90a the planner
// refuses index=wgmma and the test skips (it never compares a kernel with itself).
TEST(GpuBackend, WgmmaIndexKernelGivesTheMmaKernelsBits) {
  MSA_REQUIRE_GPU();
  std::vector<TestCase> cases;
  for (TestCase& c : AllCases()) {
    if (c.spec.config.pooling == Pooling::kMax) cases.push_back(std::move(c));
  }
  for (TestCase& c : CasesTagged(kTagGpuTiedBlockMax | kTagGpuIndexOverflow)) cases.push_back(std::move(c));
  int64_t compared = 0, refused = 0;
  for (const TestCase& test_case : cases) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision));
      if (!Runnable(problem, "index=wgmma")) continue;  // not on this device: nothing to compare
      Outputs mma, wgmma;
      const Status mma_status = RunWithIndexKernel(problem, "mma", &mma);
      const Status wgmma_status = RunWithIndexKernel(problem, "wgmma", &wgmma);
      EXPECT_EQ(mma_status.code(), wgmma_status.code()) << what << ": " << wgmma_status.message();
      EXPECT_EQ(mma_status.message(), wgmma_status.message()) << what;
      if (!mma_status.ok()) {
        ++refused;
        continue;
      }
      ExpectSameBits(mma, wgmma, what + ", wgmma vs mma index kernel");
      ++compared;
    }
  }
  if (compared == 0 && refused == 0) GTEST_SKIP() << "index=wgmma cannot run on this device (needs sm_90a)";
  EXPECT_GT(refused, 0) << "the overflow case should be refused by both kernels";
  std::printf(
      "wgmma vs mma index kernel: %lld runs bit-identical, %lld refused alike (on a device other than "
      "sm_90a the test skips)\n",
      static_cast<long long>(compared), static_cast<long long>(refused));
}

// Runs without a device: the kTagGpuTopKSplit cases are valid problems, and in the tied ones exact ties decide most
// selection rows (by the FP64 reference alone, as GpuBackend.TiedBlockMaxCasesHaveExactTiesThatDecideTheSelection).
TEST(GpuBackend, TopKSplitCasesAreValidAndTheTiedOnesAreDecidedByTies) {
  for (const TestCase& test_case : CasesTagged(kTagGpuTopKSplit)) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    const Status status = RunBackend(*FindBackend("reference"), problem, &reference);
    ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    // topk_short rows keep every candidate: nothing for a tie to decide there.
    if (!test_case.spec.few_valued_index || test_case.name.rfind("topk_split_tied", 0) != 0) continue;
    const TieRows ties = FindTieRows(problem, reference);
    const int64_t rows = int64_t(ties.exact.size());
    EXPECT_EQ(ties.exact_rows, rows) << test_case.name;
    EXPECT_GE(ties.tie_decided_rows, rows / 2) << test_case.name;
    std::printf("%s: %lld of %lld rows decided by ties\n", test_case.name.c_str(),
                static_cast<long long>(ties.tie_decided_rows), static_cast<long long>(rows));
  }
}

// The gpu's outputs of `problem` with the plan's topk=kernel.
Status RunWithTopKKernel(const Problem& problem, const char* kernel, Outputs* outputs) {
  const ScopedPlan plan("topk", kernel);
  return RunBackend(*Gpu(), problem, outputs);
}

// The top-k kernels documented to give RankTopK's selection entry for entry, hence the same bits everywhere:
// topk=threshold (the threshold filter, split rows and their merge) and topk=cta (group-maxima threshold, survivors
// ranked by counting in one CTA per row).
constexpr const char* kWarpTwinTopKKernels[] = {"threshold", "cta"};

// Each of kWarpTwinTopKKernels against topk=warp on every max-pooling case (canonical, large, tied) and on the
// kTagGpuTopKSplit cases, at bf16 and fp16.
TEST(GpuBackend, WarpTwinTopKKernelsGiveTheWarpKernelsSelection) {
  MSA_REQUIRE_GPU();
  std::vector<TestCase> cases;
  for (TestCase& c : AllCases()) {
    if (c.spec.config.pooling == Pooling::kMax) cases.push_back(std::move(c));
  }
  for (TestCase& c : CasesTagged(kTagGpuTiedBlockMax)) cases.push_back(std::move(c));
  for (TestCase& c : CasesTagged(kTagGpuTopKSplit)) cases.push_back(std::move(c));
  for (const char* twin : kWarpTwinTopKKernels) {
    int64_t compared = 0;
    for (const TestCase& test_case : cases) {
      Problem problem = GenerateProblem(test_case.spec);
      for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
        problem.config.precision = precision;
        const std::string what = test_case.name + " at " + std::string(PrecisionName(precision)) + ", topk=" + twin;
        if (!Runnable(problem, std::string("topk=") + twin)) continue;
        Outputs warp, fast;
        const Status warp_status = RunWithTopKKernel(problem, "warp", &warp);
        const Status fast_status = RunWithTopKKernel(problem, twin, &fast);
        ASSERT_TRUE(warp_status.ok()) << what << ": " << warp_status.message();
        ASSERT_TRUE(fast_status.ok()) << what << ": " << fast_status.message();
        const int64_t top_k = problem.config.top_k, rows = int64_t(warp.topk_indices.size()) / top_k;
        int64_t differing_rows = 0;
        for (int64_t row = 0; row < rows; ++row) {
          if (SameRow(warp.topk_indices, fast.topk_indices, row, top_k)) continue;
          if (++differing_rows > 8) continue;  // list the first 8
          ADD_FAILURE() << what << ", selection row " << row << "\n  warp:" << FormatRow(warp.topk_indices, row, top_k)
                        << "\n  " << twin << ":" << FormatRow(fast.topk_indices, row, top_k);
        }
        EXPECT_EQ(differing_rows, 0) << what;
        ExpectSameBits(warp, fast, what + " vs topk=warp");
        ++compared;
      }
    }
    EXPECT_GT(compared, 0) << "topk=" << twin << " ran on no case";
    std::printf("topk=%s vs warp: %lld runs compared\n", twin, static_cast<long long>(compared));
  }
}

// Runs without a device: the kTagGpuDecodeLists cases are valid problems.
TEST(GpuBackend, DecodeListCasesAreValidProblems) {
  for (const TestCase& test_case : CasesTagged(kTagGpuDecodeLists)) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    const Status status = RunBackend(*FindBackend("reference"), problem, &reference);
    EXPECT_TRUE(status.ok()) << test_case.name << ": " << status.message();
  }
}

// The gpu's outputs of `problem` with attend=attend_kernel and lists=lists (gpu/common/kernel_plan.h).
Status RunWithKvLists(const Problem& problem, const char* attend_kernel, const char* lists, Outputs* outputs) {
  const ScopedPlan attend_plan("attend", attend_kernel);
  const ScopedPlan lists_plan("lists", lists);
  return RunBackend(*Gpu(), problem, outputs);
}

// lists=direct (one list-building kernel per chunk where every sequence has at most one query) gives the
// general lists' bits on every output, on the mma.sync and the wgmma KV-outer tiles (on a device other than sm_90
// kv-outer-wgmma does not fit and both runs take the mma.sync tiles), at bf16 and fp16.
TEST(GpuBackend, DirectKvListsGiveTheGeneralListsBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  for (const TestCase& test_case : CasesTagged(kTagGpuDecodeLists)) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      for (const char* attend_kernel : {"kv-outer", "kv-outer-wgmma"}) {
        const std::string what =
            test_case.name + " at " + std::string(PrecisionName(precision)) + " on " + attend_kernel;
        if (!Runnable(problem, std::string("attend=") + attend_kernel + ",lists=direct")) continue;
        Outputs general, direct;
        const Status general_status = RunWithKvLists(problem, attend_kernel, "general", &general);
        const Status direct_status = RunWithKvLists(problem, attend_kernel, "direct", &direct);
        ASSERT_TRUE(general_status.ok()) << what << ": " << general_status.message();
        ASSERT_TRUE(direct_status.ok()) << what << ": " << direct_status.message();
        ExpectSameBits(general, direct, what + ", direct vs general KV-outer lists");
        ++compared;
      }
    }
  }
  std::printf("direct vs general KV-outer lists: %lld runs bit-identical\n", static_cast<long long>(compared));
}

// attend=split-k (one CTA per (query, group, slot), each (query, group)'s cluster merging its rows) gives kv-outer's
// bits on every output: the same tile code, and the same merge arithmetic over the same partials. On the decode-list
// cases (decode batches, rows with fewer blocks than top_k: -1 slots without a partial) and the plans cases (prefill:
// many queries per chunk), at bf16 and fp16.
TEST(GpuBackend, SplitKGivesTheKvOuterBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  std::vector<TestCase> test_cases = CasesTagged(kTagGpuDecodeLists);
  for (TestCase& c : CasesTagged(kTagGpuPlans)) test_cases.push_back(std::move(c));
  for (const TestCase& test_case : test_cases) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision));
      if (!Runnable(problem, "attend=split-k")) continue;
      Outputs kv_outer, split_k;
      const Status kv_outer_status = RunWithKvLists(problem, "kv-outer", "general", &kv_outer);
      ASSERT_TRUE(kv_outer_status.ok()) << what << ": " << kv_outer_status.message();
      const ScopedPlan split_plan("attend", "split-k");
      const Status split_status = RunBackend(*Gpu(), problem, &split_k);
      ASSERT_TRUE(split_status.ok()) << what << ": " << split_status.message();
      ExpectSameBits(kv_outer, split_k, what + ", split-k vs kv-outer");
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
  std::printf("split-k vs kv-outer: %lld runs bit-identical\n", static_cast<long long>(compared));
}

// attend=kv-outer-ws (a producer thread's bulk tensor copies, two consumer warpgroups taking turns) gives
// kv-outer-wgmma-p16's bits on every output: the same lists, tile math and merge. On the decode-list cases (a K / V
// block per tile: the block stages turn over every tile), the plans cases and two prefills of M3's dims with groups of
// 8 and 16 heads (buckets of many tiles, runs that cross sequences), at bf16 and fp16; the cases whose group size is
// not a multiple of 8 are refused by the planner and skipped.
TEST(GpuBackend, WarpSpecializedKvOuterGivesTheP16Bits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  std::vector<ProblemSpec> specs;
  for (const TestCase& c : CasesTagged(kTagGpuDecodeLists | kTagGpuPlans)) specs.push_back(c.spec);
  specs.push_back(MakeSpec(16, 2, 128, 128, 16, 1, Pooling::kMax, {{1500, 1500}, {700, 5000}}, DType::kBF16, 811));
  specs.push_back(MakeSpec(32, 2, 128, 128, 16, 1, Pooling::kMax, {{900, 3000}, {1, 9000}}, DType::kBF16, 812));
  for (const ProblemSpec& spec : specs) {
    Problem problem = GenerateProblem(spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = CaseName("ws_twin", spec) + " at " + std::string(PrecisionName(precision));
      if (!Runnable(problem, "attend=kv-outer-ws")) continue;
      Outputs p16, ws;
      {
        const ScopedPlan plan("attend", "kv-outer-wgmma-p16");
        const Status status = RunBackend(*Gpu(), problem, &p16);
        ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      }
      {
        const ScopedPlan plan("attend", "kv-outer-ws");
        const Status status = RunBackend(*Gpu(), problem, &ws);
        ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      }
      ExpectSameBits(p16, ws, what + ", kv-outer-ws vs kv-outer-wgmma-p16");
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "attend=kv-outer-ws does not run on this device (sm_90a only)";
  std::printf("kv-outer-ws vs kv-outer-wgmma-p16: %lld runs bit-identical\n", static_cast<long long>(compared));
}

// Runs without a device: the kTagGpuDecodeBatch cases are valid problems and decode batches: at most 16 queries per
// sequence (gpu/common/geometry.h IsDecodeBatch).
TEST(GpuBackend, DecodeBatchCasesAreValidDecodeBatches) {
  for (const TestCase& test_case : CasesTagged(kTagGpuDecodeBatch)) {
    const Problem problem = GenerateProblem(test_case.spec);
    const Status status = ValidateProblem(problem);
    EXPECT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    int64_t longest_q = 0;
    const Batch& batch = problem.index_inputs().batch;
    for (int64_t b = 0; b < batch.num_sequences(); ++b) {
      longest_q = std::max<int64_t>(longest_q, batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b]);
    }
    EXPECT_GE(longest_q, 1) << test_case.name;
    EXPECT_LE(longest_q, 16) << test_case.name;
  }
}

// The gpu's outputs of `problem` with batch=index_batch and the
// index and top-k kernels forced.
Status RunWithIndexBatch(const Problem& problem, const char* index_batch, const char* index_kernel,
                         const char* topk_kernel, Outputs* outputs) {
  const ScopedPlan batch_plan("batch", index_batch);
  const ScopedPlan index_plan("index", index_kernel);
  const ScopedPlan topk_plan("topk", topk_kernel);
  return RunBackend(*Gpu(), problem, outputs);
}

// batch=batched (one block-max launch and one top-k for every sequence of a decode batch) gives the
// per-sequence launches' bits on every output (block scores, selection, index_lse, out, lse) and the same refusal of
// a non-finite index score, on the mma.sync and wgmma index kernels (on a device other than sm_90 both take
// mma.sync) and the warp and threshold top-k kernels, at bf16 and fp16.
TEST(GpuBackend, BatchedDecodeIndexGivesThePerSequenceBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0, refused = 0;
  for (const TestCase& test_case : CasesTagged(kTagGpuDecodeBatch)) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      for (const char* index_kernel : {"mma", "wgmma"}) {
        for (const char* topk_kernel : {"warp", "threshold"}) {
          const std::string what = test_case.name + " at " + std::string(PrecisionName(precision)) + ", index " +
                                   index_kernel + ", top-k " + topk_kernel;
          if (!Runnable(problem, std::string("index=") + index_kernel + ",topk=" + topk_kernel + ",batch=batched")) {
            continue;
          }
          Outputs per_sequence, batched;
          const Status per_sequence_status =
              RunWithIndexBatch(problem, "per-sequence", index_kernel, topk_kernel, &per_sequence);
          const Status batched_status = RunWithIndexBatch(problem, "batched", index_kernel, topk_kernel, &batched);
          EXPECT_EQ(per_sequence_status.code(), batched_status.code()) << what << ": " << batched_status.message();
          EXPECT_EQ(per_sequence_status.message(), batched_status.message()) << what;
          if (!per_sequence_status.ok()) {
            ++refused;
            continue;
          }
          const int64_t top_k = problem.config.top_k, rows = int64_t(batched.topk_indices.size()) / top_k;
          int64_t differing_rows = 0;
          for (int64_t row = 0; row < rows; ++row) {
            if (SameRow(per_sequence.topk_indices, batched.topk_indices, row, top_k)) continue;
            if (++differing_rows > 8) continue;  // list the first 8
            ADD_FAILURE() << what << ", selection row " << row
                          << "\n  per-sequence:" << FormatRow(per_sequence.topk_indices, row, top_k)
                          << "\n  batched:     " << FormatRow(batched.topk_indices, row, top_k);
          }
          EXPECT_EQ(differing_rows, 0) << what;
          ExpectSameBits(per_sequence, batched, what + ", batched vs per-sequence index branch");
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(refused, 0) << "the overflow case should be refused by both paths";
  std::printf("batched vs per-sequence index branch: %lld runs bit-identical, %lld refused alike\n",
              static_cast<long long>(compared), static_cast<long long>(refused));
}

// What SPEC section 2 makes of a selection row's slots (gpu/topk/rank_row.cuh, include/msa/forced_blocks.h).
struct RowKinds {
  int64_t rows = 0;
  int64_t overlapping = 0;      // the init blocks and the trailing forced blocks share a block
  int64_t none_ranked = 0;      // no ranked candidate in the row (take 0: no candidate, or no room)
  int64_t ranking_decides = 0;  // some ranked, and more candidates than that (the ranking leaves some out)
};

RowKinds CountRowKinds(const Problem& problem) {
  const Config& c = problem.config;
  RowKinds kinds;
  for (const reference::QueryPlace& place : reference::PlaceQueries(problem.batch())) {
    const ForcedBlocks f = ForcedBlocksOf(place.position / c.block_size + 1, c.init_blocks, c.local_blocks, c.top_k);
    kinds.rows += c.num_kv_heads;
    kinds.overlapping += c.num_kv_heads * (f.local_begin < c.init_blocks && c.init_blocks > 0);
    kinds.none_ranked += c.num_kv_heads * (f.take == 0);
    kinds.ranking_decides += c.num_kv_heads * (f.take > 0 && f.candidates() > f.take);
  }
  return kinds;
}

// Rows [Hidx, total_q] whose selections differ as sets of blocks.
int64_t RowsWithOtherBlocks(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t top_k) {
  int64_t rows = 0;
  for (size_t begin = 0; begin < a.size(); begin += size_t(top_k)) {
    std::vector<int32_t> ra(a.begin() + begin, a.begin() + begin + top_k);
    std::vector<int32_t> rb(b.begin() + begin, b.begin() + begin + top_k);
    std::sort(ra.begin(), ra.end());
    std::sort(rb.begin(), rb.end());
    rows += ra != rb;
  }
  return rows;
}

// Runs without a device: the cases are what the gpu tests (below, in gpu_exact_test.cc and in gpu_support_test.cc)
// need them to be, by the reference alone. The local
// cases hold overlapping forced sets and rows with nothing to rank, and in each but local_all_forced (where no row
// ranks any) the ranking leaves blocks out; in each fp16 tie case every exact block max is an fp32 value (so bf16 /
// fp16 maxima are exact), the binary16 rounding changes the selection of some rows against score_format native, and
// ties decide some; the overflow problems are refused with the message the gpu must give.
TEST(GpuBackend, LocalBlocksAndFp16TieCasesAreWhatTheGpuTestsNeed) {
  RowKinds all;
  for (const GpuCase& c : LocalBlocksCases()) {
    Outputs reference;
    const Status status = RunReference(c.problem, &reference);
    ASSERT_TRUE(status.ok()) << c.name << ": " << status.message();
    const RowKinds kinds = CountRowKinds(c.problem);
    all.rows += kinds.rows;
    all.overlapping += kinds.overlapping;
    all.none_ranked += kinds.none_ranked;
    all.ranking_decides += kinds.ranking_decides;
    if (c.name.rfind("local_all_forced", 0) == 0) {
      EXPECT_EQ(kinds.none_ranked, kinds.rows) << c.name;
    } else {
      EXPECT_GT(kinds.ranking_decides, 0) << c.name;
    }
    std::printf("%s: %lld rows, %lld with overlapping forced sets, %lld with none ranked, %lld decided by ranking\n",
                c.name.c_str(), static_cast<long long>(kinds.rows), static_cast<long long>(kinds.overlapping),
                static_cast<long long>(kinds.none_ranked), static_cast<long long>(kinds.ranking_decides));
  }
  EXPECT_GT(all.overlapping, 0);
  EXPECT_GT(all.none_ranked, 0);
  for (const GpuCase& c : Fp16TieCases()) {
    Problem native = c.problem;
    native.config.score_format = ScoreFormat::kNative;
    Outputs fp16, exact;
    ASSERT_TRUE(RunReference(c.problem, &fp16).ok()) << c.name;
    ASSERT_TRUE(RunReference(native, &exact).ok()) << c.name;
    int64_t not_fp32 = 0;
    for (double score : exact.block_scores) not_fp32 += std::isfinite(score) && double(float(score)) != score;
    EXPECT_EQ(not_fp32, 0) << c.name << ": exact block maxima that are not fp32 values";
    const int64_t top_k = c.problem.config.top_k, rows = int64_t(fp16.topk_indices.size()) / top_k;
    const int64_t changed = RowsWithOtherBlocks(fp16.topk_indices, exact.topk_indices, top_k);
    const TieRows ties = FindTieRows(c.problem, fp16);
    EXPECT_GT(changed, 0) << c.name << ": the binary16 rounding should change some selections";
    EXPECT_GT(ties.any_tie_decided_rows, 0) << c.name;
    std::printf("%s: %lld rows, %lld select other blocks than with native scores, %lld decided by fp16 ties\n",
                c.name.c_str(), static_cast<long long>(rows), static_cast<long long>(changed),
                static_cast<long long>(ties.any_tie_decided_rows));
  }
  for (const bool positive : {true, false}) {
    Outputs reference;
    EXPECT_EQ(RunReference(Fp16OverflowProblem(positive), &reference).message(), Fp16OverflowMessage(positive));
  }
}

// SPEC section 2's rule applied to the gpu's own block scores (what its index branch ranked: under score_format fp16,
// binary16 values): every row of `gpu` is reference::PlaceSelection of its row of block scores, slot for slot (the
// candidates [init_end, local_begin) by score desc, id asc, then the init blocks, the trailing forced blocks, the local
// block last, -1). Under fp16 scores every finite block score is a binary16 value. Independent of any tolerance: it
// holds at every precision, whatever the scores' errors.
void ExpectRankedByItsOwnBlockScores(const Problem& problem, const Outputs& gpu, const std::string& what) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  std::vector<int32_t> expected(size_t(c.top_k));
  int64_t faults = 0;
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t row = r * total_q + t, visible = places[size_t(t)].position / c.block_size + 1;
      const double* scores = &gpu.block_scores[size_t(row * max_blocks)];
      reference::PlaceSelection(c, scores, visible, expected.data());
      bool binary16 = true;
      for (int64_t blk = 0; blk < visible && c.score_format == ScoreFormat::kFp16; ++blk) {
        binary16 = binary16 && (!std::isfinite(scores[blk]) || RoundToBinary16(scores[blk]) == scores[blk]);
      }
      const std::vector<int32_t> got(&gpu.topk_indices[size_t(row * c.top_k)],
                                     &gpu.topk_indices[size_t((row + 1) * c.top_k)]);
      if (got == expected && binary16) continue;
      if (++faults > 8) continue;  // list the first 8
      ADD_FAILURE() << what << ", group " << r << ", query " << t << (binary16 ? "" : ": a block score is not binary16")
                    << "\n  ranked by its block scores:" << FormatRow(expected, 0, c.top_k)
                    << "\n  gpu:                       " << FormatRow(got, 0, c.top_k);
    }
  }
  EXPECT_EQ(faults, 0) << what;
}

// bf16 and fp16 on the local-blocks and fp16-tie problems, under every kernel choice the plan forces:
//   index branch: index mma | wgmma (fp8 on the e4m3 case: the default there on an sm_90 device) x
//     topk warp | threshold x batch batched | per-sequence, each giving the default run's
//     selection outputs bit for bit (the kernels are documented to give the same bits), and the default run ranked by
//     its own block scores (ExpectRankedByItsOwnBlockScores); on the fp16 tie problems (exact maxima) and on the
//     local_tied problem's exact rows, the reference's selection and block scores themselves;
//   main branch: attend kv-outer-wgmma | kv-outer (each with lists direct | general) |
//     q-outer | gathered on the reference selection, out and lse within the oracle's bound (SPEC section 5).
// Plans the planner refuses on this device (wgmma off sm_90a, direct lists past decode) are skipped.
TEST(GpuBackend, LowPrecisionOnLocalBlocksAndFp16ScoresUnderEveryForcedKernel) {
  MSA_REQUIRE_GPU();
  std::vector<GpuCase> cases = LocalBlocksCases();
  const size_t tie_begin = cases.size();
  for (GpuCase& c : Fp16TieCases()) cases.push_back(std::move(c));
  int64_t index_runs = 0, attend_runs = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const bool fp16_ties = i >= tie_begin, e4m3 = cases[i].problem.config.index_format == IndexFormat::kE4M3;
    Problem problem = cases[i].problem;
    Outputs reference;
    ASSERT_TRUE(RunReference(problem, &reference).ok()) << cases[i].name;
    const TieRows exact_rows = FindTieRows(problem, reference);
    const int64_t top_k = problem.config.top_k, max_blocks = MaxBlocks(problem.config, problem.batch());
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = cases[i].name + " at " + std::string(PrecisionName(precision));
      Outputs base;
      const Status base_status = SelectWithIndexChoices(problem, "", "", "", &base);
      ASSERT_TRUE(base_status.ok()) << what << ": " << base_status.message();
      ExpectRankedByItsOwnBlockScores(problem, base, what);
      int64_t differing_rows = 0;
      for (int64_t row = 0; row < int64_t(exact_rows.exact.size()); ++row) {
        if (!fp16_ties && !exact_rows.exact[size_t(row)]) continue;
        if (SameRow(reference.topk_indices, base.topk_indices, row, top_k) &&
            SameRow(reference.block_scores, base.block_scores, row, max_blocks)) {
          continue;
        }
        if (++differing_rows > 8) continue;  // list the first 8
        ADD_FAILURE() << what << ", selection row " << row << " (exact block maxima)"
                      << "\n  reference:" << FormatRow(reference.topk_indices, row, top_k)
                      << "\n  gpu:      " << FormatRow(base.topk_indices, row, top_k);
      }
      EXPECT_EQ(differing_rows, 0) << what;
      const std::vector<const char*> index_kernels =
          e4m3 ? std::vector<const char*>{"fp8"} : std::vector<const char*>{"mma", "wgmma"};
      for (const char* index_kernel : index_kernels) {
        for (const char* topk_kernel : {"warp", "threshold"}) {
          for (const char* index_batch : {"batched", "per-sequence"}) {
            if (!Runnable(problem,
                          std::string("index=") + index_kernel + ",topk=" + topk_kernel + ",batch=" + index_batch)) {
              continue;
            }
            Outputs forced;
            const std::string how = what + ", index " + index_kernel + ", top-k " + topk_kernel + ", " + index_batch;
            const Status status = SelectWithIndexChoices(problem, index_kernel, topk_kernel, index_batch, &forced);
            ASSERT_TRUE(status.ok()) << how << ": " << status.message();
            ExpectSameSelectionBits(base, forced, how);
            ++index_runs;
          }
        }
      }
      for (const auto& [attend_kernel, lists] :
           std::vector<std::pair<const char*, const char*>>{{"kv-outer-wgmma", "direct"},
                                                            {"kv-outer-wgmma", "general"},
                                                            {"kv-outer", "direct"},
                                                            {"kv-outer", "general"},
                                                            {"q-outer", ""},
                                                            {"gathered", ""}}) {
        const std::string request =
            std::string("attend=") + attend_kernel + (*lists ? std::string(",lists=") + lists : "");
        if (!Runnable(problem, request)) continue;
        const std::string how = what + ", " + request;
        Outputs outputs;
        outputs.Allocate(problem);
        const ScopedPlan attend_plan("attend", attend_kernel);
        const ScopedPlan lists_plan("lists", lists);
        const Status status = Attend(*Gpu(), problem.config, problem.attention_inputs(),
                                     SelectionView{reference.topk_indices.data()}, outputs.attention_outputs());
        ASSERT_TRUE(status.ok()) << how << ": " << status.message();
        JudgeOptions options;
        options.precision = precision;
        Verdict verdict;
        ASSERT_TRUE(Judge(problem, reference, Candidate{std::nullopt, outputs.out, outputs.lse, std::nullopt}, options,
                          &verdict)
                        .ok());
        EXPECT_TRUE(verdict.passed()) << how << "\n" << FormatVerdict(verdict);
        ++attend_runs;
      }
    }
  }
  std::printf(
      "local blocks and fp16 scores: %lld forced index-branch runs bit-identical to the default, %lld forced "
      "main-branch runs within the oracle's bound\n",
      static_cast<long long>(index_runs), static_cast<long long>(attend_runs));
}

}  // namespace
}  // namespace msa::gpu_test
