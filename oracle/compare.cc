// The oracle's comparators (SPEC section 5): the judge's flow and the 2x rule for the float outputs.
#include "oracle/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>

#include "msa/forced_blocks.h"
#include "oracle/error_floor.h"
#include "oracle/judge_selection.h"
#include "oracle/locator.h"
#include "oracle/naive_lowp.h"
#include "oracle/precision.h"
#include "reference/reference.h"

namespace msa {
namespace {

// Bit equality, for our own FP64 backends.
TensorVerdict JudgeBits(const std::string& name, const std::vector<double>& got, const std::vector<double>& expected,
                        const std::function<Mismatch(int64_t)>& locate, int max_listed) {
  TensorVerdict verdict;
  verdict.name = name;
  verdict.precision = {Precision::kExact, "exact bits"};
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

// The largest |naive - expected| over the elements where both are finite, less each element's own allowance
// (when given), which the rule grants separately.
double NaiveError(const std::vector<double>& naive, const std::vector<double>& expected,
                  const std::vector<double>& allowance = {}) {
  double error = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(expected[i]) || !std::isfinite(naive[i])) continue;
    error = std::max(error, std::abs(naive[i] - expected[i]) - (allowance.empty() ? 0.0 : allowance[i]));
  }
  return error;
}

// The 2x rule: max|got - ref| <= 2 * max(naive error, floor) + one ulp of the precision at max|ref|, the naive
// error being the larger of its two scale orders; each element i may also have an allowance of its own
// (allowance[i], when given: fp16 block scores' rounding steps). Elements where exactly one side is non-finite
// fail on their own.
TensorVerdict JudgeRule(const std::string& name, const std::vector<double>& got, const std::vector<double>& expected,
                        double naive_error, double floor, const std::vector<double>& allowance,
                        const Chosen<Precision>& precision, const std::function<Mismatch(int64_t)>& locate,
                        int max_listed) {
  TensorVerdict verdict;
  verdict.name = name;
  verdict.precision = precision;
  verdict.judged = true;
  verdict.elements = int64_t(got.size());
  double max_reference = 0, squared_error = 0, squared_reference = 0;
  bool have_worst = false;
  for (double value : expected) {
    if (std::isfinite(value)) max_reference = std::max(max_reference, std::abs(value));
  }
  verdict.naive_error = naive_error;
  verdict.floor = floor;
  verdict.bound = 2 * std::max(naive_error, floor) + UlpAt(max_reference, precision.value);
  for (int64_t i = 0; i < int64_t(got.size()); ++i) {
    const bool finite_got = std::isfinite(got[i]), finite_expected = std::isfinite(expected[i]);
    double error;
    if (finite_got && finite_expected) {
      error = std::abs(got[i] - expected[i]);
      squared_error += error * error;
      squared_reference += expected[i] * expected[i];
    } else if (!finite_got && !finite_expected &&
               (got[i] == expected[i] || (std::isnan(got[i]) && std::isnan(expected[i])))) {
      continue;  // the same non-finite value on both sides (e.g. -inf where nothing is visible)
    } else {
      ++verdict.one_sided_nonfinite;
      error = HUGE_VAL;
    }
    Mismatch m = locate(i);
    m.got = got[i];
    m.expected = expected[i];
    m.ulps = finite_got && finite_expected ? error / UlpAt(expected[i], precision.value) : HUGE_VAL;
    if (!have_worst || error > verdict.max_error) {
      verdict.max_error = error;
      verdict.worst = m;
      have_worst = true;
    }
    verdict.max_ulps = std::max(verdict.max_ulps, m.ulps);
    const double element_allowance = allowance.empty() ? 0.0 : allowance[i];
    verdict.max_allowance = std::max(verdict.max_allowance, element_allowance);
    if (error > verdict.bound + element_allowance) {
      ++verdict.mismatches;
      if (int(verdict.listed.size()) < max_listed) verdict.listed.push_back(m);
    }
  }
  verdict.nmse = squared_reference > 0 ? squared_error / squared_reference : squared_error;
  verdict.relative_l2 = std::sqrt(verdict.nmse);
  verdict.passed = verdict.mismatches == 0;
  return verdict;
}

// The part of the naive evaluation a judged output comes from.
enum class NaivePart { kIndex, kAttention, kTraining };

// Naive evaluations by (precision, scale order, part), computed once each on the attention's selection.
class NaiveCache {
 public:
  NaiveCache(const Problem& problem, const std::vector<int32_t>& selection)
      : problem_(problem), selection_(selection) {}

