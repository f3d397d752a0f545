// The gpu backend's kernel planner (gpu/common/kernel_plan.h) on the CPU, no device needed: the plan of every shape
// class, a forced request of each value where it runs and where it is refused (the refusal names the stage and the
// value), and the MSA_GPU_PLAN grammar.
#include "gpu/common/kernel_plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/device_caps.h"
#include "oracle/cases.h"
#include "oracle/problem.h"

namespace msa::gpu {
namespace {

Config Lowp(Precision precision = Precision::kBf16) {
  Config c;  // M3: Hq 64, Hkv 4, D = Dv = Di 128, Bk 128, top_k 16, max pooling
  c.precision = precision;
  return c;
}

// One causal prefill of n tokens, or `batch` decodes of q_len queries over k_len keys.
struct Lengths {
  std::vector<int32_t> q, k;
};
Lengths Prefill(int32_t n) { return {{0, n}, {0, n}}; }
Lengths Decode(int32_t batch, int32_t q_len, int32_t k_len) {
  Lengths l;
  for (int32_t b = 0; b <= batch; ++b) {
    l.q.push_back(b * q_len);
    l.k.push_back(b * k_len);
  }
  return l;
}

Status Plan(const Config& config, const Lengths& lengths, const DeviceCaps& caps, const KernelPlan& requested,
            KernelPlan* plan) {
  const Batch batch{lengths.q, lengths.k};
  return PlanKernels(config, ShapesOf(config, batch), caps, requested, plan);
}

KernelPlan Auto(const Config& config, const Lengths& lengths, const DeviceCaps& caps = kH200Caps) {
  KernelPlan plan;
  const Status status = Plan(config, lengths, caps, {}, &plan);
  EXPECT_TRUE(status.ok()) << status.message();
  return plan;
}

KernelPlan Parsed(const std::string& text) {
  KernelPlan plan;
  const Status status = ParseKernelPlan(text, &plan);
  EXPECT_TRUE(status.ok()) << text << ": " << status.message();
  return plan;
}

// The refusal of `request` names the stage and the value of its last key=value ("kernel plan: index=wgmma cannot
// run: ..."), the one that cannot run.
void ExpectRefused(const Config& config, const Lengths& lengths, const DeviceCaps& caps, const std::string& request,
                   const std::string& reason_part) {
  KernelPlan plan;
  const Status status = Plan(config, lengths, caps, Parsed(request), &plan);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << request;
  const std::string refused = request.substr(request.rfind(',') + 1);  // npos + 1 == 0: the whole request
  EXPECT_NE(status.message().find(refused + " cannot run"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(reason_part), std::string::npos) << status.message();
}

void ExpectRuns(const Config& config, const Lengths& lengths, const DeviceCaps& caps, const std::string& request,
                const std::string& expected) {
  KernelPlan plan;
  const Status status = Plan(config, lengths, caps, Parsed(request), &plan);
  ASSERT_TRUE(status.ok()) << request << ": " << status.message();
  EXPECT_EQ(FormatKernelPlan(plan), expected) << request;
}

TEST(KernelPlan, ExactModeTakesTheCanonicalKernelsOnEveryDevice) {
  for (const DeviceCaps& caps : {kH200Caps, kA100Caps}) {
    EXPECT_EQ(FormatKernelPlan(Auto(Lowp(Precision::kExact), Prefill(4096), caps)),
              "index=exact,batch=per-sequence,topk=exact,lists=-,attend=exact");
    EXPECT_EQ(FormatKernelPlan(Auto(Lowp(Precision::kExact), Decode(8, 1, 4096), caps)),
              "index=exact,batch=per-sequence,topk=exact,lists=-,attend=exact");
  }
}

TEST(KernelPlan, LowPrecisionPrefillWithMaxPoolingTakesWgmmaOnSm90AndMmaOnSm80) {
  EXPECT_EQ(FormatKernelPlan(Auto(Lowp(), Prefill(32768))),  // routed: M3's group of 16 fits path U's tiles
            "index=wgmma,batch=per-sequence,topk=warp,lists=general,attend=routed");
  EXPECT_EQ(FormatKernelPlan(Auto(Lowp(Precision::kFp16), Prefill(32768), kA100Caps)),
            "index=mma,batch=per-sequence,topk=warp,lists=general,attend=kv-outer");
}

TEST(KernelPlan, LongRowsTakeTheThresholdTopK) {
  // 1024 blocks of 128 keys: the longest row sees 1024 blocks.
  EXPECT_EQ(Auto(Lowp(), Prefill(1024 * 128)).topk, TopKKernel::kThreshold);
  EXPECT_EQ(Auto(Lowp(), Prefill(1024 * 128 - 128)).topk, TopKKernel::kWarp);
}

TEST(KernelPlan, E4M3IndexInputsTakeTheFp8KernelOnSm90Only) {
  Config config = Lowp();
  config.index_format = IndexFormat::kE4M3;
  EXPECT_EQ(Auto(config, Prefill(8192)).index, IndexKernel::kFp8);
  EXPECT_EQ(Auto(config, Prefill(8192)).batch, IndexBatch::kPerSequence);
  EXPECT_EQ(Auto(config, Decode(4, 1, 8192)).batch, IndexBatch::kPerSequence);  // fp8 takes no batched chunk
  EXPECT_EQ(Auto(config, Prefill(8192), kA100Caps).index, IndexKernel::kMma);
  config.index_head_dim = 120;  // a multiple of 8, not of 16: the block-max kernels, not fp8
  EXPECT_EQ(Auto(config, Prefill(8192)).index, IndexKernel::kWgmma);
}

TEST(KernelPlan, LseAndMeanPoolingTakeTheScalarIndexKernels) {
  Config config = Lowp();
  config.pooling = Pooling::kLse;
  EXPECT_EQ(Auto(config, Prefill(4096)).index, IndexKernel::kTokenScores);
  EXPECT_EQ(Auto(config, Decode(8, 1, 4096)).batch, IndexBatch::kPerSequence);
  config.pooling = Pooling::kMean;
  EXPECT_EQ(Auto(config, Prefill(4096)).index, IndexKernel::kMeanKeys);
}

TEST(KernelPlan, DimsPast128TakeTheGeneralKernels) {
  Config config = Lowp();
  config.head_dim = config.value_dim = config.index_head_dim = 192;
  const KernelPlan plan = Auto(config, Prefill(4096));
  EXPECT_EQ(plan.index, IndexKernel::kTokenScores);
  EXPECT_EQ(plan.attend, AttendKernel::kGathered);
  EXPECT_EQ(plan.lists, KvLists::kNone);
}

TEST(KernelPlan, TopKTimesBlockSizePastSharedMemoryTakesTheGatheredKernel) {
  Config config = Lowp();
  config.top_k = 128;       // past KV-outer's 32 and the insertion top-k past the warp kernels' 33
  config.block_size = 256;  // Q-outer's scores of 32768 keys do not fit 227 KiB
  const KernelPlan plan = Auto(config, Prefill(65536));
  EXPECT_EQ(plan.attend, AttendKernel::kGathered);
  EXPECT_EQ(plan.topk, TopKKernel::kInsertion);
  config.top_k = 24;
  config.block_size = 64;  // Q-outer fits; KV-outer pays in decode only
  EXPECT_EQ(Auto(config, Decode(64, 1, 65536)).attend, AttendKernel::kKvOuterWs);
}

TEST(KernelPlan, DecodeBatchesBatchTheIndexBranchAndTakeTheDirectLists) {
  const KernelPlan plan = Auto(Lowp(), Decode(64, 1, 8192));
  EXPECT_EQ(FormatKernelPlan(plan), "index=wgmma,batch=batched,topk=cta,lists=direct,attend=kv-outer-ws");
  // Multi-token decode: batched (q_len <= 16), general lists (two queries share a sequence).
  EXPECT_EQ(FormatKernelPlan(Auto(Lowp(), Decode(8, 4, 8192))),
            "index=wgmma,batch=batched,topk=cta,lists=general,attend=kv-outer-ws");
  // 17 queries per sequence: not a decode batch.
  EXPECT_EQ(Auto(Lowp(), Decode(8, 17, 8192)).batch, IndexBatch::kPerSequence);
  // Decode batches rank with one CTA per row (8 bytes of shared memory per block of the longest row) ...
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, 1 << 20)).topk, TopKKernel::kCta);
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, 4096), kA100Caps).topk, TopKKernel::kCta);
  // ... unless the longest row's 262144 blocks need 2 MiB: then the threshold top-k (>= 1024 candidate blocks).
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, int64_t(1) << 25)).topk, TopKKernel::kThreshold);
}

