#include "bench/eigen_dense_attention.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <omp.h>

#include <Eigen/Dense>

namespace msa::bench {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A [rows, dim] slice of a [rows, heads, dim] tensor: consecutive rows are heads * dim floats apart.
using HeadRows = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

constexpr int64_t kQueryTile = 32;  // queries per tile; with G = 16 a tile is a 512-row GEMM

HeadRows Head(const SafetensorsTensor& tensor, int64_t rows, int64_t head) {
  const int64_t heads = tensor.shape[1], dim = tensor.shape[2];
  const float* data = reinterpret_cast<const float*>(tensor.bytes.data());
  return HeadRows(data + head * dim, rows, dim, Eigen::OuterStride<>(heads * dim));
}

}  // namespace

void EigenDenseCausalGqa(const Problem& problem, std::vector<float>* out) {
  const Config& c = problem.config;
  const int64_t n = problem.cu_seqlens_q.back(), hq = c.num_q_heads, group = c.group_size();
  const int64_t d = c.head_dim, dv = c.value_dim, tiles = (n + kQueryTile - 1) / kQueryTile;
  const float scale = float(c.SoftmaxScale());
  out->assign(size_t(n * hq * dv), 0.0f);
  Eigen::setNbThreads(1);

#pragma omp parallel
  {
    RowMatrix queries, scores, values;
#pragma omp for schedule(dynamic, 1)
    for (int64_t work = 0; work < c.num_kv_heads * tiles; ++work) {
      // Largest tiles first: tile index counts down from the end of the sequence.
      const int64_t r = work % c.num_kv_heads, tile = tiles - 1 - work / c.num_kv_heads;
      const int64_t t0 = tile * kQueryTile, rows = std::min(kQueryTile, n - t0), keys = t0 + rows;
      queries.resize(group * rows, d);  // [G * rows, D]: head-major stack of the tile's queries, times scale
      for (int64_t g = 0; g < group; ++g) {
        queries.middleRows(g * rows, rows) = Head(problem.q, n, r * group + g).middleRows(t0, rows) * scale;
      }
      const HeadRows k = Head(problem.k, n, r), v = Head(problem.v, n, r);
      scores.noalias() = queries * k.topRows(keys).transpose();  // [G * rows, keys], scaled by the queries
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t i = 0; i < rows; ++i) {
          auto row = scores.row(g * rows + i);
          const int64_t visible = t0 + i + 1;
          row.tail(keys - visible).setConstant(-std::numeric_limits<float>::infinity());
          row = (row.array() - row.head(visible).maxCoeff()).exp().matrix();
          row /= row.head(visible).sum();
        }
      }
      values.noalias() = scores * v.topRows(keys);  // [G * rows, Dv]
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t i = 0; i < rows; ++i) {
          float* target = out->data() + ((t0 + i) * hq + r * group + g) * dv;
          Eigen::Map<Eigen::RowVectorXf>(target, dv) = values.row(g * rows + i);
        }
      }
    }
  }
}

double EigenGemmRate(const Config& config, int64_t keys, int repetitions) {
  const int64_t rows = kQueryTile * config.group_size(), d = config.head_dim;
  double seconds = 0;
#pragma omp parallel reduction(max : seconds)
  {
    const RowMatrix queries = RowMatrix::Constant(rows, d, 0.5f);
    const RowMatrix k = RowMatrix::Constant(keys, d, 0.25f);
    RowMatrix scores(rows, keys);
    const double start = omp_get_wtime();
    for (int i = 0; i < repetitions; ++i) scores.noalias() = queries * k.transpose();
    seconds = omp_get_wtime() - start;
    if (scores(0, 0) != 0.125f * float(d)) seconds = -1;  // d * 0.5 * 0.25: the product really ran
  }
  if (seconds <= 0) return 0;
  return 2.0 * rows * d * double(keys) * repetitions * omp_get_max_threads() / seconds;
}

}  // namespace msa::bench
