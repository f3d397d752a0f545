// Properties of SPEC section 5 checked on the reference over random valid problems (tests/arbitrary.h).
// Where a property is exact in the canonical order (dense equivalence, order invariance, causality,
// GQA sharing, scaling by 2), outputs are compared bit for bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "oracle/random.h"
#include "oracle/selection_contract.h"
#include "reference/canonical.h"
#include "reference/reference.h"
#include "tests/arbitrary.h"

namespace msa {
namespace {

const Backend& Reference() { return *FindBackend("reference"); }

Outputs MustRun(const Problem& problem) {
  Outputs outputs;
  const Status status = RunBackend(Reference(), problem, &outputs);
  if (!status.ok()) RC_FAIL(status.message());
  return outputs;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Attention alone, on a given selection [Hidx, total_q, top_k].
Outputs MustAttend(const Problem& problem, const std::vector<int32_t>& selection) {
  Outputs outputs;
  outputs.Allocate(problem);
  const Status status = Attend(Reference(), problem.config, problem.attention_inputs(),
                               SelectionView{selection.data()}, outputs.attention_outputs());
  if (!status.ok()) RC_FAIL(status.message());
  return outputs;
}

int64_t Visible(const Config& config, const reference::QueryPlace& place) {
  return place.position / config.block_size + 1;
}

RC_GTEST_PROP(ReferenceProperty, SelectionFollowsTheContract, (const ProblemSpec& spec)) {
  const Problem problem = GenerateProblem(spec);
  const Outputs outputs = MustRun(problem);
  const Status status = CheckSelection(problem, outputs.topk_indices);
  if (!status.ok()) RC_FAIL(status.message());
  for (double value : outputs.out) RC_ASSERT(std::isfinite(value));
  for (double value : outputs.lse) RC_ASSERT(std::isfinite(value));
  for (double value : outputs.index_lse) RC_ASSERT(std::isfinite(value));
}

RC_GTEST_PROP(ReferenceProperty, EqualsDenseAttentionWhenTopKCoversEveryBlock, (ProblemSpec spec)) {
  const Problem probe = GenerateProblem(spec);
  spec.config.top_k = std::max<int>(spec.config.top_k, int(MaxBlocks(spec.config, probe.batch())));
  const Problem problem = GenerateProblem(spec);
  const Outputs sparse = MustRun(problem);
  Outputs dense;
  dense.Allocate(problem);
  RC_ASSERT(reference::DenseCausalAttention(problem.config, problem.attention_inputs(), dense.attention_outputs(), {})
                .ok());
  RC_ASSERT(SameBits(sparse.out, dense.out));
  RC_ASSERT(SameBits(sparse.lse, dense.lse));
}

RC_GTEST_PROP(ReferenceProperty, FutureKeysChangeNothing, (const ProblemSpec& spec)) {
  Problem problem = GenerateProblem(spec);
  const Outputs before = MustRun(problem);
  // Rewrite every key, value and index key past a cut position of one sequence.
  const int64_t b = *rc::gen::inRange<int64_t>(0, problem.batch().num_sequences());
  const int64_t key_begin = problem.cu_seqlens_k[b], k_len = problem.cu_seqlens_k[b + 1] - key_begin;
  RC_PRE(k_len > 0);
  const int64_t cut = *rc::gen::inRange<int64_t>(0, k_len);  // keys > cut change
  RandomStream random(spec.seed, 99);
  for (int64_t s = cut + 1; s < k_len; ++s) {
    for (SafetensorsTensor* tensor : {&problem.k, &problem.v, &problem.index_k}) {
      for (int64_t h = 0; h < tensor->shape[1]; ++h) {
        for (int64_t d = 0; d < tensor->shape[2]; ++d) SetElement(*tensor, key_begin + s, h, d, 10 * random.Normal());
      }
    }
  }
  const Outputs after = MustRun(problem);
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t t = problem.cu_seqlens_q[b]; t < problem.cu_seqlens_q[b + 1]; ++t) {
    if (places[t].position > cut) continue;  // this query may see the rewritten keys
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      const int64_t row = r * total_q + t;
      RC_ASSERT(std::equal(&before.topk_indices[row * c.top_k], &before.topk_indices[(row + 1) * c.top_k],
                           &after.topk_indices[row * c.top_k]));
      RC_ASSERT(std::memcmp(&before.block_scores[row * max_blocks], &after.block_scores[row * max_blocks],
                            max_blocks * sizeof(double)) == 0);
      RC_ASSERT(std::memcmp(&before.index_lse[row], &after.index_lse[row], sizeof(double)) == 0);
    }
    RC_ASSERT(std::memcmp(&before.out[t * c.num_q_heads * c.value_dim], &after.out[t * c.num_q_heads * c.value_dim],
                          c.num_q_heads * c.value_dim * sizeof(double)) == 0);
    RC_ASSERT(std::memcmp(&before.lse[t * c.num_q_heads], &after.lse[t * c.num_q_heads],
                          c.num_q_heads * sizeof(double)) == 0);
  }
}

RC_GTEST_PROP(ReferenceProperty, HeadsOfAGroupShareOneSelection, (const ProblemSpec& spec)) {
  Problem problem = GenerateProblem(spec);
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), g = c.group_size();
  // Give every head of a group the query of the group's first head: their outputs must then be identical,
  // because they attend over the one selection of their group.
  const TensorView q = ViewOf(problem.q);
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      for (int64_t d = 0; d < c.head_dim; ++d) SetElement(problem.q, t, h, d, q.At(t, h - h % g, d));
    }
  }
  const Outputs outputs = MustRun(problem);
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      const int64_t first = h - h % g;
      RC_ASSERT(std::memcmp(&outputs.out[(t * c.num_q_heads + h) * c.value_dim],
                            &outputs.out[(t * c.num_q_heads + first) * c.value_dim], c.value_dim * sizeof(double)) == 0);
      RC_ASSERT(outputs.lse[t * c.num_q_heads + h] == outputs.lse[t * c.num_q_heads + first]);
    }
  }
}