TEST(KernelPlan, LargeDecodeBatchesTakeKvOuterWsOnSm90aAndQOuterElsewhere) {
  // 128 and 8 x 16 queries over random blocks: about 0.5 queries per block, 512 (query, group) CTAs, 8192 tiles
  // (query, group, slot): 62 an SM of an H200, past kKvOuterWsMinTilesPerSm.
  EXPECT_EQ(Auto(Lowp(), Decode(128, 1, 4096)).attend, AttendKernel::kKvOuterWs);
  EXPECT_EQ(Auto(Lowp(), Decode(8, 16, 65536)).attend, AttendKernel::kKvOuterWs);
  // 4 queries: 256 tiles, under 4 an SM: the producer's pipeline would not fill.
  EXPECT_EQ(Auto(Lowp(), Decode(4, 1, 4096)).attend, AttendKernel::kKvOuterWgmmaP16);
  Config group4 = Lowp();
  group4.num_kv_heads = 16;  // a group of 4 heads: kv-outer-ws does not fit
  EXPECT_EQ(Auto(group4, Decode(128, 1, 4096)).attend, AttendKernel::kKvOuterWgmmaP16);
  EXPECT_EQ(Auto(Lowp(), Decode(128, 1, 4096), kA100Caps).attend, AttendKernel::kQOuter);
  // A prefill of as few queries per block stays on Q-outer.
  EXPECT_EQ(Auto(Lowp(), Decode(8, 17, 65536)).attend, AttendKernel::kQOuter);
}

