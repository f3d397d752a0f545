#include "oracle/properties.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "msa/forced_blocks.h"
#include "oracle/compare.h"
#include "oracle/judge_selection.h"
#include "oracle/naive_lowp.h"
#include "oracle/precision.h"
#include "oracle/random.h"
#include "oracle/selection_contract.h"
#include "reference/canonical.h"
#include "reference/reference.h"

namespace msa {
namespace {

Status Fail(const char* property, const std::string& what) {
  return InvalidArgument(std::string(property) + ": " + what);
}

Status Attend(const Backend& backend, const Problem& problem, const std::vector<int32_t>& selection, Outputs* outputs) {
  outputs->Allocate(problem);
  return Attend(backend, problem.config, problem.attention_inputs(), SelectionView{selection.data()},
                outputs->attention_outputs());
}

template <typename T>
Status SameBits(const char* property, const char* name, const std::vector<T>& got, const std::vector<T>& expected) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(T)) != 0) {
      return Fail(property, std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                                " differs from " + std::to_string(expected[i]));
    }
  }
  return Status::Ok();
}

// Judge options for a problem's precision: exact bits at kExact, the oracle's rules otherwise.
JudgeOptions RulesFor(const Problem& problem) {
  JudgeOptions options;
  options.precision = problem.config.precision;
  return options;
}

// Exact precision: bit equality of the supplied tensors; lower precisions: the oracle's rules.
Status Agrees(const char* property, const Problem& problem, const Outputs& expected, const Candidate& candidate) {
  Verdict verdict;
  MSA_RETURN_IF_ERROR(Judge(problem, expected, candidate, RulesFor(problem), &verdict));
  if (verdict.passed()) return Status::Ok();
  return Fail(property, "\n" + FormatVerdict(verdict));
}

// Calls fn(row, head, d) for every element of a rank-3 tensor.
template <typename Fn>
void ForEachElement(const SafetensorsTensor& tensor, Fn&& fn) {
  for (int64_t row = 0; row < tensor.shape[0]; ++row) {
    for (int64_t head = 0; head < tensor.shape[1]; ++head) {
      for (int64_t d = 0; d < tensor.shape[2]; ++d) fn(row, head, d);
    }
  }
}

// A copy of `tensor` in a buffer whose gaps between heads and rows, and tail, hold NaN: [rows, heads, dim]
// with head_stride = dim + 3 and row_stride = heads * (dim + 3) + 5.
struct PoisonedTensor {
  std::vector<uint8_t> storage;
  TensorView view;
};

PoisonedTensor PoisonedCopy(const SafetensorsTensor& tensor) {
  const TensorView packed = ViewOf(tensor);
  const int64_t head_stride = packed.dim + 3, row_stride = packed.heads * head_stride + 5;
  const int64_t elements = packed.rows * row_stride + 7, size = DTypeSize(tensor.dtype);
  PoisonedTensor poisoned;
  poisoned.storage.resize(elements * size);
  SafetensorsTensor scratch{"", tensor.dtype, {elements, 1, 1}, {}};
  scratch.bytes.resize(poisoned.storage.size());
  for (int64_t e = 0; e < elements; ++e) SetElement(scratch, e, 0, 0, std::numeric_limits<double>::quiet_NaN());
  poisoned.storage = std::move(scratch.bytes);
  for (int64_t row = 0; row < packed.rows; ++row) {
    for (int64_t head = 0; head < packed.heads; ++head) {
      std::memcpy(&poisoned.storage[(row * row_stride + head * head_stride) * size],
                  &tensor.bytes[packed.Offset(row, head, 0) * size], packed.dim * size);
    }
  }
  poisoned.view =
      TensorView{poisoned.storage.data(), tensor.dtype, packed.rows, packed.heads, packed.dim, row_stride, head_stride};
  return poisoned;
}

}  // namespace

