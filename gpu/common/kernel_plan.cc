#include "gpu/common/kernel_plan.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "gpu/common/geometry.h"
#include "gpu/common/kernel_fits.h"

namespace msa::gpu {
namespace {

// ---- names ----

template <typename E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<IndexKernel> kIndexNames[] = {{IndexKernel::kAuto, "auto"},
                                              {IndexKernel::kExact, "exact"},
                                              {IndexKernel::kTokenScores, "token-scores"},
                                              {IndexKernel::kMeanKeys, "mean-keys"},
                                              {IndexKernel::kMma, "mma"},
                                              {IndexKernel::kWgmma, "wgmma"},
                                              {IndexKernel::kFp8, "fp8"}};
constexpr Named<IndexBatch> kBatchNames[] = {
    {IndexBatch::kAuto, "auto"}, {IndexBatch::kPerSequence, "per-sequence"}, {IndexBatch::kBatched, "batched"}};
constexpr Named<TopKKernel> kTopKNames[] = {{TopKKernel::kAuto, "auto"},           {TopKKernel::kExact, "exact"},
                                            {TopKKernel::kInsertion, "insertion"}, {TopKKernel::kWarp, "warp"},
                                            {TopKKernel::kThreshold, "threshold"}, {TopKKernel::kCta, "cta"},
                                            {TopKKernel::kRunning, "running"}};
constexpr Named<KvLists> kListsNames[] = {
    {KvLists::kAuto, "auto"}, {KvLists::kNone, "-"}, {KvLists::kDirect, "direct"}, {KvLists::kGeneral, "general"}};
constexpr Named<AttendKernel> kAttendNames[] = {{AttendKernel::kAuto, "auto"},
                                                {AttendKernel::kExact, "exact"},
                                                {AttendKernel::kGathered, "gathered"},
                                                {AttendKernel::kQOuter, "q-outer"},
                                                {AttendKernel::kKvOuter, "kv-outer"},
                                                {AttendKernel::kKvOuterWgmma, "kv-outer-wgmma"},
                                                {AttendKernel::kKvOuterWgmmaP16, "kv-outer-wgmma-p16"},
                                                {AttendKernel::kKvOuterWs, "kv-outer-ws"},
                                                {AttendKernel::kUnionTile, "union-tile"},
                                                {AttendKernel::kUnionTileWs, "union-tile-ws"},
                                                {AttendKernel::kRouted, "routed"},
                                                {AttendKernel::kSplitK, "split-k"},
                                                {AttendKernel::kFusedDecode, "fused-decode"}};

template <typename E, size_t N>
const char* NameOf(const Named<E> (&names)[N], E value) {
  for (const Named<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

// `text` as one of `names` (not "-", which only the planner writes).
template <typename E, size_t N>
Status ParseValue(const Named<E> (&names)[N], std::string_view key, std::string_view text, E* value) {
  std::string choices;
  for (const Named<E>& n : names) {
    if (std::string_view(n.name) == "-") continue;
    if (text == n.name) {
      *value = n.value;
      return Status::Ok();
    }
    choices += choices.empty() ? "" : ", ";
    choices += n.name;
  }
  return InvalidArgument("kernel plan: " + std::string(key) + "=\"" + std::string(text) + "\" is not a choice (" +
                         std::string(key) + ": " + choices + ")");
}

// ---- the planner ----
}  // namespace

bool IsKvOuter(AttendKernel kernel) {
  return kernel == AttendKernel::kKvOuter || kernel == AttendKernel::kKvOuterWgmma ||
         kernel == AttendKernel::kKvOuterWgmmaP16 || kernel == AttendKernel::kKvOuterWs ||
         kernel == AttendKernel::kRouted;
}

bool TakesKvOuterWorkspace(AttendKernel kernel) {
  return IsKvOuter(kernel) || kernel == AttendKernel::kSplitK || kernel == AttendKernel::kFusedDecode;
}

namespace {

// The refusal of a requested value: the stage, the value and why it cannot run.
Status Refuse(const char* stage, const char* value, const std::string& reason) {
  return InvalidArgument("kernel plan: " + std::string(stage) + "=" + value + " cannot run: " + reason);
}

// An exact kernel runs precision exact only, and precision exact runs its stage's exact kernel only.
Status RefusePrecision(const char* stage, const char* value, bool exact_kernel, const Config& config) {
  const bool exact = config.precision == Precision::kExact;
  if (exact_kernel && !exact) {
    return Refuse(
        stage, value,
        "it computes the FP64 canonical order of precision exact, not " + std::string(PrecisionName(config.precision)));
  }
  if (!exact_kernel && exact) return Refuse(stage, value, "precision exact takes " + std::string(stage) + "=exact");
  return Status::Ok();
}

std::string CapsText(const DeviceCaps& caps) {
  return "compute capability " + std::to_string(caps.major) + "." + std::to_string(caps.minor) + ", " +
         std::to_string(caps.max_shared_bytes) + " bytes of shared memory per block";
}

// What the block-max index kernels (mma, wgmma, fp8, and the running top-k inside wgmma) need of the config, with
// this config's values.
std::string BlockMaxRule(const Config& config) {
  return "needs max pooling, index_head_dim a multiple of 8 up to 128, block_size a multiple of 64 and index_scale > 0 "
         "(pooling " +
         std::string(PoolingName(config.pooling)) + ", index_head_dim " + std::to_string(config.index_head_dim) +
         ", block_size " + std::to_string(config.block_size) + ", index_scale " + std::to_string(config.IndexScale()) +
         ")";
}

// The main branch's shape as its kernels' rules name it.
std::string AttendShapeText(const AttendGeometry& g) {
  return "head_dim " + std::to_string(g.d) + ", value_dim " + std::to_string(g.dv) + ", block_size " +
         std::to_string(g.bk) + ", group size " + std::to_string(g.hq / g.hkv) + ", top_k " + std::to_string(g.top_k);
}

// The index branch. Low precision: max pooling where BlockMaxScores fits takes a block-max kernel (fp8 on e4m3
// inputs on sm_90a, else wgmma on sm_90a, else mma; wgmma and mma give the same bits), mean pooling the mean-key
// kernel, the rest (lse pooling; max past BlockMaxScores' dims) the token-score kernel.
Status PlanIndex(const Config& config, const KernelShapes& shapes, const DeviceCaps& caps, IndexKernel requested,
                 IndexKernel* kernel) {
  const bool exact = config.precision == Precision::kExact;
  const int di = config.index_head_dim, bk = config.block_size;
  const float scale = float(config.IndexScale());
  const bool max_pooling = config.pooling == Pooling::kMax;
  const bool block_max_fits = max_pooling && BlockMaxScoresFits(di, bk, scale);
  const bool fits32 = BlockMaxGeometryFits32(shapes.total_q * config.num_kv_heads, shapes.last_position, bk);
  const bool wgmma_fits = block_max_fits && fits32 && BlockMaxScoresWgmmaFits(di, bk, scale, caps);
  const bool e4m3 = config.index_format == IndexFormat::kE4M3;
  const bool fp8_fits = block_max_fits && e4m3 && fits32 && BlockMaxScoresFp8Fits(di, bk, scale, caps);
  if (requested == IndexKernel::kAuto) {
    *kernel = exact                              ? IndexKernel::kExact
              : config.pooling == Pooling::kMean ? IndexKernel::kMeanKeys
              : fp8_fits                         ? IndexKernel::kFp8
              : wgmma_fits                       ? IndexKernel::kWgmma
              : block_max_fits                   ? IndexKernel::kMma
                                                 : IndexKernel::kTokenScores;
    return Status::Ok();
  }
  const char* value = NameOf(kIndexNames, requested);
  MSA_RETURN_IF_ERROR(RefusePrecision("index", value, requested == IndexKernel::kExact, config));
  const std::string block_max_rule = BlockMaxRule(config);
  switch (requested) {
    case IndexKernel::kTokenScores:
      if (config.pooling == Pooling::kMean) return Refuse("index", value, "it pools by max or lse, not mean");
      break;
    case IndexKernel::kMeanKeys:
      if (config.pooling != Pooling::kMean) return Refuse("index", value, "it pools by mean only");
      break;
    case IndexKernel::kMma:
      if (!block_max_fits) return Refuse("index", value, block_max_rule);
      break;
    case IndexKernel::kWgmma:
      if (!block_max_fits) return Refuse("index", value, block_max_rule);
      if (!fits32) return Refuse("index", value, "the batch's rows or key positions exceed its 32-bit geometry");
      if (!wgmma_fits)
        return Refuse(
            "index", value,
            "needs an sm_90a device with 163 KiB of shared memory per block (this one: " + CapsText(caps) + ")");
      break;
    case IndexKernel::kFp8:
      if (!e4m3) return Refuse("index", value, "needs index_format e4m3");
      if (!block_max_fits) return Refuse("index", value, block_max_rule);
      if (!fits32) return Refuse("index", value, "the batch's rows or key positions exceed its 32-bit geometry");
      if (!fp8_fits) {
        return Refuse("index", value,
                      "needs index_head_dim a multiple of 16, scale * 2 * index_head_dim * 448^2 <= "
                      "FLT_MAX and an sm_90a device (this one: " +
                          CapsText(caps) + ")");
      }
      break;
    default:
      break;
  }
  *kernel = requested;
  return Status::Ok();
}

// The top-k: exact mode ranks doubles; low precision takes the CTA kernel on decode batches whose longest row fits
// its shared memory, elsewhere the warp kernels where top_k <= 33 (threshold once the longest row sees
// kThresholdTopKMinBlocks blocks), insertion past them.
Status PlanTopK(const Config& config, const KernelShapes& shapes, const DeviceCaps& caps, TopKKernel requested,
                TopKKernel* kernel) {
  const bool exact = config.precision == Precision::kExact;
  const bool warp_fits = RankTopKFits(config.top_k);
  const int64_t longest_row_blocks = LongestRowBlocks(config, shapes);
  const bool cta_fits = RankTopKCtaFits(config.top_k, longest_row_blocks, caps);
  const bool decode = IsDecodeBatch(shapes.longest_q, shapes.sequences_with_queries);
  if (requested == TopKKernel::kAuto) {
    *kernel = exact                                           ? TopKKernel::kExact
              : !warp_fits                                    ? TopKKernel::kInsertion
              : decode && cta_fits                            ? TopKKernel::kCta
              : longest_row_blocks >= kThresholdTopKMinBlocks ? TopKKernel::kThreshold
                                                              : TopKKernel::kWarp;
    return Status::Ok();
  }
  const char* value = NameOf(kTopKNames, requested);
  MSA_RETURN_IF_ERROR(RefusePrecision("topk", value, requested == TopKKernel::kExact, config));
  if ((requested == TopKKernel::kWarp || requested == TopKKernel::kThreshold) && !warp_fits) {
    return Refuse("topk", value, "needs top_k <= 33, not " + std::to_string(config.top_k));
  }
  if (requested == TopKKernel::kRunning && config.score_format != ScoreFormat::kNative) {
    return Refuse("topk", value,
                  "ranks the block scores as the index kernel computes them, so it needs score_format native, not " +
                      std::string(ScoreFormatName(config.score_format)));
  }
  if (requested == TopKKernel::kRunning) {
    // Each condition refused on its own, with the value that fails it.
    if (config.top_k > kRunningTopKMaxTake + 1) {
      return Refuse("topk", value,
                    "needs top_k <= " + std::to_string(kRunningTopKMaxTake + 1) +
                        " (this one: " + std::to_string(config.top_k) + ")");
    }
    const int di = int(config.index_head_dim), bk = int(config.block_size);
    const float scale = float(config.IndexScale());
    if (config.pooling != Pooling::kMax || !BlockMaxScoresFits(di, bk, scale)) {
      return Refuse("topk", value, "ranks inside the wgmma index kernel, which " + BlockMaxRule(config));
    }
    if (!BlockMaxTopKWgmmaFits(di, bk, scale, int(config.top_k), caps)) {
      return Refuse("topk", value,
                    "ranks inside the wgmma index kernel, which needs an sm_90a device with " +
                        std::to_string(kBlockMaxTopKWgmmaSmemBytes) +
                        " bytes of shared memory per block (this one: " + CapsText(caps) + ")");
    }
  }
  if (requested == TopKKernel::kCta && !cta_fits) {
    return Refuse("topk", value,
                  "needs top_k <= 33 (this one: " + std::to_string(config.top_k) + ") and " +
                      std::to_string(kRankTopKCtaBytesPerCandidate) +
                      " bytes of shared memory per block of the longest row (" + std::to_string(longest_row_blocks) +
                      " blocks) within " + std::to_string(caps.max_shared_bytes) + " bytes");
  }
  *kernel = requested;
  return Status::Ok();
}

// Batched where the chunk's kernels take a batched chunk (BlockMaxScores(Wgmma), RankTopK(Threshold, Cta)) on a decode
// batch whose block scores fit the chunk budget.
Status PlanBatch(const Config& config, const KernelShapes& shapes, IndexKernel index, TopKKernel topk,
                 IndexBatch requested, IndexBatch* batch) {
  std::string why_not;
  if (index != IndexKernel::kMma && index != IndexKernel::kWgmma) {
    why_not =
        "index=" + std::string(NameOf(kIndexNames, index)) + " runs per sequence (batched needs index mma or wgmma)";
  } else if (topk != TopKKernel::kWarp && topk != TopKKernel::kThreshold && topk != TopKKernel::kCta) {
    why_not = "topk=" + std::string(NameOf(kTopKNames, topk)) +
              " runs per sequence (batched needs topk warp, threshold or cta)";
  } else if (!IsDecodeBatch(shapes.longest_q, shapes.sequences_with_queries)) {
    why_not = "not a decode batch (at most " + std::to_string(kDecodeBatchMaxQueries) +
              " queries per sequence and 65535 sequences with queries; this one: " + std::to_string(shapes.longest_q) +
              " and " + std::to_string(shapes.sequences_with_queries) + ")";
  } else if (shapes.total_q * config.num_kv_heads * shapes.max_blocks * int64_t(sizeof(float)) > kChunkBudgetBytes) {
    why_not = "the batch's block scores exceed the chunk budget of " + std::to_string(kChunkBudgetBytes) + " bytes";
  }
  if (requested == IndexBatch::kAuto) {
    *batch = why_not.empty() ? IndexBatch::kBatched : IndexBatch::kPerSequence;
    return Status::Ok();
  }
  if (requested == IndexBatch::kBatched && !why_not.empty()) return Refuse("batch", "batched", why_not);
  *batch = requested;
  return Status::Ok();
}

// The main branch. KV-outer pays off when blocks are shared (on average at least 2 queries per (sequence, block,
// group)) or when too few queries exist for the Q-outer grid to fill the device (decode); it runs on wgmma tiles with
// 16-bit partials on sm_90a (kv-outer-wgmma-p16, faster than fp32 partials on prefills and decode batches:
// docs/performance.md, 16-bit partials on path K), warp-specialized where those fit (kv-outer-ws) and the batch has
// kKvOuterWsMinTilesPerSm tiles per SM, routed with path U where that fits outside decode batches; a
// decode step whose split-k grid fits one CTA per SM takes split-k. Elsewhere Q-outer where its scores fit shared
// memory, else the gathered kernel.
Status PlanAttend(const Config& config, const KernelShapes& shapes, const DeviceCaps& caps, AttendKernel requested,
                  AttendKernel* kernel) {
  const bool exact = config.precision == Precision::kExact;
  const AttendGeometry g = AttendGeometryOf(config, shapes.total_q);
  const bool kv_outer_fits =
      KvOuterAttendFits(g, caps) && PlanKvOuterChunks(g, shapes.num_blocks, kChunkBudgetBytes, false).ok;
  const bool wgmma_fits = kv_outer_fits && KvOuterWgmmaFits(g, caps);
  const bool q_outer_fits = QOuterAttendFits(g, caps);
  if (requested == AttendKernel::kAuto) {
    const double queries_per_block = double(g.total_q) * g.top_k / double(std::max<int64_t>(shapes.num_blocks, 1));
    constexpr int64_t kFewQueryCtas = 512;  // about 4 CTAs per SM of an H100 / H200
    // Decode batches on sm_90a: KV-outer on wgmma tiles matched Q-outer with one query per sequence (within 2%) and
    // beat it by 7-15% with 4 or 16 (docs/performance.md, the decode step's top-k and main branch).
    const bool decode_wgmma = wgmma_fits && IsDecodeBatch(shapes.longest_q, shapes.sequences_with_queries);
    const bool kv_outer_pays = queries_per_block >= 2.0 || g.total_q * g.hkv < kFewQueryCtas || decode_wgmma;
    // Split-k where its CTAs (one per query, group and slot) fit one per SM: a decode step of a sequence or two,
    // latency-bound, where one launch with the merge inside beats KV-outer's lists, tiles and merge. Past one CTA per
    // SM its clusters share SMs and KV-outer is faster (docs/performance.md, the decode step).
    const bool split_k_pays = shapes.one_query_per_sequence && g.total_q * g.hkv * g.top_k <= caps.sm_count;
    // KV-outer on wgmma tiles goes through routed where path U fits too (each union tile on U or K by its union size:
    // as fast as K on random selections, faster on coherent ones, measured on prefills), except decode batches.
    const bool routed_fits =
        wgmma_fits && UnionTileFits(g, caps) && !IsDecodeBatch(shapes.longest_q, shapes.sequences_with_queries);
    // kv-outer-ws gives kv-outer-wgmma-p16's bits faster, except on a decode batch of a few tiles per SM, where its
    // producer's pipeline never fills (docs/performance.md, path K warp-specialized).
    const bool ws_pays = wgmma_fits && KvOuterWsFits(g, caps) &&
                         (!IsDecodeBatch(shapes.longest_q, shapes.sequences_with_queries) ||
                          g.total_q * g.hkv * g.top_k >= int64_t(kKvOuterWsMinTilesPerSm) * caps.sm_count);
    const AttendKernel kv_outer = routed_fits  ? AttendKernel::kRouted
                                  : ws_pays    ? AttendKernel::kKvOuterWs
                                  : wgmma_fits ? AttendKernel::kKvOuterWgmmaP16
                                               : AttendKernel::kKvOuter;
    *kernel = exact                                                        ? AttendKernel::kExact
              : split_k_pays && kv_outer_fits && SplitKAttendFits(g, caps) ? AttendKernel::kSplitK
              : kv_outer_fits && kv_outer_pays                             ? kv_outer
              : q_outer_fits                                               ? AttendKernel::kQOuter
                                                                           : AttendKernel::kGathered;
    return Status::Ok();
  }
  const char* value = NameOf(kAttendNames, requested);
  MSA_RETURN_IF_ERROR(RefusePrecision("attend", value, requested == AttendKernel::kExact, config));
  const std::string kv_outer_rule =
      "needs head_dim and value_dim multiples of 8 up to 128, block_size <= 128, "
      "group size <= 64, top_k <= 32 and lists within 32-bit offsets (" +
      AttendShapeText(g) + ", " + std::to_string(g.total_q) + " queries)";
  if (requested == AttendKernel::kQOuter && !q_outer_fits) {
    return Refuse("attend", value,
                  "needs head_dim and value_dim multiples of 8 up to 128 and the scores of top_k * "
                  "block_size keys in shared memory (" +
                      AttendShapeText(g) + "; this device: " + CapsText(caps) + ")");
  }
  const bool wgmma_tiles = requested == AttendKernel::kKvOuterWgmma || requested == AttendKernel::kKvOuterWgmmaP16 ||
                           requested == AttendKernel::kKvOuterWs || requested == AttendKernel::kRouted;
  const bool split_k = requested == AttendKernel::kSplitK || requested == AttendKernel::kFusedDecode;
  if ((requested == AttendKernel::kKvOuter || wgmma_tiles || split_k) && !kv_outer_fits) {
    return Refuse("attend", value, kv_outer_rule);
  }
  if (split_k && !SplitKAttendFits(g, caps)) {
    return Refuse("attend", value,
                  "needs top_k <= " + std::to_string(kSplitKMaxSlots) +
                      " (a (query, group)'s slots form one thread block cluster; top_k " + std::to_string(g.top_k) +
                      ") and an sm_90a device with " + std::to_string(kSplitKSmemBytes) +
                      " bytes of shared memory per block that places a cluster of top_k such blocks (this one: " +
                      CapsText(caps) + ", clusters of at most " + std::to_string(caps.max_split_k_cluster) + ")");
  }
  if (wgmma_tiles && !wgmma_fits) {
    return Refuse("attend", value, "needs an sm_90a device (this one: " + CapsText(caps) + ")");
  }
  if (requested == AttendKernel::kKvOuterWs && !KvOuterWsFits(g, caps)) {
    return Refuse("attend", value,
                  "needs a group size that is a multiple of 8 dividing 64 (this one: " + std::to_string(g.hq / g.hkv) +
                      ") and an sm_90a device with " + std::to_string(kKvOuterWsSmemBytes) +
                      " bytes of shared memory per block (this one: " + CapsText(caps) + ")");
  }
  if ((requested == AttendKernel::kUnionTile || requested == AttendKernel::kUnionTileWs ||
       requested == AttendKernel::kRouted) &&
      !UnionTileFits(g, caps)) {
    return Refuse("attend", value,
                  "needs head_dim and value_dim multiples of 8 up to 128, block_size <= 128, a group size of 2 to 64 "
                  "dividing 64, (128 / group size) x top_k <= 1024 and an sm_90a device (" +
                      AttendShapeText(g) + "; this device: " + CapsText(caps) + ")");
  }
  *kernel = requested;
  return Status::Ok();
}

// The KV-outer lists: direct where every sequence has at most one query (decode), general elsewhere.
Status PlanLists(const Config& config, const KernelShapes& shapes, AttendKernel attend, KvLists requested,
                 KvLists* lists) {
  const bool kv_outer = IsKvOuter(attend);
  const char* value = NameOf(kListsNames, requested);
  if (!kv_outer) {
    if (requested != KvLists::kAuto && requested != KvLists::kNone) {
      return Refuse("lists", value,
                    "attend=" + std::string(NameOf(kAttendNames, attend)) +
                        " builds no lists (lists "
                        "apply to attend kv-outer, kv-outer-wgmma, kv-outer-wgmma-p16 and routed)");
    }
    *lists = KvLists::kNone;
    return Status::Ok();
  }
  // Path K of attend=routed leaves the routed-out rows out of its lists: general lists only.
  const bool direct_fits =
      attend != AttendKernel::kRouted && PlanKvOuterChunks(AttendGeometryOf(config, shapes.total_q), shapes.num_blocks,
                                                           kChunkBudgetBytes, shapes.one_query_per_sequence)
                                             .direct_lists;
  if (requested == KvLists::kAuto) {
    *lists = direct_fits ? KvLists::kDirect : KvLists::kGeneral;
    return Status::Ok();
  }
  if (requested == KvLists::kNone)
    return Refuse("lists", value, "attend is KV-outer: it needs direct or general lists");
  if (requested == KvLists::kDirect && attend == AttendKernel::kRouted) {
    return Refuse("lists", value, "attend=routed builds general lists (path K skips the rows routed to path U)");
  }
  if (requested == KvLists::kDirect && !direct_fits) {
    return Refuse("lists", value,
                  "needs at most one query per sequence (this batch has a sequence of " +
                      std::to_string(shapes.longest_q) + " queries)");
  }
  *lists = requested;
  return Status::Ok();
}

// attend=fused-decode past split-k's needs (PlanAttend): the plan's index and top-k, whose bits its step gives, and its
// shapes.
Status CheckFusedDecode(const Config& config, const KernelShapes& shapes, IndexKernel index, TopKKernel topk) {
  const char* value = NameOf(kAttendNames, AttendKernel::kFusedDecode);
  if ((index != IndexKernel::kMma && index != IndexKernel::kWgmma) || topk != TopKKernel::kCta) {
    return Refuse("attend", value,
                  "its step gives the bits of index mma or wgmma and topk cta (this plan: index=" +
                      std::string(NameOf(kIndexNames, index)) + ", topk=" + NameOf(kTopKNames, topk) + ")");
  }
  if (config.score_format != ScoreFormat::kNative) return Refuse("attend", value, "needs score_format native");
  const int64_t longest_row_blocks = LongestRowBlocks(config, shapes);
  if (!FusedDecodeShapeFits(AttendGeometryOf(config, shapes.total_q), config.index_head_dim, longest_row_blocks)) {
    return Refuse(
        "attend", value,
        "needs a group of at most 16 heads (this one: " + std::to_string(config.group_size()) +
            "), index_head_dim a multiple of 8 up to 128 (this one: " + std::to_string(config.index_head_dim) +
            ") and rows of at most " + std::to_string(kFusedDecodeMaxBlocksPerCta) +
            " x top_k = " + std::to_string(int64_t(kFusedDecodeMaxBlocksPerCta) * config.top_k) +
            " visible blocks (this batch: " + std::to_string(longest_row_blocks) + ")");
  }
  return Status::Ok();
}

// Auto's fused-decode: where split-k was chosen for a step of one query whose rows have at most
// kFusedDecodeAutoBlocksPerCta blocks per CTA, and the plan's stages are those whose bits its step gives.
bool FusedDecodePays(const Config& config, const KernelShapes& shapes, const KernelPlan& p) {
  const int64_t longest_row_blocks = LongestRowBlocks(config, shapes);
  return p.attend == AttendKernel::kSplitK && shapes.total_q == 1 &&
         longest_row_blocks <= int64_t(config.top_k) * kFusedDecodeAutoBlocksPerCta &&
         CheckFusedDecode(config, shapes, p.index, p.topk).ok();
}

struct Override {
  std::mutex mutex;
  std::optional<KernelPlan> plan;
};

Override& TestOverride() {
  static Override o;
  return o;
}

}  // namespace

AttendGeometry AttendGeometryOf(const Config& config, int64_t total_q) {
  AttendGeometry g;
  g.total_q = total_q;
  g.hq = config.num_q_heads;
  g.hkv = config.num_kv_heads;
  g.d = config.head_dim;
  g.dv = config.value_dim;
  g.bk = config.block_size;
  g.top_k = config.top_k;
  return g;
}

int64_t LongestRowBlocks(const Config& config, const KernelShapes& shapes) {
  return shapes.last_position / config.block_size + 1;
}

KernelShapes ShapesOf(const Config& config, const Batch& batch) {
  KernelShapes s;
  s.total_q = batch.total_q();
  s.total_k = batch.cu_seqlens_k.empty() ? 0 : batch.cu_seqlens_k.back();
  const int64_t bk = config.block_size;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_len = batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b];
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    const int64_t blocks = (k_len + bk - 1) / bk;
    s.num_blocks += blocks;
    s.max_blocks = std::max(s.max_blocks, blocks);
    s.one_query_per_sequence = s.one_query_per_sequence && q_len <= 1;
    if (q_len == 0) continue;
    ++s.sequences_with_queries;
    s.longest_q = std::max(s.longest_q, q_len);
    s.last_position = std::max(s.last_position, k_len - 1);
  }
  return s;
}

Status PlanKernels(const Config& config, const KernelShapes& shapes, const DeviceCaps& caps,
                   const KernelPlan& requested, KernelPlan* plan) {
  KernelPlan p;
  MSA_RETURN_IF_ERROR(PlanIndex(config, shapes, caps, requested.index, &p.index));
  MSA_RETURN_IF_ERROR(PlanTopK(config, shapes, caps, requested.topk, &p.topk));
  if (p.topk == TopKKernel::kRunning && p.index != IndexKernel::kWgmma) {
    return Refuse("topk", "running",
                  "ranks inside the wgmma index kernel, so it needs index=wgmma (this plan: index=" +
                      std::string(NameOf(kIndexNames, p.index)) + ")");
  }
  MSA_RETURN_IF_ERROR(PlanBatch(config, shapes, p.index, p.topk, requested.batch, &p.batch));
  MSA_RETURN_IF_ERROR(PlanAttend(config, shapes, caps, requested.attend, &p.attend));
  MSA_RETURN_IF_ERROR(PlanLists(config, shapes, p.attend, requested.lists, &p.lists));
  if (p.attend == AttendKernel::kFusedDecode) MSA_RETURN_IF_ERROR(CheckFusedDecode(config, shapes, p.index, p.topk));
  if (requested.attend == AttendKernel::kAuto && FusedDecodePays(config, shapes, p))
    p.attend = AttendKernel::kFusedDecode;
  *plan = p;
  return Status::Ok();
}

std::string FormatSelectPlan(const KernelPlan& plan) {
  return std::string("index=") + NameOf(kIndexNames, plan.index) + ",batch=" + NameOf(kBatchNames, plan.batch) +
         ",topk=" + NameOf(kTopKNames, plan.topk);
}

std::string FormatAttendPlan(const KernelPlan& plan) {
  std::string text = std::string("attend=") + NameOf(kAttendNames, plan.attend);
  if (plan.lists != KvLists::kNone) text += std::string(",lists=") + NameOf(kListsNames, plan.lists);
  return text;
}

std::string FormatKernelPlan(const KernelPlan& plan) {
  return FormatSelectPlan(plan) + ",lists=" + NameOf(kListsNames, plan.lists) +
         ",attend=" + NameOf(kAttendNames, plan.attend);
}

std::vector<KernelPlan> AllRequestablePlans() {
  const auto requestable = [](const char* name) {
    return std::string_view(name) != "auto" && std::string_view(name) != "-";
  };
  std::vector<KernelPlan> plans;
  for (const auto& index : kIndexNames) {
    for (const auto& batch : kBatchNames) {
      for (const auto& topk : kTopKNames) {
        for (const auto& lists : kListsNames) {
          for (const auto& attend : kAttendNames) {
            if (!requestable(index.name) || !requestable(batch.name) || !requestable(topk.name) ||
                !requestable(attend.name) || std::string_view(lists.name) == "-") {
              continue;  // lists auto stays: the plans whose main branch builds no lists
            }
            plans.push_back(KernelPlan{index.value, batch.value, topk.value, lists.value, attend.value});
          }
        }
      }
    }
  }
  return plans;
}

Status ParseKernelPlan(std::string_view text, KernelPlan* plan) {
  KernelPlan parsed;
  std::vector<std::string_view> seen;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      return InvalidArgument("kernel plan: \"" + std::string(item) +
                             "\" is not key=value (keys: index, batch, topk, "
                             "lists, attend)");
    }
    const std::string_view key = item.substr(0, equals), value = item.substr(equals + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidArgument("kernel plan: key " + std::string(key) + " is given twice");
    }
    seen.push_back(key);
    if (key == "index") {
      MSA_RETURN_IF_ERROR(ParseValue(kIndexNames, key, value, &parsed.index));
    } else if (key == "batch") {
      MSA_RETURN_IF_ERROR(ParseValue(kBatchNames, key, value, &parsed.batch));
    } else if (key == "topk") {
      MSA_RETURN_IF_ERROR(ParseValue(kTopKNames, key, value, &parsed.topk));
    } else if (key == "lists") {
      MSA_RETURN_IF_ERROR(ParseValue(kListsNames, key, value, &parsed.lists));
    } else if (key == "attend") {
      MSA_RETURN_IF_ERROR(ParseValue(kAttendNames, key, value, &parsed.attend));
    } else {
      return InvalidArgument("kernel plan: unknown key \"" + std::string(key) +
                             "\" (keys: index, batch, topk, lists, attend)");
    }
  }
  *plan = parsed;
  return Status::Ok();
}

Status RequestedKernelPlan(KernelPlan* plan) {
  {
    Override& o = TestOverride();
    const std::lock_guard<std::mutex> lock(o.mutex);
    if (o.plan) {
      *plan = *o.plan;
      return Status::Ok();
    }
  }
  static const std::pair<Status, KernelPlan> from_environment = [] {
    KernelPlan parsed;
    const char* text = std::getenv("MSA_GPU_PLAN");
    Status status = ParseKernelPlan(text == nullptr ? "" : text, &parsed);
    if (!status.ok()) status = InvalidArgument("MSA_GPU_PLAN: " + status.message());
    return std::pair{status, parsed};
  }();
  if (!from_environment.first.ok()) return from_environment.first;
  *plan = from_environment.second;
  return Status::Ok();
}

void SetKernelPlanForTest(std::optional<KernelPlan> plan) {
  Override& o = TestOverride();
  const std::lock_guard<std::mutex> lock(o.mutex);
  o.plan = plan;
}

}  // namespace msa::gpu
