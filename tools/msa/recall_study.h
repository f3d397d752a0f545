// The recall study of SPEC section 5 ("recall of distant evidence"): plant needles (index keys aligned with
// a query at a distance d, strength a over Gaussian noise) and distractor blocks, then measure how often each
// backend's selection holds the needle's block, and how much of the dense softmax mass it keeps.
#ifndef MSA_TOOLS_MSA_RECALL_STUDY_H_
#define MSA_TOOLS_MSA_RECALL_STUDY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// One point of a sweep: the layer, the context and what is planted.
struct RecallSetup {
  Config config;                     // heads, dims, block_size, top_k, init_blocks, pooling (precision: the backend's)
  int32_t context = 4096;            // k_len of every sequence
  int32_t queries = 4;               // q_len of every sequence: the last `queries` positions (decode-like)
  int32_t sequences = 4;             // independent trials, one sequence each, in one batch
  int64_t distance = 1024;           // d: query position - position of its (first) needle
  double strength = 4.0;             // a: the needle's index (and main) score, in standard deviations of the noise
  int32_t needles = 1;               // needles per query, at distances d, 2d, ..., needles * d
  int32_t distractors = 0;           // blocks per query whose every key is shifted towards the query's index query
  double distractor_strength = 1.0;  // the shift of each distractor key's index score, in noise std units
  uint64_t seed = 1;
};

// Why a setup cannot be planted (a distance past the start of the context, ...); names the setting and value
// with the flag spelling of `msa recall`.
Status ValidateRecallSetup(const RecallSetup& setup);

// A needle: row (t, r) of the selection should hold `block`.
struct PlantedNeedle {
  int64_t query_row;     // t
  int64_t group;         // r = (query index within its sequence) % Hkv
  int64_t key_position;  // within its sequence
  int64_t block;         // key_position / block_size
};

struct PlantedProblem {
  Problem problem;                     // F64 inputs, config = the setup's
  std::vector<PlantedNeedle> needles;  // [sequences * queries * needles]
};

// Standard normal F64 inputs (oracle/random.h) for `setup`: they depend only on the context, queries,
// sequences, heads, dims and seed, so a sweep over distance, strength, top_k, block size or pooling reuses them.
Problem NoiseProblem(const RecallSetup& setup);

// Into `noise` (NoiseProblem(setup), or a copy of it), for query i of each sequence (group r = i % Hkv):
// distractor blocks (random history blocks other than its needles' and its local block) whose index keys
// get + c * index_q[t, r] with index score shift `distractor_strength`; then each needle key is REPLACED by
// index_q[t, r] scaled to index score `strength`, and its main key (kv head r) by q[t, r * G] scaled to
// main score `strength`. Precondition: ValidateRecallSetup passed.
PlantedProblem PlantNeedles(const RecallSetup& setup, Problem noise);

// Per needle: whether row (t, r) of the selection [Hidx, total_q, top_k] holds its block.
std::vector<bool> NeedleHits(const PlantedProblem& planted, const std::vector<int32_t>& topk_indices);

// What one backend's selection achieved on one planted problem.
struct RecallMeasure {
  int64_t needles = 0, hits = 0;
  double needle_recall = 0;     // hits / needles
  double mass_recall_mean = 0;  // over every (query, head) row, dense softmax mass inside the selection
  double mass_recall_min = 0;
  double kept_fraction = 0;  // share of dense causal (query, key) pairs the selection keeps
};
RecallMeasure MeasureRecall(const PlantedProblem& planted, const std::vector<int32_t>& topk_indices);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_STUDY_H_
