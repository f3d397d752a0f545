// The SIMD exact mode (simd/exact.h): the reference's algorithm (reference/selection.cc, attention.cc) in
// the canonical FP64 order, with the canonical primitives of simd/exact-inl.h, compiled once per Highway
// target (hwy/foreach_target.h) and dispatched at run time.
//
// Work is split into independent units, never inside a sum, and claimed dynamically by OpenMP threads,
// largest first, so ragged batches and decode steps stay balanced:
//   - index branch, phase 1: (a tile of up to 16 consecutive queries of one sequence) x (a chunk of blocks):
//     token scores of every group of the tile over the chunk's keys (each index key row is loaded once for
//     all those rows), pooled into block scores. A token score and a block's pooled score depend only on
//     that block's keys, so a long decode row splits into many units.
//   - index branch, phase 2: per (query, group) row: ranking (reference::PlaceSelection), -1 padding,
//     block_scores, index_lse over the selected keys in ascending position (score_format fp16: per selected
//     block, then over the blocks).
//   - main branch: (query, group, up to 16 heads of the group): the heads share the gathered keys and values.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/exact.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "reference/reference.h"
#include "simd/exact.h"
#include "simd/exact_inputs.h"
#include "simd/simd_backend.h"

#include "simd/exact-inl.h"

#ifndef MSA_SIMD_EXACT_SHARED_
#define MSA_SIMD_EXACT_SHARED_
namespace msa::simd::exact_internal {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// Rounds up to a multiple of 8 plus 8 more: scratch rows that vector loops may read (and write) past n.
inline size_t ScratchLength(int64_t n) { return size_t(PaddedLength(n) + 8); }

// Progress over a parallel loop: called from thread 0 with the finished share of `total` work, mapped into
// [begin, end); the caller reports 1.0 once at the very end.
class StageProgress {
 public:
  StageProgress(const ProgressFn& progress, double total, double begin, double end)
      : progress_(progress), total_(total > 0 ? total : 1), begin_(begin), end_(end) {}
  void Finished(double work) {
    const int64_t done = done_.fetch_add(int64_t(work), std::memory_order_relaxed) + int64_t(work);
    if (!progress_ || omp_get_thread_num() != 0) return;
    const double fraction = std::min(0.999, begin_ + (end_ - begin_) * double(done) / total_);
    if (fraction >= next_) {
      progress_(fraction);
      next_ = fraction + 0.01;
    }
  }

 private:
  const ProgressFn& progress_;
  double total_, begin_, end_;
  std::atomic<int64_t> done_{0};
  double next_ = 0;  // touched by thread 0 only
};

// The smallest value `candidate` has been offered (atomic min), e.g. the first bad row.
inline void AtomicMin(std::atomic<int64_t>& target, int64_t candidate) {
  int64_t current = target.load(std::memory_order_relaxed);
  while (candidate < current && !target.compare_exchange_weak(current, candidate, std::memory_order_relaxed)) {
  }
}

// Unit lists are claimed in this order: the largest first.
template <typename Unit>
void LargestFirst(std::vector<Unit>& units) {
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.cost > b.cost; });
}

// Phase 1 of the index branch: queries [t0, t0 + queries) of one sequence x blocks [block0, block0 + blocks).
struct IndexUnit {
  int64_t t0, queries, block0, blocks, cost;
};

// Main branch: query t, group r, heads [h0, h0 + heads) of the group.
struct AttendUnit {
  int64_t t, r, h0, heads, cost;
};

