#include "oracle/judge_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "msa/forced_blocks.h"
#include "oracle/locator.h"

namespace msa {
namespace {

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

enum class RowResult { kIdentical, kNearTie, kViolation, kOrderFault, kInvalid };

struct RowJudgement {
  RowResult result = RowResult::kIdentical;
  std::string why;          // kViolation, kOrderFault, kInvalid
  int64_t local_slot = -1;  // kOrderFault
};

// One row: `scores` [visible] exact pooled scores, `got` and `expected` [top_k] (expected: the reference's slots).
RowJudgement JudgeRow(const Config& config, const double* scores, int64_t visible, const int32_t* got,
                      const int32_t* expected, double tau, SelectionOrder order, bool exact_bits) {
  const RowFault fault = ClassifySelectionRow(config, visible, got, order);
  if (fault.kind == RowFault::Kind::kInvalid) return {RowResult::kInvalid, "invalid: " + fault.message};
  const RowJudgement order_fault{RowResult::kOrderFault, fault.message, fault.local_slot};
  if (exact_bits) {
    if (std::equal(got, got + config.top_k, expected)) return {};
    if (fault.kind == RowFault::Kind::kOrder) return order_fault;
    return {RowResult::kViolation, "differs from the reference row (exact mode demands the canonical slots)"};
  }
  const ForcedBlocks forced = ForcedBlocksOf(visible, config.init_blocks, config.local_blocks, config.top_k);
  const int64_t valid = std::min<int64_t>(visible, config.top_k);
  std::vector<char> picked(visible, 0), reference_picked(visible, 0);  // ranked picks only (forced ones left out)
  for (int64_t slot = 0; slot < valid; ++slot) {
    if (!forced.IsForced(got[slot])) picked[got[slot]] = 1;
  }
  for (int64_t slot = 0; slot < forced.take; ++slot) reference_picked[expected[slot]] = 1;
  if (picked != reference_picked) {
    // The lowest value a reference pick can be ranked at, and the highest a block the reference left out can.
    double lowest_pick = HUGE_VAL, highest_left_out = -HUGE_VAL;
    int64_t best_left_out = -1;
    for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
      const RankedInterval ranked = RankedIntervalOf(config, scores[b], tau);
      if (reference_picked[b]) {
        lowest_pick = std::min(lowest_pick, ranked.lo);
      } else if (ranked.hi > highest_left_out) {
        highest_left_out = ranked.hi;
        best_left_out = b;
      }
    }
    for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
      const RankedInterval ranked = RankedIntervalOf(config, scores[b], tau);
      if (picked[b] && !reference_picked[b] && ranked.hi < lowest_pick) {
        return {RowResult::kViolation, "block " + std::to_string(b) + " (score " + Number(scores[b]) +
                                           ") was selected but ranks below every block the reference selected by "
                                           "more than tau"};
      }
      if (reference_picked[b] && !picked[b] && ranked.lo > highest_left_out) {
        return {RowResult::kViolation, "block " + std::to_string(b) + " (score " + Number(scores[b]) +
                                           ") was not selected but beats the best block left out (block " +
                                           std::to_string(best_left_out) + ", score " + Number(scores[best_left_out]) +
                                           ") by more than tau"};
      }
    }
    if (fault.kind == RowFault::Kind::kOrder) return order_fault;
    return {RowResult::kNearTie, ""};
  }
  if (fault.kind == RowFault::Kind::kOrder) return order_fault;
  return {};
}

