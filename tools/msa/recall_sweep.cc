#include "tools/msa/recall_sweep.h"

#include "oracle/compare.h"
#include "oracle/selection_contract.h"

namespace msa {
namespace {

// The judged backend's selection only (Select, no Attend): the study needs nothing else from it.
Status SelectOnly(const Backend& backend, const Problem& problem, std::vector<int32_t>* topk_indices) {
  Outputs outputs;
  outputs.Allocate(problem);
  MSA_RETURN_IF_ERROR(Select(backend, problem.config, problem.index_inputs(), outputs.selection_outputs()));
  *topk_indices = std::move(outputs.topk_indices);
  return Status::Ok();
}

// Fills the comparison fields of `point` from the oracle's selection verdict and the needles both hold.
Status CompareWithReference(const PlantedProblem& planted, const Outputs& reference,
                            const std::vector<int32_t>& selection, RecallPoint* point) {
  Candidate candidate;
  candidate.topk_indices = selection;
  JudgeOptions options;
  options.precision = point->precision;
  Verdict verdict;
  MSA_RETURN_IF_ERROR(Judge(planted.problem, reference, candidate, options, &verdict));
  point->near_tie_rows = verdict.selection.near_tie_rows;
  point->violation_rows = verdict.selection.violation_rows;
  point->invalid_rows = verdict.selection.invalid_rows;
  point->tau = verdict.selection.tau;
  point->agrees = verdict.selection.passed;
  const std::vector<bool> mine = NeedleHits(planted, selection), theirs = NeedleHits(planted, reference.topk_indices);
  for (size_t n = 0; n < mine.size(); ++n) point->recall_flips += mine[n] != theirs[n];
  return Status::Ok();
}

}  // namespace

std::vector<RecallSetup> ExpandSweep(const RecallSweep& sweep) {
  std::vector<RecallSetup> setups;
  for (int32_t context : sweep.contexts) {
    for (int block_size : sweep.block_sizes) {
      for (int64_t distance : sweep.distances) {
        for (double strength : sweep.strengths) {
          for (int top_k : sweep.top_ks) {
            for (Pooling pooling : sweep.poolings) {
              RecallSetup setup = sweep.base;
              setup.context = context;
              setup.config.block_size = block_size;
              setup.distance = distance;
              setup.strength = strength;
              setup.config.top_k = top_k;
              setup.config.pooling = pooling;
              setups.push_back(setup);
            }
          }
        }
      }
    }
  }
  return setups;
}

std::vector<RecallSetup> ShardSetups(const RecallSweep& sweep) {
  std::vector<RecallSetup> setups;
  const std::vector<RecallSetup> all = ExpandSweep(sweep);
  for (size_t p = 0; p < all.size(); ++p) {
    if (sweep.shard.Holds(int64_t(p))) setups.push_back(all[p]);
  }
  return setups;
}

Status RunRecallSweep(const RecallSweep& sweep, const std::function<void(int64_t, int64_t)>& progress,
                      std::vector<RecallPoint>* points) {
  const std::vector<RecallSetup> setups = ShardSetups(sweep);
  const int64_t total = int64_t(setups.size() * sweep.backends.size());
  points->clear();
  Problem noise;
  PlantedProblem planted;
  const RecallSetup* planted_for = nullptr;  // top_k and pooling do not change the inputs: plant once for them
  for (const RecallSetup& setup : setups) {
    if (planted_for == nullptr || planted_for->context != setup.context) noise = NoiseProblem(setup);
    if (planted_for == nullptr || planted_for->context != setup.context ||
        planted_for->config.block_size != setup.config.block_size || planted_for->distance != setup.distance ||
        planted_for->strength != setup.strength) {
      planted = PlantNeedles(setup, noise);
      planted_for = &setup;
    }
    planted.problem.config = setup.config;
    // The reference's selection and block scores, exact (all the selection comparator needs: no attention).
    Config exact = setup.config;
    exact.precision = Precision::kExact;
    Outputs reference;
    reference.Allocate(planted.problem);
    MSA_RETURN_IF_ERROR(
        Select(*FindBackend("reference"), exact, planted.problem.index_inputs(), reference.selection_outputs()));
    const RecallMeasure reference_measure = MeasureRecall(planted, reference.topk_indices);
    for (const Backend* backend : sweep.backends) {
      RecallPoint point;
      point.setup = setup;
      point.backend = std::string(backend->name);
      point.precision = backend->name == "reference" ? Precision::kExact : sweep.precision;
      if (backend->name == "reference") {
        point.measure = reference_measure;
      } else {
        planted.problem.config.precision = point.precision;
        std::vector<int32_t> selection;
        const Status status = SelectOnly(*backend, planted.problem, &selection);
        planted.problem.config.precision = setup.config.precision;
        MSA_RETURN_IF_ERROR(status);
        // MeasureRecall reads each row as a set of blocks: a selection that holds the reference's blocks in
        // every row, in any order (an unordered kernel, or ties ranked differently), measures the same.
        point.measure = SameBlockSets(selection, reference.topk_indices, setup.config.top_k)
                            ? reference_measure
                            : MeasureRecall(planted, selection);
        MSA_RETURN_IF_ERROR(CompareWithReference(planted, reference, selection, &point));
      }
      points->push_back(std::move(point));
      if (progress) progress(int64_t(points->size()), total);
    }
  }
  return Status::Ok();
}

}  // namespace msa
