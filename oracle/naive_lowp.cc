#include "oracle/naive_lowp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/contributors.h"
#include "reference/reference.h"

namespace msa {

namespace {

// The naive evaluation with accumulator type A (double or float).
template <typename A>
class NaiveEvaluator {
 public:
  // Only the inputs of the parts asked for are rounded; Evaluate may then compute only those parts.
  NaiveEvaluator(const Problem& problem, Precision precision, ScaleOrder order, NaiveParts parts)
      : problem_(problem),
        config_(problem.config),
        precision_(precision),
        order_(order),
        parts_(parts),
        places_(reference::PlaceQueries(problem.batch())) {
    std::vector<std::pair<const SafetensorsTensor*, std::vector<double>*>> tensors;
    if (parts.index || parts.training) {
      tensors.insert(tensors.end(), {{&problem.index_q, &index_q_}, {&problem.index_k, &index_k_}});
    }
    if (parts.attention || parts.training) {
      tensors.insert(tensors.end(), {{&problem.q, &q_}, {&problem.k, &k_}, {&problem.v, &v_}});
    }
    if (parts.training) {
      dout_ = reference::Widen(ViewOf(*problem.dout));
      if (problem.dlse) dlse_ = reference::Widen(problem.gradient_inputs().dlse);
      for (std::vector<double>* values : {&dout_, &dlse_}) {
        for (double& value : *values) value = Round(value);
      }
    }
    for (auto [tensor, widened] : tensors) {
      *widened = reference::Widen(ViewOf(*tensor));
      // Each element is rounded on its own, so any split over threads gives the same values.
      double* values = widened->data();
      const int64_t size = int64_t(widened->size());
      // index_format e4m3: what msa::Select hands every backend (E4M3 values are exact in every precision).
      const bool e4m3 = config_.index_format == IndexFormat::kE4M3 && (widened == &index_q_ || widened == &index_k_);
#pragma omp parallel for schedule(static) if (size >= 65536)
      for (int64_t i = 0; i < size; ++i) values[i] = Round(e4m3 ? RoundToE4M3(values[i]) : values[i]);
    }
    // kPrescaledQuery: the queries carry their scale, rounded as a kernel's registers would hold them.
    if (order == ScaleOrder::kPrescaledQuery) {
      for (auto [values, scale] :
           {std::pair{&index_q_, config_.IndexScale()}, std::pair{&q_, config_.SoftmaxScale()}}) {
        for (double& value : *values) value = Round(double(A(value) * A(scale)));
      }
    }
  }

  // The block scores alone: the same values as Evaluate's, which do not depend on the selection.
  std::vector<double> BlockScores() const {
    const Config& c = config_;
    const int64_t total_q = problem_.batch().total_q(), max_blocks = MaxBlocks(c, problem_.batch());
    std::vector<double> block_scores(c.num_kv_heads * total_q * max_blocks, -std::numeric_limits<double>::infinity());
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t r = 0; r < c.num_kv_heads; ++r) {
        IndexRow(t, r, nullptr, &block_scores[(r * total_q + t) * max_blocks], nullptr);
      }
    }
    return block_scores;
  }

