// The gpu backend's kernel choice as data (the pattern of FA3's heuristics.h, ggml's ggml_cuda_get_best_fattn_kernel,
// CUTLASS's KernelScheduleAuto): one enum per pipeline stage, one pure planner that fills every kAuto and refuses a
// request that cannot run (never replacing it), one override variable parsed once, and the plan that ran reported
// with the result. Plain C++ (no CUDA headers): built and tested without nvcc. docs/gpu-kernels.md lists the kernels.
//
// Adding a kernel variant: one enum value (and its name in kernel_plan.cc), one planner line (PlanKernels), one
// launch function in the stage's pipeline table (gpu/common/pipeline.cc).
#ifndef MSA_GPU_COMMON_KERNEL_PLAN_H_
#define MSA_GPU_COMMON_KERNEL_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/common/device_caps.h"
#include "gpu/common/geometry.h"
#include "msa/config.h"
#include "msa/status.h"
#include "msa/tensor.h"

namespace msa::gpu {

// Block scores of the index branch.
enum class IndexKernel {
  kAuto,
  kExact,        // "exact": ExactTokenScores + ExactPool (mean: ExactFullBlockMeans/PartialMeans), FP64 canonical
  kTokenScores,  // "token-scores": LowpBlockScores, mma.sync token scores pooled by max or lse (any dims)
  kMeanKeys,     // "mean-keys": LowpMeanScores, dots with the blocks' mean keys in fp32 (mean pooling)
  kMma,          // "mma": BlockMaxScores, mma.sync tiles reduced to block maxima in registers
  kWgmma,        // "wgmma": BlockMaxScoresWgmma, Hopper warpgroup MMA (sm_90a), BlockMaxScores' bits
  kFp8,          // "fp8": BlockMaxScoresFp8 on e4m3 inputs (sm_90a), within kFp8IndexRelBound of the exact maxima
};
// How the index branch's launches cover the batch.
enum class IndexBatch {
  kAuto,
  kPerSequence,  // "per-sequence": chunks of one sequence (a long prefill in several)
  kBatched,      // "batched": one launch per stage for every sequence of a decode batch (the same bits)
};
// The selection of each row from its block scores.
enum class TopKKernel {
  kAuto,
  kExact,      // "exact": RankDouble, one thread per row, insertion into the sorted row, on FP64 scores
  kInsertion,  // "insertion": RankFloat, the same on fp32 scores (any top_k)
  kWarp,       // "warp": RankTopK, one warp per row (top_k <= 33)
  kThreshold,  // "threshold": RankTopKThreshold, RankTopK's selection with a threshold filter and split rows
  kCta,        // "cta": RankTopKCta, RankTopK's selection with one CTA per row (decode)
  // "running": RankTopK's selection without the block scores' round trip through memory: the index kernel
  // (BlockMaxTopKWgmma, index=wgmma only) keeps each row's best candidates of its key span as it scores, and
  // MergeRunningTopK merges the spans' lists (score_format native, per-sequence chunks).
  kRunning,
};
// The query lists of the KV-outer main branch.
enum class KvLists {
  kAuto,
  kNone,     // "-": the main branch is not KV-outer
  kDirect,   // "direct": one tile per (query, group, slot), one kernel (at most one query per sequence)
  kGeneral,  // "general": counted, scanned and filled lists (any batch)
};
// The main branch.
enum class AttendKernel {
  kAuto,
  kExact,            // "exact": ExactAttend, FP64 canonical
  kGathered,         // "gathered": GatheredAttend, one warp per (query, group, 16 heads) over the gathered keys
  kQOuter,           // "q-outer": QOuterAttend, one CTA per (query, group, 16 heads) on mma.sync
  kKvOuter,          // "kv-outer": KvOuterAttend, per-block query lists, mma.sync tiles
  kKvOuterWgmma,     // "kv-outer-wgmma": KvOuterAttendWgmma, the same lists on wgmma tiles (sm_90a), the same bits
  kKvOuterWgmmaP16,  // "kv-outer-wgmma-p16": KvOuterAttendWgmmaP16, kv-outer-wgmma with 16-bit partials (own bits)
  kKvOuterWs,        // "kv-outer-ws": KvOuterAttendWs, kv-outer-wgmma-p16 warp-specialized, the same bits
  kUnionTile,        // "union-tile": UnionTileAttend, path U on every tile (sm_90a)
  kUnionTileWs,      // "union-tile-ws": UnionTileWsAttend, the same warp-specialized, the same bits
  kRouted,  // "routed": RoutedAttend, each tile on path U or K (kv-outer-wgmma-p16's bits, general lists) by its union
  kSplitK,  // "split-k": SplitKAttend, a CTA per (query, group, slot), a cluster per (query, group) (kv-outer's bits)
  // "fused-decode": a whole step (StepOnDevice) as one FusedDecodeStep launch, which scores, ranks and runs split-k in
  // each (query, group)'s cluster with the bits of the plan's index (mma or wgmma), topk=cta and split-k; on a given
  // selection (AttendOnDevice) split-k itself.
  kFusedDecode,
};

// Whether the main branch builds KV-outer lists (kv-outer, kv-outer-wgmma, kv-outer-wgmma-p16, kv-outer-ws, and path K
// of routed).
bool IsKvOuter(AttendKernel kernel);
// Whether the main branch takes a KvOuterPlan workspace (partial results): the KV-outer kernels and split-k.
bool TakesKvOuterWorkspace(AttendKernel kernel);

struct KernelPlan {
  IndexKernel index = IndexKernel::kAuto;
  IndexBatch batch = IndexBatch::kAuto;
  TopKKernel topk = TopKKernel::kAuto;
  KvLists lists = KvLists::kAuto;
  AttendKernel attend = AttendKernel::kAuto;
  bool operator==(const KernelPlan&) const = default;
};

// The device-memory budget of one index-branch chunk's scratch and of one KV-outer chunk's partial results. Fewer,
// larger chunks shorten long prefills (docs/performance.md, the chunk budget), at up to 8 GiB per workspace.
inline constexpr int64_t kChunkBudgetBytes = int64_t(8) << 30;

// The batch as the planner sees it (ShapesOf fills it from cu_seqlens).
struct KernelShapes {
  int64_t total_q = 0;
  int64_t sequences_with_queries = 0;
  int64_t longest_q = 0;               // most queries of one sequence
  int64_t last_position = 0;           // the latest key position of any query (its sequence's k_len - 1)
  int64_t max_blocks = 0;              // ceil(longest k_len / block_size): the row stride of the block scores
  int64_t num_blocks = 0;              // sum over the sequences of ceil(k_len / block_size)
  bool one_query_per_sequence = true;  // every sequence has at most one query (decode)
  int64_t total_k = 0;                 // rows of k and v: the batch's keys
};
KernelShapes ShapesOf(const Config& config, const Batch& batch);
// The visible blocks of the batch's longest selection row: last_position / block_size + 1.
int64_t LongestRowBlocks(const Config& config, const KernelShapes& shapes);
// The main branch's launch geometry of `config` over total_q queries.
AttendGeometry AttendGeometryOf(const Config& config, int64_t total_q);

// Every field concrete (no kAuto; lists kNone unless attend is KV-outer): `requested`'s non-auto fields as given,
// the others by the heuristics in kernel_plan.cc. A requested value that cannot run on this config, batch and
// device is refused (kInvalidArgument naming the stage, the value and the reason), never replaced. Pure.
Status PlanKernels(const Config& config, const KernelShapes& shapes, const DeviceCaps& caps,
                   const KernelPlan& requested, KernelPlan* plan);

// "index=wgmma,batch=per-sequence,topk=threshold,lists=general,attend=kv-outer-wgmma": every stage, kAuto as
// "auto", kNone as "-".
std::string FormatKernelPlan(const KernelPlan& plan);
// The stages of one backend call: the index branch (index, batch, topk) or the main branch (attend, and lists when
// the main branch is KV-outer).
std::string FormatSelectPlan(const KernelPlan& plan);
std::string FormatAttendPlan(const KernelPlan& plan);

// Every combination of concrete values a caller may request (the name tables' values other than auto and "-"), for
// tests that run each plan the planner accepts.
std::vector<KernelPlan> AllRequestablePlans();

// "key=value,key=value" with keys index, batch, topk, lists, attend (each at most once; "" is all auto) into *plan.
// An unknown key or value is refused naming it and listing the choices.
Status ParseKernelPlan(std::string_view text, KernelPlan* plan);

// The plan the gpu backend is asked for: SetKernelPlanForTest's while one is set, else MSA_GPU_PLAN parsed on the
// first call (unset or empty: all auto; a value that does not parse is refused on every call).
Status RequestedKernelPlan(KernelPlan* plan);
// Tests (as Highway's SetSupportedTargetsForTest): every later RequestedKernelPlan answers `plan`; nullopt goes back
// to MSA_GPU_PLAN.
void SetKernelPlanForTest(std::optional<KernelPlan> plan);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_KERNEL_PLAN_H_
