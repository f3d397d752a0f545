// The CUDA backend ("gpu"): exact mode bit-identical to the reference on every canonical and large case,
// bf16/fp16 passing the oracle rules (near-tie flips counted, not failed) on those cases and on the shapes that
// reach the gathered attention kernel (GatheredAttend), the bf16/fp16 selection equal to the reference's where block maxima tie
// exactly (the tie order of SPEC section 2), the KV-outer direct lists equal to the general ones on decode batches,
// bitwise replay, and clean Status answers where it declines. SPEC v2's local_blocks > 1 and score_format fp16: exact
// bit for bit on problems built for them (overlapping forced sets, binary16 ties, binary16 overflow), bf16/fp16 ranked
// by their own block scores under every forced kernel choice. The e4m3 index kernels (RoundToE4M3, E4M3ToLowp,
// BlockMaxScoresFp8) are called directly: against a host rounding of their own and against exact block maxima.
// Without a usable CUDA device (or without a CUDA build) every device test skips with a message saying why; the
// conformance and property suites run the gpu backend too when it is available.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "msa/forced_blocks.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "oracle/properties.h"
#include "oracle/random.h"
#include "reference/reference.h"
#include "tests/arbitrary.h"

#include "gpu/common/kernel_plan.h"

#if defined(MSA_HAVE_CUDA)  // the CUDA build: the fp8 index kernels are called directly
#include "gpu/common/device_buffer.h"
#include "gpu/common/device_query.h"
#include "gpu/kernels.h"
#endif

namespace msa {
namespace {

const Backend* Gpu() { return FindBackend("gpu"); }

// Skips the calling test unless the gpu backend is compiled in and a usable device is present.
#define MSA_REQUIRE_GPU()                                                                                      \
  do {                                                                                                         \
    if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";     \
    if (!Gpu()->is_available()) GTEST_SKIP() << "gpu backend compiled in, but no usable CUDA device "          \
                                                "(compute capability 8.0 or newer) is present";                \
  } while (false)

template <typename T>
int64_t BitDiffs(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return -1;
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return count;
}

void ExpectSameBits(const Outputs& expected, const Outputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.topk_indices, got.topk_indices), 0) << what << ": topk_indices";
  EXPECT_EQ(BitDiffs(expected.block_scores, got.block_scores), 0) << what << ": block_scores";
  EXPECT_EQ(BitDiffs(expected.index_lse, got.index_lse), 0) << what << ": index_lse";
  EXPECT_EQ(BitDiffs(expected.out, got.out), 0) << what << ": out";
  EXPECT_EQ(BitDiffs(expected.lse, got.lse), 0) << what << ": lse";
}

std::vector<TestCase> AllCases() {
  std::vector<TestCase> cases = CanonicalCases();
  for (TestCase& c : LargeCases()) cases.push_back(std::move(c));
  return cases;
}

TEST(GpuBackend, DeclinesWhatItDoesNotSupport) {
  if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";
  Config config;
  config.precision = Precision::kFp32;
  EXPECT_EQ(Gpu()->supports(config).code(), StatusCode::kUnsupported);
  config.precision = Precision::kBf16;
  config.head_dim = 1024;
  EXPECT_EQ(Gpu()->supports(config).code(), StatusCode::kUnsupported);
  config = Config{};
  for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
    config.precision = precision;
    EXPECT_TRUE(Gpu()->supports(config).ok()) << PrecisionName(precision);
  }
}

TEST(GpuBackend, WithoutADeviceEveryCallIsDeclinedNotCrashed) {
  if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)";
  if (Gpu()->is_available()) GTEST_SKIP() << "a CUDA device is present: nothing to decline";
  const Problem problem = GenerateProblem(CanonicalCases().front().spec);
  Outputs outputs;
  const Status status = RunBackend(*Gpu(), problem, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported) << status.message();
}

TEST(GpuBackend, ExactIsBitIdenticalToTheReferenceOnEveryCase) {
  MSA_REQUIRE_GPU();
  for (const TestCase& test_case : AllCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference, gpu;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const Status status = RunBackend(*Gpu(), problem, &gpu);
    ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
    ExpectSameBits(reference, gpu, test_case.name);
  }
}

// The oracle's verdict (SPEC section 5) on the gpu's outputs `gpu` computed at `precision`, judged with its own
// selection against `reference` (the FP64 reference's outputs on the same problem).
Verdict JudgeGpuOutputs(const Problem& problem, const Outputs& reference, const Outputs& gpu, Precision precision) {
  JudgeOptions options;
  options.precision = precision;
  Verdict verdict;
  const Status status =
      Judge(problem, reference, Candidate{gpu.topk_indices, gpu.out, gpu.lse, gpu.index_lse}, options, &verdict);
  EXPECT_TRUE(status.ok()) << status.message();
  return verdict;
}

// Runs the gpu at bf16 and at fp16 on every case and judges both by the oracle rules against the FP64
// reference; prints the near-tie selection rows (counted, not failed) per precision under `label`.
void ExpectLowPrecisionPassesTheOracleRules(const std::vector<TestCase>& cases, const std::string& label) {
  int64_t near_ties[2] = {0, 0}, rows[2] = {0, 0};
  for (const TestCase& test_case : cases) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    for (int i = 0; i < 2; ++i) {
      const Precision precision = i == 0 ? Precision::kBf16 : Precision::kFp16;
      problem.config.precision = precision;
      Outputs gpu;
      const Status status = RunBackend(*Gpu(), problem, &gpu);
      ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
      const Verdict verdict = JudgeGpuOutputs(problem, reference, gpu, precision);
      EXPECT_TRUE(verdict.passed()) << test_case.name << " at " << PrecisionName(precision) << "\n"
                                    << FormatVerdict(verdict);
      near_ties[i] += verdict.selection.near_tie_rows;
      rows[i] += verdict.selection.rows;
    }
  }
  std::printf("gpu %s, bf16: %lld near-tie selection rows of %lld; fp16: %lld of %lld\n", label.c_str(),
              static_cast<long long>(near_ties[0]), static_cast<long long>(rows[0]),
              static_cast<long long>(near_ties[1]), static_cast<long long>(rows[1]));
}

TEST(GpuBackend, LowPrecisionPassesTheOracleRulesOnEveryCase) {
  MSA_REQUIRE_GPU();
  ExpectLowPrecisionPassesTheOracleRules(AllCases(), "canonical and large cases");
}

// Shapes whose main branch both tensor-core kernels decline: KvOuterAttendFits and
// QOuterAttendFits (gpu/common/kernel_fits.h) are false, so the planner (gpu/common/kernel_plan.h) takes the
// gathered kernel GatheredAttend (gpu/index/lowp_kernels.cu). One case per reason QOuterAttendFits gives (KV-outer declines each too:
// dims past 128 or not multiples of 8, top_k past 32), which also reach each of GatheredAttend's register tilings
// (kDvTiles 4, 16, 32 for Dv up to 32, 128, 256). None of the canonical or large cases gets here: their dims are multiples of 8 up to
// 128 and their top_k * Bk at most 16 * 128 keys.
std::vector<TestCase> GatheredAttendCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  // D = Dv = Di = 192: past QOuterAttend's 128 (GatheredAttend kDvTiles 32). Index branch: Di past BlockMaxScores'
  // 128, so max pooling runs in LowpBlockScores. A prefill over 10 blocks of 32 and a decode over 32 blocks.
  add("lowp_attend_wide", MakeSpec(8, 2, 192, 32, 4, 0, Pooling::kMax, {{300, 300}, {16, 1000}}, DType::kBF16, 201));
  // D = Dv = Di = 20: not a multiple of 8 (zero-padded to 32 for the mma; GatheredAttend kDvTiles 4), lse pooling with
  // an init block, and 18 heads per group: two head tiles of the group, the second holding 2 heads.
  add("lowp_attend_odd_dim", MakeSpec(36, 2, 20, 16, 4, 1, Pooling::kLse, {{100, 100}, {7, 61}}, DType::kF16, 202));
  // top_k * Bk = 48 * 128 = 6144 gathered keys at D = 128: QOuterAttend's shared-memory layout needs 261,008 bytes,
  // past the 232,448 (227 KiB) opt-in of an H100/H200, the largest of any current device (GatheredAttend kDvTiles 16).
  // top_k 48 > 33 ranks with RankFloat. Queries see 94 and 71 blocks, so the selection still drops blocks.
  add("lowp_attend_many_keys",
      MakeSpec(8, 2, 128, 128, 48, 0, Pooling::kMax, {{40, 12000}, {1, 9000}}, DType::kBF16, 203));
  return cases;
}

TEST(GpuBackend, LowPrecisionPassesTheOracleRulesWhereGatheredAttendRuns) {
  MSA_REQUIRE_GPU();
  ExpectLowPrecisionPassesTheOracleRules(GatheredAttendCases(), "GatheredAttend cases");
}

