// The SIMD training functions (simd/training.h): reference/training.cc's algorithm with the primitives of
// simd/training-inl.h, compiled once per Highway target (hwy/foreach_target.h) and dispatched at run time. The
// element type T of the arithmetic picks the precision: double is the canonical FP64 order (exact), float is fp32.
//
// Four kinds of unit, each claimed whole by one OpenMP thread (largest first), so no sum is ever split:
//   - backward rows (query t, group r, up to 16 heads of the group) over the row's key set, ascending: the forward
//     (s_j, lse, out, Delta = dot(dout, out)), then P_j = exp(s_j - lse), dP_j = dot(dout, v_j), dS_j and
//     dq = scale * (sum_j dS_j k_j). lse and Delta of every row are kept for the key pass.
//   - backward keys (block, group r, up to 64 of its keys): the contributor rows (t, h), t ascending over the queries
//     whose group-r selection holds the block, then h ascending, in chunks of 64 rows: their scores against the keys,
//     P and dS again (the same operations on the same values, so the same bits), then per key
//     dk = scale * (sum dS q) and dv = sum P dout over the rows in that order.
//   - KL rows (t, r): the group's forward lse per head, the teacher pbar_j = (sum_h P_hj) / G, the student's
//     ilse = logsumexp_j x_j, the row's KL terms, g_j = (rho_j - pbar_j) / N and dqi = index_scale * (sum_j g_j ik_j).
//   - KL keys (block, up to 64 keys): the contributor rows (t, r) ascending, g again, dki = index_scale * (sum g iq).
// A contributor row whose position is before a key of its block (the block is its local one) adds weight +0 to that
// key's sums: an exact no-op on a sum that starts at +0 (simd/training.h).
#include "simd/training.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/training.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "reference/attend_row.h"
#include "reference/reference.h"
#include "simd/exact_inputs.h"
#include "simd/simd_backend.h"

#include "simd/exact-inl.h"
#include "simd/training-inl.h"

#ifndef MSA_SIMD_TRAINING_SHARED_
#define MSA_SIMD_TRAINING_SHARED_
namespace msa::simd::training_internal {

using reference::QueryPlace;

constexpr int64_t kHeadChunk = 16;  // query heads per backward row unit (M3: G = 16)
constexpr int64_t kKeyChunk = 64;   // keys per key unit
constexpr int64_t kRowChunk = 64;   // contributor rows whose scores a key unit holds at once

// The key blocks of every sequence, numbered across the batch, and for each block and group the query rows whose
// selection holds it (its contributors), ascending. A key of the block past a query's position is not in that
// query's set even so: callers test Visible.
class KeyBlocks {
 public:
  struct Block {
    int64_t sequence;
    int64_t key_begin, key_end;  // its key rows [key_begin, key_end)
    int64_t sequence_key_begin;  // the first key row of its sequence
  };

  KeyBlocks(const Config& config, const Batch& batch, const SelectionView& selection,
            const std::vector<QueryPlace>& places)
      : groups_(config.num_kv_heads) {
    const int64_t total_q = batch.total_q(), bk = config.block_size;
    std::vector<int64_t> first_block;  // [B]
    for (int64_t b = 0; b < batch.num_sequences(); ++b) {
      first_block.push_back(int64_t(blocks_.size()));
      const int64_t begin = batch.cu_seqlens_k[b], end = batch.cu_seqlens_k[b + 1];
      for (int64_t key = begin; key < end; key += bk) blocks_.push_back({b, key, std::min(key + bk, end), begin});
    }
    contributors_.resize(groups_ * blocks_.size());
    for (int64_t t = 0; t < total_q; ++t) {  // ascending t: every list comes out sorted
      for (int64_t r = 0; r < groups_; ++r) {
        const int32_t* row = selection.topk_indices + (r * total_q + t) * config.top_k;
        for (int64_t slot = 0; slot < config.top_k && row[slot] != -1; ++slot) {
          contributors_[(first_block[places[t].sequence] + row[slot]) * groups_ + r].push_back(t);
        }
      }
    }
  }

  int64_t size() const { return int64_t(blocks_.size()); }
  const Block& operator[](int64_t block) const { return blocks_[block]; }
  // The query rows whose group-r selection holds `block`, ascending.
  const std::vector<int64_t>& Contributors(int64_t block, int64_t r) const {
    return contributors_[block * groups_ + r];
  }

 private:
  int64_t groups_;
  std::vector<Block> blocks_;
  std::vector<std::vector<int64_t>> contributors_;  // [blocks, Hkv]
};

// Whether key row `key` of `block` is at or before the position of query `place`.
inline bool Visible(const KeyBlocks::Block& block, int64_t key, const QueryPlace& place) {
  return key - block.sequence_key_begin <= place.position;
}

// The key rows of the key set of query `place` in the selection row `slots` [top_k], ascending (SPEC section 3).
inline void KeySet(const Config& config, const int32_t* slots, const QueryPlace& place, std::vector<int64_t>* keys) {
  keys->clear();
  for (const reference::KeyRange& range : reference::SelectedKeyRanges(config, slots, place.position)) {
    for (int64_t s = range.begin; s < range.end; ++s) keys->push_back(place.key_begin + s);
  }
}

// Rows: query t, group r, heads [h0, h0 + heads) of the group (h0 = 0, heads = G for the KL).
struct RowUnit {
  int64_t t, r, h0, heads, cost;
};
// Keys [key_begin, key_end) of one block, in group r (the backward) or in every group (the KL: r = -1).
struct KeyUnit {
  int64_t block, r, key_begin, key_end, cost;
};

template <typename Unit>
void LargestFirst(std::vector<Unit>& units) {
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.cost > b.cost; });
}

