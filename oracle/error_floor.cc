#include "oracle/error_floor.h"

#include <algorithm>
#include <cmath>

#include "oracle/precision.h"

namespace msa {
namespace {

// The largest Euclidean norm of a row (one head's vector) of a [rows, heads, dim] tensor, and its largest |value|.
struct Magnitudes {
  double max_norm = 0, max_abs = 0;
};

Magnitudes MagnitudesOf(const SafetensorsTensor& tensor, bool e4m3) {
  const TensorView view = ViewOf(tensor);
  Magnitudes m;
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      double squares = 0;
      for (int64_t d = 0; d < view.dim; ++d) {
        const double value = e4m3 ? RoundToE4M3(view.At(row, head, d)) : view.At(row, head, d);
        squares += value * value;
        m.max_abs = std::max(m.max_abs, std::abs(value));
      }
      m.max_norm = std::max(m.max_norm, std::sqrt(squares));
    }
  }
  return m;
}

double TreeDepth(int64_t n) { return std::ceil(std::log2(double(std::max<int64_t>(n, 1)))); }  // L(n)

}  // namespace

ErrorFloors ErrorFloorsOf(const Problem& problem, Precision precision, const TermSizes* term_sizes) {
  const Config& c = problem.config;
  const double u = std::ldexp(1.0, -(precision == Precision::kExact ? 53 : 24));
  const bool e4m3 = c.index_format == IndexFormat::kE4M3;
  const Magnitudes index_q = MagnitudesOf(problem.index_q, e4m3), index_k = MagnitudesOf(problem.index_k, e4m3);
  const Magnitudes q = MagnitudesOf(problem.q, false), k = MagnitudesOf(problem.k, false),
                   v = MagnitudesOf(problem.v, false);
  int64_t longest = 1;
  const Batch batch = problem.batch();
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    longest = std::max<int64_t>(longest, batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b]);
  }
  const int64_t keys = std::min<int64_t>(int64_t(c.top_k) * c.block_size, longest);

  const double index_dot_magnitude = c.IndexScale() * index_q.max_norm * index_k.max_norm;
  double index_score = (TreeDepth(c.index_head_dim) + 2) * u * index_dot_magnitude;
  if (c.pooling == Pooling::kLse) index_score += (TreeDepth(c.block_size) + 2) * u;
  if (c.pooling == Pooling::kMean) index_score += (TreeDepth(c.block_size) + 2) * u * index_dot_magnitude;
  const double main_score = (TreeDepth(c.head_dim) + 2) * u * c.SoftmaxScale() * q.max_norm * k.max_norm;
  const double sum_of_exponentials = (TreeDepth(keys) + 2) * u;

  ErrorFloors floors;
  floors.index_score = index_score;
  floors.index_lse = index_score + sum_of_exponentials;
  floors.lse = main_score + sum_of_exponentials;
  floors.out = (main_score + sum_of_exponentials) * v.max_abs;
  if (term_sizes == nullptr || !problem.dout) return floors;

  const int64_t dot = std::max({c.head_dim, c.value_dim, c.index_head_dim});
  const int64_t reaching = batch.total_q() * c.group_size();  // the most (query, head) pairs one key can meet
  const double per_row = (TreeDepth(keys) + TreeDepth(dot) + 4) * u;
  const double per_key = (TreeDepth(reaching) + TreeDepth(dot) + 4) * u;
  const double over_all = (TreeDepth(reaching * keys) + TreeDepth(dot) + 4) * u;
  floors.dq = per_row * term_sizes->dq;
  floors.dqi = per_row * term_sizes->dqi;
  floors.dk = per_key * term_sizes->dk;
  floors.dv = per_key * term_sizes->dv;
  floors.dki = per_key * term_sizes->dki;
  floors.kl_loss = over_all * term_sizes->kl_loss;
  return floors;
}

}  // namespace msa