// Judges every row of a head-major selection; returns whether every row is usable (valid, or an order fault).
bool JudgeRows(const Problem& problem, const SelectionExpectation& expected, const std::vector<int32_t>& topk,
               SelectionOrder order, bool exact_bits, int max_listed, SelectionVerdict* verdict) {
  const Config& c = problem.config;
  const Locator locator(problem);
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  bool usable = true;
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t row = r * total_q + t;
      const int64_t visible = locator.places[t].position / c.block_size + 1;
      const RowJudgement judged =
          JudgeRow(c, &(*expected.exact_scores)[row * max_blocks], visible, &topk[row * c.top_k],
                   &(*expected.reference_topk)[row * c.top_k], expected.tau, order, exact_bits);
      ++verdict->rows;
      std::vector<Mismatch>* list = &verdict->listed;
      switch (judged.result) {
        case RowResult::kIdentical:
          ++verdict->identical_rows;
          continue;
        case RowResult::kNearTie:
          ++verdict->near_tie_rows;
          continue;
        case RowResult::kViolation:
          ++verdict->violation_rows;
          break;
        case RowResult::kInvalid:
          ++verdict->invalid_rows;
          usable = false;
          break;
        case RowResult::kOrderFault:
          ++verdict->order_fault_rows;
          list = &verdict->order_listed;
          break;
      }
      if (int(list->size()) < max_listed) {
        Mismatch m = locator.GroupMajor(row);
        m.index = judged.local_slot;
        m.why = judged.why;
        list->push_back(m);
      }
    }
  }
  return usable;
}

bool RowsPass(const SelectionVerdict& v) {
  return v.invalid_rows == 0 && v.violation_rows == 0 && v.order_fault_rows == 0;
}

}  // namespace

RankedInterval RankedIntervalOf(const Config& config, double exact_score, double tau) {
  const double lo = exact_score - tau / 2, hi = exact_score + tau / 2;
  if (config.score_format == ScoreFormat::kFp16) return {RoundToBinary16(lo), RoundToBinary16(hi)};
  return {lo, hi};
}

std::vector<int32_t> ToHeadMajor(const std::vector<int32_t>& topk, TopkLayout layout, int64_t hidx, int64_t total_q,
                                 int64_t top_k) {
  if (layout == TopkLayout::kHeadMajor) return topk;
  std::vector<int32_t> head_major(topk.size());
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < hidx; ++r) {
      std::copy_n(&topk[(t * hidx + r) * top_k], top_k, &head_major[(r * total_q + t) * top_k]);
    }
  }
  return head_major;
}

std::vector<int32_t> JudgeSelection(const Problem& problem, const SelectionExpectation& expected,
                                    const std::vector<int32_t>& candidate_topk, TopkLayout layout, SelectionOrder order,
                                    bool exact_bits, int max_listed, SelectionVerdict* verdict) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q();
  verdict->judged = true;
  verdict->tau = expected.tau;
  verdict->layout.assumed = layout;
  verdict->layout.ambiguous = total_q == c.num_kv_heads;
  std::vector<int32_t> head_major = ToHeadMajor(candidate_topk, layout, c.num_kv_heads, total_q, c.top_k);
  bool usable = JudgeRows(problem, expected, head_major, order, exact_bits, max_listed, verdict);
  if (verdict->layout.ambiguous && !RowsPass(*verdict)) {
    const TopkLayout other = layout == TopkLayout::kHeadMajor ? TopkLayout::kQueryMajor : TopkLayout::kHeadMajor;
    std::vector<int32_t> transposed = ToHeadMajor(candidate_topk, other, c.num_kv_heads, total_q, c.top_k);
    SelectionVerdict other_reading = *verdict;
    other_reading.rows = other_reading.identical_rows = other_reading.near_tie_rows = other_reading.violation_rows =
        other_reading.invalid_rows = other_reading.order_fault_rows = 0;
    if (JudgeRows(problem, expected, transposed, order, exact_bits, 0, &other_reading) && RowsPass(other_reading)) {
      verdict->layout.transposed_passes = true;
      head_major = std::move(transposed);
      usable = true;
    }
  }
  verdict->passed = RowsPass(*verdict) && !verdict->layout.transposed_passes;
  if (!usable) head_major.clear();
  return head_major;
}

}  // namespace msa
