// The gpu backend's device pipeline: the index branch (block scores, top-k, index_lse) and the main branch over
// device views (packed arrays already on the device), under a concrete KernelPlan (gpu/common/kernel_plan.h). The
// backend (gpu/gpu_backend.cc: pack, upload, plan, download), the benchmark (bench/gpu_bench.cu) and the tests all
// run this one pipeline. Each stage's launch is a switch over the plan's enum calling one launch function per kernel
// (pipeline.cc).
//
// Workspaces are allocated up front (Allocate*Workspace); the On* calls then only enqueue, on `stream` for every
// kernel that takes one (the block-max, top-k, binary16 rounding, fill kernels and every low-precision main branch)
// and on the default stream for the others (the exact kernels, token-scores, mean-keys, insertion top-k, index_lse):
// SelectRunsOnStream / AttendRunsOnStream. attend=routed also forks its path K onto the workspace's side stream and
// joins it back onto `stream` before returning. A plan of stream kernels on a non-default stream can therefore be
// captured in a CUDA graph.
#ifndef MSA_GPU_COMMON_PIPELINE_H_
#define MSA_GPU_COMMON_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/common/device_buffer.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/common/side_stream.h"
#include "gpu/kernels.h"
#include "msa/msa.h"

namespace msa::gpu {

// ---- index branch ----

// The index inputs on the device, in the form the plan's index kernel reads: exact [total_q, Hidx, Di] and
// [total_k, Di] doubles; low precision the same as bf16 / fp16 bits; index=fp8 also their E4M3 bytes.
struct DeviceIndexInputs {
  const double* index_q_wide = nullptr;
  const double* index_k_wide = nullptr;
  const uint16_t* index_q = nullptr;
  const uint16_t* index_k = nullptr;
  const uint8_t* index_q_e4m3 = nullptr;
  const uint8_t* index_k_e4m3 = nullptr;
};

struct DeviceSelection {
  int32_t* topk = nullptr;      // [Hidx, total_q, top_k]
  double* index_lse = nullptr;  // [Hidx, total_q], or nullptr: not computed
  // flags[0]: min(t * Hidx + r) over the (query, group) rows whose index scores are not finite; flags[1]: the same
  // for score_format fp16 block scores overflowing binary16. The caller sets both to all ones (none) first.
  unsigned long long* flags = nullptr;
};

// The chunks of one call and their scratch (block scores, token scores, means, index_lse work, the top-k split
// lists, the batched chunk's sequences), sized by AllocateSelectWorkspace for one (config, batch, plan).
struct SelectWorkspace {
  std::vector<ChunkGeometry> chunks;       // the launches in order: one batched chunk, or per-sequence chunks
  std::vector<int64_t> sequence_of_chunk;  // per chunk: its sequence (-1: a batched chunk)
  ChunkGeometry base;                      // the fields every chunk shares
  DeviceBuffer<double> bs_double, tokens, means, pmeans, work;
  DeviceBuffer<float> bs_float;
  DeviceBuffer<unsigned char> topk_split_lists;
  size_t topk_split_bytes = 0;
  DeviceBuffer<unsigned long long> running_lists;  // topk=running: the index kernel's lists of a chunk
  DeviceBuffer<SequenceChunk> sequences;
};
Status AllocateSelectWorkspace(const Config& config, const Batch& batch, const KernelPlan& plan, bool want_lse,
                               SelectWorkspace* workspace);

// Per chunk, once its block scores are final (after the binary16 rounding of score_format fp16): rows [0, rows)
// of the workspace's block-score buffer (bs_double in exact mode, else bs_float) are the chunk's rows
// (t - t0) * Hidx + r, [rows, max_blocks].
using ChunkScoresFn = std::function<Status(const SelectWorkspace& workspace, const ChunkGeometry& g, int64_t rows)>;

// Timing hooks around each chunk's index kernel (kIndex) and top-k (kTopK) launches, on `stream`.
enum class Stage { kIndex, kTopK };
struct StageHooks {
  std::function<void(Stage)> begin, end;
};

// Enqueues the whole index branch of `batch` (host cu_seqlens) under `plan` (concrete, from PlanKernels).
// Preconditions: the workspace from AllocateSelectWorkspace with the same config, batch and plan; the inputs in the
// plan's form; selection.flags initialized. on_scores, hooks, progress: optional.
Status SelectOnDevice(const Config& config, const Batch& batch, const KernelPlan& plan, const DeviceIndexInputs& inputs,
                      const DeviceSelection& selection, SelectWorkspace* workspace, cudaStream_t stream,
                      const ChunkScoresFn& on_scores = {}, const StageHooks& hooks = {},
                      const ProgressFn& progress = {});
// Whether SelectOnDevice under `plan` enqueues on `stream` only (index mma, wgmma or fp8 and topk warp, threshold, cta
// or running, without the index_lse output), so that it can be captured in a CUDA graph.
bool SelectRunsOnStream(const KernelPlan& plan);

// ---- main branch ----

// The main inputs on the device: exact doubles or low-precision bits, [total_q, Hq, D], [total_k, Hkv, D|Dv]; the
// selection [Hkv, total_q, top_k]; per query its key position, first key row and (KV-outer) the blocks of the
// sequences before its own.
struct DeviceAttendInputs {
  const double* q_wide = nullptr;
  const double* k_wide = nullptr;
  const double* v_wide = nullptr;
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const int32_t* topk = nullptr;
  const int64_t* position = nullptr;     // [total_q]
  const int64_t* key_begin = nullptr;    // [total_q]
  const int32_t* first_block = nullptr;  // [total_q]: KV-outer only
};

// The KV-outer lists and partial results (empty for the other main-branch kernels), attend=routed's side stream for
// path K, and attend=union-tile-ws's tile counter.
struct AttendWorkspace {
  AttendGeometry geometry;
  int64_t total_k = 0;  // rows of k and v (the bulk tensor copies' bounds)
  KvOuterPlan kv_outer;
  DeviceBuffer<unsigned char> bytes;
  OwnedSideStream side;
  DeviceBuffer<int64_t> tile_counter;  // one
};
Status AllocateAttendWorkspace(const Config& config, const KernelShapes& shapes, const KernelPlan& plan,
                               AttendWorkspace* workspace);

// Enqueues the main branch under `plan`; the workspace from AllocateAttendWorkspace with the same config, shapes and
// plan. outputs: either format (gpu/common/geometry.h) for a low-precision plan, kFp64 for attend=exact (refused
// otherwise).
Status AttendOnDevice(const Config& config, const KernelPlan& plan, const DeviceAttendInputs& inputs,
                      const DeviceAttendOutputs& outputs, AttendWorkspace* workspace, cudaStream_t stream);
// Whether AttendOnDevice under `plan` enqueues on `stream` only (every low-precision main branch).
bool AttendRunsOnStream(const KernelPlan& plan);

// ---- the whole step ----

// The index branch, then the main branch on its selection (attend_inputs.topk == selection.topk): SelectOnDevice and
// AttendOnDevice, except under attend=fused-decode without the index_lse output, where one FusedDecodeStep launch per
// chunk does both with the same bits (the index and topk stages it replaces, then split-k). The workspaces and
// preconditions are those of the two calls; on `stream` where both run on it.
Status StepOnDevice(const Config& config, const Batch& batch, const KernelPlan& plan, const DeviceIndexInputs& index,
                    const DeviceSelection& selection, SelectWorkspace* select_workspace,
                    const DeviceAttendInputs& attend_inputs, const DeviceAttendOutputs& outputs,
                    AttendWorkspace* attend_workspace, cudaStream_t stream);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_PIPELINE_H_