// Max-pooling cases whose block maxima tie exactly. index_q and index_k come from {-1, 0, 1} (few_valued_index)
// at Di = 16, so every token score is an integer dot (|dot| <= 16: exact in the fp32 accumulation of bf16 or fp16
// products, in any order) times index_scale = 16^-0.5 = 1/4 (a power of two), and the block maxima crowd onto a
// few integers: most rows hold more blocks at the selection threshold than the selection has room for.
// Di <= 128 and Bk a multiple of 64 send the index branch to BlockMaxScores, top_k <= 33 to RankTopK
// (gpu/gpu_backend.cc, SelectImpl). D = Dv = 16 too; the main branch is not what these cases test.
std::vector<TestCase> TiedBlockMaxCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    spec.few_valued_index = true;
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  // Bk 64, top_k 16 (RankTopK's 16-key lists). A 256-query chunk over 4096 keys (64 blocks; 512 index rows:
  // BlockMaxScores with two m-tiles per warp) and a 4-query decode over 40000 keys (625 blocks: about 20
  // candidates per lane, more than its list holds).
  add("tied_max", MakeSpec(8, 2, 16, 64, 16, 0, Pooling::kMax, {{256, 4096}, {4, 40000}}, DType::kBF16, 301));
  // Bk 128 (two 64-key tiles per block), top_k 33 (RankTopK's 32-key lists), one init block, one index head. A
  // 128-query chunk over 6000 keys (47 blocks) and a 2-query decode over 140000 keys (1094 blocks: about 34 per
  // lane).
  add("tied_max", MakeSpec(4, 1, 16, 128, 33, 1, Pooling::kMax, {{128, 6000}, {2, 140000}}, DType::kBF16, 302));
  return cases;
}

// Whether row `row` of two [rows, width] tensors holds equal values (by value: -0 equals +0, as scores).
template <typename T>
bool SameRow(const std::vector<T>& a, const std::vector<T>& b, int64_t row, int64_t width) {
  return std::equal(a.begin() + row * width, a.begin() + (row + 1) * width, b.begin() + row * width);
}

// Row `row` of a [rows, width] tensor as " v0 v1 ...".
std::string FormatRow(const std::vector<int32_t>& tensor, int64_t row, int64_t width) {
  std::string text;
  for (int64_t i = 0; i < width; ++i) text += " " + std::to_string(tensor[size_t(row * width + i)]);
  return text;
}

// What the FP64 reference's outputs say about each selection row [Hidx, total_q] of a max-pooling problem.
struct TieRows {
  // Every visible block score is an exact integer multiple of index_scale (an integer dot of at most 2^11 in
  // magnitude): the bf16 and fp16 block maxima are then exact too, and so is every tie between them.
  std::vector<bool> exact;
  int64_t exact_rows = 0;
  // Exact rows where ties decide the selection: the lowest score among the selected ranked candidates equals the
  // highest among the candidates left out, so only the tie order (block id ascending) tells them apart.
  int64_t tie_decided_rows = 0;
  int64_t any_tie_decided_rows = 0;  // rows where ties decide, exact or not
};

// Whether ties decide a selection row of `visible` blocks (TieRows::tie_decided_rows) by its block scores.
bool DecidedByTies(const Config& config, const int32_t* selection, const double* scores, int64_t visible) {
  // The ranked candidates [init_end, local_begin) and the `take` of them in the row's first slots (SPEC section 2).
  const ForcedBlocks forced = ForcedBlocksOf(visible, config.init_blocks, config.local_blocks, config.top_k);
  std::vector<bool> selected(size_t(visible), false);
  double lowest_selected = std::numeric_limits<double>::infinity();
  for (int64_t slot = 0; slot < forced.take; ++slot) {
    selected[size_t(selection[slot])] = true;
    lowest_selected = std::min(lowest_selected, scores[selection[slot]]);
  }
  double highest_left_out = -std::numeric_limits<double>::infinity();
  for (int64_t blk = forced.init_end; blk < forced.local_begin; ++blk) {
    if (!selected[size_t(blk)]) highest_left_out = std::max(highest_left_out, scores[blk]);
  }
  return forced.take > 0 && lowest_selected == highest_left_out;
}

TieRows FindTieRows(const Problem& problem, const Outputs& reference) {
  const Config& config = problem.config;
  const int64_t rows = int64_t(config.num_kv_heads) * problem.batch().total_q();
  const int64_t max_blocks = MaxBlocks(config, problem.batch()), top_k = config.top_k;
  const double scale = config.IndexScale();
  TieRows result;
  result.exact.assign(size_t(rows), false);
  for (int64_t row = 0; row < rows; ++row) {
    const int32_t* selection = &reference.topk_indices[size_t(row * top_k)];
    const double* scores = &reference.block_scores[size_t(row * max_blocks)];
    int64_t valid = 0;
    while (valid < top_k && selection[valid] != -1) ++valid;
    const int64_t local = selection[valid - 1];
    bool exact = true;
    for (int64_t blk = 0; blk <= local; ++blk) {
      const double dot = scores[blk] / scale;
      exact = exact && dot == std::nearbyint(dot) && std::fabs(dot) <= 2048.0;
    }
    const bool decided_by_ties = DecidedByTies(config, selection, scores, local + 1);
    result.any_tie_decided_rows += decided_by_ties;
    if (!exact) continue;
    result.exact[size_t(row)] = true;
    ++result.exact_rows;
    result.tie_decided_rows += decided_by_ties;
  }
  return result;
}

// Runs without a device: the tied cases are what the gpu test below needs them to be, by the reference alone.
TEST(GpuBackend, TiedBlockMaxCasesHaveExactTiesThatDecideTheSelection) {
  for (const TestCase& test_case : TiedBlockMaxCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const TieRows ties = FindTieRows(problem, reference);
    const int64_t rows = int64_t(ties.exact.size());
    EXPECT_EQ(ties.exact_rows, rows) << test_case.name;
    EXPECT_GE(ties.tie_decided_rows, rows * 3 / 4) << test_case.name;  // 492 of 520 and 124 of 130 here
    std::printf("%s: %lld of %lld rows exact, %lld of them decided by ties\n", test_case.name.c_str(),
                static_cast<long long>(ties.exact_rows), static_cast<long long>(rows),
                static_cast<long long>(ties.tie_decided_rows));
  }
}

// SPEC section 2's tie order (score descending, then block id ascending; init blocks, then the local block last)
// on the gpu's low-precision index branch: where the block maxima are exact in both precisions, the gpu's
// selection and block scores equal the FP64 reference's, slot for slot.
TEST(GpuBackend, LowPrecisionSelectionEqualsTheReferenceOnExactlyTiedBlockMaxima) {
  MSA_REQUIRE_GPU();
  for (const TestCase& test_case : TiedBlockMaxCases()) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    const TieRows ties = FindTieRows(problem, reference);
    const int64_t top_k = problem.config.top_k, max_blocks = MaxBlocks(problem.config, problem.batch());
    const int64_t total_q = problem.batch().total_q();
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      Outputs gpu;
      const Status status = RunBackend(*Gpu(), problem, &gpu);
      ASSERT_TRUE(status.ok()) << test_case.name << ": " << status.message();
      int64_t differing_rows = 0;
      for (int64_t row = 0; row < int64_t(ties.exact.size()); ++row) {
        if (!ties.exact[size_t(row)]) continue;
        const bool same_selection = SameRow(reference.topk_indices, gpu.topk_indices, row, top_k);
        const bool same_scores = SameRow(reference.block_scores, gpu.block_scores, row, max_blocks);
        if (same_selection && same_scores) continue;
        if (++differing_rows > 8) continue;  // list the first 8
        ADD_FAILURE() << test_case.name << " at " << PrecisionName(precision) << ", group " << row / total_q
                      << ", query row " << row % total_q << (same_scores ? "" : ": block scores differ")
                      << "\n  reference:" << FormatRow(reference.topk_indices, row, top_k)
                      << "\n  gpu:      " << FormatRow(gpu.topk_indices, row, top_k);
      }
      EXPECT_EQ(differing_rows, 0) << test_case.name << " at " << PrecisionName(precision);
      std::printf("%s at %s: %lld exact rows (%lld decided by ties) compared\n", test_case.name.c_str(),
                  std::string(PrecisionName(precision)).c_str(), static_cast<long long>(ties.exact_rows),
                  static_cast<long long>(ties.tie_decided_rows));
    }
  }
}

