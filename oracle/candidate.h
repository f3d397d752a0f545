// Reading a candidate: an outside implementation's outputs (any subset of topk_indices, out, lse, index_lse, in any
// dtype) and the rules of its format (SPEC section 5), from a safetensors image of them. `msa check` reads its
// --outputs file through this, and the Python package (mo.check) the arrays it was given, so both judge alike.
#ifndef MSA_ORACLE_CANDIDATE_H_
#define MSA_ORACLE_CANDIDATE_H_

#include <optional>
#include <string>
#include <string_view>

#include "io/safetensors.h"
#include "oracle/compare.h"

namespace msa {

// The outputs a candidate may supply (SPEC section 7): the forward's, and training's (with dout in the inputs).
inline constexpr const char* kCandidateOutputNames[] = {"topk_indices", "out", "lse", "index_lse", "dq",
                                                        "dk",           "dv",  "dqi", "dki",       "kl_loss"};

// The caller's settings of the format rules, each a name ("strict", "query_major", "2", "bf16", ...) or empty. An
// empty rule takes the outputs' __metadata__ key of the same name, else its default: order strict, topk_layout
// head_major, lse_base e, score_precision exact for an all-F64 candidate else fp32; `precision` (no metadata key)
// judges every float output at it instead of at its own dtype.
struct CandidateRules {
  std::string precision, score_precision, order, topk_layout, lse_base;
  RuleSpelling spell = &CliFlagSpelling;  // how the caller names a rule's setting in messages and reports
};

// Widens the outputs `file` holds into `candidate` after checking each one's shape against `problem` (topk_indices
// in the chosen layout, with a layout error naming the fix when it has the other layout's shape) and its dtype
// (I32 or I64 ids, a float dtype otherwise), and sets `format` from `rules`, the metadata and the dtypes. Names
// other than the four outputs are ignored. `origin` prefixes messages. InvalidArgument when nothing is supplied.
Status ReadCandidate(const SafetensorsFile& file, const std::string& origin, const Problem& problem,
                     const CandidateRules& rules, Candidate* candidate, CandidateFormat* format);

// What `msa check` does once the inputs are read: the candidate read from `outputs` (ReadCandidate), the FP64
// reference run on `problem` (RunReference), and the judge's verdict on the candidate, with `tau` when given. An
// outside FP64 implementation may sum in any order: it is judged by the rules, not by bit equality. A non-OK Status
// is bad input (messages prefixed with `origin`); a wrong answer is a failed Verdict.
Status CheckCandidate(const Problem& problem, const SafetensorsFile& outputs, const std::string& origin,
                      const CandidateRules& rules, std::optional<double> tau, Verdict* verdict);

}  // namespace msa

#endif  // MSA_ORACLE_CANDIDATE_H_