RC_GTEST_PROP(ReferenceProperty, GroupsSelectIndependently, (ProblemSpec spec)) {
  const int group_size = spec.config.group_size();
  spec.config.num_kv_heads += 1;  // at least two groups
  spec.config.num_q_heads = spec.config.num_kv_heads * group_size;
  Problem problem = GenerateProblem(spec);
  const Outputs before = MustRun(problem);
  // Rewrite group 0's index queries: the other groups' selections must not move.
  RandomStream random(spec.seed, 7);
  const int64_t total_q = problem.batch().total_q();
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t d = 0; d < problem.config.index_head_dim; ++d) SetElement(problem.index_q, t, 0, d, random.Normal());
  }
  const Outputs after = MustRun(problem);
  const int64_t group_0_entries = total_q * problem.config.top_k;
  RC_ASSERT(std::equal(before.topk_indices.begin() + group_0_entries, before.topk_indices.end(),
                       after.topk_indices.begin() + group_0_entries));
}

RC_GTEST_PROP(ReferenceProperty, AttentionIgnoresTheOrderOfSelectedBlocks, (const ProblemSpec& spec)) {
  const Problem problem = GenerateProblem(spec);
  const Outputs outputs = MustRun(problem);
  std::vector<int32_t> shuffled = outputs.topk_indices;
  RandomStream random(spec.seed, 11);
  for (size_t row = 0; row < shuffled.size(); row += problem.config.top_k) {
    int32_t* begin = &shuffled[row];
    const int64_t valid = std::find(begin, begin + problem.config.top_k, -1) - begin;
    for (int64_t i = valid - 1; i > 0; --i) std::swap(begin[i], begin[random.Below(i + 1)]);  // Fisher-Yates
  }
  const Outputs reordered = MustAttend(problem, shuffled);
  RC_ASSERT(SameBits(outputs.out, reordered.out));
  RC_ASSERT(SameBits(outputs.lse, reordered.lse));
}