TEST(KernelPlan, KvOuterPrefillsGoThroughRoutedWherePathUFits) {
  EXPECT_EQ(Auto(Lowp(), Prefill(131072)).attend, AttendKernel::kRouted);
  Config mqa = Lowp();
  mqa.num_kv_heads = mqa.num_q_heads;                                           // group size 1: path U needs 2 to 64
  EXPECT_EQ(Auto(mqa, Prefill(32768)).attend, AttendKernel::kKvOuterWgmmaP16);  // nor does kv-outer-ws
  EXPECT_EQ(Auto(Lowp(), Prefill(32768), kA100Caps).attend, AttendKernel::kKvOuter);  // path U is sm_90a
  EXPECT_EQ(Auto(Lowp(), Decode(64, 1, 8192)).attend, AttendKernel::kKvOuterWs);      // decode batches: not routed
  EXPECT_EQ(Auto(Lowp(), Decode(8, 16, 8192)).attend, AttendKernel::kKvOuterWs);
  EXPECT_EQ(Auto(Lowp(), Decode(8, 17, 8192)).attend, AttendKernel::kRouted);  // 17 queries a sequence: a prefill
}

TEST(KernelPlan, DecodeStepsOfAFewSequencesTakeSplitKOnSm90a) {
  // M3: Hkv 4 x top_k 16 = 64 split-k CTAs a sequence; one per SM on an H200: at most 132.
  EXPECT_EQ(FormatKernelPlan(Auto(Lowp(), Decode(1, 1, 4096))),
            "index=wgmma,batch=batched,topk=cta,lists=-,attend=fused-decode");  // one query, 2 blocks a CTA
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, 4097)).attend, AttendKernel::kSplitK);    // 33 blocks: 3 for one CTA
  EXPECT_EQ(Auto(Lowp(), Decode(2, 1, 4096)).attend, AttendKernel::kSplitK);    // two queries
  Config fp16_scores = Lowp();
  fp16_scores.score_format = ScoreFormat::kFp16;  // fused-decode ranks native scores only
  EXPECT_EQ(Auto(fp16_scores, Decode(1, 1, 4096)).attend, AttendKernel::kSplitK);
  EXPECT_EQ(Auto(Lowp(), Decode(2, 1, 1 << 20)).attend, AttendKernel::kSplitK);           // 128 CTAs
  EXPECT_EQ(Auto(Lowp(), Decode(3, 1, 4096)).attend, AttendKernel::kKvOuterWgmmaP16);     // 192
  EXPECT_EQ(Auto(Lowp(), Decode(1, 2, 4096)).attend, AttendKernel::kKvOuterWgmmaP16);     // two queries a sequence
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, 4096), kA100Caps).attend, AttendKernel::kKvOuter);  // no clusters
  DeviceCaps eight_cta_clusters = kH200Caps;  // a part (a MIG slice) that cannot place 16 CTAs of 100 KB as a cluster
  eight_cta_clusters.max_split_k_cluster = 8;
  EXPECT_EQ(Auto(Lowp(), Decode(1, 1, 4096), eight_cta_clusters).attend, AttendKernel::kKvOuterWgmmaP16);
  Config wide = Lowp();
  wide.top_k = 17;  // past a cluster of 16
  EXPECT_EQ(Auto(wide, Decode(1, 1, 4096)).attend, AttendKernel::kKvOuterWgmmaP16);
}