constexpr int64_t kQueryTile = 16;   // queries of one sequence that share index-key loads
constexpr int64_t kUnitKeys = 1024;  // about this many keys per index unit
constexpr int64_t kHeadChunk = 16;   // query heads per attention unit (M3: G = 16)
// Block-score scratch (when the caller asks for no block_scores) is bounded by processing queries in batches
// of at most this many scores (32 MiB).
constexpr int64_t kScratchScores = int64_t(1) << 22;

}  // namespace msa::simd::exact_internal
#endif  // MSA_SIMD_EXACT_SHARED_

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {
namespace {

using namespace exact_internal;

// Every parallel loop below has a body of one call to a HWY_NOINLINE function: OpenMP outlines the loop into
// a compiler-made function that clang does not give this target's attributes, so no vector code may be
// inlined into it (clang 14 fails with "Do not know how to split the result of this operator").

// mean[c] = (sum of the index keys [first_key, first_key + count) in ascending order, dim c) / count, for the
// padded width of `keys` (padding dims give +0).
template <typename TK>
HWY_NOINLINE void BlockMean(const PaddedRows<TK>& keys, int64_t first_key, int64_t count, double* mean) {
  const DF d;
  const VF divisor = hn::Set(d, double(count));
  for (int64_t c = 0; c < keys.padded_dim; c += int64_t(kLanes)) {
    VF sum = hn::Zero(d);
    for (int64_t s = 0; s < count; ++s) sum = hn::Add(sum, LoadWide(keys.Row(first_key + s, 0) + c));
    hn::StoreU(hn::Div(sum, divisor), d, mean + c);
  }
}

// m + log(l), l = sum exp(x - m) over x[0..n) ascending, m the reference's max (CanonicalLogSumExp).
// scratch holds ScratchLength(n) doubles; x may be read up to RoundUp(n, kLanes).
double LogSumExp(const double* x, int64_t n, double* scratch) {
  const double m = CanonicalMax(x, size_t(n));
  ExpShifted(x, m, size_t(n), scratch);
  HWY_ALIGN double l[kLanes] = {};
  l[0] = SequentialSum(scratch, size_t(n));
  LogArray(l, 1, l);
  return m + l[0];
}

bool AllFinite(const double* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) return false;
  }
  return true;
}

// ---- index branch ----

// What every unit of the index branch reads and writes. index_q: [total_q, Hidx, Dip]; index_k: [total_k, 1,
// Dip] (TK: double or float rows); full_means: [full blocks of all sequences, Dip].
template <typename TK>
struct IndexContext {
  const Config& config;
  const SelectionOutputs& outputs;
  const PaddedRows<double>& index_q;
  const PaddedRows<TK>& index_k;
  const std::vector<reference::QueryPlace>& places;
  const std::vector<double>& full_means;
  const std::vector<int64_t>& first_full;  // [B+1]: the first full block of each sequence in full_means
  int64_t total_q, hidx, bk, dip, max_blocks;
  double index_scale;
  bool need_tokens;  // token scores: for max and lse pooling, and index_lse
  // Block scores of row (t, r) at scores + (r * scores_rows + t - scores_first) * max_blocks.
  double* scores;
  int64_t scores_rows, scores_first;
  std::atomic<int64_t>* bad_row;            // the first (query, group) row with a non-finite score
  std::atomic<int64_t>* fp16_overflow_row;  // the first row whose fp16 block score overflows binary16
  StageProgress* stage;

  double* RowScores(int64_t t, int64_t r) const { return scores + (r * scores_rows + (t - scores_first)) * max_blocks; }
};

// Per-thread scratch of the index branch.
template <typename TK>
struct IndexScratch {
  std::vector<const double*> rows;
  std::vector<const TK*> keys;
  std::vector<double> tokens;  // [rows, stride]
  std::vector<double> exps, partial_mean, block_m, block_l, logs, scores;
  std::vector<int32_t> selected;
  std::vector<int64_t> selected_keys;  // [selected blocks]: each one's visible keys
};