RC_GTEST_PROP(ReferenceProperty, SelectionIgnoresAConstantShiftOfTheScores, (ProblemSpec spec)) {
  // Small-integer index inputs and index_scale = 1/4 make every token score exact, so adding
  // index_q[t, r, 0] * c to all of a row's scores (through index_k[:, 0] += c) is an exact shift.
  spec.config.pooling = *rc::gen::element(Pooling::kMax, Pooling::kLse);
  spec.config.index_scale = 0.25;
  spec.dtype = DType::kF64;
  Problem problem = GenerateProblem(spec);
  RandomStream random(spec.seed, 13);
  for (SafetensorsTensor* tensor : {&problem.index_q, &problem.index_k}) {
    for (int64_t row = 0; row < tensor->shape[0]; ++row) {
      for (int64_t h = 0; h < tensor->shape[1]; ++h) {
        for (int64_t d = 0; d < tensor->shape[2]; ++d) SetElement(*tensor, row, h, d, double(random.Below(7) - 3));
      }
    }
  }
  const Outputs before = MustRun(problem);
  const double shift = double(*rc::gen::inRange(-5, 6));
  const TensorView index_k = ViewOf(problem.index_k);
  for (int64_t s = 0; s < index_k.rows; ++s) SetElement(problem.index_k, s, 0, 0, index_k.At(s, 0, 0) + shift);
  const Outputs after = MustRun(problem);
  RC_ASSERT(before.topk_indices == after.topk_indices);
}

RC_GTEST_PROP(ReferenceProperty, OutputIsLinearInV, (ProblemSpec spec)) {
  spec.dtype = DType::kF64;
  Problem problem = GenerateProblem(spec);
  const Outputs base = MustRun(problem);
  const TensorView v = ViewOf(problem.v);
  const std::vector<double> original = reference::Widen(v);
  // Scaling v by 2 scales every product and sum exactly: out doubles bit for bit, lse is unchanged.
  for (int64_t s = 0; s < v.rows; ++s) {
    for (int64_t h = 0; h < v.heads; ++h) {
      for (int64_t d = 0; d < v.dim; ++d) SetElement(problem.v, s, h, d, 2 * original[(s * v.heads + h) * v.dim + d]);
    }
  }
  const Outputs doubled = MustRun(problem);
  for (size_t i = 0; i < base.out.size(); ++i) RC_ASSERT(doubled.out[i] == 2 * base.out[i]);
  RC_ASSERT(SameBits(doubled.lse, base.lse));
  // Adding a second value tensor w: out(v + w) = out(v) + out(w) up to rounding of the two sums.
  RandomStream random(spec.seed, 17);
  std::vector<double> w(original.size());
  for (double& value : w) value = random.Normal();
  for (int64_t i = 0; i < int64_t(w.size()); ++i) SetElement(problem.v, i / (v.heads * v.dim), (i / v.dim) % v.heads, i % v.dim, w[i]);
  const Outputs with_w = MustRun(problem);
  for (int64_t i = 0; i < int64_t(w.size()); ++i) {
    SetElement(problem.v, i / (v.heads * v.dim), (i / v.dim) % v.heads, i % v.dim, original[i] + w[i]);
  }
  const Outputs summed = MustRun(problem);
  double magnitude = 1;
  for (size_t i = 0; i < w.size(); ++i) magnitude = std::max({magnitude, std::abs(original[i]), std::abs(w[i])});
  for (size_t i = 0; i < base.out.size(); ++i) {
    RC_ASSERT(std::abs(summed.out[i] - (base.out[i] + with_w.out[i])) <= 1e-13 * magnitude);
  }
}

RC_GTEST_PROP(ReferenceProperty, SoftmaxRowsSumToOne, (ProblemSpec spec)) {
  Problem problem = GenerateProblem(spec);
  // v = 1 everywhere: sum_j p_j * 1 is the same sum in the same order as l, so out = l / l = 1 exactly.
  for (int64_t s = 0; s < problem.v.shape[0]; ++s) {
    for (int64_t h = 0; h < problem.v.shape[1]; ++h) {
      for (int64_t d = 0; d < problem.v.shape[2]; ++d) SetElement(problem.v, s, h, d, 1.0);
    }
  }
  const Outputs outputs = MustRun(problem);
  for (double value : outputs.out) RC_ASSERT(value == 1.0);
}

