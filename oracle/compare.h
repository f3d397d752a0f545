// The oracle's comparators (SPEC section 5): judge a candidate's selection and attention outputs against
// the FP64 reference. Used by `msa check`, `msa golden verify`, the conformance suite and other projects'
// tests (through the CMake package).
#ifndef MSA_ORACLE_COMPARE_H_
#define MSA_ORACLE_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/problem.h"
#include "oracle/selection_contract.h"

namespace msa {

// How a candidate lays out topk_indices (SPEC section 5): [Hidx, total_q, top_k] or [total_q, Hidx, top_k].
enum class TopkLayout { kHeadMajor, kQueryMajor };
std::string_view TopkLayoutName(TopkLayout layout);  // "head_major", "query_major"
bool ParseTopkLayout(std::string_view name, TopkLayout* layout);

// The base of a candidate's lse and index_lse: natural (e) or log2-domain (2).
enum class LseBase { kE, kTwo };
std::string_view LseBaseName(LseBase base);  // "e", "2"
bool ParseLseBase(std::string_view name, LseBase* base);

// A rule's setting and where it came from, for the report ("its dtype BF16", "--order", "metadata", ...).
template <typename T>
struct Chosen {
  T value{};
  std::string from;
};

// How a candidate computed and stored its outputs, which sets the rules it is judged by (SPEC section 5).
struct CandidateFormat {
  // The arithmetic of the index scores it ranked: sets tau. kExact only for FP64 candidates.
  Chosen<Precision> score{Precision::kFp32, "default"};
  // The precision each float output is judged at (its own dtype unless overridden).
  Chosen<Precision> out{Precision::kExact, "default"}, lse{Precision::kExact, "default"},
      index_lse{Precision::kExact, "default"};
  // Training (SPEC section 8), each at its own dtype unless overridden.
  Chosen<Precision> dq{Precision::kExact, "default"}, dk{Precision::kExact, "default"},
      dv{Precision::kExact, "default"}, dqi{Precision::kExact, "default"}, dki{Precision::kExact, "default"},
      kl_loss{Precision::kExact, "default"};
  Chosen<TopkLayout> topk_layout{TopkLayout::kHeadMajor, "default"};
  Chosen<SelectionOrder> order{SelectionOrder::kStrict, "default"};
  Chosen<LseBase> lse_base{LseBase::kE, "default"};
};

// The format of one of this project's backends run at `precision` on `problem`: head-major, strict order, base e,
// every output at the precision (the bf16 and fp16 kernels round the token scores to it before the softmax, so
// lse and index_lse carry its rounding). The index scores they rank: fp32 at every low precision (fp32
// accumulation, block maxima kept in fp32), except at the precision itself where the backend's rounding of its
// inputs changed the index inputs (a bf16 backend given f32 inputs) or with index_format e4m3 at bf16 / fp16
// (Hopper's fp8 MMA accumulates with less than fp32 precision). kExact: everything exact.
CandidateFormat BackendFormat(const Problem& problem, Precision precision);

// What is judged: any subset of the outputs of SPEC section 7, widened to double (selection as int32).
struct Candidate {
  std::optional<std::vector<int32_t>> topk_indices = std::nullopt;  // in the candidate's topk_layout
  std::optional<std::vector<double>> out = std::nullopt;            // [total_q, Hq, Dv]
  std::optional<std::vector<double>> lse = std::nullopt;            // [total_q, Hq], in the candidate's lse_base
  std::optional<std::vector<double>> index_lse = std::nullopt;      // [Hidx, total_q], in the candidate's lse_base
  // Training (SPEC section 8), judged when the problem has dout.
  std::optional<std::vector<double>> dq = std::nullopt;       // [total_q, Hq, D]
  std::optional<std::vector<double>> dk = std::nullopt;       // [total_k, Hkv, D]
  std::optional<std::vector<double>> dv = std::nullopt;       // [total_k, Hkv, Dv]
  std::optional<std::vector<double>> dqi = std::nullopt;      // [total_q, Hidx, Di]
  std::optional<std::vector<double>> dki = std::nullopt;      // [total_k, 1, Di]
  std::optional<std::vector<double>> kl_loss = std::nullopt;  // one value
};

struct JudgeOptions {
  // This project's backends: the precision it ran at, which sets the format (BackendFormat). kExact with
  // exact_bits demands the canonical bits; any other precision is judged by the oracle rules.
  Precision precision = Precision::kExact;
  // Outside candidates (msa check): how they computed and stored their outputs; replaces BackendFormat.
  std::optional<CandidateFormat> format;
  bool exact_bits = true;     // when every output and the scores are exact: bit equality, else the rules at FP64
  std::optional<double> tau;  // selection tolerance; default from the naive evaluation's score error
  int max_listed = 8;         // mismatches listed per tensor
};

// One element that broke a rule, located in the batch: a query's (row t, its sequence, its index there), or for the
// key-major tensors of training (dk, dv, dki) a key's (key_row s, its sequence, key its position there).
struct Mismatch {
  int64_t sequence = -1, query = -1;  // query index within its sequence
  int64_t row = -1;                   // global query row t
  int64_t key = -1, key_row = -1;     // key position within its sequence, global key row s
  int64_t head = -1;                  // query head, or group for index tensors
  int64_t index = -1;                 // dim for out, slot for topk_indices, -1 otherwise
  double got = 0, expected = 0;
  double ulps = 0;  // |got - expected| in ulps of the judged precision at `expected`
  std::string why;  // for selection rows: the rule that failed
};

// How topk_indices was read: the layout assumed, and whether its shape could have told.
struct LayoutVerdict {
  TopkLayout assumed = TopkLayout::kHeadMajor;
  bool ambiguous = false;          // total_q == Hidx: both layouts have the same shape
  bool transposed_passes = false;  // the assumed reading failed and the other one passes: a layout error
};

struct SelectionVerdict {
  bool judged = false, passed = true;
  int64_t rows = 0;
  int64_t invalid_rows = 0;      // break the contract (ids, duplicates, count, forced blocks, padding)
  int64_t order_fault_rows = 0;  // valid as sets, but the local block is not last (order strict)
  int64_t identical_rows = 0;    // the same set as the reference
  int64_t near_tie_rows = 0;     // a different set, every difference within tau of the threshold: counted
  int64_t violation_rows = 0;    // a must-select block missed, or a block below theta - tau selected
  double tau = 0;
  std::string tau_from;  // how tau was set
  LayoutVerdict layout;
  std::vector<Mismatch> listed;        // first bad rows (invalid or violating)
  std::vector<Mismatch> order_listed;  // first order-fault rows, with the slot found in `index`
};

struct TensorVerdict {
  std::string name;
  Chosen<Precision> precision;  // the precision it was judged at, whose ulps measure it
  bool judged = false, passed = true;
  int64_t elements = 0, mismatches = 0, one_sided_nonfinite = 0;
  double max_error = 0;      // max |got - expected|
  double naive_error = 0;    // max |naive - expected| in the judged precision, the larger of both scale orders
  double floor = 0;          // the error analysis' floor (a few ulps of the magnitudes involved)
  double bound = 0;          // 2 * max(naive_error, floor) + 1 ulp (exact bits: 0)
  double max_allowance = 0;  // the largest allowance of an element beyond `bound` (index_lse with fp16 scores:
                             // the binary16 step its row's block scores may take within tau), 0 for most
  double nmse = 0, relative_l2 = 0;
  double max_ulps = 0;
  Mismatch worst;
  std::vector<Mismatch> listed;  // first elements over the bound, in index order
};

struct Verdict {
  CandidateFormat format;
  bool exact_bits = true;
  SelectionVerdict selection;
  std::vector<TensorVerdict> tensors;  // out, lse, index_lse: those the candidate supplied
  // Which selection the attention expectation was computed on: "candidate" when the candidate supplied a
  // usable selection (so a near-tie flip never shows as an attention error), else "reference".
  std::string attention_selection;
  bool passed() const;
};

// Judges `candidate` on `problem`, given the reference's outputs on it (RunReference).
// Errors (Status) only for malformed candidates: wrong sizes. A wrong answer is a failed Verdict.
Status Judge(const Problem& problem, const Outputs& reference, const Candidate& candidate, const JudgeOptions& options,
             Verdict* verdict);

// How a caller names the setting of a judging rule (key "order", "topk_layout", ...) in reports and messages: the
// tool's flags ("--topk-layout") by default, keyword arguments ("topk_layout=") in the Python package.
using RuleSpelling = std::string (*)(std::string_view key);
std::string CliFlagSpelling(std::string_view key);  // "--" + key with '_' as '-'
// A setting as the caller writes it: "--order any", "order=any".
std::string RuleSetting(RuleSpelling spell, std::string_view key, std::string_view value);

// A short human report: which rules applied and why, what passed, what failed, the worst positions; the advice it
// gives names rule settings as `spell` does.
std::string FormatVerdict(const Verdict& verdict, RuleSpelling spell = &CliFlagSpelling);
// The same as JSON.
std::string VerdictToJson(const Verdict& verdict);

}  // namespace msa

#endif  // MSA_ORACLE_COMPARE_H_