// Phase 1, one unit: the token scores of every (query, group) row of the tile over the chunk's keys, pooled
// into the block scores of the chunk's blocks that each query sees.
template <typename TK>
HWY_NOINLINE void ScoreBlocks(const IndexContext<TK>& c, const IndexUnit& unit, IndexScratch<TK>& s) {
  const Config& config = c.config;
  const int64_t hidx = c.hidx, bk = c.bk, dip = c.dip;
  const int64_t last_position = c.places[unit.t0 + unit.queries - 1].position;
  const int64_t key_begin = c.places[unit.t0].key_begin;
  const int64_t first_key = unit.block0 * bk;
  const int64_t num_keys = std::min((unit.block0 + unit.blocks) * bk, last_position + 1) - first_key;
  const int64_t rows = unit.queries * hidx;
  const int64_t stride = PaddedLength(num_keys);
  s.rows.resize(rows);
  for (int64_t i = 0; i < unit.queries; ++i) {
    for (int64_t r = 0; r < hidx; ++r) s.rows[i * hidx + r] = c.index_q.Row(unit.t0 + i, r);
  }
  if (c.need_tokens) {
    // Token scores x[s] = dot(index_q[t, r], index_k[s]) * index_scale: [rows, stride].
    s.keys.resize(num_keys);
    for (int64_t j = 0; j < num_keys; ++j) s.keys[j] = c.index_k.Row(key_begin + first_key + j, 0);
    s.tokens.resize(rows * stride + 8);
    DotMatrix(s.rows.data(), rows, s.keys.data(), num_keys, dip, c.index_scale, s.tokens.data(), stride);
  }
  s.exps.resize(ScratchLength(bk));
  s.block_m.resize(ScratchLength(unit.blocks));
  s.block_l.resize(ScratchLength(unit.blocks));
  s.logs.resize(ScratchLength(unit.blocks));
  s.scores.resize(ScratchLength(unit.blocks));
  s.partial_mean.resize(dip);
  for (int64_t i = 0; i < unit.queries; ++i) {
    const int64_t t = unit.t0 + i, position = c.places[t].position, num_visible_keys = position + 1;
    const int64_t block_end = std::min(unit.block0 + unit.blocks, position / bk + 1);
    const int64_t blocks = block_end - unit.block0;
    if (blocks <= 0) continue;
    // Mean pooling: a partial local block's mean over this query's visible keys.
    const bool partial_local = block_end * bk > num_visible_keys;
    if (config.pooling == Pooling::kMean && partial_local) {
      const int64_t first = (block_end - 1) * bk;
      BlockMean(c.index_k, key_begin + first, num_visible_keys - first, s.partial_mean.data());
    }
    for (int64_t r = 0; r < hidx; ++r) {
      // Token score of key first_key + j (when computed).
      const double* tokens = c.need_tokens ? s.tokens.data() + (i * hidx + r) * stride : nullptr;
      if (c.need_tokens && !AllFinite(tokens, std::min(num_keys, num_visible_keys - first_key))) {
        AtomicMin(*c.bad_row, t * hidx + r);
        continue;
      }
      // docs:begin simd-block-scores
      for (int64_t blk = unit.block0; blk < block_end; ++blk) {
        const int64_t first = blk * bk, count = std::min(bk, num_visible_keys - first);
        const double* block_tokens = c.need_tokens ? tokens + (first - first_key) : nullptr;
        double& score = s.scores[blk - unit.block0];
        switch (config.pooling) {
          case Pooling::kMax:
            score = CanonicalMax(block_tokens, size_t(count));
            break;
          case Pooling::kLse:
            // m + log(sum exp(x - m)); the logs of the chunk's blocks are taken together below.
            s.block_m[blk - unit.block0] = CanonicalMax(block_tokens, size_t(count));
            ExpShifted(block_tokens, s.block_m[blk - unit.block0], size_t(count), s.exps.data());
            s.block_l[blk - unit.block0] = SequentialSum(s.exps.data(), size_t(count));
            break;
          case Pooling::kMean: {
            const double* mean =
                count < bk ? s.partial_mean.data() : &c.full_means[(c.first_full[c.places[t].sequence] + blk) * dip];
            const double* row = s.rows[i * hidx + r];
            DotMatrix<double>(&row, 1, &mean, 1, dip, c.index_scale, &score, 1);
            break;
          }
        }
      }
      if (config.pooling == Pooling::kLse) {
        LogArray(s.block_l.data(), size_t(blocks), s.logs.data());
        for (int64_t j = 0; j < blocks; ++j) s.scores[j] = s.block_m[j] + s.logs[j];
      }
      // docs:end simd-block-scores
      if (!AllFinite(s.scores.data(), blocks)) {
        AtomicMin(*c.bad_row, t * hidx + r);
        continue;
      }
      // score_format fp16: the ranked (and reported) block scores are the binary16 roundings of the exact ones.
      if (config.score_format == ScoreFormat::kFp16) {
        for (int64_t j = 0; j < blocks; ++j) s.scores[j] = RoundToBinary16(s.scores[j]);
        if (!AllFinite(s.scores.data(), blocks)) {
          AtomicMin(*c.fp16_overflow_row, t * hidx + r);
          continue;
        }
      }
      std::copy(s.scores.data(), s.scores.data() + blocks, c.RowScores(t, r) + unit.block0);
    }
  }
  c.stage->Finished(double(num_keys * rows));
}