// Forces stages of the kernel plan for one scope (gpu/common/kernel_plan.h SetKernelPlanForTest) and restores the
// plan before it; key and value as MSA_GPU_PLAN spells them ("" leaves the stage to the planner).
class ScopedPlan {
 public:
  ScopedPlan(const char* key, const char* value) : saved_(Current()) {
    gpu::KernelPlan stage;
    if (*value != '\0') {
      const Status status = gpu::ParseKernelPlan(std::string(key) + "=" + value, &stage);
      EXPECT_TRUE(status.ok()) << status.message();
    }
    gpu::KernelPlan& plan = Current();
    if (stage.index != gpu::IndexKernel::kAuto) plan.index = stage.index;
    if (stage.batch != gpu::IndexBatch::kAuto) plan.batch = stage.batch;
    if (stage.topk != gpu::TopKKernel::kAuto) plan.topk = stage.topk;
    if (stage.lists != gpu::KvLists::kAuto) plan.lists = stage.lists;
    if (stage.attend != gpu::AttendKernel::kAuto) plan.attend = stage.attend;
    gpu::SetKernelPlanForTest(plan);
  }
  ~ScopedPlan() {
    Current() = saved_;
    gpu::SetKernelPlanForTest(saved_ == gpu::KernelPlan{} ? std::nullopt : std::optional<gpu::KernelPlan>(saved_));
  }
  ScopedPlan(const ScopedPlan&) = delete;
  ScopedPlan& operator=(const ScopedPlan&) = delete;

 private:
  static gpu::KernelPlan& Current() {
    static gpu::KernelPlan plan;
    return plan;
  }
  gpu::KernelPlan saved_;
};

// Whether the planner accepts `request` (MSA_GPU_PLAN's grammar) for `problem` on this device: a refused plan is not
// compared with a kernel it does not run (a pair of plans is compared only where both run).
bool Runnable(const Problem& problem, const std::string& request) {
#if defined(MSA_HAVE_CUDA)
  gpu::KernelPlan requested, plan;
  if (!gpu::ParseKernelPlan(request, &requested).ok()) return false;
  return gpu::PlanKernels(problem.config, gpu::ShapesOf(problem.config, problem.batch()), gpu::CurrentDeviceCaps(),
                          requested, &plan).ok();
#else
  (void)problem;
  (void)request;
  return false;
#endif
}

// The gpu's outputs of `problem` with the plan's index=kernel (gpu/common/kernel_plan.h).
Status RunWithIndexKernel(const Problem& problem, const char* kernel, Outputs* outputs) {
  const ScopedPlan plan("index", kernel);
  return RunBackend(*Gpu(), problem, outputs);
}

// index=wgmma (BlockMaxScoresWgmma, gpu/index/block_max_wgmma.cu) gives the same bits as the mma.sync
// kernel BlockMaxScores on every max-pooling case (canonical, large and tied ones, bf16 and fp16): the block
// scores, hence the selection, index_lse and the main branch. Its errors are the same too: index_q scaled to
// about 3e37 makes dot products overflow to inf (bf16) or the inputs themselves inf (fp16), and both kernels must
// name the same first bad (query, group). On a device other than sm_90a the planner refuses index=wgmma and the
// test skips (it never compares a kernel with itself).
TEST(GpuBackend, WgmmaIndexKernelGivesTheMmaKernelsBits) {
  MSA_REQUIRE_GPU();
  std::vector<TestCase> cases;
  for (TestCase& c : AllCases()) {
    if (c.spec.config.pooling == Pooling::kMax) cases.push_back(std::move(c));
  }
  for (TestCase& c : TiedBlockMaxCases()) cases.push_back(std::move(c));
  {
    ProblemSpec spec = MakeSpec(8, 4, 128, 128, 16, 0, Pooling::kMax, {{300, 300}, {3, 2000}}, DType::kBF16, 401);
    spec.query_scale = 3e37;
    cases.push_back({CaseName("index_overflow", spec), std::move(spec)});
  }
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
  std::printf("wgmma vs mma index kernel: %lld runs bit-identical, %lld refused alike (on a device other than "
              "sm_90a the test skips)\n",
              static_cast<long long>(compared), static_cast<long long>(refused));
}

// ---- index_format e4m3: RoundToE4M3, E4M3ToLowp and BlockMaxScoresFp8 called directly (gpu/kernels.h) ----

// The value of e4m3 byte `code` from the format's definition (OCP E4M3FN: sign, 4 exponent bits with bias 7,
// 3 mantissa bits; exponent 0: subnormals m * 2^-9; 0x7F and 0xFF: NaN), independent of the device code.
double E4M3Value(int code) {
  const int exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

// Round to the nearest e4m3, ties to the even code, by search over the finite non-negative codes (ascending values);
// magnitudes from 448 up saturate to 448, NaN gives 0x7F. The sign is x's (a negative x that rounds to 0 gives -0).
// The distances are exact: the two nearest codes lie within a factor 2 of |x| (Sterbenz) or one is 0.
uint8_t NearestE4M3(double x) {
  if (std::isnan(x)) return 0x7F;
  const double magnitude = std::fabs(x);
  int best = 0x7E;
  if (magnitude < 448.0) {
    best = 0;
    for (int c = 1; c <= 0x7E; ++c) {
      const double error = std::fabs(E4M3Value(c) - magnitude), best_error = std::fabs(E4M3Value(best) - magnitude);
      if (error < best_error || (error == best_error && c % 2 == 0)) best = c;
    }
  }
  return uint8_t((std::signbit(x) ? 0x80 : 0x00) | best);
}

// The test's own reference, without a device: every finite code is its own nearest e4m3, NaN codes give 0x7F, and
// the points halfway between neighbours go to the even code (one double ulp either side: to the nearer one).
TEST(E4M3Reference, EveryCodeIsItsOwnNearestAndHalfwayPointsGoToTheEvenCode) {
  for (int c = 0; c < 256; ++c) {
    const double v = E4M3Value(c);
    EXPECT_EQ(NearestE4M3(v), std::isnan(v) ? 0x7F : c) << "code " << c;
  }
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (E4M3Value(c) + E4M3Value(c + 1)) / 2;  // exact: both have 4 significant bits
    const int even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(NearestE4M3(mid), even) << "halfway above code " << c;
    EXPECT_EQ(NearestE4M3(-mid), 0x80 | even) << "halfway below code " << (0x80 | c);
    EXPECT_EQ(NearestE4M3(std::nextafter(mid, 0.0)), c) << "just below halfway above code " << c;
    EXPECT_EQ(NearestE4M3(std::nextafter(mid, 1e9)), c + 1) << "just above halfway above code " << c;
  }
  EXPECT_EQ(NearestE4M3(464.0), 0x7E);  // past the largest finite: saturated
  EXPECT_EQ(NearestE4M3(-std::numeric_limits<double>::infinity()), 0xFE);
  EXPECT_EQ(NearestE4M3(-1e-300), 0x80);
}

// Inputs of the rounding test: every e4m3 value, the halfway points between neighbours and one double ulp either
// side (both signs), specials (zeros, infinities, NaN, past 448, far below 2^-9), and random magnitudes in
// [2^-12, 2^10) of either sign.
std::vector<double> E4M3RoundingInputs() {
  std::vector<double> x;
  for (int c = 0; c < 256; ++c) x.push_back(E4M3Value(c));
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (E4M3Value(c) + E4M3Value(c + 1)) / 2;
    for (const double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (const double v : {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), 448.0, -448.0, 449.0, 464.0,
                         -465.0, 1e10, 1e-300, -5e-324, std::ldexp(1.0, -10), std::ldexp(3.0, -10)}) {
    x.push_back(v);
  }
  RandomStream rng(0xe4, 3);
  for (int i = 0; i < 20000; ++i) {
    const double magnitude = std::ldexp(1.0 + rng.Uniform(), int(rng.Below(22)) - 12);
    x.push_back(rng.Below(2) ? -magnitude : magnitude);
  }
  return x;
}

// A chunk of one sequence for the fp8 block-max test: the sequence's k_len keys follow pad_keys keys of another
// sequence, the chunk's nq queries (positions pos0..pos0+nq-1) follow t0 queries of others.
struct Fp8Chunk {
  const char* name;
  int hidx, di, bk;
  int64_t pad_keys, k_len, t0, nq, pos0;
};

// Prefill 300 and 1000 (partial last blocks), a chunk of a prefill with a prefix, decode with 4 rows (one warpgroup),
// 64 rows over Bk 256, 68 rows (two warpgroups) at Di 16 with Bk 64, one index head over 129 keys at Di 32.
std::vector<Fp8Chunk> Fp8Chunks() {
  return {{"prefill_300", 4, 128, 128, 0, 300, 0, 300, 0},
          {"prefill_1000", 4, 128, 128, 0, 1000, 0, 1000, 0},
          {"prefix_chunk", 4, 64, 64, 77, 1000, 13, 136, 864},
          {"decode_1", 4, 128, 128, 5, 5000, 3, 1, 4999},
          {"decode_16_bk256", 4, 128, 256, 0, 4133, 0, 16, 4117},
          {"decode_17_di16", 4, 16, 64, 0, 2049, 0, 17, 2032},
          {"one_head_129", 1, 32, 64, 0, 129, 0, 129, 0}};
}

// Random e4m3 codes: normal values times 2 rounded to e4m3 (about -8..8, subnormals and zeros included).
std::vector<uint8_t> RandomE4M3(int64_t n, uint64_t seed) {
  RandomStream rng(seed, 0);
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  for (uint8_t& c : codes) c = NearestE4M3(2.0 * rng.Normal());
  return codes;
}

