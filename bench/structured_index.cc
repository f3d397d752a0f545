#include "bench/structured_index.h"

#include <cmath>
#include <iterator>

#include "oracle/random.h"

namespace msa::bench {
namespace {

constexpr int kRank = 8, kTopics = 32;

// `count` unit vectors of `dim` values.
std::vector<float> Directions(int count, int64_t dim, RandomStream* normal) {
  std::vector<float> directions(size_t(count * dim));
  for (int c = 0; c < count; ++c) {
    double norm = 0;
    for (int64_t d = 0; d < dim; ++d) norm += std::pow(directions[c * dim + d] = float(normal->Normal()), 2);
    for (int64_t d = 0; d < dim; ++d) directions[c * dim + d] = float(directions[c * dim + d] / std::sqrt(norm));
  }
  return directions;
}

// row = scale * sum_j coefficient[j] * basis[j] + noise * N(0, 1/dim) per value.
void Combine(const std::vector<float>& basis, const float* coefficients, int count, float scale, float noise,
             int64_t dim, RandomStream* normal, float* row) {
  for (int64_t d = 0; d < dim; ++d) {
    float value = 0;
    for (int j = 0; j < count; ++j) value += coefficients[j] * basis[j * dim + d];
    row[d] = scale * value + noise * float(normal->Normal()) / std::sqrt(float(dim));
  }
}

// An AR(1) step of unit stationary variance: x <- rho x + sqrt(1 - rho^2) N(0, 1).
void Drift(float rho, int count, RandomStream* normal, float* x) {
  for (int j = 0; j < count; ++j) x[j] = rho * x[j] + std::sqrt(1 - rho * rho) * float(normal->Normal());
}

void LowRank(const IndexInputShape& s, uint64_t, RandomStream* normal, std::vector<float>* index_q,
             std::vector<float>* index_k) {
  const std::vector<float> basis = Directions(kRank, s.index_dim, normal);
  std::vector<float> key(kRank, 0.f);
  Drift(0.f, kRank, normal, key.data());
  for (int64_t t = 0; t < s.total_k; ++t) {
    Drift(std::exp(-1.f / 256), kRank, normal, key.data());
    Combine(basis, key.data(), kRank, 2.f, 1.f, s.index_dim, normal, index_k->data() + t * s.index_dim);
  }
  std::vector<float> query(size_t(s.num_groups * kRank), 0.f);
  Drift(0.f, int(query.size()), normal, query.data());
  for (int64_t t = 0; t < s.total_q; ++t) {
    for (int64_t g = 0; g < s.num_groups; ++g) {
      Drift(std::exp(-1.f / 64), kRank, normal, query.data() + g * kRank);
      Combine(basis, query.data() + g * kRank, kRank, 4.f, 1.f, s.index_dim, normal,
              index_q->data() + (t * s.num_groups + g) * s.index_dim);
    }
  }
}

// One-hot coefficients on a topic's direction.
void Clustered(const IndexInputShape& s, uint64_t seed, RandomStream* normal, std::vector<float>* index_q,
               std::vector<float>* index_k) {
  const std::vector<float> topics = Directions(kTopics, s.index_dim, normal);
  std::vector<float> one_hot(kTopics, 0.f);
  RandomStream picks(seed, 1);
  const auto next_topic = [&picks] { return int(picks.Below(kTopics)); };
  int topic = next_topic();
  for (int64_t t = 0; t < s.total_k; ++t) {
    if (t % s.key_run == 0) topic = next_topic();
    one_hot.assign(kTopics, 0.f);
    one_hot[topic] = 1.f;
    Combine(topics, one_hot.data(), kTopics, 2.f, 1.f, s.index_dim, normal, index_k->data() + t * s.index_dim);
  }
  std::vector<int> query_topic(size_t(s.num_groups));
  for (int64_t t = 0; t < s.total_q; ++t) {
    for (int64_t g = 0; g < s.num_groups; ++g) {
      if (t % s.query_run == 0) query_topic[g] = next_topic();
      one_hot.assign(kTopics, 0.f);
      one_hot[query_topic[g]] = 1.f;
      Combine(topics, one_hot.data(), kTopics, 4.f, 1.f, s.index_dim, normal,
              index_q->data() + (t * s.num_groups + g) * s.index_dim);
    }
  }
}

}  // namespace

bool MakeStructuredIndexInputs(const std::string& kind, const IndexInputShape& shape, uint64_t seed,
                               std::vector<float>* index_q, std::vector<float>* index_k) {
  using Maker = void (*)(const IndexInputShape&, uint64_t, RandomStream*, std::vector<float>*, std::vector<float>*);
  static constexpr struct {
    const char* name;
    Maker make;
  } kMakers[] = {{"lowrank", LowRank}, {"clustered", Clustered}};
  static_assert(std::size(kMakers) == std::size(kStructuredIndexKinds));
  for (const auto& maker : kMakers) {
    if (kind != maker.name) continue;
    index_q->assign(size_t(shape.total_q * shape.num_groups * shape.index_dim), 0.f);
    index_k->assign(size_t(shape.total_k * shape.index_dim), 0.f);
    RandomStream normal(seed, 0);
    maker.make(shape, seed, &normal, index_q, index_k);
    return true;
  }
  return false;
}

}  // namespace msa::bench
