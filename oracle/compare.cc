// The oracle's comparators (SPEC section 5).
#include "oracle/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "oracle/naive_lowp.h"
#include "oracle/precision.h"
#include "oracle/selection_contract.h"
#include "reference/reference.h"

namespace msa {
namespace {

// Locates flat element `index` of a tensor whose rows are [total_q, heads, inner] (query-major) or
// [heads, total_q] (group-major, index tensors).
struct Locator {
  const Problem& problem;
  std::vector<reference::QueryPlace> places;

  explicit Locator(const Problem& p) : problem(p), places(reference::PlaceQueries(p.batch())) {}

  Mismatch QueryMajor(int64_t index, int64_t heads, int64_t inner) const {
    Mismatch m;
    m.row = index / (heads * inner);
    m.head = (index / inner) % heads;
    m.index = inner > 1 ? index % inner : -1;
    Place(&m);
    return m;
  }
  Mismatch GroupMajor(int64_t index) const {
    Mismatch m;
    const int64_t total_q = problem.batch().total_q();
    m.head = index / total_q;
    m.row = index % total_q;
    Place(&m);
    return m;
  }
  void Place(Mismatch* m) const {
    m->sequence = places[m->row].sequence;
    m->query = m->row - problem.cu_seqlens_q[m->sequence];
  }
};

// Bit equality, for our own FP64 backends.
TensorVerdict JudgeBits(const std::string& name, const std::vector<double>& got, const std::vector<double>& expected,
                        const std::function<Mismatch(int64_t)>& locate, int max_listed) {
  TensorVerdict verdict;
  verdict.name = name;
  verdict.judged = true;
  verdict.elements = int64_t(got.size());
  for (int64_t i = 0; i < int64_t(got.size()); ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(double)) == 0) continue;
    ++verdict.mismatches;
    Mismatch m = locate(i);
    m.got = got[i];
    m.expected = expected[i];
    m.ulps = std::abs(got[i] - expected[i]) / UlpAt(expected[i], Precision::kExact);
    const double error = std::abs(got[i] - expected[i]);
    if (!(error <= verdict.max_error)) {  // NaN errors count as the worst
      verdict.max_error = std::isnan(error) ? HUGE_VAL : error;
      verdict.worst = m;
    }
    verdict.max_ulps = std::max(verdict.max_ulps, std::isnan(m.ulps) ? HUGE_VAL : m.ulps);
    if (int(verdict.listed.size()) < max_listed) verdict.listed.push_back(m);
  }
  verdict.passed = verdict.mismatches == 0;
  return verdict;
}

// The 2x rule: max|got - ref| <= 2 * max|naive - ref| + floor, floor = one ulp of the precision at max|ref|.
// Elements where exactly one side is non-finite fail on their own.
TensorVerdict JudgeRule(const std::string& name, const std::vector<double>& got, const std::vector<double>& expected,
                        const std::vector<double>& naive, Precision precision,
                        const std::function<Mismatch(int64_t)>& locate, int max_listed) {
  TensorVerdict verdict;
  verdict.name = name;
  verdict.ulp_precision = precision;
  verdict.judged = true;
  verdict.elements = int64_t(got.size());
  double max_reference = 0, squared_error = 0, squared_reference = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(expected[i])) {
      max_reference = std::max(max_reference, std::abs(expected[i]));
      if (std::isfinite(naive[i])) verdict.naive_error = std::max(verdict.naive_error, std::abs(naive[i] - expected[i]));
    }
  }
  verdict.bound = 2 * verdict.naive_error + UlpAt(max_reference, precision);
  for (int64_t i = 0; i < int64_t(got.size()); ++i) {
    const bool finite_got = std::isfinite(got[i]), finite_expected = std::isfinite(expected[i]);
    double error;
    if (finite_got && finite_expected) {
      error = std::abs(got[i] - expected[i]);
      squared_error += error * error;
      squared_reference += expected[i] * expected[i];
    } else if (!finite_got && !finite_expected && (got[i] == expected[i] || (std::isnan(got[i]) && std::isnan(expected[i])))) {
      continue;  // the same non-finite value on both sides (e.g. -inf where nothing is visible)
    } else {
      ++verdict.one_sided_nonfinite;
      error = HUGE_VAL;
    }
    Mismatch m = locate(i);
    m.got = got[i];
    m.expected = expected[i];
    m.ulps = finite_got && finite_expected ? error / UlpAt(expected[i], precision) : HUGE_VAL;
    if (verdict.worst.row < 0 || error > verdict.max_error) {
      verdict.max_error = error;
      verdict.worst = m;
    }
    verdict.max_ulps = std::max(verdict.max_ulps, m.ulps);
    if (error > verdict.bound) {
      ++verdict.mismatches;
      if (int(verdict.listed.size()) < max_listed) verdict.listed.push_back(m);
    }
  }
  verdict.nmse = squared_reference > 0 ? squared_error / squared_reference : squared_error;
  verdict.relative_l2 = std::sqrt(verdict.nmse);
  verdict.passed = verdict.mismatches == 0;
  return verdict;
}