// score_format fp16's index_lse (SPEC section 4) from s.tokens, the token scores of a row's selected blocks'
// visible keys gathered block by block in ascending id (s.selected_keys of each): per block l_b = fp16(M[b]) +
// log(sum_s exp(x[s] - M[b])), keys ascending, then the logsumexp of the l_b, blocks ascending.
template <typename TK>
double Fp16ScoresLogSumExp(IndexScratch<TK>& s) {
  const int64_t blocks = int64_t(s.selected_keys.size());
  s.block_m.resize(ScratchLength(blocks));
  s.block_l.resize(ScratchLength(blocks));
  s.logs.resize(ScratchLength(blocks));
  const double* x = s.tokens.data();
  for (int64_t i = 0; i < blocks; ++i) {
    const size_t count = size_t(s.selected_keys[i]);
    s.block_m[i] = CanonicalMax(x, count);
    ExpShifted(x, s.block_m[i], count, s.exps.data());
    s.block_l[i] = SequentialSum(s.exps.data(), count);
    x += count;
  }
  LogArray(s.block_l.data(), size_t(blocks), s.logs.data());
  for (int64_t i = 0; i < blocks; ++i) s.block_l[i] = RoundToBinary16(s.block_m[i]) + s.logs[i];
  return LogSumExp(s.block_l.data(), blocks, s.exps.data());
}

// Phase 2, one (query, group) row: the slots (reference::PlaceSelection: the ranked candidates by score
// descending, id ascending, then the init blocks, then the trailing forced blocks with the local block last,
// -1 padding), -inf past the visible blocks, and index_lse over the selected blocks' visible keys in
// ascending position.
template <typename TK>
HWY_NOINLINE void PlaceRow(const IndexContext<TK>& c, int64_t t, int64_t r, IndexScratch<TK>& s) {
  const Config& config = c.config;
  const reference::QueryPlace& place = c.places[t];
  const int64_t visible = place.position / c.bk + 1, num_visible_keys = place.position + 1;
  int32_t* slots = c.outputs.topk_indices + (r * c.total_q + t) * config.top_k;
  reference::PlaceSelection(config, c.RowScores(t, r), visible, slots);
  if (c.outputs.block_scores != nullptr) {
    std::fill(c.outputs.block_scores + (r * c.total_q + t) * c.max_blocks + visible,
              c.outputs.block_scores + (r * c.total_q + t + 1) * c.max_blocks, kMinusInf);
  }
  if (c.outputs.index_lse == nullptr) return;
  s.selected.clear();
  for (int64_t slot = 0; slot < config.top_k && slots[slot] != -1; ++slot) s.selected.push_back(slots[slot]);
  std::sort(s.selected.begin(), s.selected.end());
  s.keys.clear();
  s.selected_keys.clear();
  for (int32_t blk : s.selected) {
    const int64_t first = int64_t(blk) * c.bk, count = std::min(c.bk, num_visible_keys - first);
    for (int64_t j = 0; j < count; ++j) s.keys.push_back(c.index_k.Row(place.key_begin + first + j, 0));
    s.selected_keys.push_back(count);
  }
  const int64_t n = int64_t(s.keys.size());
  s.tokens.resize(ScratchLength(n));
  s.exps.resize(ScratchLength(n));
  const double* row = c.index_q.Row(t, r);
  DotMatrix(&row, 1, s.keys.data(), size_t(n), c.dip, c.index_scale, s.tokens.data(), size_t(n));
  c.outputs.index_lse[r * c.total_q + t] = config.score_format == ScoreFormat::kNative
                                               ? LogSumExp(s.tokens.data(), n, s.exps.data())
                                               : Fp16ScoresLogSumExp(s);
}

