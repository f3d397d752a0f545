// Main branch (SPEC section 3) and dense causal GQA attention, in the canonical FP64 order (section 4).
#include <algorithm>
#include <limits>
#include <vector>

#include "reference/canonical.h"
#include "reference/reference.h"
#include "reference/row_loop.h"

namespace msa::reference {
namespace {

// A run of consecutive key positions [begin, end) of one sequence.
struct KeyRange {
  int64_t begin, end;
};

struct WidenedAttentionInputs {
  std::vector<double> q, k, v;  // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
};

// One (query, head) row: softmax over the keys of `ranges` (ascending, disjoint) of one sequence.
// m = max s_j; p_j = exp(s_j - m); l = sum p_j; out_d = (sum_j p_j v_jd) / l; lse = m + log(l),
// every sum in ascending key position.
// docs:begin attend-row
void AttendRow(const Config& config, const WidenedAttentionInputs& in, int64_t t, int64_t h, int64_t key_begin,
               const std::vector<KeyRange>& ranges, double* out, double* lse) {
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads;
  const int64_t d = config.head_dim, dv = config.value_dim, r = h / config.group_size();
  const double scale = config.SoftmaxScale();
  const double* query = &in.q[(t * hq + h) * d];

  std::vector<double> scores;  // [|S|] in ascending key position
  for (const KeyRange& range : ranges) {
    for (int64_t s = range.begin; s < range.end; ++s) {
      scores.push_back(CanonicalDot(query, &in.k[((key_begin + s) * hkv + r) * d], d) * scale);
    }
  }
  const double m = *std::max_element(scores.begin(), scores.end());
  double l = 0.0;
  std::vector<double> weighted_sum(dv, 0.0);  // sum_j p_j * v_j, per value dim
  int64_t j = 0;
  for (const KeyRange& range : ranges) {
    for (int64_t s = range.begin; s < range.end; ++s, ++j) {
      const double p = CanonicalExp(scores[j] - m);
      l += p;
      const double* value = &in.v[((key_begin + s) * hkv + r) * dv];
      double* acc = weighted_sum.data();
      for (int64_t c = 0; c < dv; ++c) acc[c] += p * value[c];
    }
  }
  for (int64_t c = 0; c < dv; ++c) out[c] = weighted_sum[c] / l;
  *lse = m + CanonicalLog(l);
}
// docs:end attend-row

WidenedAttentionInputs WidenAll(const AttentionInputs& inputs) {
  return {Widen(inputs.q), Widen(inputs.k), Widen(inputs.v)};
}

}  // namespace

Status AttendSelected(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                      const AttentionOutputs& outputs, const ProgressFn& progress) {
  const int64_t total_q = inputs.batch.total_q(), hq = config.num_q_heads, bk = config.block_size;
  const WidenedAttentionInputs widened = WidenAll(inputs);
  const std::vector<QueryPlace> places = PlaceQueries(inputs.batch);
  ForEachRow(total_q * hq, progress, [&](int64_t work) {
    const int64_t t = work / hq, h = work % hq, r = h / config.group_size();
    const QueryPlace& place = places[t];
    // docs:begin selected-key-ranges
    // The selected blocks as a set, visited in ascending block id = ascending key position.
    const int32_t* row = selection.topk_indices + (r * total_q + t) * config.top_k;
    std::vector<int32_t> blocks;
    for (int64_t slot = 0; slot < config.top_k && row[slot] != -1; ++slot) blocks.push_back(row[slot]);
    std::sort(blocks.begin(), blocks.end());
    std::vector<KeyRange> ranges;
    for (int32_t blk : blocks) {
      ranges.push_back({blk * bk, std::min<int64_t>((blk + 1) * bk, place.position + 1)});
    }
    // docs:end selected-key-ranges
    AttendRow(config, widened, t, h, place.key_begin, ranges, &outputs.out[(t * hq + h) * config.value_dim],
              &outputs.lse[t * hq + h]);
  });
  return Status::Ok();
}

Status DenseCausalAttention(const Config& config, const AttentionInputs& inputs, const AttentionOutputs& outputs,
                            const ProgressFn& progress) {
  const int64_t total_q = inputs.batch.total_q(), hq = config.num_q_heads;
  const WidenedAttentionInputs widened = WidenAll(inputs);
  const std::vector<QueryPlace> places = PlaceQueries(inputs.batch);
  ForEachRow(total_q * hq, progress, [&](int64_t work) {
    const int64_t t = work / hq, h = work % hq;
    const QueryPlace& place = places[t];
    AttendRow(config, widened, t, h, place.key_begin, {{0, place.position + 1}},
              &outputs.out[(t * hq + h) * config.value_dim], &outputs.lse[t * hq + h]);
  });
  return Status::Ok();
}

}  // namespace msa::reference
