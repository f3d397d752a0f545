// Training (SPEC section 8) in the canonical FP64 order: the main branch's backward and the indexer's KL
// distillation, on a given selection. Rows (t, h) run across threads for dq and dqi; the sums into dk, dv and dki
// run per key over its contributor list in ascending (query, head) order, built first (KV-outer): a sum is never
// split, so the bits do not depend on the thread count.
#include <algorithm>
#include <utility>
#include <vector>

#include "reference/attend_row.h"
#include "reference/canonical.h"
#include "reference/contributors.h"
#include "reference/reference.h"
#include "reference/row_loop.h"

namespace msa::reference {
namespace {

// The main branch's inputs and upstream gradients, widened, and the forward quantities every sum reuses.
struct BackwardState {
  WidenedAttentionInputs in;
  std::vector<double> dout;   // [total_q, Hq, Dv]
  std::vector<double> dlse;   // [total_q, Hq], empty without dlse
  std::vector<double> lse;    // [total_q, Hq], the forward's
  std::vector<double> delta;  // [total_q, Hq]: Delta = dot(dout[t, h], out[t, h])
};

// dS of query t, head h at key row s (SPEC section 8): s_j, P_j = exp(s_j - lse), dP_j = dot(dout, v_j),
// dS_j = P_j * (dP_j - Delta) or P_j * ((dP_j - Delta) + dlse); *p receives P_j. The same operations on the same
// values wherever it is evaluated, so the row pass and the key pass agree bit for bit.
// docs:begin backward-ds
double ScoreGradient(const Config& config, const BackwardState& state, int64_t t, int64_t h, int64_t s, double* p) {
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, d = config.head_dim, dv = config.value_dim;
  const int64_t r = h / config.group_size(), row = t * hq + h;
  const double score = CanonicalDot(&state.in.q[row * d], &state.in.k[(s * hkv + r) * d], d) * config.SoftmaxScale();
  *p = CanonicalExp(score - state.lse[row]);
  const double dp = CanonicalDot(&state.dout[row * dv], &state.in.v[(s * hkv + r) * dv], dv);
  const double centered = dp - state.delta[row];
  return *p * (state.dlse.empty() ? centered : centered + state.dlse[row]);
}
// docs:end backward-ds

// The forward of every (t, h) row (its lse and Delta), in place in `state`.
void Forward(const Config& config, const Batch& batch, const SelectionView& selection,
             const std::vector<QueryPlace>& places, BackwardState* state) {
  const int64_t total_q = batch.total_q(), hq = config.num_q_heads, dv = config.value_dim;
  state->lse.resize(total_q * hq);
  state->delta.resize(total_q * hq);
  ForEachRow(total_q * hq, {}, [&](int64_t row) {
    const int64_t t = row / hq, h = row % hq, r = h / config.group_size();
    const int32_t* ids = selection.topk_indices + (r * total_q + t) * config.top_k;
    std::vector<double> out(dv);
    AttendRow(config, state->in, t, h, places[t].key_begin, SelectedKeyRanges(config, ids, places[t].position),
              out.data(), &state->lse[row]);
    state->delta[row] = CanonicalDot(&state->dout[row * dv], out.data(), dv);
  });
}

}  // namespace

Status Backward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), total_k = batch.total_k();
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, d = config.head_dim, dv = config.value_dim;
  const int64_t group = config.group_size();
  const double scale = config.SoftmaxScale();
  const std::vector<QueryPlace> places = PlaceQueries(batch);
  BackwardState state;
  state.in = WidenAll(inputs);
  state.dout = Widen(gradients.dout);
  if (gradients.dlse.data != nullptr) state.dlse = Widen(gradients.dlse);
  Forward(config, batch, selection, places, &state);
  const ProgressFn rows_progress = [&](double f) {
    if (progress) progress(0.5 * f);
  };
  const ProgressFn keys_progress = [&](double f) {
    if (progress) progress(0.5 + 0.5 * f);
  };

  // docs:begin backward-dq
  // dq[t, h, :] = scale * (sum_j dS_j * k[j, r, :]), j ascending over the row's key set.
  ForEachRow(total_q * hq, rows_progress, [&](int64_t row) {
    const int64_t t = row / hq, h = row % hq, r = h / group;
    const int32_t* ids = selection.topk_indices + (r * total_q + t) * config.top_k;
    std::vector<double> sum(d, 0.0);
    for (const KeyRange& range : SelectedKeyRanges(config, ids, places[t].position)) {
      for (int64_t s = places[t].key_begin + range.begin; s < places[t].key_begin + range.end; ++s) {
        double p;
        const double ds = ScoreGradient(config, state, t, h, s, &p);
        const double* key = &state.in.k[(s * hkv + r) * d];
        for (int64_t c = 0; c < d; ++c) sum[c] += ds * key[c];
      }
    }
    for (int64_t c = 0; c < d; ++c) outputs.dq[row * d + c] = scale * sum[c];
  });
  // docs:end backward-dq

  // docs:begin backward-dk-dv
  // dk[s, r, :] = scale * (sum dS * q[t, h, :]) and dv[s, r, :] = sum P * dout[t, h, :] over the (t, h) whose key
  // set holds s, ascending t, then ascending h: one key row per task, its contributors in order.
  const Contributors contributors(config, batch, selection, places);
  ForEachRow(total_k * hkv, keys_progress, [&](int64_t key_row) {
    const int64_t s = key_row / hkv, r = key_row % hkv;
    std::vector<double> dk_sum(d, 0.0), dv_sum(dv, 0.0);
    for (int64_t t : contributors.Of(s, r)) {
      if (!contributors.KeyIsVisible(s, t)) continue;
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        double p;
        const double ds = ScoreGradient(config, state, t, h, s, &p);
        const double* query = &state.in.q[(t * hq + h) * d];
        const double* upstream = &state.dout[(t * hq + h) * dv];
        for (int64_t c = 0; c < d; ++c) dk_sum[c] += ds * query[c];
        for (int64_t c = 0; c < dv; ++c) dv_sum[c] += p * upstream[c];
      }
    }
    for (int64_t c = 0; c < d; ++c) outputs.dk[key_row * d + c] = scale * dk_sum[c];
    for (int64_t c = 0; c < dv; ++c) outputs.dv[key_row * dv + c] = dv_sum[c];
  });
  // docs:end backward-dk-dv
  return Status::Ok();
}