// index_q: [total_q, Hidx, Dip]; index_k: [total_k, 1, Dip].
template <typename TK>
Status SelectBlocks(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                    const ProgressFn& progress, const PaddedRows<double>& index_q, const PaddedRows<TK>& index_k) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), hidx = config.num_kv_heads, bk = config.block_size;
  const int64_t max_blocks = MaxBlocks(config, batch);
  const int64_t dip = index_q.padded_dim;
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  const int64_t sequences = batch.num_sequences();

  // Mean pooling: the mean index key of every full block of every sequence: [sum of k_len / Bk, Dip].
  std::vector<double> full_means;
  std::vector<int64_t> first_full(sequences + 1, 0);
  if (config.pooling == Pooling::kMean) {
    std::vector<std::pair<int64_t, int64_t>> full_blocks;  // (sequence, block)
    for (int64_t b = 0; b < sequences; ++b) {
      const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
      first_full[b + 1] = first_full[b] + k_len / bk;
      for (int64_t blk = 0; blk < k_len / bk; ++blk) full_blocks.push_back({b, blk});
    }
    full_means.assign(size_t(first_full.back() * dip), 0.0);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < int64_t(full_blocks.size()); ++i) {
      BlockMean(index_k, batch.cu_seqlens_k[full_blocks[i].first] + full_blocks[i].second * bk, bk,
                &full_means[(first_full[full_blocks[i].first] + full_blocks[i].second) * dip]);
    }
  }

  // Queries go in batches when the block scores need scratch (the caller asked for no block_scores).
  const int64_t batch_queries = outputs.block_scores != nullptr
                                    ? std::max<int64_t>(total_q, 1)
                                    : std::max<int64_t>(1, kScratchScores / std::max<int64_t>(1, hidx * max_blocks));
  const int64_t blocks_per_unit = std::max<int64_t>(1, kUnitKeys / bk);
  std::vector<double> score_scratch;
  double total_work = 0;
  for (int64_t t = 0; t < total_q; ++t) total_work += double(places[t].position + 1);
  total_work *= double(hidx);
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> bad_row{kNone}, fp16_overflow_row{kNone};
  StageProgress stage(progress, total_work, 0.0, 1.0);
  IndexContext<TK> context{config,
                           outputs,
                           index_q,
                           index_k,
                           places,
                           full_means,
                           first_full,
                           total_q,
                           hidx,
                           bk,
                           dip,
                           max_blocks,
                           config.IndexScale(),
                           config.pooling != Pooling::kMean || outputs.index_lse != nullptr,
                           outputs.block_scores,
                           total_q,
                           0,
                           &bad_row,
                           &fp16_overflow_row,
                           &stage};

  for (int64_t t_begin = 0; t_begin < total_q; t_begin += batch_queries) {
    const int64_t t_end = std::min(total_q, t_begin + batch_queries), batch_rows = t_end - t_begin;
    if (outputs.block_scores == nullptr) {  // scratch [Hidx, batch_rows, max_blocks]
      score_scratch.resize(size_t(hidx * batch_rows * max_blocks));
      context.scores = score_scratch.data();
      context.scores_rows = batch_rows;
      context.scores_first = t_begin;
    }

    // Phase 1 units: tiles of kQueryTile queries within one sequence, times chunks of blocks.
    std::vector<IndexUnit> units;
    for (int64_t b = 0; b < sequences; ++b) {
      const int64_t q_first = std::max<int64_t>(batch.cu_seqlens_q[b], t_begin);
      const int64_t q_last = std::min<int64_t>(batch.cu_seqlens_q[b + 1], t_end);
      for (int64_t t0 = q_first; t0 < q_last; t0 += kQueryTile) {
        const int64_t queries = std::min(kQueryTile, q_last - t0);
        const int64_t last_position = places[t0 + queries - 1].position;
        const int64_t visible = last_position / bk + 1;
        for (int64_t block0 = 0; block0 < visible; block0 += blocks_per_unit) {
          const int64_t blocks = std::min(blocks_per_unit, visible - block0);
          const int64_t keys = std::min((block0 + blocks) * bk, last_position + 1) - block0 * bk;
          units.push_back({t0, queries, block0, blocks, keys * queries * hidx});
        }
      }
    }
    LargestFirst(units);

#pragma omp parallel
    {
      IndexScratch<TK> scratch;
#pragma omp for schedule(dynamic, 1)
      for (int64_t u = 0; u < int64_t(units.size()); ++u) ScoreBlocks(context, units[u], scratch);
    }
    const int64_t bad = bad_row.load();
    if (bad != kNone) {
      return InvalidArgument("index score of query " + std::to_string(bad / hidx) + ", group " +
                             std::to_string(bad % hidx) +
                             " is not finite: index_q and index_k are too large for a double dot product");
    }
    // An fp16 overflow fails the call: no row is placed from here on, and the refusal waits until every batch
    // is scored, since a non-finite score in a later batch takes precedence (as in the reference).
    if (fp16_overflow_row.load() != kNone) continue;

#pragma omp parallel
    {
      IndexScratch<TK> scratch;
#pragma omp for schedule(dynamic, 8)
      for (int64_t work = 0; work < batch_rows * hidx; ++work) {
        PlaceRow(context, t_begin + work / hidx, work % hidx, scratch);
      }
    }
  }
  if (const int64_t overflow = fp16_overflow_row.load(); overflow != kNone) {
    return Fp16ScoreOverflow(overflow / hidx, overflow % hidx);
  }
  if (progress) progress(1.0);
  return Status::Ok();
}