std::vector<Precision> SupportedPrecisions(const Backend& backend, const Config& config) {
  std::vector<Precision> precisions;
  for (Precision precision : {Precision::kExact, Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    Config at = config;
    at.precision = precision;
    if (backend.supports(at).ok()) precisions.push_back(precision);
  }
  return precisions;
}

Status CheckSelectionContract(const Backend& backend, const ProblemSpec& spec) {
  const Problem problem = GenerateProblem(spec);
  Outputs outputs;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  if (Status status = CheckSelection(problem, outputs.topk_indices); !status.ok()) {
    return Fail("selection contract", status.message());
  }
  for (const auto* tensor : {&outputs.out, &outputs.lse, &outputs.index_lse}) {
    for (double value : *tensor) {
      if (!std::isfinite(value)) return Fail("selection contract", "an output is not finite");
    }
  }
  return Status::Ok();
}

Status CheckDenseEquivalence(const Backend& backend, const ProblemSpec& spec) {
  ProblemSpec covering = spec;
  covering.config.top_k = std::max<int>(spec.config.top_k, int(MaxBlocks(spec.config, GenerateProblem(spec).batch())));
  const Problem problem = GenerateProblem(covering);
  Outputs dense;
  MSA_RETURN_IF_ERROR(RunReference(problem, &dense));  // its selection: every block
  Config exact = problem.config;
  exact.precision = Precision::kExact;
  MSA_RETURN_IF_ERROR(
      reference::DenseCausalAttention(exact, problem.attention_inputs(), dense.attention_outputs(), {}));
  Outputs outputs;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  return Agrees("dense equivalence", problem, dense, Candidate{.out = outputs.out, .lse = outputs.lse});
}

Status CheckCausality(const Backend& backend, const ProblemSpec& spec, uint64_t seed) {
  Problem problem = GenerateProblem(spec);
  Outputs before;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &before));
  RandomStream random(seed, 99);
  const int64_t sequences = problem.batch().num_sequences();
  const int64_t b = random.Below(sequences), key_begin = problem.cu_seqlens_k[b];
  const int64_t k_len = problem.cu_seqlens_k[b + 1] - key_begin;
  if (k_len == 0) return Status::Ok();
  const int64_t cut = random.Below(k_len);  // keys after the cut change
  for (SafetensorsTensor* tensor : {&problem.k, &problem.v, &problem.index_k}) {
    ForEachElement(*tensor, [&](int64_t row, int64_t head, int64_t d) {
      if (row > key_begin + cut && row < key_begin + k_len) SetElement(*tensor, row, head, d, 10 * random.Normal());
    });
  }
  Outputs after;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &after));
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t t = problem.cu_seqlens_q[b]; t < problem.cu_seqlens_q[b + 1]; ++t) {
    if (places[t].position > cut) continue;  // this query may see the rewritten keys
    const auto same = [](const auto* a, const auto* z, int64_t n) { return std::memcmp(a, z, n * sizeof(*a)) == 0; };
    bool unchanged = same(&before.out[t * c.num_q_heads * c.value_dim], &after.out[t * c.num_q_heads * c.value_dim],
                          c.num_q_heads * c.value_dim) &&
                     same(&before.lse[t * c.num_q_heads], &after.lse[t * c.num_q_heads], c.num_q_heads);
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      const int64_t row = r * total_q + t;
      unchanged = unchanged && same(&before.topk_indices[row * c.top_k], &after.topk_indices[row * c.top_k], c.top_k) &&
                  same(&before.block_scores[row * max_blocks], &after.block_scores[row * max_blocks], max_blocks) &&
                  same(&before.index_lse[row], &after.index_lse[row], 1);
    }
    if (!unchanged) {
      return Fail("causality", "query row " + std::to_string(t) + " (position " + std::to_string(places[t].position) +
                                   ") changed when keys after position " + std::to_string(cut) + " changed");
    }
  }
  return Status::Ok();
}

Status CheckGqaSharing(const Backend& backend, const ProblemSpec& spec) {
  Problem problem = GenerateProblem(spec);
  const Config& c = problem.config;
  const int64_t g = c.group_size();
  const SafetensorsTensor original = problem.q;
  const TensorView q = ViewOf(original);
  ForEachElement(problem.q,
                 [&](int64_t t, int64_t h, int64_t d) { SetElement(problem.q, t, h, d, q.At(t, h - h % g, d)); });
  Outputs outputs;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  for (int64_t t = 0; t < problem.batch().total_q(); ++t) {
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      const int64_t first = h - h % g;
      if (std::memcmp(&outputs.out[(t * c.num_q_heads + h) * c.value_dim],
                      &outputs.out[(t * c.num_q_heads + first) * c.value_dim], c.value_dim * sizeof(double)) != 0 ||
          std::memcmp(&outputs.lse[t * c.num_q_heads + h], &outputs.lse[t * c.num_q_heads + first], sizeof(double)) !=
              0) {
        return Fail("GQA sharing", "query row " + std::to_string(t) + ": head " + std::to_string(h) +
                                       " differs from head " + std::to_string(first) +
                                       " of its group although their queries are equal");
      }
    }
  }
  return Status::Ok();
}