// Progress over the units of a call: `Finished` from any thread, reported from thread 0 in steps of about 1%.
class WorkProgress {
 public:
  WorkProgress(const ProgressFn& progress, double total) : progress_(progress), total_(total > 0 ? total : 1) {}
  void Finished(int64_t work) {
    const int64_t done = done_.fetch_add(work, std::memory_order_relaxed) + work;
    if (!progress_ || omp_get_thread_num() != 0) return;
    const double fraction = std::min(0.999, double(done) / total_);
    if (fraction >= next_) {
      progress_(fraction);
      next_ = fraction + 0.01;
    }
  }
  void Done() {
    if (progress_) progress_(1.0);
  }

 private:
  const ProgressFn& progress_;
  double total_;
  std::atomic<int64_t> done_{0};
  double next_ = 0;  // touched by thread 0 only
};

// The cost of a row: the keys of its selected blocks, at most position + 1 (an upper bound orders the units).
inline int64_t RowKeys(const Config& config, const int32_t* slots, const QueryPlace& place) {
  int64_t blocks = 0;
  while (blocks < config.top_k && slots[blocks] != -1) ++blocks;
  return std::min(blocks * config.block_size, place.position + 1);
}

// fp32 mode: `view` rounded to float (nearest even), rows padded with +0 to `padded_dim` (>= view.dim).
inline PaddedRows<float> RoundedPadded(const TensorView& view, int64_t padded_dim) {
  PaddedRows<float> rows;
  rows.dim = view.dim;
  rows.padded_dim = padded_dim;
  rows.head_stride = padded_dim;
  rows.row_stride = view.heads * padded_dim;
  rows.storage.assign(size_t(view.rows * rows.row_stride), 0.0f);
  float* packed = rows.storage.data();
#pragma omp parallel for schedule(static) if (view.rows * rows.row_stride >= (int64_t(1) << 16))
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      float* to = packed + row * rows.row_stride + head * rows.head_stride;
      for (int64_t d = 0; d < view.dim; ++d) to[d] = float(view.At(row, head, d));
    }
  }
  rows.data = packed;
  return rows;
}

// `view` [rows, heads, 1] as a packed [rows * heads] array of T (rounded to nearest for float).
template <typename T>
std::vector<T> Column(const TensorView& view) {
  std::vector<T> values(size_t(view.rows * view.heads));
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) values[row * view.heads + head] = T(view.At(row, head, 0));
  }
  return values;
}

inline std::string Element(const char* name, int64_t row, int64_t head, int64_t d) {
  return std::string(name) + "[" + std::to_string(row) + ", " + std::to_string(head) + ", " + std::to_string(d) + "]";
}

// fp32 mode narrows f64 inputs: a value beyond the fp32 range is refused, naming the tensor and element.
inline Status CheckFp32Range(const char* name, const TensorView& view) {
  if (view.data == nullptr || view.dtype != DType::kF64) return Status::Ok();  // other dtypes fit in fp32
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      for (int64_t d = 0; d < view.dim; ++d) {
        if (std::abs(view.At(row, head, d)) > double(std::numeric_limits<float>::max())) {
          return InvalidArgument(Element(name, row, head, d) + " = " + std::to_string(view.At(row, head, d)) +
                                 ": beyond the fp32 range, so precision fp32 cannot hold it");
        }
      }
    }
  }
  return Status::Ok();
}