Status SelectImpl(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const PaddedRows<double> index_q = WidenPadded<double>(inputs.index_q);
  if (FitsFloat(inputs.index_k.dtype)) {
    return SelectBlocks(config, inputs, outputs, progress, index_q, WidenPadded<float>(inputs.index_k));
  }
  return SelectBlocks(config, inputs, outputs, progress, index_q, WidenPadded<double>(inputs.index_k));
}

// ---- main branch ----

// What every unit of the main branch reads and writes. q: [total_q, Hq, Dp]; k: [total_k, Hkv, Dp];
// v: [total_k, Hkv, Dvp] (TK, TV: double or float rows).
template <typename TK, typename TV>
struct AttendContext {
  const Config& config;
  const SelectionView& selection;
  const AttentionOutputs& outputs;
  const PaddedRows<double>& q;
  const PaddedRows<TK>& k;
  const PaddedRows<TV>& v;
  const std::vector<reference::QueryPlace>& places;
  int64_t total_q;
  StageProgress* stage;
};

// Per-thread scratch of the main branch.
template <typename TK, typename TV>
struct AttendScratch {
  std::vector<int32_t> blocks;
  std::vector<const double*> queries, weights;
  std::vector<const TK*> keys;
  std::vector<const TV*> values;
  std::vector<double*> sums;
  std::vector<double> scores;  // [heads, stride]: s_j, then p_j in place
  std::vector<double> acc;     // [heads, Dvp]: sum_j p_j v_j
  std::vector<double> m, l, log_l;
};