Status CheckGroupIndependence(const Backend& backend, const ProblemSpec& spec, uint64_t seed) {
  Problem problem = GenerateProblem(spec);
  Outputs before, after;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &before));
  RandomStream random(seed, 7);
  ForEachElement(problem.index_q, [&](int64_t t, int64_t r, int64_t d) {
    if (r == 0) SetElement(problem.index_q, t, r, d, random.Normal());
  });
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &after));
  const int64_t group_0_entries = problem.batch().total_q() * problem.config.top_k;
  if (!std::equal(before.topk_indices.begin() + group_0_entries, before.topk_indices.end(),
                  after.topk_indices.begin() + group_0_entries)) {
    return Fail("group independence", "changing group 0's index queries changed another group's selection");
  }
  return Status::Ok();
}

Status CheckBlockOrderInvariance(const Backend& backend, const ProblemSpec& spec, uint64_t seed) {
  const Problem problem = GenerateProblem(spec);
  Outputs reference;
  MSA_RETURN_IF_ERROR(RunReference(problem, &reference));
  std::vector<int32_t> shuffled = reference.topk_indices;
  RandomStream random(seed, 11);
  for (size_t row = 0; row < shuffled.size(); row += problem.config.top_k) {
    int32_t* begin = &shuffled[row];
    const int64_t valid = std::find(begin, begin + problem.config.top_k, -1) - begin;
    for (int64_t i = valid - 1; i > 0; --i) std::swap(begin[i], begin[random.Below(i + 1)]);  // Fisher-Yates
  }
  Outputs ordered, reordered;
  MSA_RETURN_IF_ERROR(Attend(backend, problem, reference.topk_indices, &ordered));
  MSA_RETURN_IF_ERROR(Attend(backend, problem, shuffled, &reordered));
  if (problem.config.precision == Precision::kExact) {
    MSA_RETURN_IF_ERROR(SameBits("block order invariance", "out", reordered.out, ordered.out));
    return SameBits("block order invariance", "lse", reordered.lse, ordered.lse);
  }
  return Agrees("block order invariance", problem, reference, Candidate{.out = reordered.out, .lse = reordered.lse});
}

Status CheckShiftInvariance(const Backend& backend, const ProblemSpec& spec, uint64_t seed, double shift) {
  // Small-integer index inputs and index_scale = 1/4 make every token score exact in every precision, so
  // adding index_q[t, r, 0] * shift to a row's scores (through index_k[:, 0] += shift) is an exact shift.
  // Max pooling only: an lse-pooled block score m + log(l) rounds differently once shifted, so two blocks can
  // tie after the shift that did not tie before.
  // fp16 scores are not shift invariant (a shift moves values across binary16 rounding points): native ones.
  ProblemSpec exact_scores = spec;
  exact_scores.config.index_scale = 0.25;
  exact_scores.config.pooling = Pooling::kMax;
  exact_scores.config.score_format = ScoreFormat::kNative;
  Problem problem = GenerateProblem(exact_scores);
  RandomStream random(seed, 13);
  for (SafetensorsTensor* tensor : {&problem.index_q, &problem.index_k}) {
    ForEachElement(*tensor, [&](int64_t row, int64_t head, int64_t d) {
      SetElement(*tensor, row, head, d, double(random.Below(7) - 3));
    });
  }
  Outputs before, after;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &before));
  const TensorView index_k = ViewOf(problem.index_k);
  for (int64_t s = 0; s < index_k.rows; ++s) SetElement(problem.index_k, s, 0, 0, index_k.At(s, 0, 0) + shift);
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &after));
  return SameBits("shift invariance", "topk_indices", after.topk_indices, before.topk_indices);
}