// fp32 mode: every element of `values` [rows, heads, dim] (nullptr: none) is finite, else InvalidArgument naming
// the first.
inline Status RequireFiniteFp32(const char* name, const double* values, int64_t rows, int64_t heads, int64_t dim) {
  if (values == nullptr) return Status::Ok();
  for (int64_t i = 0; i < rows * heads * dim; ++i) {
    if (!std::isfinite(values[i])) {
      return InvalidArgument(Element(name, i / (heads * dim), i / dim % heads, i % dim) + " = " +
                             std::to_string(values[i]) +
                             " is not finite: the scores or gradients overflow fp32 (precision exact computes them)");
    }
  }
  return Status::Ok();
}

}  // namespace msa::simd::training_internal
#endif  // MSA_SIMD_TRAINING_SHARED_

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {
namespace {

using namespace training_internal;

// Every parallel loop below has a body of one call to a HWY_NOINLINE function (simd/exact.cc says why).

// Per-thread scratch of every unit. T: the arithmetic (double or float); TK: the rows of k, v and index_k.
template <typename T, typename TK>
struct Scratch {
  std::vector<int64_t> key_rows, row_ids;
  std::vector<std::pair<int64_t, int64_t>> contributors;  // (t, r)
  std::vector<const TK*> keys, values, index_keys, group_keys;
  std::vector<const T*> queries, upstream, index_queries, weights;
  std::vector<T*> sums;
  std::vector<T> scores, probs, dps, grads, transposed, acc, out, m, l, log_l, row_lse;
  std::vector<T> x, rho, log_rho, pbar, log_pbar, g;
};

// The forward of `heads` rows over n keys (SPEC sections 3, 4), from their scores s [heads, stride]:
// m = max_j s_j, p_j = exp(s_j - m) into p [heads, stride], l = sum_j p_j; lse[h] = m + log(l) for h < heads.
// With `values` (v rows [n]), also out[h] = (sum_j p_j v_j) / l into out [heads, width], width the padded Dv (the
// padding of the value rows gives +0 there).
template <typename T, typename TK>
void Forward(Scratch<T, TK>& s, size_t heads, size_t n, size_t stride, const TK* const* values, size_t width, T* lse) {
  s.m.resize(ScratchLength(int64_t(heads)));
  s.l.assign(ScratchLength(int64_t(heads)), T(1));
  s.log_l.resize(ScratchLength(int64_t(heads)));
  s.weights.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    T* p = s.probs.data() + h * stride;
    s.m[h] = MaxOf(s.scores.data() + h * stride, n);
    ExpMinus(s.scores.data() + h * stride, s.m[h], n, p);
    s.l[h] = SumOf(p, n);
    s.weights[h] = p;
  }
  if (values != nullptr) {
    s.acc.assign(heads * width, T(0));
    s.sums.resize(heads);
    for (size_t h = 0; h < heads; ++h) s.sums[h] = s.acc.data() + h * width;
    AddWeightedRows(s.weights.data(), heads, values, n, width, s.sums.data());
    s.out.assign(heads * width, T(0));
    for (size_t h = 0; h < heads; ++h) {
      for (size_t c = 0; c < width; ++c) s.out[h * width + c] = s.sums[h][c] / s.l[h];
    }
  }
  LogOf(s.l.data(), heads, s.log_l.data());
  for (size_t h = 0; h < heads; ++h) lse[h] = s.m[h] + s.log_l[h];
}

// ---- the main branch's backward ----

// What every unit of the backward reads and writes. q: [total_q, Hq, Dp]; k: [total_k, Hkv, Dp];
// v: [total_k, Hkv, Dvp]; dout: [total_q, Hq, Dvp].
template <typename T, typename TK>
struct BackwardContext {
  const Config& config;
  const SelectionView& selection;
  const AttentionGradients& outputs;
  const PaddedRows<T>& q;
  const PaddedRows<TK>& k;
  const PaddedRows<TK>& v;
  const PaddedRows<T>& dout;
  const std::vector<T>& dlse;  // [total_q, Hq], empty without dlse
  const std::vector<QueryPlace>& places;
  const KeyBlocks& blocks;
  std::vector<T>& lse;    // [total_q, Hq]: the forward's, written by the row units
  std::vector<T>& delta;  // [total_q, Hq]: Delta = dot(dout, out), written by the row units
  int64_t total_q;
  WorkProgress* progress;
};

// dS of `rows` rows against n keys, from their scores s and dP [rows, stride]: P_j = exp(s_j - lse) into probs,
// dS_j = P_j * (dP_j - Delta) (+ dlse) into grads; row_ids[i] = t * Hq + h of row i.
template <typename T, typename TK>
void ScoreGradientRows(const BackwardContext<T, TK>& c, Scratch<T, TK>& s, const int64_t* row_ids, size_t rows,
                       size_t n, size_t stride) {
  const bool has_dlse = !c.dlse.empty();
  for (size_t i = 0; i < rows; ++i) {
    const int64_t row = row_ids[i];
    T* p = s.probs.data() + i * stride;
    ExpMinus(s.scores.data() + i * stride, c.lse[row], n, p);
    ScoreGradients(p, s.dps.data() + i * stride, c.delta[row], has_dlse, has_dlse ? c.dlse[row] : T(0), n,
                   s.grads.data() + i * stride);
  }
}

template <typename T, typename TK>
HWY_NOINLINE void BackwardRows(const BackwardContext<T, TK>& c, const RowUnit& unit, Scratch<T, TK>& s) {
  const Config& config = c.config;
  const int64_t hq = config.num_q_heads, d = config.head_dim;
  const size_t heads = size_t(unit.heads), dp = size_t(c.q.padded_dim), dvp = size_t(c.v.padded_dim);
  const T scale = T(config.SoftmaxScale());
  KeySet(config, c.selection.topk_indices + (unit.r * c.total_q + unit.t) * config.top_k, c.places[unit.t],
         &s.key_rows);
  const size_t n = s.key_rows.size(), stride = ScratchLength(int64_t(n));
  s.keys.resize(n);
  s.values.resize(n);
  for (size_t j = 0; j < n; ++j) {
    s.keys[j] = c.k.Row(s.key_rows[j], unit.r);
    s.values[j] = c.v.Row(s.key_rows[j], unit.r);
  }
  s.queries.resize(heads);
  s.upstream.resize(heads);
  std::vector<int64_t>& row_ids = s.row_ids;  // t * Hq + h
  row_ids.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    row_ids[h] = unit.t * hq + unit.h0 + int64_t(h);
    s.queries[h] = c.q.Row(unit.t, unit.h0 + int64_t(h));
    s.upstream[h] = c.dout.Row(unit.t, unit.h0 + int64_t(h));
  }

  // The forward: s_j = dot(q, k_j) * scale, lse and out; Delta = dot(dout, out).
  s.scores.resize(heads * stride);
  s.probs.resize(heads * stride);
  Dots(s.queries.data(), heads, s.keys.data(), n, dp, scale, s.scores.data(), stride);
  s.row_lse.resize(heads);
  Forward(s, heads, n, stride, s.values.data(), dvp, s.row_lse.data());
  for (size_t h = 0; h < heads; ++h) {
    c.lse[row_ids[h]] = s.row_lse[h];
    c.delta[row_ids[h]] = RowDot(s.upstream[h], s.out.data() + h * dvp, dvp);  // padding: +0 * +0 adds +0
  }

  // dP_j = dot(dout, v_j), P_j and dS_j; dq = scale * (sum_j dS_j k_j), j ascending.
  s.dps.resize(heads * stride);
  s.grads.resize(heads * stride);
  Dots(s.upstream.data(), heads, s.values.data(), n, dvp, T(1), s.dps.data(), stride);
  ScoreGradientRows(c, s, row_ids.data(), heads, n, stride);
  s.acc.assign(heads * dp, T(0));
  s.weights.resize(heads);
  s.sums.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    s.weights[h] = s.grads.data() + h * stride;
    s.sums[h] = s.acc.data() + h * dp;
  }
  AddWeightedRows(s.weights.data(), heads, s.keys.data(), n, dp, s.sums.data());
  for (size_t h = 0; h < heads; ++h) {
    double* dq = c.outputs.dq + row_ids[h] * d;
    for (int64_t e = 0; e < d; ++e) dq[e] = double(scale * s.sums[h][e]);
  }
  c.progress->Finished(unit.cost);
}