// One unit: heads [h0, h0 + heads) of group r for query t, over the keys of the row's selected blocks.
// docs:begin simd-attend-rows
template <typename TK, typename TV>
HWY_NOINLINE void AttendHeads(const AttendContext<TK, TV>& c, const AttendUnit& unit, AttendScratch<TK, TV>& s) {
  const Config& config = c.config;
  const int64_t bk = config.block_size, hq = config.num_q_heads, dv = config.value_dim;
  const int64_t dp = c.q.padded_dim, dvp = c.v.padded_dim;
  const reference::QueryPlace& place = c.places[unit.t];
  // The selected blocks as a set, visited in ascending block id = ascending key position.
  const int32_t* slots = c.selection.topk_indices + (unit.r * c.total_q + unit.t) * config.top_k;
  s.blocks.clear();
  for (int64_t slot = 0; slot < config.top_k && slots[slot] != -1; ++slot) s.blocks.push_back(slots[slot]);
  std::sort(s.blocks.begin(), s.blocks.end());
  s.keys.clear();
  s.values.clear();
  for (int32_t blk : s.blocks) {
    const int64_t end = std::min<int64_t>((int64_t(blk) + 1) * bk, place.position + 1);
    for (int64_t key = int64_t(blk) * bk; key < end; ++key) {
      s.keys.push_back(c.k.Row(place.key_begin + key, unit.r));
      s.values.push_back(c.v.Row(place.key_begin + key, unit.r));
    }
  }
  const int64_t n = int64_t(s.keys.size()), heads = unit.heads, stride = int64_t(ScratchLength(n));
  s.queries.resize(heads);
  for (int64_t h = 0; h < heads; ++h) s.queries[h] = c.q.Row(unit.t, unit.h0 + h);

  // s_j = dot(q, k_j) * scale; m = max s_j; p_j = exp(s_j - m); l = sum p_j (ascending j).
  s.scores.resize(heads * stride);
  DotMatrix(s.queries.data(), heads, s.keys.data(), n, dp, config.SoftmaxScale(), s.scores.data(), stride);
  s.m.resize(ScratchLength(heads));
  s.l.assign(ScratchLength(heads), 1.0);
  s.log_l.resize(ScratchLength(heads));
  s.weights.resize(heads);
  s.sums.resize(heads);
  s.acc.assign(heads * dvp, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    double* p = s.scores.data() + h * stride;
    s.m[h] = CanonicalMax(p, size_t(n));
    ExpShifted(p, s.m[h], size_t(n), p);
    s.l[h] = SequentialSum(p, size_t(n));
    s.weights[h] = p;
    s.sums[h] = s.acc.data() + h * dvp;
  }
  // o_d = (sum_j p_j v_jd) / l, j ascending; lse = m + log(l).
  WeightedSums(s.weights.data(), heads, s.values.data(), n, dvp, s.sums.data());
  LogArray(s.l.data(), size_t(heads), s.log_l.data());
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t head = unit.h0 + h;
    double* out = c.outputs.out + (unit.t * hq + head) * dv;
    for (int64_t d = 0; d < dv; ++d) out[d] = s.sums[h][d] / s.l[h];
    c.outputs.lse[unit.t * hq + head] = s.m[h] + s.log_l[h];
  }
  c.stage->Finished(double(unit.cost));
}
// docs:end simd-attend-rows

template <typename TK, typename TV>
Status AttendRows(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress, const PaddedRows<double>& q,
                  const PaddedRows<TK>& k, const PaddedRows<TV>& v) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), bk = config.block_size, group = config.group_size();
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);

  std::vector<AttendUnit> units;
  double total_work = 0;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < config.num_kv_heads; ++r) {
      // Cost: the number of selected keys (an upper bound is enough for the order).
      const int32_t* slots = selection.topk_indices + (r * total_q + t) * config.top_k;
      int64_t keys = 0;
      for (int64_t slot = 0; slot < config.top_k && slots[slot] != -1; ++slot) keys += bk;
      keys = std::min(keys, places[t].position + 1);
      for (int64_t h0 = 0; h0 < group; h0 += kHeadChunk) {
        const int64_t heads = std::min(kHeadChunk, group - h0);
        units.push_back({t, r, r * group + h0, heads, keys * heads});
        total_work += double(keys * heads);
      }
    }
  }
  // Group by group (the working set is one group's keys and values), largest first within a group.
  std::stable_sort(units.begin(), units.end(),
                   [](const AttendUnit& a, const AttendUnit& b) { return a.r != b.r ? a.r < b.r : a.cost > b.cost; });
  StageProgress stage(progress, total_work, 0.0, 1.0);
  const AttendContext<TK, TV> context{config, selection, outputs, q, k, v, places, total_q, &stage};

#pragma omp parallel
  {
    AttendScratch<TK, TV> scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < int64_t(units.size()); ++u) AttendHeads(context, units[u], scratch);
  }
  if (progress) progress(1.0);
  return Status::Ok();
}

