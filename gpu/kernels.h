// The CUDA kernels of the gpu backend, as plain launchers over device pointers (no std types cross here), by stage:
// conversions and fills (gpu/common/), the index branch (gpu/index/), the top-k (gpu/topk/), the main branch
// (gpu/attend/), exact mode (gpu/exact/). The launchers that take a `stream` enqueue on it, allocate nothing and never
// wait on the host, so that a decode step can be captured in a CUDA graph; the others enqueue on the default stream.
// Each returns cudaGetLastError() after its launches. The geometry structs are in gpu/common/geometry.h, whether a
// kernel takes a shape in gpu/common/kernel_fits.h (a launcher refuses what its predicate refuses). The low-precision
// main-branch launchers write out and lse in the format their DeviceAttendOutputs names (geometry.h), either format.
#ifndef MSA_GPU_KERNELS_H_
#define MSA_GPU_KERNELS_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/common/block_max_grid.h"
#include "gpu/common/geometry.h"
#include "gpu/common/kernel_fits.h"
#include "gpu/common/side_stream.h"
#include "gpu/common/union_route.h"

namespace msa::gpu {

// Exact widening of n packed elements of `type` to double.
cudaError_t WidenToDouble(const void* src, int type, int64_t n, double* dst);
// *first = min(*first, i) over the packed elements i of `type` that are not finite (*first untouched when all are).
cudaError_t FirstNonFinite(const void* src, int type, int64_t n, unsigned long long* first);
// Round-to-nearest-even narrowing of n packed elements of `type` to bf16 or fp16 (raw 16-bit storage).
cudaError_t RoundToLowp(const void* src, int type, int64_t n, int lowp, uint16_t* dst);
// Round-to-nearest-even narrowing of n packed elements of `type` to OCP E4M3FN bytes (sign, 4 exponent bits with
// bias 7, 3 mantissa bits: largest finite 448, smallest subnormal 2^-9, no infinities), rounded once from the exact
// value (an F64 input is not rounded through float first). Finite magnitudes past 448 and infinities saturate to
// +-448 (0x7E / 0xFE; the front end refuses them before any backend sees them), NaN becomes 0x7F. The identity on
// values that are e4m3 numbers already. The index inputs of index_format e4m3 take this form on the device.
cudaError_t RoundToE4M3(const void* src, int type, int64_t n, uint8_t* dst);
// Exact widening of n e4m3 bytes to bf16 or fp16 (every e4m3 number is both a bf16 and an fp16; NaN stays NaN).
cudaError_t E4M3ToLowp(const uint8_t* src, int64_t n, int lowp, uint16_t* dst);
// dst[i] = value for i < n.
cudaError_t FillDouble(double* dst, int64_t n, double value, cudaStream_t stream = nullptr);
cudaError_t FillFloat(float* dst, int64_t n, float value, cudaStream_t stream = nullptr);

// ---- exact mode (FP64 canonical, SPEC section 4; compiled with --fmad=false) ----
// Token scores of the chunk: scratch[row * ld + s] = CanonicalDot(index_q row, index_k[key_begin + s]) * scale
// for s <= position(row) (other entries untouched). ld >= pos0 + nq.
cudaError_t ExactTokenScores(const double* index_q, const double* index_k, const ChunkGeometry& g, double scale,
                             double* scratch, int64_t ld);
// Mean index key of every FULL block of a sequence: means[blk * Di + d], blk < k_len / Bk.
cudaError_t ExactFullBlockMeans(const double* index_k, const ChunkGeometry& g, double* means);
// Mean of the visible keys of each chunk query's local block when it is partial: pmeans[(t - t0) * Di + d].
cudaError_t ExactPartialMeans(const double* index_k, const ChunkGeometry& g, double* pmeans);
// Block scores of the chunk: bs[row * max_blocks + blk] for blk < visible(row) (others untouched), by
// pooling; non-finite token or block scores record min(t * Hidx + r) in *bad_row (tokens checked when
// check_tokens). Max/lse read `scratch`; mean reads `means`/`pmeans` and index_q.
cudaError_t ExactPool(int pooling, const double* scratch, int64_t ld, const double* index_q, const double* means,
                      const double* pmeans, const ChunkGeometry& g, double scale, bool check_tokens, double* bs,
                      unsigned long long* bad_row);
// index_lse of the chunk's rows over their selection (topk), the token scores recomputed in canonical order (SPEC
// section 4): score_format kScoresNative: the logsumexp of the selected blocks' token scores; kScoresFp16: per
// selected block b (ascending id) l_b = fp16(M[b]) + log(sum of exp(x - M[b]) over its keys, ascending), then the
// logsumexp of the l_b. work: [nq * Hidx * top_k * Bk] doubles of scratch.
cudaError_t ExactIndexLse(const double* index_q, const double* index_k, const int32_t* topk, const ChunkGeometry& g,
                          double scale, int score_format, double* work, double* index_lse);
cudaError_t ExactAttend(const double* q, const double* k, const double* v, const int32_t* topk, const int64_t* position,
                        const int64_t* key_begin, const AttendGeometry& g, double scale, double* out, double* lse);

// ---- shared by both modes ----
// The selection of each chunk row from its block scores (SPEC section 2, gpu/topk/rank_row.cuh: the ranked candidates
// by score desc, id asc; the init blocks; the other forced trailing blocks; the local block last; -1).
cudaError_t RankDouble(const double* bs, const ChunkGeometry& g, int32_t* topk);
cudaError_t RankFloat(const float* bs, const ChunkGeometry& g, int32_t* topk);
// score_format fp16 (SPEC section 2): the block scores of the first `rows` rows of a chunk's buffer, bs[row *
// max_blocks + blk] (row = (t - g.t0) * Hidx + r: a plain chunk's nq * Hidx rows, or every row of a batched chunk),
// each replaced by its binary16 value (gpu/common/fp16_score.cuh: nearest, ties to even, rounded once from the stored
// double or float), before ranking and download. -inf (blocks not visible) and non-finite scores (bad rows) keep
// their value; a finite score whose binary16 value is +-inf (|score| >= 65520) records min(t * Hidx + r) in
// *overflow_row. On `stream`, allocating nothing (a decode step's graph can hold it).
cudaError_t RoundScoresToBinary16(double* bs, const ChunkGeometry& g, int64_t rows, unsigned long long* overflow_row,
                                  cudaStream_t stream = nullptr);
cudaError_t RoundScoresToBinary16(float* bs, const ChunkGeometry& g, int64_t rows, unsigned long long* overflow_row,
                                  cudaStream_t stream = nullptr);

// ---- low precision (bf16 / fp16 storage, fp32 accumulation, tensor cores) ----
// Block scores (max / lse pooling; the backend takes BlockMaxScores for max where it fits) of the chunk from
// mma.sync token scores, the block reduction fused and
// the local block clamped causally: bs[row * max_blocks + blk] for blk < visible(row).
cudaError_t LowpBlockScores(int lowp, int pooling, const uint16_t* index_q, const uint16_t* index_k,
                            const ChunkGeometry& g, float scale, float* bs, unsigned long long* bad_row);
// The launch grid of a block-max plan (gpu/common/block_max_grid.h).
inline dim3 GridOf(const BlockMaxGrid& plan) {
  return dim3{unsigned(plan.tiles_x), unsigned(plan.splits), unsigned(plan.sequences)};
}
// Max pooling of the chunk at tensor-core rate (index_kernels.cu): mma.sync tiles of index_q . index_k reduced to
// block maxima in registers, the local block clamped causally; bs[row * max_blocks + blk] for blk < visible(row),
// other entries untouched. Needs BlockMaxScoresFits(di, bk, scale). Takes a batched chunk (one launch for every
// sequence of a decode batch; bad rows are named by their global query row in either form).
cudaError_t BlockMaxScores(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                           float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream = nullptr);
// The same block maxima on Hopper warpgroup MMA (block_max_wgmma.cu on block_max_wgmma.cuh, sm_90a only):
// 128-row CTAs of two warpgroups, the query rows in registers, 128-key tiles of index_k through a 4-stage cp.async
// ring, wgmma m64n128k16 (A from registers) with the reduction of one tile overlapping the next tile's wgmma. The
// same contract as BlockMaxScores (entries written, bad-row detection, batched chunks) and the same bits. Needs
// BlockMaxScoresWgmmaFits(di, bk, scale): BlockMaxScoresFits and a compute capability 9.0 device; returns
// cudaErrorNotSupported otherwise (nothing enqueued).
cudaError_t BlockMaxScoresWgmma(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                                float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream = nullptr);
// BlockMaxScoresWgmma with a running top-k (topk=running, block_max_wgmma.cuh): two-warpgroup CTAs on the grid of
// PlanRunningTopKGrid keep each row's best candidates of their key span (RankKey of the scaled block max, the blocks
// [init_end, local_begin) of its forced-block rule) and write them to lists [nq * Hidx rows][splits]
// [RunningTopKListLength(top_k)] (RunningTopKListEntries 64-bit keys, descending, 0 past the span's candidates);
// MergeRunningTopK ranks them. The block maxima also go to bs (BlockMaxScores' contract) where bs is not null, and
// bad rows to bad_row as there. Needs BlockMaxTopKWgmmaFits(di, bk, scale, top_k), a chunk of one sequence and
// the 32-bit geometry (BlockMaxGeometryFits32); returns cudaErrorNotSupported otherwise (nothing enqueued).
cudaError_t BlockMaxTopKWgmma(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                              float scale, float* bs, unsigned long long* lists, unsigned long long* bad_row,
                              cudaStream_t stream = nullptr);
// The same block maxima on e4m3 inputs (block_max_fp8.cu, sm_90a only): index_q and
// index_k hold OCP E4M3FN bytes (RoundToE4M3), laid out as above with one byte per element. BlockMaxScoresWgmma's
// kernel with wgmma m64n128k32 .e4m3 (A from registers, B = K-major key tiles) and its contract: bs[row * max_blocks
// + blk] written for blk < visible(row) and nothing else, the local block clamped causally, the grid of
// PlanBlockMaxGrid, a row with a visible scaled score that is not finite (with these inputs: only a NaN byte) goes to
// atomicMin(bad_row, t * Hidx + r), and a bad row's entries are unspecified. Not the same bits as BlockMaxScores on
// the widened values: Hopper's fp8 MMA adds with reduced precision; each written entry is within kFp8IndexRelBound *
// scale * (the largest sum_i |q_i k_i| over the block's visible keys) of the exact block max. Needs
// BlockMaxScoresFp8Fits(di, bk, scale): di a multiple of 16 up to 128, bk a multiple of 64, scale > 0 with
// scale * 2 * di * 448^2 <= FLT_MAX (no dot overflows), a compute capability 9.0 device; and key positions below
// 2^31 - bk - nq, and a chunk of one sequence (not a batched one); returns cudaErrorNotSupported otherwise (nothing
// enqueued).
cudaError_t BlockMaxScoresFp8(const uint8_t* index_q, const uint8_t* index_k, const ChunkGeometry& g, float scale,
                              float* bs, unsigned long long* bad_row, cudaStream_t stream = nullptr);
// The selection of each chunk row from fp32 block scores, one warp per row, the same order as RankFloat.
// Needs RankTopKFits(top_k). A batched chunk: grid y = its sequences, one launch for every sequence's rows. RankTopK
// and RankTopKThreshold's first launch are programmatic dependents of the kernel before them on `stream` (they wait
// for it before reading bs; the index kernels let them launch early); the threshold merge is an ordinary launch.
cudaError_t RankTopK(const float* bs, const ChunkGeometry& g, int32_t* topk, cudaStream_t stream = nullptr);
// The same selection as RankTopK, bit for bit on every input (ties, -0/+0, fewer candidates than take, init and
// trailing forced blocks), with a threshold filter (index_kernels.cu, ThresholdLists): each lane's largest candidate
// key first, then only keys >= the take-th largest of those 32 enter the lanes' sorted lists. Many rows (prefill): one
// warp per row, one launch. Few rows with many candidates (decode: fewer rows than about 16 warps per SM): each row's
// candidates are split over up to 32 warps (at least 256 candidates each), each split writes its best `take`
// keys to `workspace` ([rows, splits, top_k] 64-bit keys), and a second launch merges them, one warp per row.
// Needs RankTopKFits(g.top_k) (cudaErrorInvalidValue otherwise, nothing enqueued). workspace: device memory of
// workspace_bytes, or nullptr (then never split); RankTopKThresholdSplits says how many splits a chunk gets from
// it (fewer where it is too small; 1: the one-launch kernel, the workspace untouched). Both launches go on
// `stream`, allocate nothing and never wait on the host, so they can be captured in a CUDA graph; the workspace
// must not be shared with work running concurrently.
// A batched chunk: grid y = its sequences (both launches), the splits sized for num_sequences * nq * Hidx rows and
// the most candidates of any row, and a sequence's split lists at its rows' offset in the batch's rows.
// RankTopKThresholdWorkspaceBytes(max_rows, top_k): enough for any chunk of at most max_rows = nq * Hidx rows
// (batched: num_sequences * nq * Hidx) on the current device (at most 2 * 16 * SMs * top_k * 8 bytes: about 1.1 MB
// on an H200 at top_k 33).
size_t RankTopKThresholdWorkspaceBytes(int64_t max_rows, int top_k);
int RankTopKThresholdSplits(const ChunkGeometry& g, size_t workspace_bytes);
cudaError_t RankTopKThreshold(const float* bs, const ChunkGeometry& g, void* workspace, size_t workspace_bytes,
                              int32_t* topk, cudaStream_t stream = nullptr);
// The same selection as RankTopK, bit for bit on every input, with one CTA per row (rank_topk_cta.cu): a threshold
// from 32 group maxima, the keys above it gathered in shared memory and ranked by counting. For chunks of few rows
// with many candidates (decode). Needs RankTopKCtaFits(g.top_k, the chunk's most candidates) (cudaErrorInvalidValue
// otherwise, nothing enqueued). One launch, a programmatic dependent of the kernel before it on `stream`, no
// workspace, graph-capturable. A batched chunk: grid y = its sequences.
cudaError_t RankTopKCta(const float* bs, const ChunkGeometry& g, int32_t* topk, cudaStream_t stream = nullptr);
// RankTopK's selection, bit for bit, from BlockMaxTopKWgmma's lists of the same chunk (merge_running_topk.cu): one
// warp per row merges the lists of the spans that hold its candidates. One launch, a programmatic dependent of the
// index kernel before it on `stream`, graph-capturable. A chunk of one sequence with top_k <= kRunningTopKMaxTake + 1
// (cudaErrorInvalidValue otherwise, nothing enqueued).
cudaError_t MergeRunningTopK(const unsigned long long* lists, const ChunkGeometry& g, int32_t* topk,
                             cudaStream_t stream = nullptr);
// Mean pooling in fp32 (CUDA cores).
cudaError_t LowpMeanScores(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                           float scale, float* bs, unsigned long long* bad_row);
// index_lse over the selection in fp32, by score_format as ExactIndexLse (any order: per lane, then over the warp).
cudaError_t LowpIndexLse(int lowp, const uint16_t* index_q, const uint16_t* index_k, const int32_t* topk,
                         const ChunkGeometry& g, float scale, int score_format, double* index_lse);
// The main branch over the gathered keys (lowp_kernels.cu): one warp per (query, group, 16 heads), two passes over
// the selected blocks' visible keys; any dims up to kLowpMaxDim. The fallback where QOuterAttend does not fit.
cudaError_t GatheredAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                           const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                           const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// The main branch on tensor cores, query-outer (attend_kernels.cu): one CTA of 4 warps per (query, group, 16
// heads), K and V of the gathered keys read once, scores kept in shared memory; same rounding points as
// GatheredAttend. Needs QOuterAttendFits(g) (dims multiples of 8 up to 128, scores of top_k * bk keys in shared
// memory).
cudaError_t QOuterAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                         const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                         const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// The main branch on tensor cores, KV-outer (kv_outer_attend.cu): the selection is inverted on the device into
// per-(sequence, block, group) lists of the queries that chose the block; a tile of up to 64 (query, head) rows
// loads the block's K and V once and writes one partial (m, l, O) per row, and a merge kernel combines each
// row's partials by log-sum-exp in ascending block order. Queries go in chunks sized by the plan; the launches
// are asynchronous on `stream` and never wait on the host, so they can be captured in a CUDA graph. Needs
// KvOuterAttendFits(g) (dims multiples of 8 up to 128, block_size <= 128, group size <= 64, top_k <= 32).
// The chunking and the workspace layout (byte offsets) of KvOuterAttend. num_blocks: sum over the batch's
// sequences of ceil(k_len / block_size). ok is false when the lists would not fit 32-bit offsets.
// one_query_per_sequence: the caller states that every sequence of the batch has at most one query (q_len <= 1:
// decode), so no two queries of a chunk share a (sequence, block, group) list. The plan then also sizes the
// workspace for the direct lists (DirectListsKernel in kv_outer_attend.cu: one tile per (query, group, selection
// slot), built by one kernel instead of 3 memsets, 2 counting kernels, a 2-kernel scan and a fill) and sets
// direct_lists; a caller may clear direct_lists to take the general lists (the same bits either way). Setting it
// on a plan made without one_query_per_sequence has no effect (direct_max_tiles is 0 there).
struct KvOuterPlan {
  bool ok = false;
  int qpc = 0;  // queries per tile: 64 / group size
  int64_t chunk_q = 0, num_buckets = 0, max_entries = 0, max_tiles = 0;
  size_t counts = 0, offsets = 0, cursor = 0, entries = 0, tile_block = 0, part_o = 0, part_ml = 0, scan_temp = 0;
  size_t union_route = 0;  // RoutedAttend's route, [UnionTileCount(g)] bytes
  // RoutedAttend's lists, each ascending and then -1: path-K queries ([total_q] int64) and path-U tiles
  // ([UnionTileCount(g)] int64); their counts (two int64) and the temporary storage of the selections that write them
  size_t path_k_queries = 0, path_u_tiles = 0, route_counts = 0, route_select = 0, route_select_bytes = 0;
  size_t union_tile_counter = 0;  // path U's tile counter (one int64, UnionTileWsAttend's tile_counter)
  size_t scan_temp_bytes = 0, bytes = 0;
  bool direct_lists = false;     // build each chunk's lists with DirectListsKernel
  int64_t direct_max_tiles = 0;  // tiles the workspace holds for them: chunk_q * Hkv * top_k (0: not sized)
};
KvOuterPlan PlanKvOuter(const AttendGeometry& g, int64_t num_blocks, int64_t budget_bytes,
                        bool one_query_per_sequence = false);
// first_block [total_q]: the number of blocks of the sequences before the query's own (its bucket offset).
cudaError_t KvOuterAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                          const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                          const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace,
                          const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// The same main branch with Hopper tiles (kv_outer_wgmma.cu, sm_90a only): the lists,
// the plan (PlanKvOuter), the partial results and the merge are KvOuterAttend's, the tile kernel runs one warpgroup
// per 64-row tile on wgmma.mma_async (S = Q K^T and O = P V, P from registers) with K and V kept in shared memory
// across the consecutive tiles of one (sequence, block, group). Same rounding points as KvOuterAttend. Needs
// KvOuterWgmmaFits(g): KvOuterAttendFits(g) and a compute capability 9.0 device; returns cudaErrorNotSupported
// otherwise (nothing enqueued).
cudaError_t KvOuterAttendWgmma(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                               const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                               const AttendGeometry& g, float scale, const KvOuterPlan& plan, void* workspace,
                               const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// KvOuterAttendWgmma with 16-bit partial results: each tile stores O_b / l_b rounded to the storage format (not O_b
// in fp32), and the merge folds them as acc += (O_b / l_b) (l_b w_b). Half the partials' bytes, its own rounding point
// (so not KvOuterAttendWgmma's bits); everything else, the needs and the errors are KvOuterAttendWgmma's.
cudaError_t KvOuterAttendWgmmaP16(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                                  const int32_t* first_block, const AttendGeometry& g, float scale,
                                  const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                                  cudaStream_t stream = nullptr);
// KvOuterAttendWgmmaP16 with a warp-specialized tile kernel (kv_outer_ws.cu): a producer thread loads each tile's Q
// and each block's K and V by bulk tensor copies, two consumer warpgroups take turns at the tensor pipe. The same
// lists, tiles, math and merge, hence KvOuterAttendWgmmaP16's bits. total_k: the rows of k and v. Needs
// KvOuterWsFits(g) (cudaErrorNotSupported otherwise) and total_k, total_q within 32 bits (cudaErrorInvalidValue
// otherwise); nothing is enqueued then.
cudaError_t KvOuterAttendWs(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                            const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                            const int32_t* first_block, const AttendGeometry& g, float scale, const KvOuterPlan& plan,
                            void* workspace, const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);

// The most SplitKAttend CTAs the current device places as one thread block cluster
// (cudaOccupancyMaxPotentialClusterSize at kSplitKSmemBytes each; sm_90a devices only, 0 elsewhere or on error):
// DeviceCaps::max_split_k_cluster.
int SplitKLargestCluster();

// The main branch split over selection slots (gpu/attend/split_k.cu): one CTA per (query, group, slot) computes the
// partial KvOuterAttend's tile computes for that block; a (query, group)'s top_k CTAs are one thread block cluster,
// which synchronizes and merges the group's rows with the arithmetic of KvOuterAttend's merge, so out and lse are
// KvOuterAttend's bits. One launch per chunk of plan.chunk_q queries, a programmatic dependent of the kernel before it
// on `stream`: it waits for that kernel before reading topk, but reads q, position and key_begin before, so they must
// be complete before the kernel before it starts. workspace: PlanKvOuter's layout. Needs SplitKAttendFits(g) and sm_90
// code: cudaErrorInvalidValue past kSplitKMaxSlots, cudaErrorNotSupported where the binary is not sm_90 code.
cudaError_t SplitKAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                         const int64_t* position, const int64_t* key_begin, const AttendGeometry& g, float scale,
                         const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                         cudaStream_t stream = nullptr);

// The index branch's side of FusedDecodeStep: index_q [total_q, Hidx, Di] and index_k [total_k, Di] as low-precision
// bits, the index scale, the forced blocks (Config::init_blocks, local_blocks), and where the step writes the
// selection topk [Hidx, total_q, top_k] and the first (query, group) t * Hidx + r whose scaled index scores are not
// finite (atomicMin; the caller sets it to all ones first).
struct FusedDecodeIndex {
  const uint16_t* index_q = nullptr;
  const uint16_t* index_k = nullptr;
  int di = 0;
  float scale = 0.0f;
  int init_blocks = 0, local_blocks = 1;
  int32_t* topk = nullptr;
  unsigned long long* bad_row = nullptr;
};
// A whole decode step in one launch per chunk of plan.chunk_q queries (gpu/attend/fused_decode.cu): each (query,
// group)'s cluster of top_k CTAs scores its blocks (BlockMaxScores' bits), ranks them (RankTopKCta's selection, written
// to index.topk) and runs split-k on that selection (SplitKAttend's out and lse). Max pooling and score_format native
// only. A programmatic dependent of the kernel before it, waiting for it before reading anything. workspace:
// PlanKvOuter's layout. Needs SplitKAttendFits and FusedDecodeShapeFits (longest_visible_blocks: the batch's longest
// row) and sm_90 code: cudaErrorInvalidValue and cudaErrorNotSupported otherwise, nothing enqueued.
cudaError_t FusedDecodeStep(int lowp, const FusedDecodeIndex& index, const uint16_t* q, const uint16_t* k,
                            const uint16_t* v, const int64_t* position, const int64_t* key_begin,
                            const AttendGeometry& g, int64_t longest_visible_blocks, float scale,
                            const KvOuterPlan& plan, void* workspace, const DeviceAttendOutputs& outputs,
                            cudaStream_t stream = nullptr);

// Path U of the main branch (gpu/attend/union_tile.cu, sm_90a only): one CTA per union tile (UnionTileQueries(g)
// consecutive queries x one group, UnionTileCount(g) tiles, tile = run * Hkv + group) walks the ascending union of
// its rows' selected blocks once, each row masked to its own blocks, online softmax in fp32 with P in the storage
// format; out and lse written directly. Scores are dot(R(q * scale), k) (SPEC section 5's order (b); KvOuterAttend
// takes order (a), R(R(dot) * scale)). A row's bits depend on its own selection only. route (nullable,
// [UnionTileCount(g)]): tiles with route[tile] == 0 are left to path K (their rows untouched). Needs UnionTileFits(g);
// returns cudaErrorNotSupported otherwise (nothing enqueued).
cudaError_t UnionTileAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* topk,
                            const int64_t* position, const int64_t* key_begin, const int32_t* first_block,
                            const AttendGeometry& g, float scale, const uint8_t* route,
                            const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// Which items (tiles, queries) a launch walks: the first `count` of the ascending list `items` (entries of -1 are
// skipped), or, where `items` is null, every item in order (count unused).
struct ItemList {
  const int64_t* items = nullptr;
  int64_t count = 0;
};
// UnionTileAttend's warp-specialized twin (gpu/attend/union_tile_ws.cu): the same contract and the same bits, with
// one producer thread loading Q, K and V by bulk tensor copies (k and v hold total_k rows, total_k < 2^31, and
// total_q + 128 < 2^31; cudaErrorInvalidValue otherwise), the two consumer warpgroups' matrix work and softmax
// overlapped, and the next tile's union built meanwhile: a CTA per multiprocessor takes tile after tile. The tiles it
// computes are given as a list, not a route (ItemList: the listed tiles, -1 for none, or every tile). tile_counter: one
// int64 of device memory, zeroed by the call on `stream`, that the CTAs take list entries from (in any order: a row's
// bits do not depend on which CTA computes it).
cudaError_t UnionTileWsAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                              const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                              const int32_t* first_block, const AttendGeometry& g, float scale, const ItemList& tiles,
                              int64_t* tile_counter, const DeviceAttendOutputs& outputs, cudaStream_t stream = nullptr);