// Transposes the [rows, stride] weights of `from` into s.transposed [keys, ScratchLength(kRowChunk)], +0 where
// key j of the unit is past the position of contributor row i (query row_queries[i]), and points s.weights at it.
template <typename T, typename TK>
void TransposeVisible(Scratch<T, TK>& s, const T* from, size_t rows, size_t stride, const KeyBlocks::Block& block,
                      const KeyUnit& unit, const std::vector<QueryPlace>& places, const int64_t* row_queries) {
  const size_t keys = size_t(unit.key_end - unit.key_begin), row_stride = ScratchLength(kRowChunk);
  s.transposed.resize(keys * row_stride);
  s.weights.resize(keys);
  for (size_t j = 0; j < keys; ++j) {
    T* to = s.transposed.data() + j * row_stride;
    const int64_t key = unit.key_begin + int64_t(j);
    for (size_t i = 0; i < rows; ++i) to[i] = Visible(block, key, places[row_queries[i]]) ? from[i * stride + j] : T(0);
    s.weights[j] = to;
  }
}

template <typename T, typename TK>
HWY_NOINLINE void BackwardKeys(const BackwardContext<T, TK>& c, const KeyUnit& unit, Scratch<T, TK>& s,
                               std::vector<T>& dk_acc, std::vector<T>& dv_acc) {
  const Config& config = c.config;
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, group = config.group_size();
  const int64_t d = config.head_dim, dv = config.value_dim, r = unit.r;
  const size_t dp = size_t(c.q.padded_dim), dvp = size_t(c.v.padded_dim);
  const size_t nk = size_t(unit.key_end - unit.key_begin), stride = ScratchLength(int64_t(nk));
  const T scale = T(config.SoftmaxScale());
  const KeyBlocks::Block& block = c.blocks[unit.block];
  s.keys.resize(nk);
  s.values.resize(nk);
  for (size_t j = 0; j < nk; ++j) {
    s.keys[j] = c.k.Row(unit.key_begin + int64_t(j), r);
    s.values[j] = c.v.Row(unit.key_begin + int64_t(j), r);
  }
  dk_acc.assign(nk * dp, T(0));
  dv_acc.assign(nk * dvp, T(0));
  std::vector<T*> dk_sums(nk), dv_sums(nk);
  for (size_t j = 0; j < nk; ++j) {
    dk_sums[j] = dk_acc.data() + j * dp;
    dv_sums[j] = dv_acc.data() + j * dvp;
  }
  // The contributor rows (t, h): t ascending, then h ascending.
  const std::vector<int64_t>& queries = c.blocks.Contributors(unit.block, r);
  const int64_t total_rows = int64_t(queries.size()) * group;
  s.scores.resize(kRowChunk * stride);
  s.probs.resize(kRowChunk * stride);
  s.dps.resize(kRowChunk * stride);
  s.grads.resize(kRowChunk * stride);
  s.queries.resize(kRowChunk);
  s.upstream.resize(kRowChunk);
  int64_t row_ids[kRowChunk], row_queries[kRowChunk];
  for (int64_t row0 = 0; row0 < total_rows; row0 += kRowChunk) {
    const size_t rows = size_t(std::min(kRowChunk, total_rows - row0));
    for (size_t i = 0; i < rows; ++i) {
      const int64_t t = queries[(row0 + int64_t(i)) / group], h = r * group + (row0 + int64_t(i)) % group;
      row_queries[i] = t;
      row_ids[i] = t * hq + h;
      s.queries[i] = c.q.Row(t, h);
      s.upstream[i] = c.dout.Row(t, h);
    }
    Dots(s.queries.data(), rows, s.keys.data(), nk, dp, scale, s.scores.data(), stride);
    Dots(s.upstream.data(), rows, s.values.data(), nk, dvp, T(1), s.dps.data(), stride);
    ScoreGradientRows(c, s, row_ids, rows, nk, stride);
    // Per key, over the rows in order: dk += dS * q, dv += P * dout.
    TransposeVisible(s, s.grads.data(), rows, stride, block, unit, c.places, row_queries);
    AddWeightedRows(s.weights.data(), nk, s.queries.data(), rows, dp, dk_sums.data());
    TransposeVisible(s, s.probs.data(), rows, stride, block, unit, c.places, row_queries);
    AddWeightedRows(s.weights.data(), nk, s.upstream.data(), rows, dvp, dv_sums.data());
  }
  for (size_t j = 0; j < nk; ++j) {
    const int64_t key_row = (unit.key_begin + int64_t(j)) * hkv + r;
    for (int64_t e = 0; e < d; ++e) c.outputs.dk[key_row * d + e] = double(scale * dk_sums[j][e]);
    for (int64_t e = 0; e < dv; ++e) c.outputs.dv[key_row * dv + e] = double(dv_sums[j][e]);
  }
  c.progress->Finished(unit.cost);
}