Status CheckScalingV(const Backend& backend, const ProblemSpec& spec) {
  Problem problem = GenerateProblem(spec);
  // v on the grid of the precision (held in F64): doubling a value that the backend would round is not exact
  // where the grid's spacing does not double with it (fp16 below 2^-14: 2 R(v) != R(2 v)).
  const std::vector<double> widened = reference::Widen(ViewOf(problem.v));  // [total_k, Hkv, Dv]
  problem.v.dtype = DType::kF64;
  problem.v.bytes.resize(widened.size() * sizeof(double));
  size_t next = 0;
  ForEachElement(problem.v, [&](int64_t s, int64_t h, int64_t d) {
    SetElement(problem.v, s, h, d, RoundToPrecision(widened[next++], problem.config.precision));
  });
  Outputs base, doubled;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &base));
  const SafetensorsTensor original = problem.v;
  const TensorView v = ViewOf(original);
  ForEachElement(problem.v,
                 [&](int64_t s, int64_t h, int64_t d) { SetElement(problem.v, s, h, d, 2 * v.At(s, h, d)); });
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &doubled));
  std::vector<double> expected = base.out;
  for (double& value : expected) value *= 2;
  MSA_RETURN_IF_ERROR(SameBits("scaling v by 2", "out", doubled.out, expected));
  return SameBits("scaling v by 2", "lse", doubled.lse, base.lse);
}

Status CheckLinearityInV(const Backend& backend, const ProblemSpec& spec, uint64_t seed) {
  Problem problem = GenerateProblem(spec);
  const std::vector<double> v = reference::Widen(ViewOf(problem.v));  // [total_k, Hkv, Dv]
  // v in F64, so that v + w is stored exactly as computed (any input dtype is allowed).
  problem.v.dtype = DType::kF64;
  problem.v.bytes.resize(v.size() * sizeof(double));
  RandomStream random(seed, 17);
  std::vector<double> w(v.size());
  for (double& value : w) value = random.Normal();
  const auto run_with_values = [&](const std::function<double(size_t)>& value, Outputs* outputs) {
    size_t i = 0;
    ForEachElement(problem.v, [&](int64_t s, int64_t h, int64_t d) { SetElement(problem.v, s, h, d, value(i++)); });
    return RunBackend(backend, problem, outputs);
  };
  Outputs with_v, with_w, with_sum;
  MSA_RETURN_IF_ERROR(run_with_values([&](size_t i) { return v[i]; }, &with_v));
  MSA_RETURN_IF_ERROR(run_with_values([&](size_t i) { return w[i]; }, &with_w));
  MSA_RETURN_IF_ERROR(run_with_values([&](size_t i) { return v[i] + w[i]; }, &with_sum));
  double magnitude = 1;
  for (size_t i = 0; i < v.size(); ++i) magnitude = std::max({magnitude, std::abs(v[i]), std::abs(w[i])});
  const Precision precision = problem.config.precision;
  const double tolerance = precision == Precision::kExact ? 1e-13 * magnitude : 8 * UlpAt(magnitude, precision);
  for (size_t i = 0; i < with_sum.out.size(); ++i) {
    const double error = std::abs(with_sum.out[i] - (with_v.out[i] + with_w.out[i]));
    if (!(error <= tolerance)) {
      return Fail("linearity in v", "out[" + std::to_string(i) + "]: out(v + w) - out(v) - out(w) = " +
                                        std::to_string(error) + " > " + std::to_string(tolerance));
    }
  }
  return Status::Ok();
}