TEST(KernelPlan, EveryReturnedFieldIsConcrete) {
  for (const Lengths& lengths : {Prefill(1), Prefill(300), Decode(3, 2, 1000), Decode(70000, 1, 128)}) {
    for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
      const KernelPlan plan = Auto(Lowp(precision), lengths);
      EXPECT_NE(plan.index, IndexKernel::kAuto);
      EXPECT_NE(plan.batch, IndexBatch::kAuto);
      EXPECT_NE(plan.topk, TopKKernel::kAuto);
      EXPECT_NE(plan.lists, KvLists::kAuto);
      EXPECT_NE(plan.attend, AttendKernel::kAuto);
      EXPECT_EQ(FormatKernelPlan(plan).find("auto"), std::string::npos);
    }
  }
}

TEST(KernelPlan, EachForcedValueRunsWhereItFits) {
  const Config lowp = Lowp();
  Config mean = lowp, e4m3 = lowp;
  mean.pooling = Pooling::kMean;
  e4m3.index_format = IndexFormat::kE4M3;
  ExpectRuns(Lowp(Precision::kExact), Prefill(512), kA100Caps, "index=exact,topk=exact,attend=exact,batch=per-sequence",
             "index=exact,batch=per-sequence,topk=exact,lists=-,attend=exact");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "index=token-scores",
             "index=token-scores,batch=per-sequence,topk=warp,lists=general,attend=routed");
  ExpectRuns(mean, Prefill(512), kH200Caps, "index=mean-keys",
             "index=mean-keys,batch=per-sequence,topk=warp,lists=general,attend=routed");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "index=mma,topk=threshold,attend=kv-outer",
             "index=mma,batch=per-sequence,topk=threshold,lists=general,attend=kv-outer");
  ExpectRuns(e4m3, Prefill(512), kH200Caps, "index=fp8,topk=insertion,attend=q-outer",
             "index=fp8,batch=per-sequence,topk=insertion,lists=-,attend=q-outer");
  ExpectRuns(lowp, Decode(4, 1, 512), kA100Caps, "index=mma,batch=batched,lists=direct,attend=kv-outer",
             "index=mma,batch=batched,topk=cta,lists=direct,attend=kv-outer");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "batch=per-sequence,lists=general,attend=kv-outer-wgmma",
             "index=wgmma,batch=per-sequence,topk=cta,lists=general,attend=kv-outer-wgmma");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "attend=kv-outer-wgmma-p16",
             "index=wgmma,batch=per-sequence,topk=warp,lists=general,attend=kv-outer-wgmma-p16");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "attend=kv-outer-wgmma-p16",
             "index=wgmma,batch=batched,topk=cta,lists=direct,attend=kv-outer-wgmma-p16");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "attend=kv-outer-ws",
             "index=wgmma,batch=per-sequence,topk=warp,lists=general,attend=kv-outer-ws");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "attend=kv-outer-ws",
             "index=wgmma,batch=batched,topk=cta,lists=direct,attend=kv-outer-ws");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "attend=gathered",
             "index=wgmma,batch=batched,topk=cta,lists=-,attend=gathered");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "attend=union-tile",
             "index=wgmma,batch=per-sequence,topk=warp,lists=-,attend=union-tile");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "attend=routed",
             "index=wgmma,batch=batched,topk=cta,lists=general,attend=routed");
  ExpectRuns(lowp, Decode(4, 2, 512), kH200Caps, "attend=split-k",
             "index=wgmma,batch=batched,topk=cta,lists=-,attend=split-k");
  // A row of 64 blocks (8192 keys of 128): 4 blocks for each of top_k 16 CTAs.
  ExpectRuns(lowp, Decode(1, 1, 8192), kH200Caps, "attend=fused-decode",
             "index=wgmma,batch=batched,topk=cta,lists=-,attend=fused-decode");
  ExpectRuns(lowp, Decode(4, 1, 4096), kH200Caps, "index=mma,attend=fused-decode",
             "index=mma,batch=batched,topk=cta,lists=-,attend=fused-decode");
  ExpectRuns(lowp, Prefill(512), kH200Caps, "topk=running",
             "index=wgmma,batch=per-sequence,topk=running,lists=general,attend=routed");
  ExpectRuns(lowp, Decode(4, 1, 512), kH200Caps, "topk=running,attend=kv-outer-ws",  // one sequence a launch
             "index=wgmma,batch=per-sequence,topk=running,lists=direct,attend=kv-outer-ws");
}

