// What the gpu backend's tests (tests/gpu_*_test.cc) share: the skip without a device, bit-for-bit comparison of
// outputs, scoped kernel plans (gpu/common/kernel_plan.h SetKernelPlanForTest) and whether the planner accepts one,
// the tie analysis of a selection by the FP64 reference's outputs, and the problems built from the case list
// (oracle/case_list.cc) whose index inputs a test writes itself (binary16 ties, binary16 overflow). Shapes come from
// CasesTagged; none is defined here.
#ifndef MSA_TESTS_GPU_TEST_SUPPORT_H_
#define MSA_TESTS_GPU_TEST_SUPPORT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/kernel_plan.h"
#include "msa/forced_blocks.h"
#include "oracle/cases.h"
#include "oracle/problem.h"
#include "oracle/random.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_query.h"
#endif

namespace msa::gpu_test {

inline const Backend* Gpu() { return FindBackend("gpu"); }

// Skips the calling test unless the gpu backend is compiled in and a usable device is present.
#define MSA_REQUIRE_GPU()                                                                                  \
  do {                                                                                                     \
    if (Gpu() == nullptr) GTEST_SKIP() << "gpu backend not compiled in (configure with nvcc on the PATH)"; \
    if (!Gpu()->is_available())                                                                            \
      GTEST_SKIP() << "gpu backend compiled in, but no usable CUDA device "                                \
                      "(compute capability 8.0 or newer) is present";                                      \
  } while (false)

// The number of elements whose bytes differ (-1 when the sizes differ).
template <typename T>
int64_t BitDiffs(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return -1;
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return count;
}

// Every output (selection, block scores, index_lse, out, lse) the same bits, or a failure naming `what`.
inline void ExpectSameBits(const Outputs& expected, const Outputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.topk_indices, got.topk_indices), 0) << what << ": topk_indices";
  EXPECT_EQ(BitDiffs(expected.block_scores, got.block_scores), 0) << what << ": block_scores";
  EXPECT_EQ(BitDiffs(expected.index_lse, got.index_lse), 0) << what << ": index_lse";
  EXPECT_EQ(BitDiffs(expected.out, got.out), 0) << what << ": out";
  EXPECT_EQ(BitDiffs(expected.lse, got.lse), 0) << what << ": lse";
}

// MiniMax-M3's config (Config's defaults) at `precision`.
inline Config M3Config(Precision precision = Precision::kBf16) {
  Config c;
  c.precision = precision;
  return c;
}

// Sequences of q_lens[b] queries over k_lens[b] keys: the cu_seqlens it owns, and the Batch viewing them.
struct LengthsBatch {
  std::vector<int32_t> cu_q{0}, cu_k{0};
  LengthsBatch(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& k_lens) {
    for (size_t b = 0; b < q_lens.size(); ++b) {
      cu_q.push_back(cu_q.back() + q_lens[b]);
      cu_k.push_back(cu_k.back() + k_lens[b]);
    }
  }
  Batch batch() const { return Batch{cu_q, cu_k}; }
};

// The canonical and the large cases (oracle/cases.h), in list order.
inline std::vector<TestCase> AllCases() {
  std::vector<TestCase> cases = CanonicalCases();
  for (TestCase& c : LargeCases()) cases.push_back(std::move(c));
  return cases;
}

// Whether row `row` of two [rows, width] tensors holds equal values (by value: -0 equals +0, as scores).
template <typename T>
bool SameRow(const std::vector<T>& a, const std::vector<T>& b, int64_t row, int64_t width) {
  return std::equal(a.begin() + row * width, a.begin() + (row + 1) * width, b.begin() + row * width);
}