// The row units, then (after the first loop's barrier: every lse and Delta written) the key units.
template <typename T, typename TK>
HWY_NOINLINE void RunBackwardUnits(const BackwardContext<T, TK>& context, const std::vector<RowUnit>& row_units,
                                   const std::vector<KeyUnit>& key_units) {
#pragma omp parallel
  {
    Scratch<T, TK> scratch;
    std::vector<T> dk_acc, dv_acc;
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < int64_t(row_units.size()); ++u) BackwardRows(context, row_units[u], scratch);
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < int64_t(key_units.size()); ++u) {
      BackwardKeys(context, key_units[u], scratch, dk_acc, dv_acc);
    }
  }
}

// Key units: every (block, chunk of up to kKeyChunk keys), including blocks nobody selected (their sums are +0), for
// each of `groups` groups (per_group: the backward) or for all of them at once (r = -1: the KL). The cost counts
// `rows_per_query` rows per contributing query.
inline std::vector<KeyUnit> MakeKeyUnits(const KeyBlocks& blocks, int64_t groups, bool per_group,
                                         int64_t rows_per_query) {
  std::vector<KeyUnit> units;
  for (int64_t b = 0; b < blocks.size(); ++b) {
    for (int64_t key = blocks[b].key_begin; key < blocks[b].key_end; key += kKeyChunk) {
      const int64_t end = std::min(key + kKeyChunk, blocks[b].key_end);
      if (per_group) {
        for (int64_t r = 0; r < groups; ++r) {
          units.push_back({b, r, key, end, int64_t(blocks.Contributors(b, r).size()) * rows_per_query * (end - key)});
        }
      } else {
        int64_t rows = 0;
        for (int64_t r = 0; r < groups; ++r) rows += int64_t(blocks.Contributors(b, r).size());
        units.push_back({b, -1, key, end, rows * rows_per_query * (end - key)});
      }
    }
  }
  LargestFirst(units);
  return units;
}

template <typename T, typename TK>
Status BackwardWith(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                    const AttentionGradients& outputs, const ProgressFn& progress, const PaddedRows<T>& q,
                    const PaddedRows<TK>& k, const PaddedRows<TK>& v, const PaddedRows<T>& dout,
                    const std::vector<T>& dlse) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), hq = config.num_q_heads, group = config.group_size();
  const std::vector<QueryPlace> places = reference::PlaceQueries(batch);
  const KeyBlocks blocks(config, batch, selection, places);
  std::vector<RowUnit> row_units;
  double total_work = 0;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < config.num_kv_heads; ++r) {
      const int64_t keys = RowKeys(config, selection.topk_indices + (r * total_q + t) * config.top_k, places[t]);
      for (int64_t h0 = 0; h0 < group; h0 += kHeadChunk) {
        const int64_t heads = std::min(kHeadChunk, group - h0);
        row_units.push_back({t, r, r * group + h0, heads, keys * heads});
        total_work += double(keys * heads);
      }
    }
  }
  LargestFirst(row_units);
  // Without query rows dk and dv may be absent (msa.h): then nothing is written.
  const std::vector<KeyUnit> key_units = outputs.dk != nullptr && outputs.dv != nullptr
                                             ? MakeKeyUnits(blocks, config.num_kv_heads, true, group)
                                             : std::vector<KeyUnit>();
  for (const KeyUnit& unit : key_units) total_work += double(unit.cost);
  std::vector<T> lse(size_t(total_q * hq)), delta(size_t(total_q * hq));
  WorkProgress work(progress, total_work);
  const BackwardContext<T, TK> context{config, selection, outputs, q,   k,     v,       dout,
                                       dlse,   places,    blocks,  lse, delta, total_q, &work};
  RunBackwardUnits(context, row_units, key_units);
  work.Done();
  return Status::Ok();
}

// ---- the indexer's KL distillation ----

// What every unit of the KL reads and writes. q: [total_q, Hq, Dp]; k: [total_k, Hkv, Dp];
// index_q: [total_q, Hidx, Dip]; index_k: [total_k, 1, Dip].
template <typename T, typename TK>
struct KlContext {
  const Config& config;
  const SelectionView& selection;
  const IndexerKlOutputs& outputs;
  const PaddedRows<T>& q;
  const PaddedRows<TK>& k;
  const PaddedRows<T>& index_q;
  const PaddedRows<TK>& index_k;
  const std::vector<QueryPlace>& places;
  const KeyBlocks& blocks;
  std::vector<T>& lse;     // [total_q, Hq]: the teacher's (the main branch's forward), written by the row units
  std::vector<T>& ilse;    // [total_q, Hidx]: the student's, written by the row units
  std::vector<T>& row_kl;  // [total_q, Hidx]: each row's sum of KL terms
  int64_t total_q;
  T rows;  // N = Hidx * max(total_q, 1)
  WorkProgress* progress;
};