#if defined(MSA_HAVE_CUDA)
// Skips the calling test unless a device runs BlockMaxScoresFp8 (compute capability 9.0).
#define MSA_REQUIRE_FP8_INDEX_KERNEL()                                                                     \
  do {                                                                                                     \
    MSA_REQUIRE_GPU();                                                                                     \
    if (!gpu::BlockMaxScoresFp8Fits(128, 128, 1.0f, gpu::CurrentDeviceCaps())) GTEST_SKIP() << "BlockMaxScoresFp8 needs an sm_90 device"; \
  } while (false)

// The chunk's geometry; its sequence's queries after the chunk are 2 more rows of index_q.
gpu::ChunkGeometry Fp8Geometry(const Fp8Chunk& c) {
  gpu::ChunkGeometry g;
  g.t0 = c.t0;
  g.nq = c.nq;
  g.pos0 = c.pos0;
  g.key_begin = c.pad_keys;
  g.k_len = c.k_len;
  g.total_q = c.t0 + c.nq + 2;
  g.hidx = c.hidx;
  g.di = c.di;
  g.bk = c.bk;
  g.top_k = 16;
  g.max_blocks = (c.k_len + c.bk - 1) / c.bk;
  return g;
}

// Host vector -> new device buffer; false (and a test failure) on a CUDA error.
template <typename T>
bool Upload(const std::vector<T>& host, gpu::DeviceBuffer<T>* device) {
  const Status status = device->Allocate(int64_t(host.size()), "test input");
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return false;
  const cudaError_t error = cudaMemcpy(device->get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return error == cudaSuccess;
}

template <typename T>
bool Download(const gpu::DeviceBuffer<T>& device, std::vector<T>* host) {
  host->resize(size_t(device.size()));
  const cudaError_t error = cudaMemcpy(host->data(), device.get(), host->size() * sizeof(T), cudaMemcpyDeviceToHost);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return error == cudaSuccess;
}

// BlockMaxScoresFp8 on the e4m3 codes and BlockMaxScores on their bf16 widening (exact), each into block scores
// poisoned with all-ones bits, with their first bad rows (all ones: none).
struct Fp8AndMma {
  std::vector<float> fp8, mma;  // [nq * Hidx, max_blocks]
  unsigned long long fp8_bad = 0, mma_bad = 0;
};

bool RunFp8AndMma(const gpu::ChunkGeometry& g, const std::vector<uint8_t>& index_q, const std::vector<uint8_t>& index_k,
                  float scale, Fp8AndMma* result) {
  std::vector<uint16_t> q16(index_q.size()), k16(index_k.size());
  for (size_t i = 0; i < index_q.size(); ++i) q16[i] = DoubleToBF16(E4M3Value(index_q[i]));
  for (size_t i = 0; i < index_k.size(); ++i) k16[i] = DoubleToBF16(E4M3Value(index_k[i]));
  gpu::DeviceBuffer<uint8_t> q8_d, k8_d;
  gpu::DeviceBuffer<uint16_t> q16_d, k16_d;
  gpu::DeviceBuffer<float> fp8_d, mma_d;
  gpu::DeviceBuffer<unsigned long long> bad_d;
  const std::vector<float> poison(size_t(g.nq * g.hidx * g.max_blocks), std::bit_cast<float>(0xffffffffu));
  const std::vector<unsigned long long> no_bad_row(2, ~0ull);
  if (!Upload(index_q, &q8_d) || !Upload(index_k, &k8_d) || !Upload(q16, &q16_d) || !Upload(k16, &k16_d) ||
      !Upload(poison, &fp8_d) || !Upload(poison, &mma_d) || !Upload(no_bad_row, &bad_d)) {
    return false;
  }
  cudaError_t error = gpu::BlockMaxScoresFp8(q8_d.get(), k8_d.get(), g, scale, fp8_d.get(), bad_d.get());
  EXPECT_EQ(error, cudaSuccess) << "BlockMaxScoresFp8: " << cudaGetErrorString(error);
  if (error == cudaSuccess) {
    error = gpu::BlockMaxScores(gpu::kLowpBF16, q16_d.get(), k16_d.get(), g, scale, mma_d.get(), bad_d.get() + 1);
    EXPECT_EQ(error, cudaSuccess) << "BlockMaxScores: " << cudaGetErrorString(error);
  }
  if (error == cudaSuccess) {
    error = cudaDeviceSynchronize();
    EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  }
  std::vector<unsigned long long> bad;
  if (error != cudaSuccess || !Download(fp8_d, &result->fp8) || !Download(mma_d, &result->mma) ||
      !Download(bad_d, &bad)) {
    return false;
  }
  result->fp8_bad = bad[0];
  result->mma_bad = bad[1];
  return true;
}
#endif  // MSA_HAVE_CUDA

// RoundToE4M3 gives the nearest e4m3 with ties to the even code (NearestE4M3) from every input type: the inputs
// stored as F64 (rounded once from the double: the halfway points +- one double ulp go to the nearer code), F32,
// BF16 and F16 (the inputs rounded to the type first, on the host). E4M3ToLowp widens every code exactly.
TEST(GpuKernels, RoundToE4M3IsTheNearestE4M3WithTiesToEven) {
  MSA_REQUIRE_GPU();
  const std::vector<double> inputs = E4M3RoundingInputs();
#if defined(MSA_HAVE_CUDA)
  const int64_t n = int64_t(inputs.size());
  for (const DType dtype : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<unsigned char> stored(size_t(n * DTypeSize(dtype)));
    std::vector<uint8_t> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double v = inputs[size_t(i)];
      unsigned char* at = stored.data() + i * DTypeSize(dtype);
      if (dtype == DType::kF64) {
        std::memcpy(at, &v, 8);
      } else if (dtype == DType::kF32) {
        const float f = static_cast<float>(v);
        std::memcpy(at, &f, 4);
      } else {
        const uint16_t bits = dtype == DType::kBF16 ? DoubleToBF16(v) : DoubleToF16(v);
        std::memcpy(at, &bits, 2);
      }
      v = LoadAsDouble(stored.data(), dtype, i);
      expected[size_t(i)] = NearestE4M3(v);
    }
    gpu::DeviceBuffer<unsigned char> src;
    gpu::DeviceBuffer<uint8_t> dst;
    ASSERT_TRUE(Upload(stored, &src));
    ASSERT_TRUE(dst.Allocate(n, "e4m3 output").ok());
    ASSERT_EQ(gpu::RoundToE4M3(src.get(), static_cast<int>(dtype), n, dst.get()), cudaSuccess);
    std::vector<uint8_t> got;
    ASSERT_TRUE(Download(dst, &got));
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (got[size_t(i)] == expected[size_t(i)]) continue;
      if (wrong++ < 5) {
        ADD_FAILURE() << DTypeName(dtype) << " input " << LoadAsDouble(stored.data(), dtype, i) << " (index " << i
                      << "): RoundToE4M3 gives code " << int(got[size_t(i)]) << ", the nearest e4m3 is code "
                      << int(expected[size_t(i)]);
      }
    }
    EXPECT_EQ(wrong, 0) << DTypeName(dtype) << ": codes that differ from the nearest e4m3";
  }
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
  gpu::DeviceBuffer<uint8_t> codes_d;
  ASSERT_TRUE(Upload(codes, &codes_d));
  for (const int lowp : {gpu::kLowpBF16, gpu::kLowpF16}) {
    gpu::DeviceBuffer<uint16_t> wide_d;
    ASSERT_TRUE(wide_d.Allocate(256, "widened codes").ok());
    ASSERT_EQ(gpu::E4M3ToLowp(codes_d.get(), 256, lowp, wide_d.get()), cudaSuccess);
    std::vector<uint16_t> wide;
    ASSERT_TRUE(Download(wide_d, &wide));
    for (int c = 0; c < 256; ++c) {
      const double got = lowp == gpu::kLowpBF16 ? BF16ToDouble(wide[size_t(c)]) : F16ToDouble(wide[size_t(c)]);
      const double want = E4M3Value(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "code " << c;
      } else {
        EXPECT_EQ(std::memcmp(&got, &want, 8), 0) << "code " << c << ": " << got << " instead of " << want;
      }
    }
  }
#endif
}

