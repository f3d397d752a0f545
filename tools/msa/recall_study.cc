#include "tools/msa/recall_study.h"

#include <algorithm>
#include <limits>
#include <string>

#include "oracle/random.h"
#include "tools/msa/recall.h"

namespace msa {
namespace {

constexpr uint64_t kDistractorStream = 1000;  // streams 1..5 are GenerateProblem's tensors

// The history blocks query (position, group) may use as distractors: not forced, not holding its needles.
std::vector<int64_t> DistractorCandidates(const RecallSetup& setup, int64_t position) {
  const int64_t bk = setup.config.block_size, local = position / bk;
  std::vector<int64_t> candidates;
  for (int64_t block = std::min<int64_t>(setup.config.init_blocks, local); block < local; ++block) {
    bool holds_needle = false;
    for (int64_t j = 1; j <= setup.needles; ++j) holds_needle |= (position - j * setup.distance) / bk == block;
    if (!holds_needle) candidates.push_back(block);
  }
  return candidates;
}

// The squared norm of row (t, head) of a rank-3 tensor.
double SquaredNorm(const TensorView& view, int64_t t, int64_t head) {
  double sum = 0;
  for (int64_t d = 0; d < view.dim; ++d) sum += view.At(t, head, d) * view.At(t, head, d);
  return sum;
}

// keys[position, head] (+)= direction[t, direction_head] * factor, with factor chosen so that
// dot(direction row, added part) * scale == shift.
// docs:begin shift-key
void ShiftKey(SafetensorsTensor& keys, int64_t position, int64_t head, const SafetensorsTensor& direction, int64_t t,
              int64_t direction_head, double scale, double shift, bool replace) {
  const TensorView q = ViewOf(direction), k = ViewOf(keys);
  const double factor = shift / (SquaredNorm(q, t, direction_head) * scale);
  for (int64_t d = 0; d < q.dim; ++d) {
    const double base = replace ? 0.0 : k.At(position, head, d);
    SetElement(keys, position, head, d, base + q.At(t, direction_head, d) * factor);
  }
}
// docs:end shift-key

}  // namespace

Status ValidateRecallSetup(const RecallSetup& setup) {
  MSA_RETURN_IF_ERROR(ValidateConfig(setup.config));
  const auto fail = [](const std::string& flag, auto value, const std::string& rule) {
    return InvalidArgument(flag + " " + std::to_string(value) + ": " + rule);
  };
  if (setup.context < 1) return fail("--context", setup.context, "must be at least 1");
  if (setup.queries < 1 || setup.queries > setup.context) {
    return fail("--queries", setup.queries, "must be in [1, context " + std::to_string(setup.context) + "]");
  }
  if (setup.sequences < 1) return fail("--sequences", setup.sequences, "must be at least 1");
  if (setup.needles < 1) return fail("--needles", setup.needles, "must be at least 1");
  const int64_t first_position = setup.context - setup.queries;  // the earliest query's position
  if (setup.distance < 0 || setup.distance * setup.needles > first_position) {
    return fail("--distance", setup.distance,
                "must be in [0, (context - queries) / needles] = [0, " +
                    std::to_string(first_position / setup.needles) + "] so every needle lies in the context");
  }
  if (setup.needles > 1 && setup.distance < setup.queries) {
    return fail("--distance", setup.distance,
                "must be at least --queries " + std::to_string(setup.queries) +
                    " with several needles, so needles of different queries never share a key");
  }
  if (setup.distractors < 0) return fail("--distractors", setup.distractors, "must be at least 0");
  // Every query needs that many candidates; later queries see more blocks, but their needles can split into
  // more blocks than the first query's, so each position counts.
  int64_t available = std::numeric_limits<int64_t>::max();
  for (int64_t position = first_position; position < setup.context; ++position) {
    available = std::min(available, int64_t(DistractorCandidates(setup, position).size()));
  }
  if (setup.distractors > available) {
    return fail("--distractors", setup.distractors,
                "exceeds the " + std::to_string(available) + " history blocks free of needles and forced blocks");
  }
  return Status::Ok();
}

Problem NoiseProblem(const RecallSetup& setup) {
  ProblemSpec spec;
  spec.config = setup.config;
  spec.lengths.assign(setup.sequences, {setup.queries, setup.context});
  spec.dtype = DType::kF64;
  spec.seed = setup.seed;
  return GenerateProblem(spec);
}

PlantedProblem PlantNeedles(const RecallSetup& setup, Problem noise) {
  PlantedProblem planted{std::move(noise), {}};
  Problem& problem = planted.problem;
  problem.config = setup.config;
  const Config& c = setup.config;
  const int64_t bk = c.block_size;

  // Distractors first (keys shifted), so that needles placed afterwards keep their exact score.
  for (int64_t b = 0; b < setup.sequences; ++b) {
    for (int64_t i = 0; i < setup.queries; ++i) {
      const int64_t t = problem.cu_seqlens_q[b] + i, r = i % c.num_kv_heads;
      const int64_t position = setup.context - setup.queries + i;
      std::vector<int64_t> candidates = DistractorCandidates(setup, position);
      RandomStream random(setup.seed, kDistractorStream + uint64_t(t));
      for (int64_t n = 0; n < setup.distractors; ++n) {  // a partial Fisher-Yates draw
        std::swap(candidates[n], candidates[n + random.Below(int64_t(candidates.size()) - n)]);
        for (int64_t s = candidates[n] * bk; s < (candidates[n] + 1) * bk; ++s) {
          ShiftKey(problem.index_k, problem.cu_seqlens_k[b] + s, 0, problem.index_q, t, r, c.IndexScale(),
                   setup.distractor_strength, /*replace=*/false);
        }
      }
    }
  }
  for (int64_t b = 0; b < setup.sequences; ++b) {
    for (int64_t i = 0; i < setup.queries; ++i) {
      const int64_t t = problem.cu_seqlens_q[b] + i, r = i % c.num_kv_heads;
      const int64_t position = setup.context - setup.queries + i;
      // docs:begin plant-needle
      for (int64_t j = 1; j <= setup.needles; ++j) {
        const int64_t key = position - j * setup.distance, row = problem.cu_seqlens_k[b] + key;
        ShiftKey(problem.index_k, row, 0, problem.index_q, t, r, c.IndexScale(), setup.strength, /*replace=*/true);
        ShiftKey(problem.k, row, r, problem.q, t, r * c.group_size(), c.SoftmaxScale(), setup.strength,
                 /*replace=*/true);
        planted.needles.push_back({t, r, key, key / bk});
      }
      // docs:end plant-needle
    }
  }
  return planted;
}

std::vector<bool> NeedleHits(const PlantedProblem& planted, const std::vector<int32_t>& topk_indices) {
  std::vector<bool> hits;
  for (const PlantedNeedle& needle : planted.needles) {
    hits.push_back(SelectionHolds(planted.problem, topk_indices, needle.query_row, needle.group, needle.block));
  }
  return hits;
}

RecallMeasure MeasureRecall(const PlantedProblem& planted, const std::vector<int32_t>& topk_indices) {
  RecallMeasure measure;
  const std::vector<bool> hits = NeedleHits(planted, topk_indices);
  measure.needles = int64_t(hits.size());
  measure.hits = std::count(hits.begin(), hits.end(), true);
  measure.needle_recall = measure.needles == 0 ? 1.0 : double(measure.hits) / double(measure.needles);
  const MassRecall mass = SampledMassRecall(planted.problem, topk_indices, planted.problem.batch().total_q());
  measure.mass_recall_mean = mass.mean;
  measure.mass_recall_min = mass.min;
  measure.kept_fraction = KeptKeyFraction(planted.problem, topk_indices);
  return measure;
}

}  // namespace msa
