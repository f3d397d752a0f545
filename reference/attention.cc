// Main branch (SPEC section 3) and dense causal GQA attention, in the canonical FP64 order (section 4).
#include <algorithm>
#include <limits>
#include <vector>

#include "reference/attend_row.h"
#include "reference/canonical.h"
#include "reference/reference.h"
#include "reference/row_loop.h"

namespace msa::reference {

// m = max s_j; p_j = exp(s_j - m); l = sum p_j; out_d = (sum_j p_j v_jd) / l; lse = m + log(l),
// every sum in ascending key position.
// docs:begin attend-row
void AttendRow(const Config& config, const WidenedAttentionInputs& in, int64_t t, int64_t h, int64_t key_begin,
               const std::vector<KeyRange>& ranges, double* out, double* lse, std::vector<double>* scores_out) {
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
  if (scores_out != nullptr) *scores_out = std::move(scores);
}
// docs:end attend-row

WidenedAttentionInputs WidenAll(const AttentionInputs& inputs) {
  return {Widen(inputs.q), Widen(inputs.k), Widen(inputs.v)};
}

// docs:begin selected-key-ranges
std::vector<KeyRange> SelectedKeyRanges(const Config& config, const int32_t* row, int64_t position) {
  // The selected blocks as a set, visited in ascending block id = ascending key position.
  std::vector<int32_t> blocks;
  for (int64_t slot = 0; slot < config.top_k && row[slot] != -1; ++slot) blocks.push_back(row[slot]);
  std::sort(blocks.begin(), blocks.end());
  std::vector<KeyRange> ranges;
  const int64_t bk = config.block_size;
  for (int32_t blk : blocks) ranges.push_back({blk * bk, std::min<int64_t>((blk + 1) * bk, position + 1)});
  return ranges;
}
// docs:end selected-key-ranges

Status AttendSelected(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                      const AttentionOutputs& outputs, const ProgressFn& progress) {
  const int64_t total_q = inputs.batch.total_q(), hq = config.num_q_heads;
  const WidenedAttentionInputs widened = WidenAll(inputs);
  const std::vector<QueryPlace> places = PlaceQueries(inputs.batch);
  ForEachRow(total_q * hq, progress, [&](int64_t work) {
    const int64_t t = work / hq, h = work % hq, r = h / config.group_size();
    const QueryPlace& place = places[t];
    const int32_t* row = selection.topk_indices + (r * total_q + t) * config.top_k;
    AttendRow(config, widened, t, h, place.key_begin, SelectedKeyRanges(config, row, place.position),
              &outputs.out[(t * hq + h) * config.value_dim], &outputs.lse[t * hq + h]);
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