// The scores s_hj = dot(q[t, h], k_j) * scale [G, stride] of the heads of group r of query t over the k rows
// `keys` [n] (into s.scores; s.queries points at the heads' rows).
template <typename T, typename TK>
void TeacherScores(const KlContext<T, TK>& c, Scratch<T, TK>& s, int64_t t, int64_t r, const TK* const* keys, size_t n,
                   size_t stride) {
  const int64_t group = c.config.group_size();
  s.queries.resize(size_t(group));
  for (int64_t h = 0; h < group; ++h) s.queries[h] = c.q.Row(t, r * group + h);
  s.scores.resize(size_t(group) * stride);
  s.probs.resize(size_t(group) * stride);
  Dots(s.queries.data(), size_t(group), keys, n, size_t(c.q.padded_dim), T(c.config.SoftmaxScale()), s.scores.data(),
       stride);
}

// The teacher pbar [n] from those scores and the heads' lse: P_hj = exp(s_hj - lse_h), pbar_j = (sum_h P_hj) / G.
template <typename T, typename TK>
void TeacherMean(const KlContext<T, TK>& c, Scratch<T, TK>& s, int64_t t, int64_t r, size_t n, size_t stride, T* pbar) {
  const int64_t group = c.config.group_size(), hq = c.config.num_q_heads;
  s.weights.resize(size_t(group));
  for (int64_t h = 0; h < group; ++h) {
    s.weights[h] = s.probs.data() + h * stride;
    ExpMinus(s.scores.data() + h * stride, c.lse[t * hq + r * group + h], n, s.probs.data() + h * stride);
  }
  GroupMean(s.weights.data(), size_t(group), n, pbar);
}

template <typename T, typename TK>
HWY_NOINLINE void KlRows(const KlContext<T, TK>& c, const RowUnit& unit, Scratch<T, TK>& s) {
  const Config& config = c.config;
  const int64_t hq = config.num_q_heads, hidx = config.num_kv_heads, di = config.index_head_dim;
  const int64_t group = config.group_size(), t = unit.t, r = unit.r;
  const size_t dip = size_t(c.index_q.padded_dim);
  const T index_scale = T(config.IndexScale());
  KeySet(config, c.selection.topk_indices + (r * c.total_q + t) * config.top_k, c.places[t], &s.key_rows);
  const size_t n = s.key_rows.size(), stride = ScratchLength(int64_t(n));
  s.keys.resize(n);
  s.index_keys.resize(n);
  for (size_t j = 0; j < n; ++j) {
    s.keys[j] = c.k.Row(s.key_rows[j], r);
    s.index_keys[j] = c.index_k.Row(s.key_rows[j], 0);
  }

  // The teacher: the forward lse of each head of the group, then pbar.
  TeacherScores(c, s, t, r, s.keys.data(), n, stride);
  Forward<T, TK>(s, size_t(group), n, stride, nullptr, 0, c.lse.data() + t * hq + r * group);
  s.pbar.resize(stride);
  TeacherMean(c, s, t, r, n, stride, s.pbar.data());

  // The student: x_j = dot(index_q, index_k_j) * index_scale, ilse = logsumexp_j x_j, log rho_j = x_j - ilse.
  s.x.resize(stride);
  s.rho.resize(stride);
  s.log_rho.resize(stride);
  s.log_pbar.resize(stride);
  s.g.resize(stride);
  const T* index_query = c.index_q.Row(t, r);
  Dots(&index_query, 1, s.index_keys.data(), n, dip, index_scale, s.x.data(), stride);
  const T m = MaxOf(s.x.data(), n);
  ExpMinus(s.x.data(), m, n, s.rho.data());
  T l[kFloatPad] = {T(1)};  // [0]: the sum, then its log; the other lanes are only read
  l[0] = SumOf(s.rho.data(), n);
  LogOf(l, 1, l);
  const T ilse = m + l[0];
  c.ilse[t * hidx + r] = ilse;
  Minus(s.x.data(), ilse, n, s.log_rho.data());

  // KL terms pbar_j * (log pbar_j - log rho_j), j ascending, skipping pbar_j = 0; g_j = (rho_j - pbar_j) / N;
  // dqi = index_scale * (sum_j g_j index_k_j).
  ExpOf(s.log_rho.data(), n, s.rho.data());
  LogOf(s.pbar.data(), n, s.log_pbar.data());
  T kl = 0;
  for (size_t j = 0; j < n; ++j) {
    if (s.pbar[j] != T(0)) kl += s.pbar[j] * (s.log_pbar[j] - s.log_rho[j]);
  }
  c.row_kl[t * hidx + r] = kl;
  KlGradients(s.rho.data(), s.pbar.data(), c.rows, n, s.g.data());
  s.acc.assign(dip, T(0));
  const T* weights = s.g.data();
  T* sum = s.acc.data();
  AddWeightedRows(&weights, 1, s.index_keys.data(), n, dip, &sum);
  double* dqi = c.outputs.dqi + (t * hidx + r) * di;
  for (int64_t e = 0; e < di; ++e) dqi[e] = double(index_scale * sum[e]);
  c.progress->Finished(unit.cost);
}