Status CheckSuffixRule(const Backend& backend, const ProblemSpec& spec, int32_t k_len, int32_t q_len) {
  ProblemSpec full_spec = spec;
  full_spec.lengths = {{k_len, k_len}};
  const Problem full = GenerateProblem(full_spec);
  Problem chunk = full;
  chunk.cu_seqlens_q = {0, q_len};
  for (SafetensorsTensor* tensor : {&chunk.q, &chunk.index_q}) {  // keep the last q_len query rows
    const int64_t row_bytes = int64_t(tensor->bytes.size()) / k_len;
    tensor->bytes.erase(tensor->bytes.begin(), tensor->bytes.begin() + (k_len - q_len) * row_bytes);
    tensor->shape[0] = q_len;
  }
  Outputs full_outputs, chunk_outputs;
  MSA_RETURN_IF_ERROR(RunBackend(backend, full, &full_outputs));
  MSA_RETURN_IF_ERROR(RunBackend(backend, chunk, &chunk_outputs));
  // The full prefill's rows k_len - q_len .. k_len - 1, as outputs of the chunk problem.
  const Config& c = full.config;
  const int64_t skip = k_len - q_len, blocks = MaxBlocks(c, full.batch());
  Outputs rows;
  rows.out.assign(full_outputs.out.begin() + skip * c.num_q_heads * c.value_dim, full_outputs.out.end());
  rows.lse.assign(full_outputs.lse.begin() + skip * c.num_q_heads, full_outputs.lse.end());
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    const int64_t first = r * k_len + skip;
    rows.topk_indices.insert(rows.topk_indices.end(), full_outputs.topk_indices.begin() + first * c.top_k,
                             full_outputs.topk_indices.begin() + (r + 1) * k_len * c.top_k);
    rows.block_scores.insert(rows.block_scores.end(), full_outputs.block_scores.begin() + first * blocks,
                             full_outputs.block_scores.begin() + (r + 1) * k_len * blocks);
    rows.index_lse.insert(rows.index_lse.end(), full_outputs.index_lse.begin() + first,
                          full_outputs.index_lse.begin() + (r + 1) * k_len);
  }
  if (c.precision == Precision::kExact) {
    MSA_RETURN_IF_ERROR(SameBits("suffix rule", "topk_indices", chunk_outputs.topk_indices, rows.topk_indices));
    MSA_RETURN_IF_ERROR(SameBits("suffix rule", "out", chunk_outputs.out, rows.out));
    return SameBits("suffix rule", "lse", chunk_outputs.lse, rows.lse);
  }
  Outputs reference;
  MSA_RETURN_IF_ERROR(RunReference(chunk, &reference));
  MSA_RETURN_IF_ERROR(Agrees(
      "suffix rule (chunk)", chunk, reference,
      Candidate{.topk_indices = chunk_outputs.topk_indices, .out = chunk_outputs.out, .lse = chunk_outputs.lse}));
  return Agrees("suffix rule (full prefill rows)", chunk, reference,
                Candidate{.topk_indices = rows.topk_indices, .out = rows.out, .lse = rows.lse});
}

Status CheckSoftmaxRowsSumToOne(const Backend& backend, const ProblemSpec& spec) {
  Problem problem = GenerateProblem(spec);
  ForEachElement(problem.v, [&](int64_t s, int64_t h, int64_t d) { SetElement(problem.v, s, h, d, 1.0); });
  Outputs outputs;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  // Exact: sum_j p_j * 1 is the same sum as l, so out = l / l = 1. Otherwise within 4 ulps of the precision.
  const double tolerance =
      problem.config.precision == Precision::kExact ? 0.0 : 4 * UlpAt(1.0, problem.config.precision);
  for (size_t i = 0; i < outputs.out.size(); ++i) {
    if (!(std::abs(outputs.out[i] - 1.0) <= tolerance)) {
      return Fail("softmax rows sum to 1",
                  "out[" + std::to_string(i) + "] = " + std::to_string(outputs.out[i]) + " with v = 1");
    }
  }
  return Status::Ok();
}