Status IndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                 const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress) {
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q(), total_k = batch.total_k();
  const int64_t hq = config.num_q_heads, hidx = config.num_kv_heads, d = config.head_dim, di = config.index_head_dim;
  const int64_t group = config.group_size();
  const double scale = config.SoftmaxScale(), index_scale = config.IndexScale();
  const double rows = double(hidx * std::max<int64_t>(total_q, 1));  // N
  const std::vector<QueryPlace> places = PlaceQueries(batch);
  const WidenedAttentionInputs in = WidenAll(inputs);
  const std::vector<double> index_q = Widen(index_inputs.index_q);  // [total_q, Hidx, Di]
  const std::vector<double> index_k = Widen(index_inputs.index_k);  // [total_k, Di]
  std::vector<double> lse(total_q * hq), ilse(total_q * hidx), row_kl(total_q * hidx);
  const ProgressFn rows_progress = [&](double f) {
    if (progress) progress(0.5 * f);
  };
  const ProgressFn keys_progress = [&](double f) {
    if (progress) progress(0.5 + 0.5 * f);
  };

  // The teacher's mean probability of key row s for query t, group r: (sum_h P[t, h, s], h ascending) / G, with
  // P = exp(s_hj - lse_h) from the forward's scores and lse.
  const auto teacher = [&](int64_t t, int64_t r, int64_t s) {
    double sum = 0.0;
    for (int64_t h = r * group; h < (r + 1) * group; ++h) {
      const double score = CanonicalDot(&in.q[(t * hq + h) * d], &in.k[(s * hidx + r) * d], d) * scale;
      sum += CanonicalExp(score - lse[t * hq + h]);
    }
    return sum / double(group);
  };
  const auto index_score = [&](int64_t t, int64_t r, int64_t s) {
    return CanonicalDot(&index_q[(t * hidx + r) * di], &index_k[s * di], di) * index_scale;
  };

  // docs:begin kl-rows
  // Per (t, r): the forward's lse of the group's heads, ilse = logsumexp of the index scores x over the key set,
  // g_j = (rho_j - pbar_j) / N with rho_j = exp(x_j - ilse), the row's KL terms, and dqi.
  ForEachRow(total_q * hidx, rows_progress, [&](int64_t work) {
    const int64_t t = work / hidx, r = work % hidx;
    const int32_t* ids = selection.topk_indices + (r * total_q + t) * config.top_k;
    const std::vector<KeyRange> ranges = SelectedKeyRanges(config, ids, places[t].position);
    std::vector<double> out(config.value_dim);
    for (int64_t h = r * group; h < (r + 1) * group; ++h) {
      AttendRow(config, in, t, h, places[t].key_begin, ranges, out.data(), &lse[t * hq + h]);
    }
    std::vector<int64_t> keys;  // the key set, ascending key rows
    for (const KeyRange& range : ranges) {
      for (int64_t s = range.begin; s < range.end; ++s) keys.push_back(places[t].key_begin + s);
    }
    std::vector<double> x(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) x[j] = index_score(t, r, keys[j]);
    const double row_ilse = CanonicalLogSumExp(x.data(), int64_t(x.size()));
    ilse[t * hidx + r] = row_ilse;
    double kl = 0.0;
    std::vector<double> sum(di, 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      const double pbar = teacher(t, r, keys[j]);
      const double log_rho = x[j] - row_ilse;
      if (pbar != 0.0) kl += pbar * (CanonicalLog(pbar) - log_rho);
      const double g = (CanonicalExp(log_rho) - pbar) / rows;
      for (int64_t c = 0; c < di; ++c) sum[c] += g * index_k[keys[j] * di + c];
    }
    row_kl[work] = kl;
    for (int64_t c = 0; c < di; ++c) outputs.dqi[work * di + c] = index_scale * sum[c];
  });
  // docs:end kl-rows
  double total = 0.0;
  for (double kl : row_kl) total += kl;  // ascending t, then r
  *outputs.kl_loss = total / rows;

  // docs:begin kl-dki
  // dki[s, :] = index_scale * (sum g[t, r, s] * index_q[t, r, :]) over the (t, r) whose key set holds s, ascending
  // t, then ascending r.
  const Contributors contributors(config, batch, selection, places);
  ForEachRow(total_k, keys_progress, [&](int64_t s) {
    std::vector<double> sum(di, 0.0);
    for (const auto& [t, r] : contributors.RowsOf(s, hidx)) {
      const double g = (CanonicalExp(index_score(t, r, s) - ilse[t * hidx + r]) - teacher(t, r, s)) / rows;
      for (int64_t c = 0; c < di; ++c) sum[c] += g * index_q[(t * hidx + r) * di + c];
    }
    for (int64_t c = 0; c < di; ++c) outputs.dki[s * di + c] = index_scale * sum[c];
  });
  // docs:end kl-dki
  if (outputs.teacher_lse != nullptr) std::copy(lse.begin(), lse.end(), outputs.teacher_lse);
  if (outputs.indexer_lse != nullptr) {
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t r = 0; r < hidx; ++r) outputs.indexer_lse[r * total_q + t] = ilse[t * hidx + r];
    }
  }
  return Status::Ok();
}

}  // namespace msa::reference
