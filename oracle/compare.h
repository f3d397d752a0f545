// The oracle's comparators (SPEC section 5): judge a candidate's selection and attention outputs against
// the FP64 reference. Used by `msa check`, `msa golden verify`, the conformance suite and other projects'
// tests (through the CMake package).
#ifndef MSA_ORACLE_COMPARE_H_
#define MSA_ORACLE_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// What is judged: any subset of the outputs of SPEC section 7, widened to double (selection as int32).
struct Candidate {
  std::optional<std::vector<int32_t>> topk_indices;  // [Hidx, total_q, top_k]
  std::optional<std::vector<double>> out;            // [total_q, Hq, Dv]
  std::optional<std::vector<double>> lse;            // [total_q, Hq]
  std::optional<std::vector<double>> index_lse;      // [Hidx, total_q]
  // The format lse and index_lse were stored in, when coarser than the accumulator's (fp32 at every low
  // precision): a bf16 lse carries a bf16 rounding, which widens its one-ulp floor.
  Precision lse_stored_as = Precision::kExact;
};

struct JudgeOptions {
  // The arithmetic the candidate used. kExact demands the canonical bits (our own FP64 backends); any other
  // precision is judged by the oracle rules against a naive evaluation in that precision. For an outside
  // FP64 implementation (any order) use Precision::kExact with exact_bits = false.
  Precision precision = Precision::kExact;
  bool exact_bits = true;           // with kExact: bit equality (true) or the rules at FP64 (false)
  std::optional<double> tau;        // selection tolerance; default from the naive evaluation's score error
  int max_listed = 8;               // mismatches listed per tensor
};

// One element that broke a rule, located in the batch.
struct Mismatch {
  int64_t sequence = -1, query = -1;  // query index within its sequence
  int64_t row = -1;                   // global query row t
  int64_t head = -1;                  // query head, or group for index tensors
  int64_t index = -1;                 // dim for out, slot for topk_indices, -1 otherwise
  double got = 0, expected = 0;
  double ulps = 0;                    // |got - expected| in ulps of the judged precision at `expected`
  std::string why;                    // for selection rows: the rule that failed
};

struct SelectionVerdict {
  bool judged = false, passed = true;
  int64_t rows = 0;
  int64_t invalid_rows = 0;        // break the contract (ids, duplicates, count, local last, init, padding)
  int64_t identical_rows = 0;      // the same set as the reference
  int64_t near_tie_rows = 0;       // a different set, every difference within tau of the threshold: counted
  int64_t violation_rows = 0;      // a must-select block missed, or a block below theta - tau selected
  double tau = 0;
  std::vector<Mismatch> listed;    // first bad rows
};

struct TensorVerdict {
  std::string name;
  Precision ulp_precision = Precision::kExact;  // the format whose ulps measure this tensor
  bool judged = false, passed = true;
  int64_t elements = 0, mismatches = 0, one_sided_nonfinite = 0;
  double max_error = 0;        // max |got - expected|
  double naive_error = 0;      // max |naive - expected| in the judged precision
  double bound = 0;            // 2 * naive_error + floor (exact bits: 0)
  double nmse = 0, relative_l2 = 0;
  double max_ulps = 0;
  Mismatch worst;
  std::vector<Mismatch> listed;  // first elements over the bound, in index order
};

struct Verdict {
  Precision precision = Precision::kExact;
  bool exact_bits = true;
  SelectionVerdict selection;
  std::vector<TensorVerdict> tensors;  // out, lse, index_lse: those the candidate supplied
  // Which selection the attention expectation was computed on: "candidate" when the candidate supplied a
  // valid selection (so a near-tie flip never shows as an attention error), else "reference".
  std::string attention_selection;
  bool passed() const;
};

// Judges `candidate` on `problem`, given the reference's outputs on it (RunBackend with "reference").
// Errors (Status) only for malformed candidates: wrong sizes. A wrong answer is a failed Verdict.
Status Judge(const Problem& problem, const Outputs& reference, const Candidate& candidate,
             const JudgeOptions& options, Verdict* verdict);

// A short human report: what passed, what failed, the worst positions.
std::string FormatVerdict(const Verdict& verdict);
// The same as JSON.
std::string VerdictToJson(const Verdict& verdict);

}  // namespace msa

#endif  // MSA_ORACLE_COMPARE_H_
