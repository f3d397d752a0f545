// Every runnable kernel plan of the gpu backend (gpu/common/kernel_plan.h) on the kTagGpuPlans cases, each against
// the FP64 reference under the oracle rules: exact plans bit-identical to the reference; each low-precision plan
// passing the oracle (SPEC section 5); and the plans the kernels claim to be bit-identical to each other compared bit
// for bit (index mma = wgmma, topk warp = threshold = cta, batch per-sequence = batched, lists general = direct, attend
// kv-outer = kv-outer-wgmma, attend kv-outer-wgmma-p16 = kv-outer-ws, attend union-tile = union-tile-ws). The plans
// come from PlanKernels over every combination of requested values on this device: a plan it refuses is not run (and
// never replaced), so no kernel is compared with itself. MSA_GPU_PLANS_MATCHING=TEXT (a device run's shortcut) keeps
// only the plans whose text contains TEXT, e.g. "attend=kv-outer-wgmma-p16". Without a usable CUDA device every test
// skips saying why.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/kernel_plan.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_query.h"
#endif

namespace msa::gpu_test {
namespace {

// The MSA_GPU_PLANS_MATCHING text ("" when unset: every plan).
std::string PlansMatching() {
  const char* text = std::getenv("MSA_GPU_PLANS_MATCHING");
  return text == nullptr ? "" : text;
}

// Every plan PlanKernels accepts for `config` on this device whose text contains PlansMatching(), keyed by its text
// (distinct concrete plans).
std::map<std::string, gpu::KernelPlan> RunnablePlans(const Config& config, const Batch& batch) {
  std::map<std::string, gpu::KernelPlan> plans;
#if defined(MSA_HAVE_CUDA)
  const gpu::KernelShapes shapes = gpu::ShapesOf(config, batch);
  const std::string matching = PlansMatching();
  for (const gpu::KernelPlan& requested : gpu::AllRequestablePlans()) {
    gpu::KernelPlan plan;
    if (gpu::PlanKernels(config, shapes, gpu::CurrentDeviceCaps(), requested, &plan).ok() &&
        gpu::FormatKernelPlan(plan).find(matching) != std::string::npos) {
      plans[gpu::FormatKernelPlan(plan)] = plan;
    }
  }
#else
  (void)config;
  (void)batch;
#endif
  return plans;
}

// The class of plans whose kernels give the same bits: each claimed twin mapped to one representative.
std::string BitClass(gpu::KernelPlan plan) {
  using namespace gpu;
  if (plan.index == IndexKernel::kWgmma) plan.index = IndexKernel::kMma;
  if (plan.topk == TopKKernel::kThreshold || plan.topk == TopKKernel::kCta || plan.topk == TopKKernel::kRunning) {
    plan.topk = TopKKernel::kWarp;
  }
  plan.batch = IndexBatch::kPerSequence;
  if (plan.lists == KvLists::kDirect) plan.lists = KvLists::kGeneral;
  // fused-decode's main branch on a given selection is split-k; split-k builds no lists, its tiles and merge are
  // kv-outer's.
  if (plan.attend == AttendKernel::kKvOuterWgmma || plan.attend == AttendKernel::kSplitK ||
      plan.attend == AttendKernel::kFusedDecode) {
    plan.attend = AttendKernel::kKvOuter;
    plan.lists = KvLists::kGeneral;
  }
  if (plan.attend == AttendKernel::kUnionTileWs) plan.attend = AttendKernel::kUnionTile;
  if (plan.attend == AttendKernel::kKvOuterWs) plan.attend = AttendKernel::kKvOuterWgmmaP16;
  return FormatKernelPlan(plan);
}

// Runs the gpu under `plan` (SetKernelPlanForTest) and checks that the plan that ran is the one asked for.
Status RunUnderPlan(const Problem& problem, const gpu::KernelPlan& plan, Outputs* outputs) {
  gpu::SetKernelPlanForTest(plan);
  outputs->Allocate(problem);
  Status status = Select(*Gpu(), problem.config, problem.index_inputs(), outputs->selection_outputs());
  if (status.ok()) {
    EXPECT_EQ(Gpu()->last_plan(), gpu::FormatSelectPlan(plan));
    status = Attend(*Gpu(), problem.config, problem.attention_inputs(), SelectionView{outputs->topk_indices.data()},
                    outputs->attention_outputs());
    if (status.ok()) {
      EXPECT_EQ(Gpu()->last_plan(), gpu::FormatAttendPlan(plan));
    }
  }
  gpu::SetKernelPlanForTest(std::nullopt);
  return status;
}

class GpuPlans : public ::testing::TestWithParam<Precision> {};

TEST_P(GpuPlans, EveryRunnablePlanPassesTheOracleAndClaimedTwinsAgreeBitForBit) {
  MSA_REQUIRE_GPU();
  const Precision precision = GetParam();
  int64_t runs = 0, twins = 0;
  for (const TestCase& test_case : CasesTagged(kTagGpuPlans)) {
    Problem problem = GenerateProblem(test_case.spec);
    Outputs reference;
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &reference).ok());
    problem.config.precision = precision;
    std::map<std::string, Outputs> first_of_class;
    for (const auto& [name, plan] : RunnablePlans(problem.config, problem.batch())) {
      const std::string what = test_case.name + " at " + std::string(PrecisionName(precision)) + ", " + name;
      Outputs outputs;
      const Status status = RunUnderPlan(problem, plan, &outputs);
      ASSERT_TRUE(status.ok()) << what << ": " << status.message();
      ++runs;
      if (precision == Precision::kExact) {
        ExpectSameBits(reference, outputs, what + " vs the reference");
      } else {
        JudgeOptions options;
        options.precision = precision;
        Verdict verdict;
        ASSERT_TRUE(Judge(problem, reference,
                          Candidate{outputs.topk_indices, outputs.out, outputs.lse, outputs.index_lse}, options,
                          &verdict)
                        .ok());
        EXPECT_TRUE(verdict.passed()) << what << "\n" << FormatVerdict(verdict);
      }
      const std::string bit_class = BitClass(plan);
      const auto first = first_of_class.find(bit_class);
      if (first == first_of_class.end()) {
        first_of_class.emplace(bit_class, std::move(outputs));
      } else {
        ExpectSameBits(first->second, outputs, what + " vs its twin " + bit_class);
        ++twins;
      }
    }
  }
  std::printf("%s: %lld runnable plans run%s, %lld compared bit for bit with a twin\n",
              std::string(PrecisionName(precision)).c_str(), static_cast<long long>(runs),
              PlansMatching().empty() ? "" : (" (those matching \"" + PlansMatching() + "\")").c_str(),
              static_cast<long long>(twins));
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuPlans, ::testing::Values(Precision::kExact, Precision::kBf16, Precision::kFp16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(PrecisionName(info.param));
                         });

// A plan the planner refuses is refused by the backend with the planner's message (never replaced by another).
TEST(GpuPlans, ARefusedPlanIsRefusedByTheBackendNotReplaced) {
  MSA_REQUIRE_GPU();
  Problem problem = GenerateProblem(CasesTagged(kTagGpuPlans).front().spec);
  problem.config.precision = Precision::kBf16;
  gpu::KernelPlan plan;
  plan.index = gpu::IndexKernel::kExact;  // exact kernels at bf16
  gpu::SetKernelPlanForTest(plan);
  Outputs outputs;
  const Status status = RunBackend(*Gpu(), problem, &outputs);
  gpu::SetKernelPlanForTest(std::nullopt);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("index=exact cannot run"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace msa::gpu_test