// Selection agreement of one row (SPEC section 5). Returns "" when the row passes; counts near ties.
std::string JudgeSelectionRow(const Config& config, const double* scores, int64_t visible, const int32_t* got,
                              const int32_t* expected, double tau, bool exact_bits, SelectionVerdict* verdict) {
  if (Status status = CheckSelectionRow(config, visible, got); !status.ok()) {
    ++verdict->invalid_rows;
    return "invalid: " + status.message();
  }
  const int64_t valid = std::min<int64_t>(visible, config.top_k);
  if (exact_bits) {
    if (std::equal(got, got + config.top_k, expected)) {
      ++verdict->identical_rows;
      return "";
    }
    ++verdict->violation_rows;
    return "differs from the reference row (exact mode demands the canonical slots)";
  }
  std::vector<char> chosen(visible, 0), reference_chosen(visible, 0);
  for (int64_t slot = 0; slot < valid; ++slot) {
    chosen[got[slot]] = 1;
    reference_chosen[expected[slot]] = 1;
  }
  if (chosen == reference_chosen) {
    ++verdict->identical_rows;
    return "";
  }
  // theta: the lowest FP64 score among the reference's ranked (non-forced) picks.
  const int64_t local = visible - 1, init = std::min<int64_t>(config.init_blocks, local);
  const int64_t ranked = std::min<int64_t>(config.top_k - init - 1, local - init);
  double theta = HUGE_VAL;
  for (int64_t slot = 0; slot < ranked; ++slot) theta = std::min(theta, scores[expected[slot]]);
  for (int64_t b = init; b < local; ++b) {
    if (!chosen[b] && scores[b] > theta + tau) {
      ++verdict->violation_rows;
      return "block " + std::to_string(b) + " (score " + std::to_string(scores[b]) + ") beats theta " +
             std::to_string(theta) + " by more than tau but was not selected";
    }
    if (chosen[b] && scores[b] < theta - tau) {
      ++verdict->violation_rows;
      return "block " + std::to_string(b) + " (score " + std::to_string(scores[b]) + ") is below theta - tau = " +
             std::to_string(theta - tau) + " but was selected";
    }
  }
  ++verdict->near_tie_rows;
  return "";
}

}  // namespace

bool Verdict::passed() const {
  if (!selection.passed) return false;
  for (const TensorVerdict& tensor : tensors) {
    if (!tensor.passed) return false;
  }
  return true;
}

