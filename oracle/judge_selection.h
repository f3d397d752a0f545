// The selection half of the judge (SPEC section 5): validity, order and layout of a candidate's topk_indices
// and its agreement with the reference's selection within tau.
#ifndef MSA_ORACLE_JUDGE_SELECTION_H_
#define MSA_ORACLE_JUDGE_SELECTION_H_

#include <cstdint>
#include <vector>

#include "oracle/compare.h"

namespace msa {

// What a selection is judged against.
struct SelectionExpectation {
  const std::vector<int32_t>* reference_topk = nullptr;  // [Hidx, total_q, top_k], canonical slots
  const std::vector<double>* exact_scores = nullptr;     // [Hidx, total_q, max_blocks] pooled block scores M
                                                         // (exact, before any score_format rounding)
  double tau = 0;
};

// The value a candidate ranks for a block of exact score m, as its precision moves m by up to tau / 2: the
// interval [lo, hi] (score_format native: [m - tau/2, m + tau/2]; fp16: the binary16 roundings of those).
struct RankedInterval {
  double lo = 0, hi = 0;
};
RankedInterval RankedIntervalOf(const Config& config, double exact_score, double tau);

// Judges candidate_topk (in `layout`) row by row into *verdict, with exact_bits demanding the reference's slots.
// Agreement of a usable row whose set differs from the reference's (P: the reference's ranked picks, S: the
// candidate's, intervals from RankedIntervalOf):
//   - a block of S outside P whose hi is below the lo of every block of P is a violation ("below theta - tau");
//   - a block of P outside S whose lo is above the hi of every ranked candidate outside P is a violation (it
//     beats everything the reference left out by more than tau: no ranking within the tolerance drops it);
//   - otherwise the row is a near-tie flip, counted. (Native scores: the first rule is SPEC section 5's
//     "every selected block scores at least theta - tau"; the second is its must-select rule anchored at the best
//     block left out, which is never looser, and both stay sound for fp16 scores, whose ties are common.)
// Where the shape cannot tell the layout (total_q == Hidx) and the assumed reading fails, the transposed reading
// is judged too; if it passes, the verdict is a layout error (verdict->layout.transposed_passes).
// Returns the usable selection in head-major layout ([Hidx, total_q, top_k]: the transposed reading for a layout
// error), or an empty vector when some row is invalid. Precondition: candidate_topk has Hidx * total_q * top_k
// entries.
std::vector<int32_t> JudgeSelection(const Problem& problem, const SelectionExpectation& expected,
                                    const std::vector<int32_t>& candidate_topk, TopkLayout layout, SelectionOrder order,
                                    bool exact_bits, int max_listed, SelectionVerdict* verdict);

// [total_q, Hidx, top_k] <-> [Hidx, total_q, top_k].
std::vector<int32_t> ToHeadMajor(const std::vector<int32_t>& topk, TopkLayout layout, int64_t hidx, int64_t total_q,
                                 int64_t top_k);

}  // namespace msa

#endif  // MSA_ORACLE_JUDGE_SELECTION_H_