// BlockMaxScoresFp8 against the exact block maxima of the same e4m3 values (double: their products and sums are
// exact) and against BlockMaxScores on the bf16 widening, on prefill, prefix-chunk and decode shapes with partial last
// blocks and causal edges: the same entries written (blk <= the row's local block, nothing else), every entry within
// kFp8IndexRelBound * its magnitude (scale * the largest sum_i |q_i k_i| over the block's visible keys) of the exact
// value and of BlockMaxScores', no bad row. BlockMaxScores (fp32 accumulation of exact products) is within
// 2^-16 of the magnitude (128 fp32 adds lose at most about 2^-17): the yardstick.
TEST(GpuKernels, Fp8BlockMaxIsWithinItsBoundOfTheExactBlockMax) {
#if defined(MSA_HAVE_CUDA)
  MSA_REQUIRE_FP8_INDEX_KERNEL();
#else
  MSA_REQUIRE_GPU();
#endif
  uint64_t seed = 900;
  for (const Fp8Chunk& c : Fp8Chunks()) {
    const int64_t total_q = c.t0 + c.nq + 2, total_k = c.pad_keys + c.k_len;
    const std::vector<uint8_t> index_q = RandomE4M3(total_q * c.hidx * c.di, ++seed);  // [total_q, Hidx, Di]
    const std::vector<uint8_t> index_k = RandomE4M3(total_k * c.di, ++seed);           // [total_k, Di]
    const double scale = 1.0 / std::sqrt(double(c.di));
    const int64_t rows = c.nq * c.hidx, max_blocks = (c.k_len + c.bk - 1) / c.bk;
    // Exact block maxima and magnitudes, [rows, max_blocks] (NaN where not visible).
    std::vector<double> exact(size_t(rows * max_blocks), std::numeric_limits<double>::quiet_NaN());
    std::vector<double> magnitude(exact.size(), 0.0);
    std::vector<double> q_values(index_q.size()), k_values(index_k.size());
    for (size_t i = 0; i < index_q.size(); ++i) q_values[i] = E4M3Value(index_q[i]);
    for (size_t i = 0; i < index_k.size(); ++i) k_values[i] = E4M3Value(index_k[i]);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t t = c.t0 + row / c.hidx, r = row % c.hidx, pos = c.pos0 + row / c.hidx;
      const double* q = q_values.data() + (t * c.hidx + r) * c.di;
      for (int64_t s = 0; s <= pos; ++s) {
        const double* k = k_values.data() + (c.pad_keys + s) * c.di;
        double dot = 0, abs_dot = 0;
        for (int d = 0; d < c.di; ++d) {
          const double product = q[d] * k[d];
          dot += product;
          abs_dot += std::fabs(product);
        }
        double& best = exact[size_t(row * max_blocks + s / c.bk)];
        best = std::isnan(best) ? dot * scale : std::max(best, dot * scale);
        double& mag = magnitude[size_t(row * max_blocks + s / c.bk)];
        mag = std::max(mag, abs_dot * scale);
      }
    }
#if defined(MSA_HAVE_CUDA)
    const gpu::ChunkGeometry g = Fp8Geometry(c);
    Fp8AndMma run;
    ASSERT_TRUE(RunFp8AndMma(g, index_q, index_k, float(scale), &run)) << c.name;
    EXPECT_EQ(run.fp8_bad, ~0ull) << c.name << ": BlockMaxScoresFp8 flagged a bad row";
    EXPECT_EQ(run.mma_bad, ~0ull) << c.name << ": BlockMaxScores flagged a bad row";
    double max_rel = 0, max_rel_mma = 0;
    int64_t failures = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const bool visible = !std::isnan(exact[i]);
      const bool fp8_written = std::bit_cast<uint32_t>(run.fp8[i]) != 0xffffffffu;
      const bool mma_written = std::bit_cast<uint32_t>(run.mma[i]) != 0xffffffffu;
      const double fp8_error = std::fabs(double(run.fp8[i]) - exact[i]);
      const double mma_error = std::fabs(double(run.mma[i]) - exact[i]);
      const double fp8_vs_mma = std::fabs(double(run.fp8[i]) - double(run.mma[i]));
      const double bound = double(gpu::kFp8IndexRelBound) * magnitude[i];
      const bool ok = fp8_written == visible && mma_written == visible &&
                      (!visible || (fp8_error <= bound && fp8_vs_mma <= bound && mma_error <= 0x1p-16 * magnitude[i]));
      if (visible && magnitude[i] > 0) {
        max_rel = std::max(max_rel, fp8_error / magnitude[i]);
        max_rel_mma = std::max(max_rel_mma, mma_error / magnitude[i]);
      }
      if (!ok && failures++ < 5) {
        ADD_FAILURE() << c.name << ": row " << i / size_t(max_blocks) << ", block " << i % size_t(max_blocks)
                      << (visible ? " (visible)" : " (not visible)") << ": fp8 " << run.fp8[i] << ", mma "
                      << run.mma[i] << ", exact " << exact[i] << ", magnitude " << magnitude[i];
      }
    }
    EXPECT_EQ(failures, 0) << c.name;
    std::printf("%s: max |fp8 - exact| / magnitude = %.3g (bound %.3g), max |mma - exact| / magnitude = %.3g\n",
                c.name, max_rel, double(gpu::kFp8IndexRelBound), max_rel_mma);
#endif
  }
}

// A NaN byte in a key makes every row that sees the key bad, a NaN byte in a query its row: BlockMaxScoresFp8 names
// the same first bad row (t * Hidx + r) as BlockMaxScores and as the definition.
TEST(GpuKernels, Fp8BlockMaxFlagsTheBadRowsTheMmaKernelFlags) {
#if defined(MSA_HAVE_CUDA)
  MSA_REQUIRE_FP8_INDEX_KERNEL();
#else
  MSA_REQUIRE_GPU();
#endif
  const Fp8Chunk c = Fp8Chunks().front();  // prefill 300, Hidx 4
  std::vector<uint8_t> index_q = RandomE4M3((c.t0 + c.nq + 2) * c.hidx * c.di, 71);
  std::vector<uint8_t> index_k = RandomE4M3((c.pad_keys + c.k_len) * c.di, 72);
  index_k[size_t(150 * c.di + 7)] = 0x7F;  // key 150: rows of queries 150.. see it; first (query 150, group 0)
  const unsigned long long key_nan_row = 150 * 4 + 0;
  index_q[size_t((40 * c.hidx + 3) * c.di)] = 0xFF;  // query 40, group 3
  const unsigned long long query_nan_row = 40 * 4 + 3;
  for (const bool with_query_nan : {false, true}) {
    std::vector<uint8_t> q = index_q;
    if (!with_query_nan) q[size_t((40 * c.hidx + 3) * c.di)] = 0;
#if defined(MSA_HAVE_CUDA)
    Fp8AndMma run;
    ASSERT_TRUE(RunFp8AndMma(Fp8Geometry(c), q, index_k, 1.0f / std::sqrt(float(c.di)), &run));
    const unsigned long long expected = with_query_nan ? query_nan_row : key_nan_row;
    EXPECT_EQ(run.mma_bad, expected) << "BlockMaxScores, query NaN " << with_query_nan;
    EXPECT_EQ(run.fp8_bad, expected) << "BlockMaxScoresFp8, query NaN " << with_query_nan;
#else
    (void)q, (void)key_nan_row, (void)query_nan_row;
#endif
  }
}

// Cases for RankTopKThreshold's paths (gpu/index/index_kernels.cu): few rows over many candidates, so a chunk's rows are
// split over several warps (RankTopKThresholdSplits: fewer rows than 16 warps per SM, at least 256 candidates per
// split, up to 32 splits) and merged; exact ties in bulk (few_valued_index, as TiedBlockMaxCases); rows with fewer
// candidates than the selection takes, and init blocks. Di 16, Bk a multiple of 64 and top_k <= 33 send them to
// BlockMaxScores and the RankTopK family (SelectImpl).
std::vector<TestCase> TopKSplitCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec, bool tied) {
    spec.few_valued_index = tied;
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  // Bk 64, top_k 16: 1, 4 and 2 queries (2, 8 and 4 rows) over 4687, 3125 and 625 blocks: 19, 13 and 3 splits.
  add("topk_split", MakeSpec(4, 2, 16, 64, 16, 0, Pooling::kMax, {{1, 300000}, {4, 200000}, {2, 40000}},
                             DType::kBF16, 501), false);
  // The same shapes with exact ties everywhere: the splits' lists and the merge must keep block id order.
  add("topk_split_tied", MakeSpec(4, 2, 16, 64, 16, 0, Pooling::kMax, {{1, 300000}, {4, 200000}, {2, 40000}},
                                  DType::kBF16, 502), true);
  // Bk 128, top_k 33 (32-key lists), one init block, one index head: 3125 and 546 blocks (13 and 3 splits).
  add("topk_split_tied", MakeSpec(4, 1, 16, 128, 33, 1, Pooling::kMax, {{3, 400000}, {1, 70000}}, DType::kBF16, 503),
      true);
  // Fewer candidates than the selection takes (and fewer than 32 lanes), two init blocks: 1 to 11 blocks.
  add("topk_short", MakeSpec(4, 2, 16, 64, 16, 2, Pooling::kMax, {{40, 40}, {5, 700}, {3, 130}, {1, 64}},
                             DType::kBF16, 504), true);
  add("topk_short", MakeSpec(4, 1, 16, 64, 33, 0, Pooling::kMax, {{70, 1000}, {2, 2100}}, DType::kBF16, 505), false);
  return cases;
}