  const NaiveOutputs& Get(Precision precision, ScaleOrder order, NaivePart part) {
    const auto key = std::make_tuple(precision, order, part);
    auto found = cache_.find(key);
    if (found == cache_.end()) {
      const NaiveParts parts{part == NaivePart::kIndex, part == NaivePart::kAttention, part == NaivePart::kTraining};
      found = cache_.emplace(key, NaiveEvaluate(problem_, precision, selection_, order, parts)).first;
    }
    return found->second;
  }

 private:
  const Problem& problem_;
  const std::vector<int32_t>& selection_;
  std::map<std::tuple<Precision, ScaleOrder, NaivePart>, NaiveOutputs> cache_;
};

constexpr ScaleOrder kScaleOrders[] = {ScaleOrder::kScaleAfterDot, ScaleOrder::kPrescaledQuery};

// The exact pooled block scores M [Hidx, total_q, max_blocks], before any score_format rounding: the reference's
// block_scores, or (score_format fp16, whose block_scores are rounded) the reference's index branch run native.
Status ExactBlockScores(const Problem& problem, const Outputs& reference, std::vector<double>* scores) {
  if (problem.config.score_format == ScoreFormat::kNative) {
    *scores = reference.block_scores;
    return Status::Ok();
  }
  Config native = problem.config;
  native.score_format = ScoreFormat::kNative;
  native.precision = Precision::kExact;
  std::vector<int32_t> topk(reference.topk_indices.size());
  scores->assign(reference.block_scores.size(), 0);
  return Select(*FindBackend("reference"), native, problem.index_inputs(), {topk.data(), scores->data(), nullptr});
}

// Per row [Hidx * total_q] of `selection`, the largest binary16 step a candidate's fp16 block score can take within
// tau (score_format fp16): what its index_lse may differ by in that row, on top of the fp32 error. Empty for native
// scores.
std::vector<double> Fp16RoundingSteps(const Problem& problem, const std::vector<double>& exact_scores,
                                      const std::vector<int32_t>& selection, double tau) {
  const Config& c = problem.config;
  if (c.score_format != ScoreFormat::kFp16) return {};
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  std::vector<double> steps(c.num_kv_heads * total_q, 0.0);
  for (int64_t row = 0; row < c.num_kv_heads * total_q; ++row) {
    for (int64_t slot = 0; slot < c.top_k && selection[row * c.top_k + slot] >= 0; ++slot) {
      const RankedInterval ranked =
          RankedIntervalOf(c, exact_scores[row * max_blocks + selection[row * c.top_k + slot]], tau);
      steps[row] = std::max(steps[row], ranked.hi - ranked.lo);
    }
  }
  return steps;
}

bool IsExact(const CandidateFormat& f, const Candidate& candidate) {
  const std::pair<const std::optional<std::vector<double>>*, const Chosen<Precision>*> outputs[] = {
      {&candidate.out, &f.out}, {&candidate.lse, &f.lse}, {&candidate.index_lse, &f.index_lse},
      {&candidate.dq, &f.dq},   {&candidate.dk, &f.dk},   {&candidate.dv, &f.dv},
      {&candidate.dqi, &f.dqi}, {&candidate.dki, &f.dki}, {&candidate.kl_loss, &f.kl_loss}};
  bool exact = f.score.value == Precision::kExact;
  for (const auto& [values, precision] : outputs) exact = exact && (!*values || precision->value == Precision::kExact);
  return exact;
}

// The training outputs of the reference on `selection` (the reference's own outputs when it is the reference's
// selection).
Status ExpectedTraining(const Problem& problem, const Outputs& reference, const std::vector<int32_t>& selection,
                        bool own_selection, Outputs* expected) {
  *expected = reference;
  if (!own_selection || !problem.dout) return Status::Ok();
  Config exact = problem.config;
  exact.precision = Precision::kExact;
  const SelectionView view{selection.data()};
  MSA_RETURN_IF_ERROR(Backward(*FindBackend("reference"), exact, problem.attention_inputs(), view,
                               problem.gradient_inputs(), expected->attention_gradients()));
  return IndexerKl(*FindBackend("reference"), exact, problem.index_inputs(), problem.attention_inputs(), view,
                   expected->indexer_kl_outputs());
}

std::vector<double> ToLseBase(std::vector<double> values, LseBase base) {
  if (base == LseBase::kTwo) {
    for (double& value : values) value *= std::numbers::log2e;
  }
  return values;
}

}  // namespace

