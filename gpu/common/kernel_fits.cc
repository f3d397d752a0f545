#include "gpu/common/kernel_fits.h"

#include <algorithm>
#include <cfloat>

#include "gpu/attend/q_outer_layout.h"
#include "gpu/exact/exact_tiling.h"

namespace msa::gpu {

bool BlockMaxScoresFits(int di, int bk, float scale) {
  return di % 8 == 0 && di <= kBlockMaxDiPad && bk % kBlockMaxKeyTile == 0 && scale > 0.0f;
}

bool BlockMaxScoresWgmmaFits(int di, int bk, float scale, const DeviceCaps& caps) {
  return BlockMaxScoresFits(di, bk, scale) && kBlockMaxWgmmaSmemBytes <= size_t(caps.max_shared_bytes) &&
         caps.RunsSm90a();
}

bool BlockMaxTopKWgmmaFits(int di, int bk, float scale, int top_k, const DeviceCaps& caps) {
  return BlockMaxScoresWgmmaFits(di, bk, scale, caps) && top_k <= kRunningTopKMaxTake + 1 &&
         kBlockMaxTopKWgmmaSmemBytes <= size_t(caps.max_shared_bytes);
}

bool BlockMaxScoresFp8Fits(int di, int bk, float scale, const DeviceCaps& caps) {
  const bool no_overflow = double(scale) * 2.0 * di * double(kE4M3Max) * kE4M3Max <= double(FLT_MAX);
  return di > 0 && di % 16 == 0 && di <= kBlockMaxDiPad && bk > 0 && bk % kBlockMaxKeyTile == 0 && scale > 0.0f &&
         no_overflow && kBlockMaxFp8SmemBytes <= size_t(caps.max_shared_bytes) && caps.RunsSm90a();
}

bool BlockMaxGeometryFits32(int64_t rows, int64_t last_position, int bk) {
  constexpr int64_t kInt32Max = 2147483647;
  return rows <= kInt32Max - 256 && last_position + 1 + bk <= kInt32Max;
}

bool RankTopKFits(int top_k) { return top_k <= 33; }

bool RankTopKCtaFits(int top_k, int64_t candidates, const DeviceCaps& caps) {
  constexpr int64_t kStaticBytes = 1024;  // the kernel's own shared variables, rounded up
  return RankTopKFits(top_k) && candidates <= (caps.max_shared_bytes - kStaticBytes) / kRankTopKCtaBytesPerCandidate;
}

bool RankTopKThresholdPaysOff(const ChunkGeometry& g) {
  return (g.pos0 + g.nq - 1) / g.bk + 1 >= kThresholdTopKMinBlocks;
}

bool ExactFits(int d, int dv, int di, int group_size, const DeviceCaps& caps) {
  const size_t limit = size_t(caps.max_shared_bytes);
  return exact::PlanTokens(di, limit).tm > 0 && exact::PlanAttend(d, dv, group_size, 1, limit).tk > 0;
}

bool QOuterAttendFits(const AttendGeometry& g, const DeviceCaps& caps) {
  if (g.d % 8 != 0 || g.dv % 8 != 0 || g.d > q_outer::kDimPad || g.dv > q_outer::kDimPad) return false;
  return q_outer::PlanLayout(g).bytes <= size_t(caps.max_shared_bytes);
}

bool KvOuterAttendFits(const AttendGeometry& g, const DeviceCaps& caps) {
  const int group = g.hq / g.hkv;
  return g.d % 8 == 0 && g.dv % 8 == 0 && g.d <= kKvOuterDimPad && g.dv <= kKvOuterDimPad && g.bk <= kKvOuterKeyPad &&
         group <= kKvOuterTileRows && g.top_k <= 32 && kKvOuterMmaSmemBytes <= size_t(caps.max_shared_bytes);
}

bool KvOuterWgmmaFits(const AttendGeometry& g, const DeviceCaps& caps) {
  return KvOuterAttendFits(g, caps) && kKvOuterWgmmaSmemBytes <= size_t(caps.max_shared_bytes) && caps.RunsSm90a();
}

bool KvOuterWsFits(const AttendGeometry& g, const DeviceCaps& caps) {
  const int group = g.hq / g.hkv;
  return KvOuterWgmmaFits(g, caps) && group % 8 == 0 && 64 % group == 0 &&
         kKvOuterWsSmemBytes <= size_t(caps.max_shared_bytes);
}

bool SplitKAttendFits(const AttendGeometry& g, const DeviceCaps& caps) {
  return KvOuterAttendFits(g, caps) && g.top_k <= kSplitKMaxSlots &&
         kSplitKSmemBytes <= size_t(caps.max_shared_bytes) && caps.RunsSm90a() && g.top_k <= caps.max_split_k_cluster;
}

bool FusedDecodeShapeFits(const AttendGeometry& g, int di, int64_t longest_visible_blocks) {
  return g.hq / g.hkv <= 16 && g.top_k <= kSplitKMaxSlots && di > 0 && di % 8 == 0 && di <= kBlockMaxDiPad &&
         longest_visible_blocks <= int64_t(g.top_k) * kFusedDecodeMaxBlocksPerCta;
}

bool UnionTileFits(const AttendGeometry& g, const DeviceCaps& caps) {
  const int group = g.hq / g.hkv;
  return g.d % 8 == 0 && g.dv % 8 == 0 && g.d <= kKvOuterDimPad && g.dv <= kKvOuterDimPad && g.bk <= kKvOuterKeyPad &&
         group >= 2 && group <= 64 && 64 % group == 0 && (kUnionTileRows / group) * g.top_k <= kUnionTileMaxEntries &&
         std::max(kUnionTileSmemBytes, kUnionTileWsSmemBytes) <= size_t(caps.max_shared_bytes) && caps.RunsSm90a();
}

KvOuterChunks PlanKvOuterChunks(const AttendGeometry& g, int64_t num_blocks, int64_t budget_bytes,
                                bool one_query_per_sequence) {
  KvOuterChunks c;
  c.qpc = kKvOuterTileRows / (g.hq / g.hkv);
  c.num_buckets = num_blocks * g.hkv;
  const int64_t per_query = int64_t(g.hq) * g.top_k * (int64_t(g.dv) * 4 + 8);
  const int64_t max_list = int64_t(1) << 28;  // list entries stay far inside int32
  c.chunk_q = std::max<int64_t>(1, std::min({g.total_q, budget_bytes / per_query, max_list / (g.hkv * g.top_k)}));
  const int64_t entries = c.chunk_q * g.hkv * g.top_k + c.num_buckets * (c.qpc - 1);
  c.max_tiles = (entries + c.qpc - 1) / c.qpc;
  c.max_entries = c.max_tiles * c.qpc;
  c.ok = c.max_entries < (int64_t(1) << 31) - 1;
  const int64_t direct_tiles = c.chunk_q * g.hkv * g.top_k;  // one per (query, group, slot)
  if (one_query_per_sequence && direct_tiles * c.qpc < (int64_t(1) << 31) - 1) {
    c.direct_lists = true;
    c.direct_max_tiles = direct_tiles;
  }
  return c;
}

}  // namespace msa::gpu