Status Judge(const Problem& problem, const Outputs& reference, const Candidate& candidate, const JudgeOptions& options,
             Verdict* verdict) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const auto check_size = [](const char* name, size_t got, int64_t expected) {
    if (int64_t(got) == expected) return Status::Ok();
    return InvalidArgument(std::string(name) + " has " + std::to_string(got) + " elements: must have " +
                           std::to_string(expected));
  };
  if (candidate.topk_indices) MSA_RETURN_IF_ERROR(check_size("topk_indices", candidate.topk_indices->size(), c.num_kv_heads * total_q * c.top_k));
  if (candidate.out) MSA_RETURN_IF_ERROR(check_size("out", candidate.out->size(), total_q * c.num_q_heads * c.value_dim));
  if (candidate.lse) MSA_RETURN_IF_ERROR(check_size("lse", candidate.lse->size(), total_q * c.num_q_heads));
  if (candidate.index_lse) MSA_RETURN_IF_ERROR(check_size("index_lse", candidate.index_lse->size(), c.num_kv_heads * total_q));

  *verdict = Verdict{};
  verdict->precision = options.precision;
  verdict->exact_bits = options.precision == Precision::kExact && options.exact_bits;
  const Locator locator(problem);

  // The candidate's attention outputs, if any, are judged against expectations computed below; a candidate
  // that supplies only a selection needs none of them (no naive attention, no reference attention).
  const bool judges_attention = candidate.out || candidate.lse || candidate.index_lse;

  // The naive evaluation on the reference selection gives tau (from its block-score error, which does not
  // depend on the selection, so a selection-only judgement evaluates the block scores alone).
  NaiveOutputs naive;
  if (judges_attention) {
    naive = NaiveEvaluate(problem, options.precision, reference.topk_indices);
  } else {
    naive.block_scores = NaiveBlockScores(problem, options.precision);
  }
  double score_error = 0, max_score = 0;
  for (size_t i = 0; i < reference.block_scores.size(); ++i) {
    if (!std::isfinite(reference.block_scores[i])) continue;
    score_error = std::max(score_error, std::abs(naive.block_scores[i] - reference.block_scores[i]));
    max_score = std::max(max_score, std::abs(reference.block_scores[i]));
  }
  SelectionVerdict& selection = verdict->selection;
  selection.tau = options.tau ? *options.tau : 2 * score_error + UlpAt(max_score, options.precision);

  // Selection: validity and agreement, row by row.
  bool selection_usable = false;
  if (candidate.topk_indices) {
    selection.judged = true;
    selection_usable = true;
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      for (int64_t t = 0; t < total_q; ++t) {
        const int64_t row = r * total_q + t;
        const int64_t visible = locator.places[t].position / c.block_size + 1;
        const int64_t invalid_before = selection.invalid_rows;
        const std::string why = JudgeSelectionRow(c, &reference.block_scores[row * max_blocks], visible,
                                                  &(*candidate.topk_indices)[row * c.top_k],
                                                  &reference.topk_indices[row * c.top_k], selection.tau,
                                                  verdict->exact_bits, &selection);
        ++selection.rows;
        if (selection.invalid_rows > invalid_before) selection_usable = false;
        if (!why.empty() && int(selection.listed.size()) < options.max_listed) {
          Mismatch m = locator.GroupMajor(row);
          m.why = why;
          selection.listed.push_back(m);
        }
      }
    }
    selection.passed = selection.invalid_rows == 0 && selection.violation_rows == 0;
  }

  // Attention is judged on the candidate's own selection when it is valid (a near-tie flip is then never an
  // attention error), else on the reference selection. The expectations are recomputed on the candidate's
  // selection only for the tensors it supplies, and only when some row holds other blocks than the
  // reference's: attention, index_lse and the naive evaluation read each row as a set, so a reordered row
  // gives the reference's values.
  const bool own_selection = selection_usable && judges_attention &&
                             !SameBlockSets(*candidate.topk_indices, reference.topk_indices, c.top_k);
  verdict->attention_selection = selection_usable ? "candidate" : "reference";
  std::vector<double> expected_out = reference.out, expected_lse = reference.lse, expected_index_lse = reference.index_lse;
  if (own_selection) {
    const SelectionView view{candidate.topk_indices->data()};
    if (candidate.out || candidate.lse) {
      const Backend& ref = *FindBackend("reference");
      MSA_RETURN_IF_ERROR(ref.attend(c, problem.attention_inputs(), view, {expected_out.data(), expected_lse.data()}, {}));
    }
    if (candidate.index_lse) {
      MSA_RETURN_IF_ERROR(reference::IndexLseForSelection(c, problem.index_inputs(), view, expected_index_lse.data()));
    }
    naive = NaiveEvaluate(problem, options.precision, *candidate.topk_indices);
  }

  // out is stored in the judged precision; lse and index_lse are kept in the accumulator's (fp32 for every
  // low precision), which sets their one-ulp floor and the unit of their ulps.
  Precision accumulator = options.precision == Precision::kExact ? Precision::kExact : Precision::kFp32;
  if (SignificandBits(candidate.lse_stored_as) < SignificandBits(accumulator)) accumulator = candidate.lse_stored_as;
  const int max_listed = options.max_listed;
  const auto judge = [&](const char* name, const std::optional<std::vector<double>>& got,
                         const std::vector<double>& expected, const std::vector<double>& naive_values,
                         Precision precision, const std::function<Mismatch(int64_t)>& locate) {
    if (!got) return;
    verdict->tensors.push_back(verdict->exact_bits
                                   ? JudgeBits(name, *got, expected, locate, max_listed)
                                   : JudgeRule(name, *got, expected, naive_values, precision, locate, max_listed));
  };
  judge("out", candidate.out, expected_out, naive.out, options.precision,
        [&](int64_t i) { return locator.QueryMajor(i, c.num_q_heads, c.value_dim); });
  judge("lse", candidate.lse, expected_lse, naive.lse, accumulator,
        [&](int64_t i) { return locator.QueryMajor(i, c.num_q_heads, 1); });
  judge("index_lse", candidate.index_lse, expected_index_lse, naive.index_lse, accumulator,
        [&](int64_t i) { return locator.GroupMajor(i); });
  return Status::Ok();
}

}  // namespace msa
