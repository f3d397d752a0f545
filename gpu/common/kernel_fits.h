// Whether each kernel takes a shape on a device: plain C++ over plain data (gpu/common/geometry.h, device_caps.h),
// so that the planner (kernel_plan.h) builds and is tested without nvcc. The constants are the kernels' own: each
// kernel file static_asserts that its layout matches the figure here, and launches only what these predicates
// accept (cudaErrorNotSupported otherwise, nothing enqueued).
#ifndef MSA_GPU_COMMON_KERNEL_FITS_H_
#define MSA_GPU_COMMON_KERNEL_FITS_H_

#include <cstddef>
#include <cstdint>

#include "gpu/common/device_caps.h"
#include "gpu/common/geometry.h"

namespace msa::gpu {

// ---- index branch ----
// BlockMaxScores (gpu/index/index_kernels.cu): index dims zero-padded to 128, 64-key pipeline stages.
inline constexpr int kBlockMaxDiPad = 128;
inline constexpr int kBlockMaxKeyTile = 64;
// BlockMaxScoresWgmma / BlockMaxScoresFp8 (gpu/index/block_max_wgmma.cuh SmemBytes of a 2-warpgroup CTA).
inline constexpr size_t kBlockMaxWgmmaSmemBytes = 1024 + 4 * 32768 + 2 * 64 * (128 + 8) * 2;
inline constexpr size_t kBlockMaxFp8SmemBytes = 1024 + 4 * 16384 + 2 * 64 * (128 + 16) * 1;
inline constexpr float kE4M3Max = 448.0f;

// BlockMaxScores: di a multiple of 8 up to 128, bk a multiple of 64, scale > 0 (max pooling; any device).
bool BlockMaxScoresFits(int di, int bk, float scale);
// BlockMaxScoresWgmma: BlockMaxScoresFits, its shared memory, an sm_90a device.
bool BlockMaxScoresWgmmaFits(int di, int bk, float scale, const DeviceCaps& caps);
// BlockMaxTopKWgmma (topk=running): BlockMaxScoresWgmmaFits with its rows' running lists in shared memory as well
// (128 rows of kRunningListStride 64-bit keys), and top_k <= kRunningTopKMaxTake + 1.
inline constexpr int kRunningTopKMaxTake = 32;
// A row's list in shared memory holds kRunningTopKMaxTake keys and one of padding: the 8 rows that a warp's inserting
// lanes hold then start 2 banks apart, so their accesses never conflict.
inline constexpr int kRunningListStride = kRunningTopKMaxTake + 1;
inline constexpr size_t kBlockMaxTopKWgmmaSmemBytes = kBlockMaxWgmmaSmemBytes + 128 * kRunningListStride * 8;
bool BlockMaxTopKWgmmaFits(int di, int bk, float scale, int top_k, const DeviceCaps& caps);
// BlockMaxScoresFp8: di a multiple of 16 up to 128, bk a multiple of 64, scale > 0 with scale * 2 * di * 448^2 <=
// FLT_MAX (no dot overflows), its shared memory, an sm_90a device.
bool BlockMaxScoresFp8Fits(int di, int bk, float scale, const DeviceCaps& caps);
// The wgmma and fp8 block-max kernels index rows, key positions and block ends in 32 bits: a chunk of nq queries
// (of Hidx rows each) ending at key position `last_position` fits when nq * Hidx <= 2^31 - 1 - 256 and
// last_position + 1 + bk <= 2^31 - 1.
bool BlockMaxGeometryFits32(int64_t rows, int64_t last_position, int bk);

// ---- top-k ----
// RankTopK / RankTopKThreshold: one warp per row, top_k <= 33.
bool RankTopKFits(int top_k);
// RankTopKCta: one CTA per row, top_k <= 33 (so that its survivors stay few) and kRankTopKCtaBytesPerCandidate of
// shared memory per candidate of the longest row (an upper bound: `candidates`), within the device's limit.
inline constexpr int64_t kRankTopKCtaBytesPerCandidate = 8;
bool RankTopKCtaFits(int top_k, int64_t candidates, const DeviceCaps& caps);
// RankTopKThreshold beats RankTopK once the longest row sees this many blocks (docs/gpu-kernels.md has the
// figures); below it RankTopK is faster.
inline constexpr int64_t kThresholdTopKMinBlocks = 1024;
// Whether RankTopKThreshold pays off on the chunk (batched: on its longest sequence): its longest row sees at least
// kThresholdTopKMinBlocks blocks.
bool RankTopKThresholdPaysOff(const ChunkGeometry& g);

// ---- main branch ----
// ExactAttend and ExactTokenScores (gpu/exact/exact_tiling.h): a tiling of these dims in shared memory.
bool ExactFits(int d, int dv, int di, int group_size, const DeviceCaps& caps);
// QOuterAttend: dims multiples of 8 up to 128, the scores of top_k * bk keys in shared memory
// (gpu/attend/q_outer_layout.h).
bool QOuterAttendFits(const AttendGeometry& g, const DeviceCaps& caps);
// KvOuterAttend (mma.sync tiles of 64 (query, head) rows, gpu/attend/kv_outer_attend.cu).
inline constexpr int kKvOuterTileRows = 64;
inline constexpr int kKvOuterKeyPad = 128;
inline constexpr int kKvOuterDimPad = 128;
inline constexpr size_t kKvOuterMmaSmemBytes =
    size_t(kKvOuterTileRows + 2 * kKvOuterKeyPad) * (kKvOuterDimPad + 8) * 2 +
    kKvOuterTileRows * (sizeof(int32_t) + sizeof(int64_t));
// KvOuterAttendWgmma's tile kernel (gpu/attend/kv_outer_wgmma.cu).
inline constexpr size_t kKvOuterWgmmaSmemBytes = 104288;
// Dims multiples of 8 up to 128, block_size <= 128, group size <= 64, top_k <= 32, the tile in shared memory.
bool KvOuterAttendFits(const AttendGeometry& g, const DeviceCaps& caps);
// KvOuterAttendFits and an sm_90a device with room for the wgmma tile.
bool KvOuterWgmmaFits(const AttendGeometry& g, const DeviceCaps& caps);
// KvOuterAttendWs's tile kernel (gpu/attend/kv_outer_ws.cu).
inline constexpr size_t kKvOuterWsSmemBytes = 202496;
// KvOuterWgmmaFits, a group size that is a multiple of 8 dividing 64 (a query's heads are one bulk copy into whole
// 1024-byte swizzle atoms) and room for the warp-specialized tile.
bool KvOuterWsFits(const AttendGeometry& g, const DeviceCaps& caps);
// The planner's kv-outer-ws rule for decode batches: at least this many tiles (query, group, slot) per SM.
inline constexpr int kKvOuterWsMinTilesPerSm = 4;
// SplitKAttend (gpu/attend/split_k.cu): the KV-outer tile and, for groups of at most 16 heads, P and the row maxima
// past it in shared memory.
inline constexpr size_t kSplitKSmemBytes = kKvOuterMmaSmemBytes + 16 * (128 + 8) * 4 + 8 * 32 * 16 + 8 * 16 * 4;
// SplitKAttend's most slots: the top_k CTAs of a (query, group) form one thread block cluster (16: H100 / H200's
// largest, non-portable cluster).
inline constexpr int kSplitKMaxSlots = 16;
// KvOuterAttendFits, top_k <= kSplitKMaxSlots and an sm_90a device (clusters) with room for kSplitKSmemBytes that
// places a cluster of top_k such CTAs (caps.max_split_k_cluster).
bool SplitKAttendFits(const AttendGeometry& g, const DeviceCaps& caps);
// FusedDecodeStep (gpu/attend/fused_decode.cu): each CTA of a (query, group)'s cluster scores at most this many blocks.
inline constexpr int kFusedDecodeMaxBlocksPerCta = 4;
// The planner's fused-decode rule: a step of one query whose rows have at most this many blocks per CTA (faster than
// split-k's step at 1 x 4K, as fast at 8K with 4 blocks a CTA; bench/results/fused_decode_2026-12-06.md).
inline constexpr int kFusedDecodeAutoBlocksPerCta = 2;
// FusedDecodeStep's shapes: a group of at most 16 heads, top_k <= kSplitKMaxSlots, index dims a multiple of 8 up to
// 128, and rows of at most top_k * kFusedDecodeMaxBlocksPerCta visible blocks (longest_visible_blocks: the batch's
// longest row).
bool FusedDecodeShapeFits(const AttendGeometry& g, int di, int64_t longest_visible_blocks);

// UnionTileAttend (path U, gpu/attend/union_tile.cu): tiles of 128 (query, head) rows = 128 / group consecutive
// queries of one kv group, at most kUnionTileMaxEntries (query, selection slot) pairs.
inline constexpr int kUnionTileRows = 128;
inline constexpr int kUnionTileMaxEntries = 1024;
inline constexpr size_t kUnionTileSmemBytes = 200208;    // UnionTileAttend
inline constexpr size_t kUnionTileWsSmemBytes = 226464;  // UnionTileWsAttend
// Queries per union tile: 128 / group size.
inline int UnionTileQueries(const AttendGeometry& g) { return kUnionTileRows / (g.hq / g.hkv); }
// Union tiles of the batch: ceil(total_q / UnionTileQueries) runs of queries x Hkv groups.
inline int64_t UnionTileCount(const AttendGeometry& g) {
  const int qpt = UnionTileQueries(g);
  return (g.total_q + qpt - 1) / qpt * g.hkv;
}
// Dims multiples of 8 up to 128, block_size <= 128, a group size of 2 to 64 dividing 64 (at most 64 queries a tile),
// UnionTileQueries x top_k <= kUnionTileMaxEntries, an sm_90a device with the tile in shared memory.
bool UnionTileFits(const AttendGeometry& g, const DeviceCaps& caps);

// The chunking of the KV-outer main branch: queries per chunk and the list sizes (KvOuterPlan, gpu/attend/
// kv_outer.h, adds the workspace offsets). num_blocks: sum over the batch's sequences of ceil(k_len / block_size).
// ok is false when the lists would not fit 32-bit offsets; direct_lists when one_query_per_sequence (every
// sequence has at most one query: decode) and the direct lists fit them too.
struct KvOuterChunks {
  bool ok = false;
  int qpc = 0;  // queries per tile: 64 / group size
  int64_t chunk_q = 0, num_buckets = 0, max_entries = 0, max_tiles = 0;
  bool direct_lists = false;
  int64_t direct_max_tiles = 0;  // chunk_q * Hkv * top_k where direct_lists, else 0
};
KvOuterChunks PlanKvOuterChunks(const AttendGeometry& g, int64_t num_blocks, int64_t budget_bytes,
                                bool one_query_per_sequence);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_KERNEL_FITS_H_
