#include "tools/msa/recall.h"

#include <algorithm>

#include "reference/canonical.h"
#include "reference/reference.h"

namespace msa {

bool SelectionHolds(const Problem& problem, const std::vector<int32_t>& topk_indices, int64_t t, int64_t r,
                    int64_t block) {
  const int64_t top_k = problem.config.top_k;
  const int32_t* row = &topk_indices[(r * problem.batch().total_q() + t) * top_k];
  return std::find(row, row + top_k, int32_t(block)) != row + top_k;
}

double KeptKeyFraction(const Problem& problem, const std::vector<int32_t>& topk_indices) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q();
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  double kept = 0, dense = 0;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      const int32_t* row = &topk_indices[(r * total_q + t) * c.top_k];
      for (int64_t slot = 0; slot < c.top_k && row[slot] >= 0; ++slot) {
        kept += double(std::min<int64_t>(int64_t(row[slot] + 1) * c.block_size, places[t].position + 1) -
                       int64_t(row[slot]) * c.block_size);
      }
      dense += double(places[t].position + 1);
    }
  }
  return dense == 0 ? 1.0 : kept / dense;
}

MassRecall SampledMassRecall(const Problem& problem, const std::vector<int32_t>& topk_indices, int64_t num_queries) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), hq = c.num_q_heads, hkv = c.num_kv_heads;
  const int64_t d = c.head_dim, bk = c.block_size;
  const int64_t count = std::min(num_queries, total_q);
  const std::vector<double> q = reference::Widen(ViewOf(problem.q));  // [total_q, Hq, D]
  const std::vector<double> k = reference::Widen(ViewOf(problem.k));  // [total_k, Hkv, D]
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  const double scale = c.SoftmaxScale();
  std::vector<double> recall(count * hq);  // [count, Hq]
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t work = 0; work < count * hq; ++work) {
    const int64_t t = count == total_q ? work / hq : (work / hq) * total_q / count, h = work % hq;
    const int64_t r = h / c.group_size();
    const reference::QueryPlace& place = places[t];
    std::vector<double> scores(place.position + 1);
    for (int64_t s = 0; s <= place.position; ++s) {
      scores[s] = CanonicalDot(&q[(t * hq + h) * d], &k[((place.key_begin + s) * hkv + r) * d], d) * scale;
    }
    std::vector<char> kept(place.position / bk + 1, 0);
    const int32_t* row = &topk_indices[(r * total_q + t) * c.top_k];
    for (int64_t slot = 0; slot < c.top_k && row[slot] >= 0; ++slot) kept[row[slot]] = 1;
    const double m = *std::max_element(scores.begin(), scores.end());
    double total = 0, selected = 0;
    for (int64_t s = 0; s <= place.position; ++s) {
      const double p = CanonicalExp(scores[s] - m);
      total += p;
      if (kept[s / bk]) selected += p;
    }
    recall[work] = selected / total;
  }
  MassRecall result;
  result.rows = int64_t(recall.size());
  double sum = 0;
  for (double value : recall) {
    sum += value;
    result.min = std::min(result.min, value);
  }
  result.mean = recall.empty() ? 1.0 : sum / double(recall.size());
  return result;
}

}  // namespace msa