template <typename T, typename TK>
HWY_NOINLINE void KlKeys(const KlContext<T, TK>& c, const KeyUnit& unit, Scratch<T, TK>& s, std::vector<T>& dki_acc,
                         std::vector<T>& grads) {
  const Config& config = c.config;
  const int64_t hidx = config.num_kv_heads, di = config.index_head_dim;
  const size_t dip = size_t(c.index_q.padded_dim);
  const size_t nk = size_t(unit.key_end - unit.key_begin), stride = ScratchLength(int64_t(nk));
  const T index_scale = T(config.IndexScale());
  const KeyBlocks::Block& block = c.blocks[unit.block];
  s.index_keys.resize(nk);
  s.group_keys.resize(hidx * nk);  // [Hidx, nk]: the k rows of each group
  for (size_t j = 0; j < nk; ++j) {
    s.index_keys[j] = c.index_k.Row(unit.key_begin + int64_t(j), 0);
    for (int64_t r = 0; r < hidx; ++r) s.group_keys[r * nk + j] = c.k.Row(unit.key_begin + int64_t(j), r);
  }
  dki_acc.assign(nk * dip, T(0));
  std::vector<T*> dki_sums(nk);
  for (size_t j = 0; j < nk; ++j) dki_sums[j] = dki_acc.data() + j * dip;
  // The contributor rows (t, r): t ascending, then r ascending.
  s.contributors.clear();
  for (int64_t r = 0; r < hidx; ++r) {
    for (int64_t t : c.blocks.Contributors(unit.block, r)) s.contributors.push_back({t, r});
  }
  std::sort(s.contributors.begin(), s.contributors.end());
  const int64_t total_rows = int64_t(s.contributors.size());
  s.x.resize(kRowChunk * stride);
  s.pbar.resize(stride);
  grads.resize(kRowChunk * stride);
  s.index_queries.resize(kRowChunk);
  int64_t row_queries[kRowChunk];
  for (int64_t row0 = 0; row0 < total_rows; row0 += kRowChunk) {
    const size_t rows = size_t(std::min(kRowChunk, total_rows - row0));
    for (size_t i = 0; i < rows; ++i) {
      row_queries[i] = s.contributors[row0 + int64_t(i)].first;
      s.index_queries[i] = c.index_q.Row(row_queries[i], s.contributors[row0 + int64_t(i)].second);
    }
    Dots(s.index_queries.data(), rows, s.index_keys.data(), nk, dip, index_scale, s.x.data(), stride);
    for (size_t i = 0; i < rows; ++i) {
      const auto [t, r] = s.contributors[row0 + int64_t(i)];
      T* rho = s.x.data() + i * stride;
      ExpMinus(rho, c.ilse[t * hidx + r], nk, rho);  // rho_j = exp(x_j - ilse)
      TeacherScores(c, s, t, r, s.group_keys.data() + r * nk, nk, stride);
      TeacherMean(c, s, t, r, nk, stride, s.pbar.data());
      KlGradients(rho, s.pbar.data(), c.rows, nk, grads.data() + i * stride);
    }
    // Per key, over the rows in order: dki += g * index_q.
    TransposeVisible(s, grads.data(), rows, stride, block, unit, c.places, row_queries);
    AddWeightedRows(s.weights.data(), nk, s.index_queries.data(), rows, dip, dki_sums.data());
  }
  for (size_t j = 0; j < nk; ++j) {
    double* dki = c.outputs.dki + (unit.key_begin + int64_t(j)) * di;
    for (int64_t e = 0; e < di; ++e) dki[e] = double(index_scale * dki_sums[j][e]);
  }
  c.progress->Finished(unit.cost);
}

// The row units, then (after the first loop's barrier: every lse and ilse written) the key units.
template <typename T, typename TK>
HWY_NOINLINE void RunKlUnits(const KlContext<T, TK>& context, const std::vector<RowUnit>& row_units,
                             const std::vector<KeyUnit>& key_units) {
#pragma omp parallel
  {
    Scratch<T, TK> scratch;
    std::vector<T> dki_acc, grads;
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < int64_t(row_units.size()); ++u) KlRows(context, row_units[u], scratch);
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < int64_t(key_units.size()); ++u) KlKeys(context, key_units[u], scratch, dki_acc, grads);
  }
}

template <typename T, typename TK>
Status IndexerKlWith(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                     const IndexerKlOutputs& outputs, const ProgressFn& progress, const PaddedRows<T>& q,
                     const PaddedRows<TK>& k, const PaddedRows<T>& index_q, const PaddedRows<TK>& index_k) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), hq = config.num_q_heads, hidx = config.num_kv_heads;
  const int64_t group = config.group_size();
  const std::vector<QueryPlace> places = reference::PlaceQueries(batch);
  const KeyBlocks blocks(config, batch, selection, places);
  std::vector<RowUnit> row_units;
  double total_work = 0;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < hidx; ++r) {
      const int64_t keys = RowKeys(config, selection.topk_indices + (r * total_q + t) * config.top_k, places[t]);
      row_units.push_back({t, r, r * group, group, keys * (group + 1)});
      total_work += double(keys * (group + 1));
    }
  }
  LargestFirst(row_units);
  // Without query rows dki may be absent (msa.h): then nothing is written.
  const std::vector<KeyUnit> key_units =
      outputs.dki != nullptr ? MakeKeyUnits(blocks, hidx, false, group + 1) : std::vector<KeyUnit>();
  for (const KeyUnit& unit : key_units) total_work += double(unit.cost);
  std::vector<T> lse(size_t(total_q * hq)), ilse(size_t(total_q * hidx)), row_kl(size_t(total_q * hidx));
  WorkProgress work(progress, total_work);
  const KlContext<T, TK> context{
      config, selection, outputs, q,    k,      index_q, index_k,
      places, blocks,    lse,     ilse, row_kl, total_q, T(double(hidx * std::max<int64_t>(total_q, 1))),
      &work};
  RunKlUnits(context, row_units, key_units);

  T total = 0;
  for (T kl : row_kl) total += kl;  // ascending t, then r
  *outputs.kl_loss = double(total / context.rows);
  if (outputs.teacher_lse != nullptr) std::copy(lse.begin(), lse.end(), outputs.teacher_lse);
  if (outputs.indexer_lse != nullptr) {
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t r = 0; r < hidx; ++r) outputs.indexer_lse[r * total_q + t] = double(ilse[t * hidx + r]);
    }
  }
  work.Done();
  return Status::Ok();
}

