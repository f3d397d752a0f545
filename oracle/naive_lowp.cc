#include "oracle/naive_lowp.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
    if (parts.index) tensors.insert(tensors.end(), {{&problem.index_q, &index_q_}, {&problem.index_k, &index_k_}});
    if (parts.attention) tensors.insert(tensors.end(), {{&problem.q, &q_}, {&problem.k, &k_}, {&problem.v, &v_}});
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

  void AttendRow(int64_t t, int64_t h, const int32_t* row, double* out, double* lse) const {
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
  }

  const Problem& problem_;
  const Config& config_;
  Precision precision_;
  ScaleOrder order_;
  NaiveParts parts_;
  std::vector<reference::QueryPlace> places_;
  std::vector<double> q_, k_, v_, index_q_, index_k_;  // widened and rounded to the precision
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