Status CheckMaxDominance(const Backend& backend, const ProblemSpec& spec) {
  ProblemSpec max_pooled = spec;
  max_pooled.config.pooling = Pooling::kMax;
  const Problem problem = GenerateProblem(max_pooled);
  Outputs outputs, reference;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  double tau = 0;
  if (problem.config.precision != Precision::kExact) {
    MSA_RETURN_IF_ERROR(RunReference(problem, &reference));
    Verdict verdict;
    MSA_RETURN_IF_ERROR(
        Judge(problem, reference, Candidate{.topk_indices = outputs.topk_indices}, RulesFor(problem), &verdict));
    tau = verdict.selection.tau;
  }
  const Config& c = problem.config;
  const std::vector<double> index_q = reference::Widen(ViewOf(problem.index_q));
  const std::vector<double> index_k = reference::Widen(ViewOf(problem.index_k));
  const int64_t total_q = problem.batch().total_q(), di = c.index_head_dim, bk = c.block_size;
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t visible = places[t].position / bk + 1;
      const ForcedBlocks forced = ForcedBlocksOf(visible, c.init_blocks, c.local_blocks, c.top_k);
      if (forced.take == 0 || forced.take == forced.candidates()) continue;  // nothing ranked, or nothing left out
      const int32_t* row = &outputs.topk_indices[(r * total_q + t) * c.top_k];
      const auto token_score = [&](int64_t s) {
        return CanonicalDot(&index_q[(t * c.num_kv_heads + r) * di], &index_k[(places[t].key_begin + s) * di], di) *
               c.IndexScale();
      };
      std::vector<char> kept(visible, 0);
      double theta = HUGE_VAL;  // the lowest block max among the ranked blocks kept
      for (int64_t slot = 0; slot < std::min<int64_t>(visible, c.top_k); ++slot) kept[row[slot]] = 1;
      for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
        if (!kept[b]) continue;
        double block_max = -HUGE_VAL;
        for (int64_t s = b * bk; s < (b + 1) * bk; ++s) block_max = std::max(block_max, token_score(s));
        theta = std::min(theta, block_max);
      }
      // A token whose lowest ranked value (tau/2 below it; fp16 scores: rounded) beats the kept block's highest
      // (theta + tau/2): its block ranks above that block whatever the candidate's error within tau.
      const double theta_highest = RankedIntervalOf(c, theta, tau).hi;
      for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
        if (kept[b]) continue;
        for (int64_t s = b * bk; s < (b + 1) * bk; ++s) {
          if (RankedIntervalOf(c, token_score(s), tau).lo > theta_highest) {
            return Fail("max dominance", "group " + std::to_string(r) + " query row " + std::to_string(t) + ": key " +
                                             std::to_string(s) + " of block " + std::to_string(b) + " scores " +
                                             std::to_string(token_score(s)) + " > theta " + std::to_string(theta) +
                                             " + tau, but its block was left out");
          }
        }
      }
    }
  }
  return Status::Ok();
}

Status CheckPoisonedInputsNeverRead(const Backend& backend, const ProblemSpec& spec) {
  const Problem problem = GenerateProblem(spec);
  Outputs packed, poisoned;
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &packed));
  const PoisonedTensor q = PoisonedCopy(problem.q), k = PoisonedCopy(problem.k), v = PoisonedCopy(problem.v);
  const PoisonedTensor index_q = PoisonedCopy(problem.index_q), index_k = PoisonedCopy(problem.index_k);
  poisoned.Allocate(problem);
  const Config& c = problem.config;
  MSA_RETURN_IF_ERROR(
      Select(backend, c, IndexInputs{index_q.view, index_k.view, problem.batch()}, poisoned.selection_outputs()));
  MSA_RETURN_IF_ERROR(Attend(backend, c, AttentionInputs{q.view, k.view, v.view, problem.batch()},
                             SelectionView{poisoned.topk_indices.data()}, poisoned.attention_outputs()));
  MSA_RETURN_IF_ERROR(SameBits("poisoned inputs", "topk_indices", poisoned.topk_indices, packed.topk_indices));
  MSA_RETURN_IF_ERROR(SameBits("poisoned inputs", "block_scores", poisoned.block_scores, packed.block_scores));
  MSA_RETURN_IF_ERROR(SameBits("poisoned inputs", "index_lse", poisoned.index_lse, packed.index_lse));
  MSA_RETURN_IF_ERROR(SameBits("poisoned inputs", "out", poisoned.out, packed.out));
  return SameBits("poisoned inputs", "lse", poisoned.lse, packed.lse);
}

Status CheckOutputsFullyWritten(const Backend& backend, const ProblemSpec& spec) {
  const Problem problem = GenerateProblem(spec);
  Outputs outputs;  // RunBackend allocates them filled with poison
  MSA_RETURN_IF_ERROR(RunBackend(backend, problem, &outputs));
  for (size_t i = 0; i < outputs.topk_indices.size(); ++i) {
    if (outputs.topk_indices[i] == std::numeric_limits<int32_t>::min()) {
      return Fail("outputs fully written", "topk_indices[" + std::to_string(i) + "] still holds the poison");
    }
  }
  for (auto [name, tensor] : {std::pair{"block_scores", &outputs.block_scores},
                              {"index_lse", &outputs.index_lse},
                              {"out", &outputs.out},
                              {"lse", &outputs.lse}}) {
    for (size_t i = 0; i < tensor->size(); ++i) {
      if (std::isnan((*tensor)[i])) {
        return Fail("outputs fully written",
                    std::string(name) + "[" + std::to_string(i) + "] still holds the NaN poison");
      }
    }
  }
  return Status::Ok();
}

}  // namespace msa