// ---- entry points per target ----

Status ExactBackwardImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                         const GradientInputs& gradients, const AttentionGradients& outputs,
                         const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const PaddedRows<double> q = WidenPadded<double>(inputs.q), dout = WidenPadded<double>(gradients.dout);
  const std::vector<double> dlse =
      gradients.dlse.data != nullptr ? Column<double>(gradients.dlse) : std::vector<double>();
  if (FitsFloat(inputs.k.dtype) && FitsFloat(inputs.v.dtype)) {
    return BackwardWith<double, float>(config, inputs, selection, outputs, progress, q, WidenPadded<float>(inputs.k),
                                       WidenPadded<float>(inputs.v), dout, dlse);
  }
  return BackwardWith<double, double>(config, inputs, selection, outputs, progress, q, WidenPadded<double>(inputs.k),
                                      WidenPadded<double>(inputs.v), dout, dlse);
}

Status ExactIndexerKlImpl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                          const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const PaddedRows<double> q = WidenPadded<double>(inputs.q), index_q = WidenPadded<double>(index_inputs.index_q);
  if (FitsFloat(inputs.k.dtype) && FitsFloat(index_inputs.index_k.dtype)) {
    return IndexerKlWith<double, float>(config, inputs, selection, outputs, progress, q, WidenPadded<float>(inputs.k),
                                        index_q, WidenPadded<float>(index_inputs.index_k));
  }
  return IndexerKlWith<double, double>(config, inputs, selection, outputs, progress, q, WidenPadded<double>(inputs.k),
                                       index_q, WidenPadded<double>(index_inputs.index_k));
}

// A view rounded to fp32 rows padded to whole vectors of every target.
PaddedRows<float> Fp32Rows(const TensorView& view) {
  return RoundedPadded(view, (view.dim + kFloatPad - 1) / kFloatPad * kFloatPad);
}

Status Fp32BackwardImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                        const GradientInputs& gradients, const AttentionGradients& outputs,
                        const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  for (const auto& [name, view] : {std::pair{"q", &inputs.q},
                                   {"k", &inputs.k},
                                   {"v", &inputs.v},
                                   {"dout", &gradients.dout},
                                   {"dlse", &gradients.dlse}}) {
    MSA_RETURN_IF_ERROR(CheckFp32Range(name, *view));
  }
  const std::vector<float> dlse = gradients.dlse.data != nullptr ? Column<float>(gradients.dlse) : std::vector<float>();
  MSA_RETURN_IF_ERROR(
      (BackwardWith<float, float>(config, inputs, selection, outputs, progress, Fp32Rows(inputs.q), Fp32Rows(inputs.k),
                                  Fp32Rows(inputs.v), Fp32Rows(gradients.dout), dlse)));
  const int64_t total_q = inputs.batch.total_q(), total_k = inputs.batch.total_k();
  MSA_RETURN_IF_ERROR(RequireFiniteFp32("dq", outputs.dq, total_q, config.num_q_heads, config.head_dim));
  MSA_RETURN_IF_ERROR(RequireFiniteFp32("dk", outputs.dk, total_k, config.num_kv_heads, config.head_dim));
  return RequireFiniteFp32("dv", outputs.dv, total_k, config.num_kv_heads, config.value_dim);
}

Status Fp32IndexerKlImpl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                         const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  for (const auto& [name, view] : {std::pair{"q", &inputs.q},
                                   {"k", &inputs.k},
                                   {"index_q", &index_inputs.index_q},
                                   {"index_k", &index_inputs.index_k}}) {
    MSA_RETURN_IF_ERROR(CheckFp32Range(name, *view));
  }
  MSA_RETURN_IF_ERROR(
      (IndexerKlWith<float, float>(config, inputs, selection, outputs, progress, Fp32Rows(inputs.q), Fp32Rows(inputs.k),
                                   Fp32Rows(index_inputs.index_q), Fp32Rows(index_inputs.index_k))));
  const int64_t total_q = inputs.batch.total_q(), total_k = inputs.batch.total_k();
  MSA_RETURN_IF_ERROR(RequireFiniteFp32("kl_loss", outputs.kl_loss, 1, 1, 1));
  MSA_RETURN_IF_ERROR(RequireFiniteFp32("dqi", outputs.dqi, total_q, config.num_kv_heads, config.index_head_dim));
  return RequireFiniteFp32("dki", outputs.dki, total_k, 1, config.index_head_dim);
}

}  // namespace
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace msa::simd {

HWY_EXPORT(ExactBackwardImpl);
HWY_EXPORT(ExactIndexerKlImpl);
HWY_EXPORT(Fp32BackwardImpl);
HWY_EXPORT(Fp32IndexerKlImpl);

Status ExactBackward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                     const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(ExactBackwardImpl)(config, inputs, selection, gradients, outputs, progress);
}

Status Fp32Backward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                    const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(Fp32BackwardImpl)(config, inputs, selection, gradients, outputs, progress);
}

Status ExactIndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                      const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(ExactIndexerKlImpl)(config, index_inputs, inputs, selection, outputs, progress);
}

Status Fp32IndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                     const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(Fp32IndexerKlImpl)(config, index_inputs, inputs, selection, outputs, progress);
}

}  // namespace msa::simd
#endif  // HWY_ONCE