// Runs without a device: TopKSplitCases are valid problems, and in the tied ones exact ties decide most selection
// rows (by the FP64 reference alone, as TiedBlockMaxCasesHaveExactTiesThatDecideTheSelection).
TEST(GpuBackend, TopKSplitCasesAreValidAndTheTiedOnesAreDecidedByTies) {
  for (const TestCase& test_case : TopKSplitCases()) {
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

// topk=threshold (RankTopKThreshold: the threshold filter, split rows and their merge) gives RankTopK's
// selection entry for entry, hence the same bits everywhere, on every max-pooling case (canonical, large, tied)
// and on TopKSplitCases, at bf16 and fp16.
TEST(GpuBackend, ThresholdTopKKernelGivesTheWarpKernelsSelection) {
  MSA_REQUIRE_GPU();
  std::vector<TestCase> cases;
  for (TestCase& c : AllCases()) {
    if (c.spec.config.pooling == Pooling::kMax) cases.push_back(std::move(c));
  }
  for (TestCase& c : TiedBlockMaxCases()) cases.push_back(std::move(c));
  for (TestCase& c : TopKSplitCases()) cases.push_back(std::move(c));
  int64_t compared = 0;
  for (const TestCase& test_case : cases) {
    Problem problem = GenerateProblem(test_case.spec);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision));
      if (!Runnable(problem, "topk=threshold")) continue;
      Outputs warp, fast;
      const Status warp_status = RunWithTopKKernel(problem, "warp", &warp);
      const Status fast_status = RunWithTopKKernel(problem, "threshold", &fast);
      ASSERT_TRUE(warp_status.ok()) << what << ": " << warp_status.message();
      ASSERT_TRUE(fast_status.ok()) << what << ": " << fast_status.message();
      const int64_t top_k = problem.config.top_k, rows = int64_t(warp.topk_indices.size()) / top_k;
      int64_t differing_rows = 0;
      for (int64_t row = 0; row < rows; ++row) {
        if (SameRow(warp.topk_indices, fast.topk_indices, row, top_k)) continue;
        if (++differing_rows > 8) continue;  // list the first 8
        ADD_FAILURE() << what << ", selection row " << row << "\n  warp:" << FormatRow(warp.topk_indices, row, top_k)
                      << "\n  threshold:" << FormatRow(fast.topk_indices, row, top_k);
      }
      EXPECT_EQ(differing_rows, 0) << what;
      ExpectSameBits(warp, fast, what + ", threshold vs warp top-k kernel");
      ++compared;
    }
  }
  std::printf("threshold vs warp top-k kernel: %lld runs compared\n", static_cast<long long>(compared));
}

// Decode-shaped batches for the KV-outer direct lists (gpu/attend/kv_outer_attend.cu DirectListsKernel): many
// sequences with one query each (and one with none), over contexts from a single key to thousands; top_k 1, 8, 16
// and 32; 0 to 3 init blocks; short sequences with fewer blocks than top_k (-1 slots, hence padding tiles); group
// sizes 1 to 16 (1 to 64 queries per tile). The last case mixes in a sequence of 3 queries, where the planner refuses
// the direct lists and the case is skipped.
std::vector<TestCase> DecodeListCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  const std::vector<std::pair<int32_t, int32_t>> short_and_long = {
      {1, 1}, {1, 5}, {1, 63}, {1, 64}, {1, 65}, {1, 130}, {0, 90}, {1, 700}, {1, 2000}, {1, 4097}};
  add("decode_lists", MakeSpec(16, 2, 64, 64, 8, 1, Pooling::kMax, short_and_long, DType::kBF16, 601));
  add("decode_lists", MakeSpec(8, 4, 32, 32, 16, 2, Pooling::kMax, short_and_long, DType::kBF16, 602));
  add("decode_lists", MakeSpec(4, 4, 16, 16, 32, 3, Pooling::kMax, short_and_long, DType::kBF16, 603));
  add("decode_lists", MakeSpec(4, 2, 16, 16, 1, 0, Pooling::kMax, short_and_long, DType::kBF16, 604));
  add("decode_lists", MakeSpec(8, 1, 32, 64, 16, 0, Pooling::kLse, short_and_long, DType::kBF16, 605));
  {  // M3 heads and dims (group 16: 4 queries per tile), 12 sequences of 128 to ~11K keys
    std::vector<std::pair<int32_t, int32_t>> lengths;
    for (int32_t i = 0; i < 12; ++i) lengths.push_back({1, 128 + 997 * i});
    add("decode_lists", MakeSpec(64, 4, 128, 128, 16, 1, Pooling::kMax, lengths, DType::kBF16, 606));
  }
  add("decode_lists_mixed",
      MakeSpec(8, 2, 32, 32, 8, 1, Pooling::kMax, {{1, 300}, {3, 200}, {1, 40}, {1, 1000}}, DType::kBF16, 607));
  return cases;
}

// Runs without a device: DecodeListCases are valid problems.
TEST(GpuBackend, DecodeListCasesAreValidProblems) {
  for (const TestCase& test_case : DecodeListCases()) {
    const Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    const Status status = RunBackend(*FindBackend("reference"), problem, &reference);
    EXPECT_TRUE(status.ok()) << test_case.name << ": " << status.message();
  }
}

// The gpu's outputs of `problem` with attend=attend_kernel and lists=lists
// (gpu_backend.cc ChooseKvLists).
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
  for (const TestCase& test_case : DecodeListCases()) {
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

// Decode batches for the batched index branch (gpu/common/geometry.h IsDecodeBatch, ChunkGeometry::sequences): every
// sequence with at most 16 queries, so SelectImpl ranks the whole batch as one batched chunk (one block-max launch,
// one top-k) unless batch=per-sequence. Mixed k_len from a single key to thousands (sequences shorter
// than top_k blocks: -1 slots; CTAs past a short sequence's blocks exit), q_len 1 and 16 mixed (CTAs past a
// sequence's rows exit; q_len 16 over 16 keys), a sequence with no query, init blocks, top_k 8, 16 and 33 (16- and
// 32-key top-k lists), Hidx 1 to 4; few rows over many blocks (RankTopKThreshold's split lists at their rows' offset
// in the batch); and index_q scaled to overflow, where both paths must name the same first bad (query, group). Di and
// Bk send them to BlockMaxScores(Wgmma) and the RankTopK family.
std::vector<TestCase> DecodeBatchCases() {
  std::vector<TestCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec) {
    cases.push_back({CaseName(kind, spec), std::move(spec)});
  };
  const std::vector<std::pair<int32_t, int32_t>> mixed = {{1, 1},    {16, 16}, {1, 5},    {16, 700}, {0, 90},
                                                          {1, 64},   {3, 130}, {16, 2000}, {1, 4097}, {5, 5},
                                                          {1, 129},  {16, 257}};
  add("decode_batch", MakeSpec(8, 2, 64, 64, 8, 1, Pooling::kMax, mixed, DType::kBF16, 701));
  add("decode_batch", MakeSpec(8, 4, 32, 128, 16, 2, Pooling::kMax, mixed, DType::kBF16, 702));
  add("decode_batch", MakeSpec(4, 1, 16, 64, 33, 0, Pooling::kMax, mixed, DType::kBF16, 703));
  {  // M3 heads and dims, 8 sequences of 1 or 16 queries over 128 to ~7K keys
    std::vector<std::pair<int32_t, int32_t>> lengths;
    for (int32_t i = 0; i < 8; ++i) lengths.push_back({i % 3 == 0 ? 16 : 1, 128 + 997 * i});
    add("decode_batch", MakeSpec(64, 4, 128, 128, 16, 0, Pooling::kMax, lengths, DType::kBF16, 704));
  }
  // Few rows over thousands of blocks (RankTopKThreshold: split lists, merged), next to short sequences.
  add("decode_batch_split",
      MakeSpec(4, 2, 16, 64, 16, 1, Pooling::kMax, {{1, 300000}, {16, 100000}, {1, 1}, {16, 40}}, DType::kBF16, 705));
  {
    ProblemSpec spec = MakeSpec(8, 4, 128, 128, 16, 0, Pooling::kMax, {{1, 300}, {16, 2000}, {1, 1}}, DType::kBF16, 706);
    spec.query_scale = 3e37;
    add("decode_batch_overflow", std::move(spec));
  }
  return cases;
}

