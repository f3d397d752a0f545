#include "tools/msa/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "oracle/random.h"
#include "reference/canonical.h"
#include "reference/reference.h"

namespace msa {
namespace {

std::string Fixed(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", value);
  return text;
}

// "[0.3, -1.2, 0.5]" of row (row, head) of a rank-3 tensor.
std::string Row(const SafetensorsTensor& tensor, int64_t row, int64_t head) {
  const TensorView view = ViewOf(tensor);
  std::string text = "[";
  for (int64_t d = 0; d < view.dim; ++d) {
    char value[32];
    std::snprintf(value, sizeof(value), "%.1f", view.At(row, head, d));
    text += (d == 0 ? "" : ", ") + std::string(value);
  }
  return text + "]";
}

// Standard normal values rounded to one decimal, overwriting every element of `tensor`.
void RoundedNormals(SafetensorsTensor& tensor, RandomStream& random) {
  for (int64_t row = 0; row < tensor.shape[0]; ++row) {
    for (int64_t head = 0; head < tensor.shape[1]; ++head) {
      for (int64_t d = 0; d < tensor.shape[2]; ++d) {
        SetElement(tensor, row, head, d, std::round(random.Normal() * 10.0) / 10.0 + 0.0);  // + 0.0: no "-0.0"
      }
    }
  }
}

std::string BlockKeys(int64_t block, int64_t bk, int64_t position) {
  const int64_t first = block * bk, last = std::min((block + 1) * bk, position + 1) - 1;
  return "keys " + std::to_string(first) + "-" + std::to_string(last);
}

// Steps 1-5 for (query t, group r): token scores, block scores, forced blocks, ranking, selection.
void ExplainSelection(const Problem& problem, const Outputs& reference, int64_t t, int64_t r, std::string& out) {
  const Config& c = problem.config;
  const int64_t bk = c.block_size, position = t, visible = position / bk + 1, local = visible - 1;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const TensorView index_q = ViewOf(problem.index_q), index_k = ViewOf(problem.index_k);
  const std::vector<double> query = reference::Widen(index_q), keys = reference::Widen(index_k);
  const int64_t di = c.index_head_dim;
  const double* scores = &reference.block_scores[(r * total_q + t) * max_blocks];  // [max_blocks]

  out += "\n== group r = " + std::to_string(r) + " (query heads " + std::to_string(r * c.group_size()) + ".." +
         std::to_string((r + 1) * c.group_size() - 1) + " share its selection)\n";
  out += "index_q[t=" + std::to_string(t) + ", r=" + std::to_string(r) + "] = " + Row(problem.index_q, t, r) + "\n";
  out += "step 1. token scores x[s] = dot(index_q, index_k[s]) * index_scale, index_scale = " + Fixed(c.IndexScale()) +
         "\n";
  for (int64_t s = 0; s <= position; ++s) {
    const double x = CanonicalDot(&query[(t * c.num_kv_heads + r) * di], &keys[s * di], di) * c.IndexScale();
    out += "  key " + std::to_string(s) + " (block " + std::to_string(s / bk) +
           ") index_k = " + Row(problem.index_k, s, 0) + "  x = " + Fixed(x) + "\n";
  }
  const char* how = c.pooling == Pooling::kMax   ? "max of the block's visible token scores"
                    : c.pooling == Pooling::kLse ? "logsumexp of the block's visible token scores"
                                                 : "dot(index_q, mean of the block's visible index keys) * index_scale";
  out += "step 2. block scores M[b] (" + std::string(PoolingName(c.pooling)) + " pooling: " + how + ")\n";
  for (int64_t b = 0; b < visible; ++b) {
    std::string mean_key;  // mean pooling scores this key: the block's visible index keys averaged
    if (c.pooling == Pooling::kMean) {
      const int64_t first = b * bk, count = std::min(bk, position + 1 - first);
      for (int64_t d = 0; d < di; ++d) {
        double sum = 0;
        for (int64_t s = first; s < first + count; ++s) sum += keys[s * di + d];
        mean_key += (d == 0 ? "" : ", ") + Fixed(sum / double(count));
      }
      mean_key = " mean index_k = [" + mean_key + "]";
    }
    out += "  block " + std::to_string(b) + " (" + BlockKeys(b, bk, position) + (b == local ? ", local" : "") + ")" +
           mean_key + " M = " + Fixed(scores[b]) + "\n";
  }
  const int64_t init = std::min<int64_t>(c.init_blocks, local);
  std::string forced = "{";
  for (int64_t b = 0; b < init; ++b) forced += std::to_string(b) + " (init), ";
  forced += std::to_string(local) + " (local)}";
  out += "step 3. forced blocks F = " + forced + ": always selected, never ranked\n";
  std::vector<int64_t> ranked;
  for (int64_t b = init; b < local; ++b) ranked.push_back(b);
  std::stable_sort(ranked.begin(), ranked.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  const int64_t take = std::min<int64_t>(c.top_k - (init + 1), int64_t(ranked.size()));
  out += "step 4. ranking of the other " + std::to_string(ranked.size()) +
         " block(s): score descending, then block id ascending; the first " + std::to_string(take) + " are taken\n";
  for (size_t n = 0; n < ranked.size(); ++n) {
    const bool tied = (n > 0 && scores[ranked[n - 1]] == scores[ranked[n]]) ||
                      (n + 1 < ranked.size() && scores[ranked[n + 1]] == scores[ranked[n]]);
    out += "  " + std::to_string(n + 1) + ". block " + std::to_string(ranked[n]) + "  M = " + Fixed(scores[ranked[n]]) +
           (tied ? "  (tie: the lower id ranks first)" : "") + (int64_t(n) < take ? "  taken" : "") + "\n";
  }
  const int32_t* row = &reference.topk_indices[(r * total_q + t) * c.top_k];  // [top_k]
  std::string slots;
  for (int64_t slot = 0; slot < c.top_k; ++slot) slots += (slot == 0 ? "" : ", ") + std::to_string(row[slot]);
  out += "step 5. selection row (top_k = " + std::to_string(c.top_k) +
         " slots: ranked picks, then init blocks, then the local block last, -1 padding) = [" + slots + "]\n";
}

// Step 6 for (query t, head h): main scores over the selected keys, softmax weights, output, lse.
void ExplainAttention(const Problem& problem, const Outputs& reference, int64_t t, int64_t h, std::string& out) {
  const Config& c = problem.config;
  const int64_t r = h / c.group_size(), total_q = problem.batch().total_q(), d = c.head_dim, bk = c.block_size;
  const std::vector<double> q = reference::Widen(ViewOf(problem.q)), k = reference::Widen(ViewOf(problem.k));
  const int32_t* row = &reference.topk_indices[(r * total_q + t) * c.top_k];  // [top_k]
  std::vector<int64_t> selected_keys;                                         // ascending key position
  std::vector<int32_t> blocks;
  for (int64_t slot = 0; slot < c.top_k && row[slot] >= 0; ++slot) blocks.push_back(row[slot]);
  std::sort(blocks.begin(), blocks.end());
  for (int32_t b : blocks) {
    const int64_t end = std::min<int64_t>((b + 1) * int64_t(bk), t + 1);
    for (int64_t s = int64_t(b) * bk; s < end; ++s) selected_keys.push_back(s);
  }
  std::vector<double> logits;
  for (int64_t s : selected_keys) {
    logits.push_back(CanonicalDot(&q[(t * c.num_q_heads + h) * d], &k[(s * c.num_kv_heads + r) * d], d) *
                     c.SoftmaxScale());
  }
  const double m = *std::max_element(logits.begin(), logits.end());
  double l = 0;
  for (double logit : logits) l += CanonicalExp(logit - m);
  out += "step 6. head h = " + std::to_string(h) + ": q[t, h] = " + Row(problem.q, t, h) +
         "; softmax over the selected keys of score = dot(q, k[s]) * scale, scale = " + Fixed(c.SoftmaxScale()) + "\n";
  for (size_t j = 0; j < selected_keys.size(); ++j) {
    const int64_t s = selected_keys[j];
    out += "  key " + std::to_string(s) + " k = " + Row(problem.k, s, r) + " v = " + Row(problem.v, s, r) +
           "  score = " + Fixed(logits[j]) + "  weight = " + Fixed(CanonicalExp(logits[j] - m) / l) + "\n";
  }
  std::string values;
  for (int64_t e = 0; e < c.value_dim; ++e) {
    values += (e == 0 ? "" : ", ") + Fixed(reference.out[(t * c.num_q_heads + h) * c.value_dim + e]);
  }
  out +=
      "  out[t, h] = sum of weight * v = [" + values + "]  lse = " + Fixed(reference.lse[t * c.num_q_heads + h]) + "\n";
}

}  // namespace

Problem MakeExplainProblem(const Config& config, int32_t keys, uint64_t seed) {
  ProblemSpec spec;
  spec.config = config;
  spec.lengths = {{keys, keys}};
  spec.dtype = DType::kF64;
  spec.seed = seed;
  Problem problem = GenerateProblem(spec);
  uint64_t stream = 1;
  for (SafetensorsTensor* tensor : {&problem.q, &problem.k, &problem.v, &problem.index_q, &problem.index_k}) {
    RandomStream random(seed, stream++);
    RoundedNormals(*tensor, random);
  }
  return problem;
}

std::string ExplainQuery(const Problem& problem, const Outputs& reference, int64_t query) {
  const Config& c = problem.config;
  std::string out = "traced query t = " + std::to_string(query) + " at position " + std::to_string(query) +
                    ": it sees keys 0.." + std::to_string(query) + ", blocks 0.." +
                    std::to_string(query / c.block_size) + " (the last one is its local block)\n";
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    ExplainSelection(problem, reference, query, r, out);
    for (int64_t h = r * c.group_size(); h < (r + 1) * c.group_size(); ++h) {
      ExplainAttention(problem, reference, query, h, out);
    }
  }
  return out;
}

}  // namespace msa