// Row `row` of a [rows, width] tensor as " v0 v1 ...".
inline std::string FormatRow(const std::vector<int32_t>& tensor, int64_t row, int64_t width) {
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
inline bool DecidedByTies(const Config& config, const int32_t* selection, const double* scores, int64_t visible) {
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

// The TieRows of a max-pooling problem, from the FP64 reference's outputs `reference` on it.
inline TieRows FindTieRows(const Problem& problem, const Outputs& reference) {
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
inline bool Runnable(const Problem& problem, const std::string& request) {
#if defined(MSA_HAVE_CUDA)
  gpu::KernelPlan requested, plan;
  if (!gpu::ParseKernelPlan(request, &requested).ok()) return false;
  return gpu::PlanKernels(problem.config, gpu::ShapesOf(problem.config, problem.batch()), gpu::CurrentDeviceCaps(),
                          requested, &plan)
      .ok();
#else
  (void)problem;
  (void)request;
  return false;
#endif
}

// The gpu's selection outputs (topk_indices, block_scores, index_lse) of `problem` with the index branch's kernel
// choices forced (gpu/common/kernel_plan.h).
inline Status SelectWithIndexChoices(const Problem& problem, const char* index_kernel, const char* topk_kernel,
                                     const char* index_batch, Outputs* outputs) {
  const ScopedPlan index_plan("index", index_kernel);
  const ScopedPlan topk_plan("topk", topk_kernel);
  const ScopedPlan batch_plan("batch", index_batch);
  outputs->Allocate(problem);
  return Select(*Gpu(), problem.config, problem.index_inputs(), outputs->selection_outputs());
}

// The selection outputs (topk_indices, block_scores, index_lse) the same bits.
inline void ExpectSameSelectionBits(const Outputs& expected, const Outputs& got, const std::string& what) {
  EXPECT_EQ(BitDiffs(expected.topk_indices, got.topk_indices), 0) << what << ": topk_indices";
  EXPECT_EQ(BitDiffs(expected.block_scores, got.block_scores), 0) << what << ": block_scores";
  EXPECT_EQ(BitDiffs(expected.index_lse, got.index_lse), 0) << what << ": index_lse";
}

// ---- problems built from the case list: several forced local blocks, fp16 block scores ----

// A problem of the gpu tests, built (not only generated) from a case of the list.
struct GpuCase {
  std::string name;
  Problem problem;
};

// The cases tagged `tags` (oracle/case_list.cc), each problem made by build(spec).
inline std::vector<GpuCase> BuiltCases(uint32_t tags, Problem (*build)(ProblemSpec)) {
  std::vector<GpuCase> cases;
  for (const TestCase& test_case : CasesTagged(tags)) cases.push_back({test_case.name, build(test_case.spec)});
  return cases;
}

// The kTagGpuLocalBlocks cases (local_blocks > 1, SPEC section 2), generated.
inline std::vector<GpuCase> LocalBlocksCases() {
  return BuiltCases(kTagGpuLocalBlocks, [](ProblemSpec spec) { return GenerateProblem(spec); });
}

// score_format fp16 with binary16 ties by construction (spec: its shapes, dtype, top_k, init and local blocks):
// index_scale 1, index query [1, c, 0, ...] with c = 1 + (t + r) % 3 for query t, group r, index key [a, b, 0, ...]
// with a = 1 + i / 8 (i < 24; i < 8 in every third block of a sequence, whose keys then all score below 2) and
// b = j * 2^-12 (j < 8). A token score a + c b is exact in double and in fp32 (the products are exact and the sum needs
// at most 15 bits), and so is every bf16 / fp16 block max, in any accumulation order. The binary16 grid is 2^-10
// apart on [1, 2) and 2^-9 on [2, 4) (4 and 8 steps of 2^-12): distinct maxima collapse onto one fp16 score, the
// halfway ones go to the even neighbour, and the blocks sharing the row's threshold score are told apart by id alone.
// The lowp selection and block scores must then equal the reference's, slot for slot.
inline Problem Fp16TieProblem(ProblemSpec spec) {
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

// The kTagGpuFp16Ties cases (oracle/case_list.cc) with their binary16 ties written in (Fp16TieProblem).
inline std::vector<GpuCase> Fp16TieCases() { return BuiltCases(kTagGpuFp16Ties, Fp16TieProblem); }

// A decode batch whose block scores overflow binary16 in exactly one (query, group) row (the first in the order
// t * Hidx + r is what the reference reports): index_scale 1, index_q[query, group] = [+-256, 0, ...] there, and keys
// [256, 0, ...] (any dtype holds 256): scores +-65536. positive: query 0 (sequence 0, position 299), group 0, key 5
// (one key is its block's max). Else query 1 (the first of sequence 1), group 1, over a whole block of such keys
// (block 3: keys 192..255 of the sequence), whose max is then -65536. Every other score is 256 times a normal value at
// most: no other overflow.
inline Problem Fp16OverflowProblem(bool positive) {
  const ProblemSpec spec = CasesTagged(kTagGpuFp16Overflow).front().spec;  // index_scale 1, fp16 scores
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

inline std::string Fp16OverflowMessage(bool positive) {
  return std::string("block score of query ") + (positive ? "0, group 0" : "1, group 1") +
         " overflows binary16 (|score| >= 65520): score_format fp16 cannot represent it";
}

}  // namespace msa::gpu_test

#endif  // MSA_TESTS_GPU_TEST_SUPPORT_H_