std::string_view TopkLayoutName(TopkLayout layout) {
  return layout == TopkLayout::kQueryMajor ? "query_major" : "head_major";
}

bool ParseTopkLayout(std::string_view name, TopkLayout* layout) {
  return ParseByName(name, {TopkLayout::kHeadMajor, TopkLayout::kQueryMajor}, TopkLayoutName, layout);
}

std::string_view LseBaseName(LseBase base) { return base == LseBase::kTwo ? "2" : "e"; }

bool ParseLseBase(std::string_view name, LseBase* base) {
  return ParseByName(name, {LseBase::kE, LseBase::kTwo}, LseBaseName, base);
}

CandidateFormat BackendFormat(const Problem& problem, Precision precision) {
  CandidateFormat format;
  const std::string from = "the backend ran at " + std::string(PrecisionName(precision));
  format.out = format.dq = format.dk = format.dv = format.dqi = format.dki = format.kl_loss = {precision, from};
  if (precision == Precision::kExact) {
    format.score = format.lse = format.index_lse = {precision, from};
    return format;
  }
  // Whether the backend's rounding of its inputs to `precision` leaves these tensors unchanged.
  const auto unchanged = [precision](std::initializer_list<const SafetensorsTensor*> tensors) {
    for (const SafetensorsTensor* tensor : tensors) {
      const TensorView view = ViewOf(*tensor);
      for (int64_t i = 0; i < view.rows * view.heads * view.dim; ++i) {
        const double value = LoadAsDouble(view.data, view.dtype, i);
        if (RoundToPrecision(value, precision) != value) return false;
      }
    }
    return true;
  };
  // fp32 computes everything in fp32. The bf16 and fp16 kernels accumulate in fp32 but round the token scores to
  // their precision before the softmax, as a framework's eager attention does, so lse and index_lse are judged at
  // it; the block maxima they rank stay fp32 (scores at fp32) unless their rounding of the inputs changed the index
  // inputs, or the index is fp8 (Hopper's fp8 MMA accumulates with less than fp32 precision).
  format.lse = format.index_lse = {precision, from};
  const bool fp8_index = problem.config.index_format == IndexFormat::kE4M3 && precision != Precision::kFp32;
  const bool scores_fp32 = !fp8_index && unchanged({&problem.index_q, &problem.index_k});
  format.score = {scores_fp32 ? Precision::kFp32 : precision, from};
  return format;
}

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
  const int64_t total_q = problem.batch().total_q();
  const auto check_size = [](const char* name, size_t got, int64_t expected) {
    if (int64_t(got) == expected) return Status::Ok();
    return InvalidArgument(std::string(name) + " has " + std::to_string(got) + " elements: must have " +
                           std::to_string(expected));
  };
  if (candidate.topk_indices)
    MSA_RETURN_IF_ERROR(check_size("topk_indices", candidate.topk_indices->size(), c.num_kv_heads * total_q * c.top_k));
  if (candidate.out)
    MSA_RETURN_IF_ERROR(check_size("out", candidate.out->size(), total_q * c.num_q_heads * c.value_dim));
  if (candidate.lse) MSA_RETURN_IF_ERROR(check_size("lse", candidate.lse->size(), total_q * c.num_q_heads));
  if (candidate.index_lse)
    MSA_RETURN_IF_ERROR(check_size("index_lse", candidate.index_lse->size(), c.num_kv_heads * total_q));
  const int64_t total_k = problem.batch().total_k();
  const bool training =
      candidate.dq || candidate.dk || candidate.dv || candidate.dqi || candidate.dki || candidate.kl_loss;
  if (training && !problem.dout) {
    return InvalidArgument("training outputs (dq, dk, dv, dqi, dki, kl_loss) are judged only on inputs with dout");
  }
  for (const auto& [name, values, size] : {std::tuple{"dq", &candidate.dq, total_q * c.num_q_heads * c.head_dim},
                                           {"dk", &candidate.dk, total_k * c.num_kv_heads * c.head_dim},
                                           {"dv", &candidate.dv, total_k * c.num_kv_heads * c.value_dim},
                                           {"dqi", &candidate.dqi, total_q * c.num_kv_heads * c.index_head_dim},
                                           {"dki", &candidate.dki, total_k * c.index_head_dim},
                                           {"kl_loss", &candidate.kl_loss, int64_t{1}}}) {
    if (*values) MSA_RETURN_IF_ERROR(check_size(name, (*values)->size(), size));
  }

  *verdict = Verdict{};
  const CandidateFormat format = options.format ? *options.format : BackendFormat(problem, options.precision);
  verdict->format = format;
  verdict->exact_bits = options.exact_bits && IsExact(format, candidate);
  const Locator locator(problem);

  // tau: twice the larger of the naive block-score error at the score precision (both scale orders) and the
  // error analysis' floor, plus one ulp; or the user's.
  std::vector<double> exact_scores;
  MSA_RETURN_IF_ERROR(ExactBlockScores(problem, reference, &exact_scores));
  SelectionVerdict& selection = verdict->selection;
  if (options.tau) {
    selection.tau = *options.tau;
    selection.tau_from = "given";
  } else if (verdict->exact_bits) {
    selection.tau_from = "exact bits: the canonical slots";
  } else if (candidate.topk_indices || c.score_format == ScoreFormat::kFp16) {  // fp16: index_lse's step needs tau
    double score_error = 0, max_score = 0;
    for (ScaleOrder order : kScaleOrders) {
      score_error =
          std::max(score_error, NaiveError(NaiveBlockScores(problem, format.score.value, order), exact_scores));
    }
    for (double score : exact_scores) {
      if (std::isfinite(score)) max_score = std::max(max_score, std::abs(score));
    }
    const double floor = ErrorFloorsOf(problem, format.score.value).index_score;
    selection.tau = 2 * std::max(score_error, floor) + UlpAt(max_score, format.score.value);
    char text[160];
    std::snprintf(text, sizeof(text), "2 * max(naive %s block-score error %.3g, floor %.3g) + 1 ulp",
                  std::string(PrecisionName(format.score.value)).c_str(), score_error, floor);
    selection.tau_from = text;
  }

  // Selection: validity, order, layout and agreement, row by row. Attention is judged on the candidate's own
  // selection when it is usable (a near-tie flip is then never an attention error), else on the reference's.
  std::vector<int32_t> attention_selection = reference.topk_indices;
  bool own_selection = false;
  if (candidate.topk_indices) {
    const SelectionExpectation expected{&reference.topk_indices, &exact_scores, selection.tau};
    std::vector<int32_t> usable =
        JudgeSelection(problem, expected, *candidate.topk_indices, format.topk_layout.value, format.order.value,
                       verdict->exact_bits, options.max_listed, &selection);
    if (!usable.empty()) {
      own_selection = !SameBlockSets(usable, reference.topk_indices, c.top_k);
      attention_selection = std::move(usable);
      verdict->attention_selection = "candidate";
    } else {
      verdict->attention_selection = "reference";
    }
  } else {
    verdict->attention_selection = "reference";
  }
  if (!candidate.out && !candidate.lse && !candidate.index_lse && !training) return Status::Ok();

  // Expectations on the attention's selection: the reference's outputs, recomputed only where the candidate's
  // own selection holds other blocks (attention and index_lse read each row as a set).
  std::vector<double> expected_out = reference.out, expected_lse = reference.lse,
                      expected_index_lse = reference.index_lse;
  if (own_selection) {
    const SelectionView view{attention_selection.data()};
    if (candidate.out || candidate.lse) {
      MSA_RETURN_IF_ERROR(reference::AttendSelected(c, problem.attention_inputs(), view,
                                                    {expected_out.data(), expected_lse.data()}, {}));
    }
    if (candidate.index_lse) {
      Config exact = c;
      exact.precision = Precision::kExact;
      const IndexInputs given = problem.index_inputs();
      IndexInputs inputs = given;
      std::vector<double> rounded_q, rounded_k;  // index_format e4m3: the values every backend saw
      if (c.index_format == IndexFormat::kE4M3) {
        MSA_RETURN_IF_ERROR(RoundViewToE4M3(given.index_q, "index_q", &rounded_q, &inputs.index_q));
        MSA_RETURN_IF_ERROR(RoundViewToE4M3(given.index_k, "index_k", &rounded_k, &inputs.index_k));
      }
      MSA_RETURN_IF_ERROR(reference::IndexLseForSelection(exact, inputs, view, expected_index_lse.data()));
    }
  }

  Outputs expected_training;
  if (training) {
    MSA_RETURN_IF_ERROR(ExpectedTraining(problem, reference, attention_selection, own_selection, &expected_training));
  }
  NaiveCache naive(problem, attention_selection);
  const std::vector<double> fp16_steps = Fp16RoundingSteps(problem, exact_scores, attention_selection, selection.tau);
  const std::vector<double> none;
  const int max_listed = options.max_listed;
  const double base_scale = format.lse_base.value == LseBase::kTwo ? std::numbers::log2e : 1.0;
  struct Judged {
    const char* name;
    const std::optional<std::vector<double>>& got;
    const std::vector<double>& expected;
    const Chosen<Precision>& precision;
    NaivePart part;
    bool is_lse;
    std::vector<double> NaiveOutputs::*naive_values;
    double ErrorFloors::*floor;
    const std::vector<double>& allowance;  // per element, or empty
    std::function<Mismatch(int64_t)> locate;
  };
  const Judged judged[] = {
      {"out", candidate.out, expected_out, format.out, NaivePart::kAttention, false, &NaiveOutputs::out,
       &ErrorFloors::out, none, [&](int64_t i) { return locator.QueryMajor(i, c.num_q_heads, c.value_dim); }},
      {"lse", candidate.lse, expected_lse, format.lse, NaivePart::kAttention, true, &NaiveOutputs::lse,
       &ErrorFloors::lse, none, [&](int64_t i) { return locator.QueryMajor(i, c.num_q_heads, 1); }},
      {"index_lse", candidate.index_lse, expected_index_lse, format.index_lse, NaivePart::kIndex, true,
       &NaiveOutputs::index_lse, &ErrorFloors::index_lse, fp16_steps, [&](int64_t i) { return locator.GroupMajor(i); }},
      {"dq", candidate.dq, expected_training.dq, format.dq, NaivePart::kTraining, false, &NaiveOutputs::dq,
       &ErrorFloors::dq, none, [&](int64_t i) { return locator.QueryMajor(i, c.num_q_heads, c.head_dim); }},
      {"dk", candidate.dk, expected_training.dk, format.dk, NaivePart::kTraining, false, &NaiveOutputs::dk,
       &ErrorFloors::dk, none, [&](int64_t i) { return locator.KeyMajor(i, c.num_kv_heads, c.head_dim); }},
      {"dv", candidate.dv, expected_training.dv, format.dv, NaivePart::kTraining, false, &NaiveOutputs::dv,
       &ErrorFloors::dv, none, [&](int64_t i) { return locator.KeyMajor(i, c.num_kv_heads, c.value_dim); }},
      {"dqi", candidate.dqi, expected_training.dqi, format.dqi, NaivePart::kTraining, false, &NaiveOutputs::dqi,
       &ErrorFloors::dqi, none, [&](int64_t i) { return locator.QueryMajor(i, c.num_kv_heads, c.index_head_dim); }},
      {"dki", candidate.dki, expected_training.dki, format.dki, NaivePart::kTraining, false, &NaiveOutputs::dki,
       &ErrorFloors::dki, none, [&](int64_t i) { return locator.KeyMajor(i, 1, c.index_head_dim); }},
      {"kl_loss", candidate.kl_loss, expected_training.kl_loss, format.kl_loss, NaivePart::kTraining, false,
       &NaiveOutputs::kl_loss, &ErrorFloors::kl_loss, none, [&](int64_t) { return Mismatch{}; }},
  };
  for (const Judged& j : judged) {
    if (!j.got) continue;
    if (verdict->exact_bits) {
      verdict->tensors.push_back(JudgeBits(j.name, *j.got, j.expected, j.locate, max_listed));
      continue;
    }
    // lse and index_lse are judged in the candidate's base: the expectation, naive errors and floor scaled.
    const double scale = j.is_lse ? base_scale : 1.0;
    const std::vector<double> expected = j.is_lse ? ToLseBase(j.expected, format.lse_base.value) : j.expected;
    double naive_error = 0;
    for (ScaleOrder order : kScaleOrders) {
      const NaiveOutputs& outputs = naive.Get(j.precision.value, order, j.part);
      naive_error = std::max(naive_error, NaiveError(outputs.*j.naive_values, j.expected, j.allowance));
    }
    const TermSizes* term_sizes =
        j.part == NaivePart::kTraining
            ? &naive.Get(j.precision.value, ScaleOrder::kScaleAfterDot, NaivePart::kTraining).term_sizes
            : nullptr;
    const double floor = ErrorFloorsOf(problem, j.precision.value, term_sizes).*j.floor;
    std::vector<double> allowance = j.allowance;
    for (double& value : allowance) value *= scale;
    verdict->tensors.push_back(JudgeRule(j.name, *j.got, expected, scale * naive_error, scale * floor, allowance,
                                         j.precision, j.locate, max_listed));
  }
  return Status::Ok();
}

}  // namespace msa