// Runs without a device: DecodeBatchCases are valid problems and decode batches: at most 16 queries per sequence
// (gpu/common/geometry.h IsDecodeBatch).
TEST(GpuBackend, DecodeBatchCasesAreValidDecodeBatches) {
  for (const TestCase& test_case : DecodeBatchCases()) {
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
  for (const TestCase& test_case : DecodeBatchCases()) {
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

// ---- SPEC v2 selection features: several forced local blocks (local_blocks) and fp16 block scores (score_format) ----

// A problem of the tests below, built (not only generated) once per test.
struct GpuCase {
  std::string name;
  Problem problem;
};

// local_blocks > 1 (SPEC section 2: the last local_blocks visible blocks forced beside the init blocks, each block
// counted once): sequences so short that the forced sets overlap (2 init blocks and 3 local ones over 1 to 5 blocks:
// every block forced), rows with nothing left to rank (take 0), rows with more candidates than room, long rows. Di 16
// or 32 and Bk a multiple of 64 send max pooling to BlockMaxScores(Wgmma), top_k <= 33 to the RankTopK family: a
// prefill-and-chunk mix (per-sequence chunks), a decode batch (the batched chunk), few rows over thousands of blocks
// (RankTopKThreshold's split lists), exact ties at top_k 33 (32-key lists), top_k = init_blocks + local_blocks (no
// ranked candidate anywhere); then top_k 40 (RankFloat), Bk 16 with lse pooling (LowpBlockScores), and an e4m3 case
// with fp16 scores (BlockMaxScoresFp8 on an sm_90 device, then the binary16 rounding).
std::vector<GpuCase> LocalBlocksCases() {
  std::vector<GpuCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec, int local_blocks) {
    spec.config.local_blocks = local_blocks;
    cases.push_back({CaseName(kind, spec), GenerateProblem(spec)});
  };
  add("local_prefill",
      MakeSpec(8, 2, 16, 64, 8, 2, Pooling::kMax,
               {{1, 1}, {5, 5}, {64, 64}, {65, 65}, {130, 130}, {300, 300}, {3, 700}, {64, 3000}}, DType::kBF16, 801),
      3);
  add("local_decode",
      MakeSpec(8, 4, 32, 128, 8, 1, Pooling::kMax,
               {{1, 1}, {16, 16}, {1, 5}, {16, 700}, {0, 90}, {1, 129}, {3, 385}, {16, 2000}, {1, 4097}, {16, 6000}},
               DType::kBF16, 802),
      4);
  add("local_split", MakeSpec(4, 2, 16, 64, 16, 1, Pooling::kMax, {{1, 300000}, {2, 40000}}, DType::kBF16, 803), 5);
  {
    ProblemSpec spec = MakeSpec(4, 1, 16, 64, 33, 2, Pooling::kMax, {{128, 6000}, {2, 140000}}, DType::kBF16, 804);
    spec.few_valued_index = true;
    add("local_tied", spec, 7);
  }
  add("local_all_forced", MakeSpec(4, 2, 16, 64, 4, 1, Pooling::kMax, {{200, 200}, {1, 5000}}, DType::kBF16, 805), 3);
  add("local_rank_float", MakeSpec(4, 2, 16, 64, 40, 3, Pooling::kMax, {{1, 6000}, {300, 3000}}, DType::kBF16, 806), 6);
  add("local_lse", MakeSpec(4, 2, 16, 16, 6, 1, Pooling::kLse, {{100, 100}, {7, 61}, {1, 500}}, DType::kF16, 807), 2);
  {
    ProblemSpec spec =
        MakeSpec(16, 4, 128, 128, 16, 0, Pooling::kMax, {{300, 300}, {4, 3000}, {16, 5000}}, DType::kBF16, 808);
    spec.config.index_format = IndexFormat::kE4M3;
    spec.config.score_format = ScoreFormat::kFp16;
    add("local_e4m3_fp16_scores", spec, 2);
  }
  return cases;
}

// score_format fp16 with binary16 ties by construction (spec: its shapes, dtype, top_k, init and local blocks):
// index_scale 1, index query [1, c, 0, ...] with c = 1 + (t + r) % 3 for query t, group r, index key [a, b, 0, ...]
// with a = 1 + i / 8 (i < 24; i < 8 in every third block of a sequence, whose keys then all score below 2) and
// b = j * 2^-12 (j < 8). A token score a + c b is exact in double and in fp32 (the products are exact and the sum needs
// at most 15 bits), and so is every bf16 / fp16 block max, in any accumulation order. The binary16 grid is 2^-10
// apart on [1, 2) and 2^-9 on [2, 4) (4 and 8 steps of 2^-12): distinct maxima collapse onto one fp16 score, the
// halfway ones go to the even neighbour, and the blocks sharing the row's threshold score are told apart by id alone.
// The lowp selection and block scores must then equal the reference's, slot for slot.
Problem Fp16TieProblem(ProblemSpec spec) {
  spec.config.index_scale = 1.0;
  spec.config.score_format = ScoreFormat::kFp16;
  Problem problem = GenerateProblem(spec);
  const Config& c = problem.config;
  for (int64_t t = 0; t < problem.batch().total_q(); ++t) {
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      for (int64_t d = 0; d < c.index_head_dim; ++d) {
        SetElement(problem.index_q, t, r, d, d == 0 ? 1.0 : d == 1 ? 1.0 + double((t + r) % 3) : 0.0);
      }
    }
  }
  RandomStream rng(spec.seed, 99);
  for (size_t b = 0; b + 1 < problem.cu_seqlens_k.size(); ++b) {
    for (int64_t s = 0; s < problem.cu_seqlens_k[b + 1] - problem.cu_seqlens_k[b]; ++s) {
      const int64_t key = problem.cu_seqlens_k[b] + s;
      const bool low_block = (s / c.block_size) % 3 == 0;
      for (int64_t d = 2; d < c.index_head_dim; ++d) SetElement(problem.index_k, key, 0, d, 0.0);
      SetElement(problem.index_k, key, 0, 0, 1.0 + double(rng.Below(low_block ? 8 : 24)) / 8);
      SetElement(problem.index_k, key, 0, 1, std::ldexp(double(rng.Below(8)), -12));
    }
  }
  return problem;
}

std::vector<GpuCase> Fp16TieCases() {
  std::vector<GpuCase> cases;
  const auto add = [&cases](const std::string& kind, ProblemSpec spec, int local_blocks) {
    spec.config.local_blocks = local_blocks;
    cases.push_back({CaseName(kind, spec), Fp16TieProblem(spec)});
  };
  add("fp16_ties_prefill",
      MakeSpec(8, 2, 16, 64, 8, 1, Pooling::kMax, {{64, 3000}, {1, 1}, {20, 20}}, DType::kBF16, 901), 2);
  add("fp16_ties_decode",
      MakeSpec(8, 4, 32, 128, 8, 0, Pooling::kMax, {{1, 1}, {16, 700}, {1, 4097}, {3, 385}, {16, 2000}, {8, 9000}},
               DType::kBF16, 902),
      1);
  add("fp16_ties_split",
      MakeSpec(4, 2, 16, 64, 16, 1, Pooling::kMax, {{1, 300000}, {4, 100000}}, DType::kBF16, 903), 3);
  add("fp16_ties_k33", MakeSpec(4, 1, 16, 128, 33, 2, Pooling::kMax, {{128, 6000}, {2, 140000}}, DType::kBF16, 904), 1);
  add("fp16_ties_bk16",
      MakeSpec(4, 2, 16, 16, 6, 1, Pooling::kMax, {{40, 2000}, {1, 3000}, {30, 30}}, DType::kF16, 905), 2);
  add("fp16_ties_k40", MakeSpec(4, 2, 16, 64, 40, 1, Pooling::kMax, {{1, 20000}, {70, 3000}}, DType::kBF16, 906), 4);
  return cases;
}

// A decode batch whose block scores overflow binary16 in exactly one (query, group) row (the first in the order
// t * Hidx + r is what the reference reports): index_scale 1, index_q[query, group] = [+-256, 0, ...] there, and keys
// [256, 0, ...] (any dtype holds 256): scores +-65536. positive: query 0 (sequence 0, position 299), group 0, key 5
// (one key is its block's max). Else query 1 (the first of sequence 1), group 1, over a whole block of such keys
// (block 3: keys 192..255 of the sequence), whose max is then -65536. Every other score is 256 times a normal value at
// most: no other overflow.
Problem Fp16OverflowProblem(bool positive) {
  ProblemSpec spec = MakeSpec(8, 2, 16, 64, 8, 1, Pooling::kMax, {{1, 300}, {16, 2000}, {1, 1}}, DType::kBF16, 907);
  spec.config.index_scale = 1.0;
  spec.config.score_format = ScoreFormat::kFp16;
  spec.config.local_blocks = 2;
  Problem problem = GenerateProblem(spec);
  const int64_t t = positive ? 0 : 1, r = positive ? 0 : 1;
  for (int64_t d = 0; d < spec.config.index_head_dim; ++d) {
    SetElement(problem.index_q, t, r, d, d == 0 ? (positive ? 256 : -256) : 0);
  }
  const int64_t first = positive ? 5 : problem.cu_seqlens_k[1] + 192, last = positive ? 5 : first + 63;
  for (int64_t key = first; key <= last; ++key) {
    for (int64_t d = 0; d < spec.config.index_head_dim; ++d) SetElement(problem.index_k, key, 0, d, d == 0 ? 256 : 0);
  }
  return problem;
}

std::string Fp16OverflowMessage(bool positive) {
  return std::string("block score of query ") + (positive ? "0, group 0" : "1, group 1") +
         " overflows binary16 (|score| >= 65520): score_format fp16 cannot represent it";
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

// Runs without a device: the cases are what the gpu tests below need them to be, by the reference alone. The local
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

// The gpu's selection outputs (topk_indices, block_scores, index_lse) of `problem` with the index branch's kernel
// choices forced (gpu/common/kernel_plan.h).
Status SelectWithIndexChoices(const Problem& problem, const char* index_kernel, const char* topk_kernel,
                              const char* index_batch, Outputs* outputs) {
  const ScopedPlan index_plan("index", index_kernel);
  const ScopedPlan topk_plan("topk", topk_kernel);
  const ScopedPlan batch_plan("batch", index_batch);
  outputs->Allocate(problem);
  return Select(*Gpu(), problem.config, problem.index_inputs(), outputs->selection_outputs());
}

void ExpectSameSelectionBits(const Outputs& expected, const Outputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.topk_indices, got.topk_indices), 0) << what << ": topk_indices";
  EXPECT_EQ(BitDiffs(expected.block_scores, got.block_scores), 0) << what << ": block_scores";
  EXPECT_EQ(BitDiffs(expected.index_lse, got.index_lse), 0) << what << ": index_lse";
}