TEST(KernelPlan, EachForcedValueIsRefusedWhereItCannotRunNamingTheStageAndTheValue) {
  const Config lowp = Lowp(), exact = Lowp(Precision::kExact);
  ExpectRefused(lowp, Prefill(512), kA100Caps, "index=wgmma", "sm_90a");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "index=fp8", "index_format e4m3");
  Config e4m3 = lowp;
  e4m3.index_format = IndexFormat::kE4M3;
  ExpectRefused(e4m3, Prefill(512), kA100Caps, "index=fp8", "sm_90a");
  ExpectRefused(exact, Prefill(512), kH200Caps, "index=mma", "precision exact takes index=exact");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "index=exact", "precision exact");
  Config lse = lowp;
  lse.pooling = Pooling::kLse;
  ExpectRefused(lse, Prefill(512), kH200Caps, "index=mma", "max pooling");
  ExpectRefused(lse, Prefill(512), kH200Caps, "index=mean-keys", "mean only");
  Config mean = lowp;
  mean.pooling = Pooling::kMean;
  ExpectRefused(mean, Prefill(512), kH200Caps, "index=token-scores", "not mean");
  ExpectRefused(exact, Prefill(512), kH200Caps, "topk=warp", "topk=exact");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "topk=exact", "FP64");
  Config wide_k = lowp;
  wide_k.top_k = 40;
  ExpectRefused(wide_k, Prefill(8192), kH200Caps, "topk=threshold", "top_k <= 33");
  ExpectRefused(wide_k, Decode(4, 1, 8192), kH200Caps, "topk=cta", "top_k <= 33");
  ExpectRefused(lowp, Decode(1, 1, int64_t(1) << 25), kH200Caps, "topk=cta", "262144 blocks) within 232448 bytes");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "batch=batched", "not a decode batch");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "topk=running", "the wgmma index kernel");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "index=mma,topk=running", "needs index=wgmma (this plan: index=mma)");
  ExpectRefused(exact, Prefill(512), kH200Caps, "topk=running", "precision exact takes topk=exact");
  ExpectRefused(wide_k, Prefill(8192), kH200Caps, "topk=running", "top_k <= 33 (this one: 40)");
  Config small_blocks = lowp;  // top_k fits: the refusal names the block size, the condition that fails
  small_blocks.block_size = 32;
  ExpectRefused(small_blocks, Prefill(512), kH200Caps, "topk=running", "index kernel, which needs max pooling");
  ExpectRefused(small_blocks, Prefill(512), kH200Caps, "topk=running", "block_size 32,");
  ExpectRefused(lowp, Decode(4, 1, 512), kH200Caps, "topk=running,batch=batched", "runs per sequence");
  ExpectRefused(lowp, Decode(4, 1, 512), kH200Caps, "index=token-scores,batch=batched", "runs per sequence");
  ExpectRefused(exact, Decode(4, 1, 512), kH200Caps, "batch=batched", "runs per sequence");
  ExpectRefused(lowp, Decode(4, 2, 512), kH200Caps, "attend=kv-outer-wgmma,lists=direct", "one query per sequence");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "attend=q-outer,lists=general", "builds no lists");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=kv-outer-wgmma", "sm_90a");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=kv-outer-wgmma-p16", "sm_90a");
  ExpectRefused(exact, Prefill(512), kH200Caps, "attend=kv-outer-wgmma-p16", "precision exact");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=union-tile", "sm_90a");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "attend=union-tile,lists=general", "builds no lists");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=routed", "sm_90a");
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=union-tile-ws", "sm_90a");
  ExpectRefused(lowp, Decode(4, 1, 512), kH200Caps, "attend=routed,lists=direct", "builds general lists");
  Config mqa = lowp;
  mqa.num_kv_heads = mqa.num_q_heads;  // group size 1: 128 queries a tile
  ExpectRefused(mqa, Prefill(512), kH200Caps, "attend=union-tile", "group size of 2 to 64");
  ExpectRefused(mqa, Prefill(512), kH200Caps, "attend=union-tile", "group size 1, top_k");  // the failing value
  ExpectRefused(lowp, Prefill(512), kA100Caps, "attend=kv-outer-ws", "sm_90a");
  ExpectRefused(exact, Prefill(512), kH200Caps, "attend=kv-outer-ws", "precision exact");
  Config group4 = lowp;
  group4.num_kv_heads = lowp.num_q_heads / 4;  // a query's 4 heads fill half a swizzle atom
  ExpectRefused(group4, Prefill(512), kH200Caps, "attend=kv-outer-ws", "multiple of 8 dividing 64 (this one: 4)");
  Config big = lowp;
  big.top_k = 64;
  big.block_size = 512;  // Q-outer's scores of 32768 keys, KV-outer's top_k <= 32 and block_size <= 128
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=q-outer", "shared memory");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=q-outer", "block_size 512, group size");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=kv-outer", "top_k <= 32");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=kv-outer", "block_size 512, group size");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=kv-outer", "top_k 64, 65536 queries");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=kv-outer-wgmma-p16", "top_k <= 32");
  ExpectRefused(big, Prefill(65536), kH200Caps, "attend=split-k", "top_k <= 32");
  ExpectRefused(lowp, Decode(4, 1, 512), kH200Caps, "attend=split-k,lists=direct", "builds no lists");
  // Room for the KV-outer tile, not for split-k's extra. Split-k's shared memory: the tile (64 + 2 x 128 rows of 136
  // halves, 64 x 12 bytes of entries) 87808 + P (16 x 136 fp32) 8704 + fragments (8 x 32 x 16 bytes) 4096 + row maxima
  // (8 warps x 16 fp32) 512 = 101120.
  constexpr DeviceCaps kNinetySixKiB{9, 0, 132, 96 * 1024};
  ExpectRuns(lowp, Decode(4, 1, 512), kNinetySixKiB, "attend=kv-outer",
             "index=mma,batch=batched,topk=cta,lists=direct,attend=kv-outer");
  ExpectRefused(lowp, Decode(4, 1, 512), kNinetySixKiB, "attend=split-k", "101120 bytes of shared memory");
  ExpectRefused(lowp, Decode(4, 1, 512), kA100Caps, "attend=split-k", "sm_90a");  // clusters
  Config seventeen = lowp;
  seventeen.top_k = 17;  // one CTA per slot in a cluster of at most 16
  ExpectRefused(seventeen, Decode(4, 1, 4096), kH200Caps, "attend=split-k", "top_k <= 16");
  DeviceCaps eight_cta_clusters = kH200Caps;
  eight_cta_clusters.max_split_k_cluster = 8;  // M3's top_k 16 CTAs form one cluster
  ExpectRefused(lowp, Decode(4, 1, 4096), eight_cta_clusters, "attend=split-k", "clusters of at most 8");
  // fused-decode: split-k's needs, then the stages whose bits its step gives and its shapes.
  ExpectRefused(lowp, Decode(4, 1, 4096), eight_cta_clusters, "attend=fused-decode", "clusters of at most 8");
  ExpectRefused(lowp, Decode(4, 1, 4096), kH200Caps, "topk=warp,attend=fused-decode",
                "index mma or wgmma and topk cta (this plan: index=wgmma, topk=warp)");
  ExpectRefused(lowp, Decode(1, 1, 8193), kH200Caps, "attend=fused-decode",
                "at most 4 x top_k = 64 visible blocks (this batch: 65)");
  Config fp16_scores = lowp;
  fp16_scores.score_format = ScoreFormat::kFp16;
  ExpectRefused(fp16_scores, Decode(4, 1, 4096), kH200Caps, "attend=fused-decode", "score_format native");
  ExpectRefused(fp16_scores, Prefill(512), kH200Caps, "topk=running", "score_format native, not fp16");
  Config group32 = lowp;
  group32.num_q_heads = 128;
  ExpectRefused(group32, Decode(4, 1, 4096), kH200Caps, "attend=fused-decode", "at most 16 heads (this one: 32)");
  ExpectRefused(exact, Prefill(512), kH200Caps, "attend=gathered", "attend=exact");
  ExpectRefused(lowp, Prefill(512), kH200Caps, "attend=exact", "precision exact");
}