  NaiveOutputs Evaluate(const std::vector<int32_t>& selection) const {
    const Config& c = config_;
    const int64_t total_q = problem_.batch().total_q(), max_blocks = MaxBlocks(c, problem_.batch());
    NaiveOutputs result;
    if (parts_.index) {
      result.block_scores.assign(c.num_kv_heads * total_q * max_blocks, -std::numeric_limits<double>::infinity());
      result.index_lse.resize(c.num_kv_heads * total_q);
    }
    if (parts_.attention) {
      result.out.resize(total_q * c.num_q_heads * c.value_dim);
      result.lse.resize(total_q * c.num_q_heads);
    }
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t r = 0; r < c.num_kv_heads && parts_.index; ++r) {
        const int32_t* row = &selection[(r * total_q + t) * c.top_k];
        IndexRow(t, r, row, &result.block_scores[(r * total_q + t) * max_blocks], &result.index_lse[r * total_q + t]);
      }
      for (int64_t h = 0; h < c.num_q_heads && parts_.attention; ++h) {
        const int32_t* row = &selection[((h / c.group_size()) * total_q + t) * c.top_k];
        AttendRow(t, h, row, &result.out[(t * c.num_q_heads + h) * c.value_dim], &result.lse[t * c.num_q_heads + h]);
      }
    }
    if (parts_.training) Training(selection, &result);
    return result;
  }

 private:
  double Round(double value) const { return RoundToPrecision(value, precision_); }

  A Dot(const double* a, const double* b, int64_t n) const {
    A sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += A(a[i]) * A(b[i]);
    return sum;
  }

  // kScaleAfterDot: R(R(dot(a, b)) * scale); kPrescaledQuery: R(dot(a, b)), `a` already holding R(q * scale).
  double Score(const double* a, const double* b, int64_t n, double scale) const {
    if (order_ == ScaleOrder::kPrescaledQuery) return Round(double(Dot(a, b, n)));
    return Round(double(A(Round(double(Dot(a, b, n)))) * A(scale)));
  }

  static double LogSumExp(const std::vector<double>& x) {
    if (x.empty()) return -std::numeric_limits<double>::infinity();
    const A m = A(*std::max_element(x.begin(), x.end()));
    A l = 0;
    for (double value : x) l += std::exp(A(value) - m);
    return double(m + std::log(l));
  }

  // The blocks of a row's valid prefix, ascending.
  std::vector<int32_t> SortedBlocks(const int32_t* row) const {
    std::vector<int32_t> blocks;
    for (int64_t slot = 0; slot < config_.top_k && row[slot] >= 0; ++slot) blocks.push_back(row[slot]);
    std::sort(blocks.begin(), blocks.end());
    return blocks;
  }

  // The selected blocks' visible keys, ascending.
  std::vector<int64_t> SelectedKeys(int64_t position, const int32_t* row) const {
    std::vector<int64_t> keys;
    for (int32_t b : SortedBlocks(row)) {
      for (int64_t s = int64_t(b) * config_.block_size;
           s < std::min<int64_t>((b + 1) * int64_t(config_.block_size), position + 1); ++s) {
        keys.push_back(s);
      }
    }
    return keys;
  }

  // `row` and `index_lse` may both be null: the block scores only.
  void IndexRow(int64_t t, int64_t r, const int32_t* row, double* block_scores, double* index_lse) const {
    const Config& c = config_;
    const reference::QueryPlace& place = places_[t];
    const int64_t di = c.index_head_dim, bk = c.block_size, visible = place.position / bk + 1;
    const double* query = &index_q_[(t * c.num_kv_heads + r) * di];
    const auto key = [&](int64_t s) { return &index_k_[(place.key_begin + s) * di]; };
    std::vector<double> tokens(place.position + 1);
    for (int64_t s = 0; s <= place.position; ++s) tokens[s] = Score(query, key(s), di, c.IndexScale());
    for (int64_t b = 0; b < visible; ++b) {
      const int64_t first = b * bk, last = std::min(first + bk, place.position + 1);
      switch (c.pooling) {
        case Pooling::kMax:
          block_scores[b] = *std::max_element(&tokens[first], &tokens[last]);
          break;
        case Pooling::kLse:
          block_scores[b] = Round(LogSumExp({&tokens[first], &tokens[last]}));
          break;
        case Pooling::kMean: {
          std::vector<double> mean(di);
          for (int64_t d = 0; d < di; ++d) {
            A sum = 0;
            for (int64_t s = first; s < last; ++s) sum += A(key(s)[d]);
            mean[d] = Round(double(sum / A(last - first)));
          }
          block_scores[b] = Score(query, mean.data(), di, c.IndexScale());
          break;
        }
      }
    }
    if (index_lse == nullptr) return;  // BlockScores: no selection
    std::vector<double> selected;
    if (c.score_format == ScoreFormat::kNative) {
      for (int64_t s : SelectedKeys(place.position, row)) selected.push_back(tokens[s]);
    } else {  // fp16: one term fp16(M[b]) + log(sum exp(x - M[b])) per selected block
      for (int32_t b : SortedBlocks(row)) {
        const int64_t first = int64_t(b) * bk, last = std::min(first + bk, place.position + 1);
        const A m = A(block_scores[b]);
        A sum = 0;
        for (int64_t s = first; s < last; ++s) sum += std::exp(A(tokens[s]) - m);
        selected.push_back(double(A(RoundToBinary16(block_scores[b])) + std::log(sum)));
      }
    }
    *index_lse = LogSumExp(selected);
  }

  // A row's softmax pieces the training sums reuse: its largest score and its sum of exponentials.
  struct RowSoftmax {
    A m = 0, l = 0;
  };

  // With `softmax`, also the row's m and l.
  void AttendRow(int64_t t, int64_t h, const int32_t* row, double* out, double* lse,
                 RowSoftmax* softmax = nullptr) const {
    const Config& c = config_;
    const reference::QueryPlace& place = places_[t];
    const int64_t d = c.head_dim, dv = c.value_dim, hkv = c.num_kv_heads, r = h / c.group_size();
    const std::vector<int64_t> keys = SelectedKeys(place.position, row);
    std::vector<double> scores;
    for (int64_t s : keys) {
      scores.push_back(
          Score(&q_[(t * c.num_q_heads + h) * d], &k_[((place.key_begin + s) * hkv + r) * d], d, c.SoftmaxScale()));
    }
    const A m = A(*std::max_element(scores.begin(), scores.end()));
    std::vector<A> p(keys.size());
    A l = 0;
    for (size_t j = 0; j < keys.size(); ++j) l += (p[j] = std::exp(A(scores[j]) - m));
    std::vector<A> acc(dv, A(0));
    for (size_t j = 0; j < keys.size(); ++j) {
      const A weight = A(Round(double(p[j] / l)));
      const double* value = &v_[((place.key_begin + keys[j]) * hkv + r) * dv];
      for (int64_t e = 0; e < dv; ++e) acc[e] += weight * A(value[e]);
    }
    for (int64_t e = 0; e < dv; ++e) out[e] = Round(double(acc[e]));
    *lse = double(m + std::log(l));
    if (softmax != nullptr) *softmax = {m, l};
  }

  // ---- training (SPEC section 8), on the forward's stored probabilities ----

  // The forward's stored probability R(exp(s - m) / l) of key row `key` (of the row's set) for query t, head h.
  A Probability(int64_t t, int64_t h, int64_t key, const RowSoftmax& softmax) const {
    const Config& c = config_;
    const int64_t d = c.head_dim, r = h / c.group_size();
    const double score =
        Score(&q_[(t * c.num_q_heads + h) * d], &k_[(key * c.num_kv_heads + r) * d], d, c.SoftmaxScale());
    return A(Round(double(std::exp(A(score) - softmax.m) / softmax.l)));
  }

  // sum_i |a_i b_i|: the size of a dot product's terms.
  static double AbsDot(const double* a, const double* b, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::abs(a[i] * b[i]);
    return sum;
  }

  // One term of the backward: dS of query t, head h at key row `key`, R(P * (R(dot(dout, v)) - Delta) (+ dlse)),
  // its P, and the size of the magnitudes that dS's rounding follows: P * (sum|dout v| + sum|dout out| + |dlse|).
  struct ScoreTerm {
    A ds, p;
    double size;
  };
  ScoreTerm ScoreGradient(int64_t t, int64_t h, int64_t key, const RowSoftmax& softmax, A delta,
                          double delta_size) const {
    const Config& c = config_;
    const int64_t dv = c.value_dim, row = t * c.num_q_heads + h, r = h / c.group_size();
    ScoreTerm term;
    term.p = Probability(t, h, key, softmax);
    const double* value = &v_[(key * c.num_kv_heads + r) * dv];
    const A dp = A(Round(double(Dot(&dout_[row * dv], value, dv))));
    const double dlse = dlse_.empty() ? 0.0 : dlse_[row];
    const A centered = dlse_.empty() ? dp - delta : (dp - delta) + A(dlse);
    term.ds = A(Round(double(term.p * centered)));
    term.size = double(term.p) * (AbsDot(&dout_[row * dv], value, dv) + delta_size + std::abs(dlse));
    return term;
  }

  // The student's side of key row `key` for (t, r): its index score x and rho = exp(x - ilse).
  A IndexScore(int64_t t, int64_t r, int64_t key) const {
    const Config& c = config_;
    const int64_t di = c.index_head_dim;
    return A(Score(&index_q_[(t * c.num_kv_heads + r) * di], &index_k_[key * di], di, c.IndexScale()));
  }

  // The teacher's mean probability of key row `key` for (t, r): (sum over the group's heads of P) / G.
  A TeacherMean(int64_t t, int64_t r, int64_t key, const std::vector<RowSoftmax>& softmax) const {
    const Config& c = config_;
    const int64_t g = c.group_size();
    A sum = 0;
    for (int64_t h = r * g; h < (r + 1) * g; ++h) sum += Probability(t, h, key, softmax[t * c.num_q_heads + h]);
    return sum / A(g);
  }

  // The query side of a gradient sum: kScaleAfterDot R(scale * sum), kPrescaledQuery (the query already scaled)
  // R(sum).
  double QuerySideGradient(A sum, double scale) const {
    return Round(double(order_ == ScaleOrder::kPrescaledQuery ? sum : A(scale) * sum));
  }

  void Training(const std::vector<int32_t>& selection, NaiveOutputs* result) const {
    const Config& c = config_;
    const int64_t total_q = problem_.batch().total_q(), total_k = problem_.batch().total_k();
    const int64_t hq = c.num_q_heads, hkv = c.num_kv_heads, d = c.head_dim, dv = c.value_dim, di = c.index_head_dim;
    const int64_t g = c.group_size();
    const A rows = A(hkv * std::max<int64_t>(total_q, 1));  // N
    std::vector<RowSoftmax> softmax(total_q * hq);
    std::vector<A> delta(total_q * hq), ilse(total_q * hkv);
    std::vector<double> delta_size(total_q * hq), row_kl(total_q * hkv), row_kl_size(total_q * hkv);
    std::vector<double> dq_size(total_q * hq * d, 0.0), dqi_size(total_q * hkv * di, 0.0);
    result->dq.resize(total_q * hq * d);
    result->dqi.resize(total_q * hkv * di);
    const auto row_of = [&](int64_t t, int64_t r) { return &selection[(r * total_q + t) * c.top_k]; };

    // Rows: the forward's m, l and Delta; dq; the KL rows and dqi.
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t t = 0; t < total_q; ++t) {
      const reference::QueryPlace& place = places_[t];
      std::vector<double> out(dv);
      for (int64_t h = 0; h < hq; ++h) {
        double lse;
        AttendRow(t, h, row_of(t, h / g), out.data(), &lse, &softmax[t * hq + h]);
        delta[t * hq + h] = A(Round(double(Dot(&dout_[(t * hq + h) * dv], out.data(), dv))));
        delta_size[t * hq + h] = AbsDot(&dout_[(t * hq + h) * dv], out.data(), dv);
      }
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t row = t * hq + h;
        std::vector<A> sum(d, A(0));
        for (int64_t s : SelectedKeys(place.position, row_of(t, h / g))) {
          const int64_t key = place.key_begin + s;
          const ScoreTerm term = ScoreGradient(t, h, key, softmax[row], delta[row], delta_size[row]);
          for (int64_t e = 0; e < d; ++e) {
            const double k_value = k_[(key * hkv + h / g) * d + e];
            sum[e] += term.ds * A(k_value);
            dq_size[row * d + e] += c.SoftmaxScale() * term.size * std::abs(k_value);
          }
        }
        for (int64_t e = 0; e < d; ++e) result->dq[row * d + e] = Round(double(A(c.SoftmaxScale()) * sum[e]));
      }
      for (int64_t r = 0; r < hkv; ++r) {
        const std::vector<int64_t> keys = SelectedKeys(place.position, row_of(t, r));
        std::vector<double> x(keys.size());
        for (size_t j = 0; j < keys.size(); ++j) x[j] = double(IndexScore(t, r, place.key_begin + keys[j]));
        const A row_ilse = A(LogSumExp(x));
        ilse[t * hkv + r] = row_ilse;
        A kl = 0;
        double kl_size = 0;
        std::vector<A> sum(di, A(0));
        for (size_t j = 0; j < keys.size(); ++j) {
          const int64_t key = place.key_begin + keys[j];
          const A log_rho = A(x[j]) - row_ilse, pbar = TeacherMean(t, r, key, softmax), rho = std::exp(log_rho);
          const double size = double(rho + pbar) / double(rows);  // g_j's terms
          if (pbar > 0) {
            kl += pbar * (std::log(pbar) - log_rho);
            kl_size += double(pbar) * (std::abs(std::log(pbar)) + std::abs(log_rho)) / double(rows);
          }
          const A gradient = A(Round(double(rho - pbar))) / rows;
          for (int64_t e = 0; e < di; ++e) {
            sum[e] += gradient * A(index_k_[key * di + e]);
            dqi_size[(t * hkv + r) * di + e] += c.IndexScale() * size * std::abs(index_k_[key * di + e]);
          }
        }
        row_kl[t * hkv + r] = double(kl);
        row_kl_size[t * hkv + r] = kl_size;
        for (int64_t e = 0; e < di; ++e) {
          result->dqi[(t * hkv + r) * di + e] = Round(double(A(c.IndexScale()) * sum[e]));
        }
      }
    }
    A kl = 0;
    double kl_size = 0;
    for (size_t i = 0; i < row_kl.size(); ++i) {
      kl += A(row_kl[i]);
      kl_size += row_kl_size[i];
    }
    result->kl_loss = {double(kl / rows)};

    // Keys: dk and dv per (key row, group), dki per key row, over their contributors in order.
    const reference::Contributors contributors(c, problem_.batch(), {selection.data()}, places_);
    result->dk.resize(total_k * hkv * d);
    result->dv.resize(total_k * hkv * dv);
    result->dki.resize(total_k * di);
    std::vector<double> dk_size(total_k * hkv * d, 0.0), dv_size(total_k * hkv * dv, 0.0), dki_size(total_k * di, 0.0);
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t key = 0; key < total_k; ++key) {
      for (int64_t r = 0; r < hkv; ++r) {
        const int64_t key_row = key * hkv + r;
        std::vector<A> dk_sum(d, A(0)), dv_sum(dv, A(0));
        for (int64_t t : contributors.Of(key, r)) {
          if (!contributors.KeyIsVisible(key, t)) continue;
          for (int64_t h = r * g; h < (r + 1) * g; ++h) {
            const int64_t row = t * hq + h;
            const ScoreTerm term = ScoreGradient(t, h, key, softmax[row], delta[row], delta_size[row]);
            for (int64_t e = 0; e < d; ++e) {
              dk_sum[e] += term.ds * A(q_[row * d + e]);
              dk_size[key_row * d + e] += c.SoftmaxScale() * term.size * std::abs(q_[row * d + e]);
            }
            for (int64_t e = 0; e < dv; ++e) {
              dv_sum[e] += term.p * A(dout_[row * dv + e]);
              dv_size[key_row * dv + e] += double(term.p) * std::abs(dout_[row * dv + e]);
            }
          }
        }
        for (int64_t e = 0; e < d; ++e) result->dk[key_row * d + e] = QuerySideGradient(dk_sum[e], c.SoftmaxScale());
        for (int64_t e = 0; e < dv; ++e) result->dv[key_row * dv + e] = Round(double(dv_sum[e]));
      }
      std::vector<A> sum(di, A(0));
      for (const auto& [t, r] : contributors.RowsOf(key, hkv)) {
        const A rho = std::exp(IndexScore(t, r, key) - ilse[t * hkv + r]), pbar = TeacherMean(t, r, key, softmax);
        const A gradient = A(Round(double(rho - pbar))) / rows;
        const double size = double(rho + pbar) / double(rows);
        for (int64_t e = 0; e < di; ++e) {
          sum[e] += gradient * A(index_q_[(t * hkv + r) * di + e]);
          dki_size[key * di + e] += c.IndexScale() * size * std::abs(index_q_[(t * hkv + r) * di + e]);
        }
      }
      for (int64_t e = 0; e < di; ++e) result->dki[key * di + e] = QuerySideGradient(sum[e], c.IndexScale());
    }
    TermSizes& sizes = result->term_sizes;
    for (const auto& [largest, values] : {std::pair{&sizes.dq, &dq_size},
                                          {&sizes.dk, &dk_size},
                                          {&sizes.dv, &dv_size},
                                          {&sizes.dqi, &dqi_size},
                                          {&sizes.dki, &dki_size}}) {
      for (double value : *values) *largest = std::max(*largest, value);
    }
    sizes.kl_loss = kl_size;
  }

  const Problem& problem_;
  const Config& config_;
  Precision precision_;
  ScaleOrder order_;
  NaiveParts parts_;
  std::vector<reference::QueryPlace> places_;
  std::vector<double> q_, k_, v_, index_q_, index_k_;  // widened and rounded to the precision
  std::vector<double> dout_, dlse_;                    // training: widened and rounded (dlse_ empty without it)
};

}  // namespace

NaiveOutputs NaiveEvaluate(const Problem& problem, Precision precision, const std::vector<int32_t>& selection,
                           ScaleOrder order, NaiveParts parts) {
  if (precision == Precision::kExact)
    return NaiveEvaluator<double>(problem, precision, order, parts).Evaluate(selection);
  return NaiveEvaluator<float>(problem, precision, order, parts).Evaluate(selection);
}

std::vector<double> NaiveBlockScores(const Problem& problem, Precision precision, ScaleOrder order) {
  const NaiveParts index_only{true, false};
  if (precision == Precision::kExact)
    return NaiveEvaluator<double>(problem, precision, order, index_only).BlockScores();
  return NaiveEvaluator<float>(problem, precision, order, index_only).BlockScores();
}

}  // namespace msa
