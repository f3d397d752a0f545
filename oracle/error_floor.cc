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

ErrorFloors ErrorFloorsOf(const Problem& problem, Precision precision, const TrainingMagnitudes* magnitudes) {
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
  if (magnitudes == nullptr || !problem.dout) return floors;

  const Magnitudes dout = MagnitudesOf(*problem.dout, false);
  double dlse_max = 0;
  if (problem.dlse) {
    const TensorView view = problem.gradient_inputs().dlse;
    for (int64_t i = 0; i < view.rows * view.heads; ++i) {
      dlse_max = std::max(dlse_max, std::abs(LoadAsDouble(view.data, view.dtype, i)));
    }
  }
  const double score_gradient = dout.max_norm * v.max_norm + dlse_max;  // G_dP
  const double c_main = 2 * sum_of_exponentials + (TreeDepth(c.value_dim) + 2) * u + 2 * main_score;
  const double c_kl = 2 * sum_of_exponentials + 2 * index_score + 2 * main_score;
  const double rows = double(c.num_kv_heads * std::max<int64_t>(batch.total_q(), 1));
  floors.dq = 2 * c.SoftmaxScale() * k.max_abs * score_gradient * c_main;
  floors.dk = 2 * c.SoftmaxScale() * q.max_abs * score_gradient * c_main * magnitudes->key_mass;
  floors.dv = dout.max_abs * magnitudes->key_mass * (sum_of_exponentials + 2 * main_score);
  floors.dqi = c.IndexScale() * index_k.max_abs * (2 / rows) * c_kl;
  floors.dki = c.IndexScale() * index_q.max_abs * (magnitudes->index_key_mass / rows) * c_kl;
  floors.kl_loss = magnitudes->kl_terms * c_kl;
  return floors;
}

}  // namespace msa