template <typename TK>
Status AttendWithKeys(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                      const AttentionOutputs& outputs, const ProgressFn& progress, const PaddedRows<double>& q,
                      const PaddedRows<TK>& k) {
  if (FitsFloat(inputs.v.dtype)) {
    return AttendRows(config, inputs, selection, outputs, progress, q, k, WidenPadded<float>(inputs.v));
  }
  return AttendRows(config, inputs, selection, outputs, progress, q, k, WidenPadded<double>(inputs.v));
}

Status AttendImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const PaddedRows<double> q = WidenPadded<double>(inputs.q);
  if (FitsFloat(inputs.k.dtype)) {
    return AttendWithKeys(config, inputs, selection, outputs, progress, q, WidenPadded<float>(inputs.k));
  }
  return AttendWithKeys(config, inputs, selection, outputs, progress, q, WidenPadded<double>(inputs.k));
}

// ---- array forms of the primitives, for tests ----

// y[0..n) = f(x[0..n)) by a primitive that takes whole vectors: the whole vectors in place, the rest through a padded
// vector.
template <typename ArrayFn>
void ApplyWithTail(ArrayFn array_fn, const double* x, size_t n, double* y) {
  RecordDispatchedTarget(HWY_TARGET);
  const size_t whole = n / kLanes * kLanes;
  array_fn(x, whole, y);
  HWY_ALIGN double tail[kLanes] = {};
  std::copy(x + whole, x + n, tail);
  array_fn(tail, n - whole, tail);
  std::copy(tail, tail + (n - whole), y + whole);
}

void ExpArrayImpl(const double* x, size_t n, double* y) {
  ApplyWithTail([](const double* a, size_t m, double* b) { ExpArray(a, m, b); }, x, n, y);
}

void LogArrayImpl(const double* x, size_t n, double* y) {
  ApplyWithTail([](const double* a, size_t m, double* b) { LogArray(a, m, b); }, x, n, y);
}

void DotMatrixImpl(const double* a, size_t rows, const double* b, size_t cols, size_t n, double* out) {
  RecordDispatchedTarget(HWY_TARGET);
  const size_t padded = size_t(PaddedLength(int64_t(n)));
  std::vector<double> a_padded(rows * padded, 0.0), b_padded(cols * padded, 0.0);
  std::vector<const double*> a_rows(rows), b_rows(cols);
  for (size_t i = 0; i < rows; ++i) {
    std::copy(a + i * n, a + (i + 1) * n, a_padded.data() + i * padded);
    a_rows[i] = a_padded.data() + i * padded;
  }
  for (size_t j = 0; j < cols; ++j) {
    std::copy(b + j * n, b + (j + 1) * n, b_padded.data() + j * padded);
    b_rows[j] = b_padded.data() + j * padded;
  }
  DotMatrix<double>(a_rows.data(), rows, b_rows.data(), cols, padded, 1.0, out, cols);
}

}  // namespace
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace msa::simd {

HWY_EXPORT(SelectImpl);
HWY_EXPORT(AttendImpl);
HWY_EXPORT(ExpArrayImpl);
HWY_EXPORT(LogArrayImpl);
HWY_EXPORT(DotMatrixImpl);

Status ExactSelect(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                   const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(SelectImpl)(config, inputs, outputs, progress);
}

Status ExactAttend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                   const AttentionOutputs& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(AttendImpl)(config, inputs, selection, outputs, progress);
}

void CanonicalExpArray(const double* x, size_t n, double* y) { HWY_DYNAMIC_DISPATCH(ExpArrayImpl)(x, n, y); }

void CanonicalLogArray(const double* x, size_t n, double* y) { HWY_DYNAMIC_DISPATCH(LogArrayImpl)(x, n, y); }

void CanonicalDotMatrix(const double* a, size_t rows, const double* b, size_t cols, size_t n, double* out) {
  HWY_DYNAMIC_DISPATCH(DotMatrixImpl)(a, rows, b, cols, n, out);
}

}  // namespace msa::simd
#endif  // HWY_ONCE
