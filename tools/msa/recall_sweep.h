// Sweeps of the recall study (tools/msa/recall_study.h) over distance, strength, top_k, block size, context,
// pooling and backend, with every non-reference backend judged against the reference on the same inputs.
#ifndef MSA_TOOLS_MSA_RECALL_SWEEP_H_
#define MSA_TOOLS_MSA_RECALL_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oracle/shard.h"
#include "tools/msa/recall_study.h"

namespace msa {

struct RecallSweep {
  RecallSetup base;  // everything not swept (heads, dims, init blocks, queries, sequences, needles, seed, ...)
  std::vector<int32_t> contexts;
  std::vector<int64_t> distances;
  std::vector<double> strengths;
  std::vector<int> top_ks, block_sizes;
  std::vector<Pooling> poolings;
  std::vector<const Backend*> backends;     // reported in this order; the reference (if listed) runs exact
  Precision precision = Precision::kExact;  // what every other backend runs
  Shard shard;                              // runs the setups at positions p of ExpandSweep with p % N == I
};

// One row of the study: one backend on one setup.
struct RecallPoint {
  RecallSetup setup;
  std::string backend;
  Precision precision = Precision::kExact;
  RecallMeasure measure;
  // Against the reference's selection on the same inputs (all zero for the reference itself):
  int64_t recall_flips = 0;    // needles held by exactly one of the two selections
  int64_t near_tie_rows = 0;   // rows whose set differs only by blocks within tau of the threshold
  int64_t violation_rows = 0;  // rows that miss a must-select block or hold a block below theta - tau
  int64_t invalid_rows = 0;    // rows that break the selection contract
  double tau = 0;
  bool agrees = true;  // no violation and no invalid row: every recall difference is a near tie
};

// The setups of the sweep, in the order they run (context, block size, distance, strength, top_k, pooling).
std::vector<RecallSetup> ExpandSweep(const RecallSweep& sweep);

// The setups of the sweep's shard (all of them for 0/1), in ExpandSweep order.
std::vector<RecallSetup> ShardSetups(const RecallSweep& sweep);

// Runs every setup of the sweep's shard with every backend, judging each non-reference backend's selection against
// the exact reference's on the same inputs. `progress(done, total)` after each (setup, backend); points come out
// in ExpandSweep order, backends in sweep order. Errors: a backend that fails to run (Status). Each setup's inputs
// depend on the setup alone, so a shard's points equal the whole run's at its positions.
Status RunRecallSweep(const RecallSweep& sweep, const std::function<void(int64_t, int64_t)>& progress,
                      std::vector<RecallPoint>* points);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_SWEEP_H_