TEST(KernelPlanParser, ReadsEveryKeyAndLeavesTheRestAuto) {
  const KernelPlan plan = Parsed("index=wgmma,attend=kv-outer");
  EXPECT_EQ(plan.index, IndexKernel::kWgmma);
  EXPECT_EQ(plan.attend, AttendKernel::kKvOuter);
  EXPECT_EQ(plan.topk, TopKKernel::kAuto);
  EXPECT_EQ(Parsed(""), KernelPlan{});
  EXPECT_EQ(FormatKernelPlan(Parsed("index=fp8,batch=per-sequence,topk=threshold,lists=direct,attend=gathered")),
            "index=fp8,batch=per-sequence,topk=threshold,lists=direct,attend=gathered");
  EXPECT_EQ(FormatKernelPlan(KernelPlan{}), "index=auto,batch=auto,topk=auto,lists=auto,attend=auto");
}

TEST(KernelPlanParser, RefusesUnknownKeysAndValuesNamingThemAndTheChoices) {
  const auto message = [](const std::string& text) {
    KernelPlan plan;
    const Status status = ParseKernelPlan(text, &plan);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << text;
    return status.message();
  };
  EXPECT_NE(
      message("attend=kv_outer")
          .find(
              "attend=\"kv_outer\" is not a choice (attend: auto, exact, gathered, "
              "q-outer, kv-outer, kv-outer-wgmma, kv-outer-wgmma-p16, kv-outer-ws, union-tile, union-tile-ws, routed, "
              "split-k, fused-decode)"),
      std::string::npos);
  EXPECT_NE(message("index=wgmma2").find("\"wgmma2\""), std::string::npos);
  EXPECT_NE(message("topk=fast").find("threshold"), std::string::npos);  // the old name is gone
  EXPECT_NE(message("lists=-").find("\"-\""), std::string::npos);        // "-" is the planner's, not a request
  EXPECT_NE(message("kernel=mma").find("unknown key \"kernel\" (keys: index, batch, topk, lists, attend)"),
            std::string::npos);
  EXPECT_NE(message("index").find("not key=value"), std::string::npos);
  EXPECT_NE(message("index=mma,index=wgmma").find("twice"), std::string::npos);
}

