// Random problems from a spec (the project's own generator, so the goldens made from them are the same on every
// compiler) and a backend run on an owned problem (io/problem.h: Problem, Outputs).
#ifndef MSA_ORACLE_PROBLEM_H_
#define MSA_ORACLE_PROBLEM_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "io/problem.h"
#include "msa/msa.h"

namespace msa {

// What to generate: a config, (q_len, k_len) per sequence, the input dtype and a seed.
struct ProblemSpec {
  Config config;
  std::vector<std::pair<int32_t, int32_t>> lengths;  // (q_len, k_len) per sequence
  DType dtype = DType::kF64;
  uint64_t seed = 0;
  double query_scale = 1.0;       // multiplies q and index_q: 100 gives |scores| around 1e4 (large logits)
  bool few_valued_index = false;  // index_q, index_k drawn from {-1, 0, 1}: many exactly tied scores
  bool training = false;          // also dout (standard normal, spec.dtype): the backward and the KL are part of it
  bool with_dlse = false;         // also dlse (standard normal), with training
};

// Fills every input with standard normal values (our own generator; see query_scale and few_valued_index),
// rounded to spec.dtype.
// Each tensor draws from its own stream, so changing one tensor's size leaves the others unchanged.
Problem GenerateProblem(const ProblemSpec& spec);

// Runs Select then Attend of `backend` on `problem` into freshly allocated `outputs`; with dout in the problem, then
// Backward and IndexerKl on that selection.
Status RunBackend(const Backend& backend, const Problem& problem, Outputs* outputs,
                  const ProgressFn& select_progress = {}, const ProgressFn& attend_progress = {});

// Runs the FP64 reference on `problem` (the training functions too, with dout) at precision exact, whatever
// problem.config.precision asks of the backend being judged (the reference computes only exact): the expectation every
// precision is judged against.
Status RunReference(const Problem& problem, Outputs* outputs);

}  // namespace msa

#endif  // MSA_ORACLE_PROBLEM_H_