// Exact mode on the local-blocks, fp16-tie and fp16-overflow problems: every output bit for bit the reference's
// (slots, block_scores, index_lse with the fp16 formula, out, lse), and the overflow refused with the reference's
// message.
TEST(GpuBackend, ExactIsBitIdenticalToTheReferenceOnLocalBlocksAndFp16Scores) {
  MSA_REQUIRE_GPU();
  std::vector<GpuCase> cases = LocalBlocksCases();
  for (GpuCase& c : Fp16TieCases()) cases.push_back(std::move(c));
  for (const GpuCase& c : cases) {
    Outputs reference, gpu;
    ASSERT_TRUE(RunReference(c.problem, &reference).ok()) << c.name;
    const Status status = RunBackend(*Gpu(), c.problem, &gpu);
    ASSERT_TRUE(status.ok()) << c.name << ": " << status.message();
    ExpectSameBits(reference, gpu, c.name);
  }
  for (const bool positive : {true, false}) {
    Outputs gpu;
    EXPECT_EQ(RunBackend(*Gpu(), Fp16OverflowProblem(positive), &gpu).message(), Fp16OverflowMessage(positive));
  }
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
            if (!Runnable(problem, std::string("index=") + index_kernel + ",topk=" + topk_kernel + ",batch=" +
                                       index_batch)) {
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
      for (const auto& [attend_kernel, lists] : std::vector<std::pair<const char*, const char*>>{
               {"kv-outer-wgmma", "direct"}, {"kv-outer-wgmma", "general"}, {"kv-outer", "direct"},
               {"kv-outer", "general"}, {"q-outer", ""}, {"gathered", ""}}) {
        const std::string request = std::string("attend=") + attend_kernel + (*lists ? std::string(",lists=") + lists : "");
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
                          &verdict).ok());
        EXPECT_TRUE(verdict.passed()) << how << "\n" << FormatVerdict(verdict);
        ++attend_runs;
      }
    }
  }
  std::printf("local blocks and fp16 scores: %lld forced index-branch runs bit-identical to the default, %lld forced "
              "main-branch runs within the oracle's bound\n",
              static_cast<long long>(index_runs), static_cast<long long>(attend_runs));
}

// The binary16 overflow refused in bf16 and fp16 as in exact (the reference's message, the same first row) on every
// index-branch path: mma and wgmma block maxima, warp and threshold top-k, the batched and per-sequence decode batch.
TEST(GpuBackend, Fp16ScoresOverflowingBinary16AreRefusedOnEveryIndexPath) {
  MSA_REQUIRE_GPU();
  for (const bool positive : {true, false}) {
    Problem problem = Fp16OverflowProblem(positive);
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      problem.config.precision = precision;
      for (const char* index_kernel : {"mma", "wgmma"}) {
        for (const char* topk_kernel : {"warp", "threshold"}) {
          for (const char* index_batch : {"batched", "per-sequence"}) {
            if (!Runnable(problem, std::string("index=") + index_kernel + ",topk=" + topk_kernel + ",batch=" +
                                       index_batch)) {
              continue;
            }
            Outputs outputs;
            const Status status = SelectWithIndexChoices(problem, index_kernel, topk_kernel, index_batch, &outputs);
            EXPECT_EQ(status.message(), Fp16OverflowMessage(positive))
                << PrecisionName(precision) << ", index " << index_kernel << ", top-k " << topk_kernel << ", "
                << index_batch;
          }
        }
      }
    }
  }
}

TEST(GpuBackend, TwoRunsAreBitwiseIdentical) {
  MSA_REQUIRE_GPU();
  const TestCase test_case = LargeCases().front();
  for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
    Problem problem = GenerateProblem(test_case.spec);
    problem.config.precision = precision;
    Outputs first, second;
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &first).ok());
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &second).ok());
    ExpectSameBits(first, second, test_case.name + " " + std::string(PrecisionName(precision)));
  }
}

TEST(GpuBackend, DecodeShapesQLen1To16OverALongContext) {
  MSA_REQUIRE_GPU();
  ProblemSpec spec;  // M3 dims with 16 query heads: one sequence per q_len 1..16, each over 8K+ keys
  spec.config.num_q_heads = 16;
  for (int32_t q_len = 1; q_len <= 16; ++q_len) spec.lengths.push_back({q_len, 8192 + 61 * q_len});
  spec.dtype = DType::kBF16;
  spec.seed = 77;
  Problem problem = GenerateProblem(spec);
  Outputs reference;
  ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
  for (Precision precision : {Precision::kExact, Precision::kBf16}) {
    problem.config.precision = precision;
    Outputs gpu;
    ASSERT_TRUE(RunBackend(*Gpu(), problem, &gpu).ok());
    if (precision == Precision::kExact) {
      ExpectSameBits(reference, gpu, "decode");
      continue;
    }
    const Verdict verdict = JudgeGpuOutputs(problem, reference, gpu, precision);
    EXPECT_TRUE(verdict.passed()) << FormatVerdict(verdict);
  }
}

// SPEC section 5's properties (oracle/properties.h) on the gpu backend alone, at every precision it supports,
// on random valid problems: property_test runs them for every backend in turn, and stops at the first backend
// that fails; these keep the gpu's verdict independent of the others.
bool GpuHolds(const std::string& name, const std::function<Status(const Backend&, const ProblemSpec&)>& check) {
  return rc::check(name, [&check](const ProblemSpec& spec) {
    for (Precision precision : SupportedPrecisions(*Gpu(), spec.config)) {
      ProblemSpec at = spec;
      at.config.precision = precision;
      const Status status = check(*Gpu(), at);
      if (!status.ok()) RC_FAIL("gpu at " + std::string(PrecisionName(precision)) + ": " + status.message());
    }
  });
}

TEST(GpuProperty, EverySpecSection5PropertyHolds) {
  MSA_REQUIRE_GPU();
  EXPECT_TRUE(GpuHolds("selection contract", CheckSelectionContract));
  EXPECT_TRUE(GpuHolds("dense equivalence", CheckDenseEquivalence));
  EXPECT_TRUE(GpuHolds("causality", [](const Backend& b, const ProblemSpec& s) { return CheckCausality(b, s, s.seed ^ 1); }));
  EXPECT_TRUE(GpuHolds("gqa sharing", CheckGqaSharing));
  EXPECT_TRUE(GpuHolds("group independence", [](const Backend& b, ProblemSpec s) {
    const int group_size = s.config.group_size();
    s.config.num_kv_heads += 1;
    s.config.num_q_heads = s.config.num_kv_heads * group_size;
    return CheckGroupIndependence(b, s, s.seed ^ 2);
  }));
  EXPECT_TRUE(GpuHolds("block order", [](const Backend& b, const ProblemSpec& s) {
    return CheckBlockOrderInvariance(b, s, s.seed ^ 3);
  }));
  EXPECT_TRUE(GpuHolds("shift invariance", [](const Backend& b, const ProblemSpec& s) {
    return CheckShiftInvariance(b, s, s.seed ^ 4, double(int64_t(s.seed % 11) - 5));
  }));
  EXPECT_TRUE(GpuHolds("scaling v", CheckScalingV));
  EXPECT_TRUE(GpuHolds("linearity in v", [](const Backend& b, const ProblemSpec& s) {
    return CheckLinearityInV(b, s, s.seed ^ 5);
  }));
  EXPECT_TRUE(GpuHolds("suffix rule", [](const Backend& b, const ProblemSpec& s) {
    const int32_t k_len = 1 + int32_t(s.seed % 59), q_len = 1 + int32_t((s.seed >> 8) % uint64_t(k_len));
    return CheckSuffixRule(b, s, k_len, q_len);
  }));
  EXPECT_TRUE(GpuHolds("softmax rows sum to one", CheckSoftmaxRowsSumToOne));
  EXPECT_TRUE(GpuHolds("max dominance", CheckMaxDominance));
  EXPECT_TRUE(GpuHolds("poison never read", CheckPoisonedInputsNeverRead));
  EXPECT_TRUE(GpuHolds("every output written", CheckOutputsFullyWritten));
}

}  // namespace
}  // namespace msa