TEST(KernelPlanParser, SetKernelPlanForTestOverridesTheEnvironmentUntilCleared) {
  const KernelPlan forced = Parsed("index=fp8,batch=batched,topk=insertion,lists=direct,attend=gathered");
  SetKernelPlanForTest(forced);
  KernelPlan plan;
  ASSERT_TRUE(RequestedKernelPlan(&plan).ok());
  EXPECT_EQ(plan, forced);
  SetKernelPlanForTest(std::nullopt);
  const Status status = RequestedKernelPlan(&plan);  // MSA_GPU_PLAN, as this process was started
  EXPECT_FALSE(status.ok() && plan == forced);
}

TEST(KernelPlan, AllRequestablePlansIsEveryCombinationOfConcreteValues) {
  const std::vector<KernelPlan> plans = AllRequestablePlans();
  EXPECT_EQ(plans.size(), size_t(6 * 2 * 6 * 3 * 12));  // index, batch, topk, lists (auto, direct, general), attend
  int64_t accepted = 0;
  for (const KernelPlan& requested : plans) {
    KernelPlan plan;
    accepted += Plan(Lowp(), Decode(4, 1, 4096), kH200Caps, requested, &plan).ok();
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, int64_t(plans.size()));
}

TEST(KernelPlanFormat, EachCallReportsItsOwnStages) {
  const KernelPlan plan = Parsed("index=mma,batch=batched,topk=warp,lists=direct,attend=kv-outer");
  EXPECT_EQ(FormatSelectPlan(plan), "index=mma,batch=batched,topk=warp");
  EXPECT_EQ(FormatAttendPlan(plan), "attend=kv-outer,lists=direct");
  KernelPlan q_outer;
  q_outer.attend = AttendKernel::kQOuter;
  q_outer.lists = KvLists::kNone;
  EXPECT_EQ(FormatAttendPlan(q_outer), "attend=q-outer");
}

// The plan a run reports is the backend's select plan, then its attend plan (what `msa run` prints and writes):
// a backend whose last_plan answers by call count, over the reference's select and attend.
thread_local int plan_calls = 0;
std::string PlanByCallCount() { return ++plan_calls % 2 == 1 ? "index=mma,topk=warp" : "attend=gathered"; }

TEST(KernelPlanOfARun, IsTheSelectPlanThenTheAttendPlan) {
  Backend reporting = *FindBackend("reference");
  reporting.last_plan = PlanByCallCount;
  const Problem problem = GenerateProblem(CanonicalCases().front().spec);
  Outputs outputs;
  plan_calls = 0;
  ASSERT_TRUE(RunBackend(reporting, problem, &outputs).ok());
  EXPECT_EQ(outputs.kernel_plan, "index=mma,topk=warp,attend=gathered");
  EXPECT_EQ(plan_calls, 2);
  Outputs no_choice;
  ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &no_choice).ok());
  EXPECT_EQ(no_choice.kernel_plan, "");
}

}  // namespace
}  // namespace msa::gpu