RC_GTEST_PROP(ReferenceProperty, MaxPoolingSelectsEveryBlockWithATokenAboveTheThreshold, (ProblemSpec spec)) {
  // Max dominance: if a history block is left out, none of its tokens may score above the lowest-scored
  // ranked block that was kept (theta). Token scores are recomputed here with the canonical dot.
  spec.config.pooling = Pooling::kMax;
  const Problem problem = GenerateProblem(spec);
  const Outputs outputs = MustRun(problem);
  const Config& c = problem.config;
  const std::vector<double> index_q = reference::Widen(ViewOf(problem.index_q));
  const std::vector<double> index_k = reference::Widen(ViewOf(problem.index_k));
  const int64_t total_q = problem.batch().total_q(), di = c.index_head_dim;
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t visible = Visible(c, places[t]), local = visible - 1;
      const int64_t init = std::min<int64_t>(c.init_blocks, local);
      const int64_t ranked = std::min<int64_t>(c.top_k - init - 1, local - init);  // ranked slots used
      if (ranked <= 0 || ranked == local - init) continue;  // nothing ranked, or nothing left out
      const int32_t* row = &outputs.topk_indices[(r * total_q + t) * c.top_k];
      std::vector<char> kept(visible, 0);
      for (int64_t slot = 0; slot < ranked + init + 1; ++slot) kept[row[slot]] = 1;
      const auto token_score = [&](int64_t s) {
        return CanonicalDot(&index_q[(t * c.num_kv_heads + r) * di], &index_k[(places[t].key_begin + s) * di], di) *
               c.IndexScale();
      };
      double theta = HUGE_VAL;  // the lowest block max among the ranked blocks kept
      for (int64_t slot = 0; slot < ranked; ++slot) {
        double block_max = -HUGE_VAL;
        for (int64_t s = row[slot] * c.block_size; s < std::min<int64_t>((row[slot] + 1) * c.block_size, places[t].position + 1); ++s) {
          block_max = std::max(block_max, token_score(s));
        }
        theta = std::min(theta, block_max);
      }
      for (int64_t b = init; b < local; ++b) {
        if (kept[b]) continue;
        for (int64_t s = b * c.block_size; s < (b + 1) * c.block_size; ++s) RC_ASSERT(token_score(s) <= theta);
      }
    }
  }
}

RC_GTEST_PROP(ReferenceProperty, ChunkedPrefillEqualsTheSameRowsOfAFullPrefill, (ProblemSpec spec)) {
  // The suffix rule: the last q_len queries over k_len keys are the last q_len rows of the full prefill.
  const int32_t k_len = *rc::gen::inRange(1, 60), q_len = *rc::gen::inRange(1, k_len + 1);
  spec.lengths = {{k_len, k_len}};
  const Problem full = GenerateProblem(spec);
  Problem chunk = full;
  chunk.cu_seqlens_q = {0, q_len};
  const Config& c = full.config;
  for (SafetensorsTensor* tensor : {&chunk.q, &chunk.index_q}) {
    const int64_t row_bytes = tensor->bytes.size() / k_len;
    tensor->bytes.erase(tensor->bytes.begin(), tensor->bytes.begin() + (k_len - q_len) * row_bytes);
    tensor->shape[0] = q_len;
  }
  const Outputs full_out = MustRun(full), chunk_out = MustRun(chunk);
  const int64_t skip = k_len - q_len;
  RC_ASSERT(std::memcmp(&full_out.out[skip * c.num_q_heads * c.value_dim], chunk_out.out.data(),
                        chunk_out.out.size() * sizeof(double)) == 0);
  RC_ASSERT(std::memcmp(&full_out.lse[skip * c.num_q_heads], chunk_out.lse.data(), chunk_out.lse.size() * sizeof(double)) == 0);
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    RC_ASSERT(std::equal(&chunk_out.topk_indices[r * q_len * c.top_k], &chunk_out.topk_indices[(r + 1) * q_len * c.top_k],
                         &full_out.topk_indices[(r * k_len + skip) * c.top_k]));
  }
}

}  // namespace
}  // namespace msa