// The device planner of the two paths (gpu/attend/union_route.cu): route[tile] = 1 where the tile's union of
// selected blocks (global ids) is at most MaxUnionForPathU(routing, its queries, its selected blocks)
// (gpu/common/union_tile_plan.h), else 0; the same route as the host planner PlanUnionTiles for every tile.
// route: [UnionTileCount(g)] bytes. Needs UnionTileFits' group and top_k bounds.
cudaError_t RouteUnionTiles(const int32_t* topk, const int32_t* first_block, const AttendGeometry& g,
                            const UnionTileRouting& routing, uint8_t* route, cudaStream_t stream = nullptr);
// Both paths (gpu/attend/union_route.cu, sm_90a only): RouteUnionTiles into the workspace's route (plan from
// PlanKvOuter), UnionTileWsAttend on the tiles routed to U, KvOuterAttendWgmmaP16's lists, tiles and merge on the rest
// (general lists; its tiles are KvOuterAttendWs's where KvOuterWsFits(g): the same bits). Each row gets the bits of the
// path its tile took. Path K runs on side.stream where there is one, forked after the route and joined before return,
// beside path U on `stream`. Needs KvOuterWgmmaFits(g) and UnionTileFits(g); returns cudaErrorNotSupported otherwise
// (nothing enqueued). Each path walks a list made after the route: path U its tiles, path K the queries with a tile on
// K where those are at most half the queries (else every query). The lists' lengths come to the host (waiting for
// `stream` up to the route); while `stream` captures a graph, path U walks its whole list (-1 past the count) and path
// K every query.
cudaError_t RoutedAttend(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t total_k,
                         const int32_t* topk, const int64_t* position, const int64_t* key_begin,
                         const int32_t* first_block, const AttendGeometry& g, float scale, const KvOuterPlan& plan,
                         const UnionTileRouting& routing, void* workspace, const DeviceAttendOutputs& outputs,
                         cudaStream_t stream = nullptr, const SideStream& side = SideStream{});

}  // namespace msa::gpu

#endif  // MSA_GPU_KERNELS_H_
