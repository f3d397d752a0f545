// `msa explain`: MSA step by step on a tiny prefill, for people learning how it works. Every number printed
// is the reference's (block scores, selection, out, lse) or is computed with the reference's own primitives
// (CanonicalDot, CanonicalExp: token scores, softmax weights).
#ifndef MSA_TOOLS_MSA_EXPLAIN_H_
#define MSA_TOOLS_MSA_EXPLAIN_H_

#include <cstdint>
#include <string>

#include "oracle/problem.h"

namespace msa {

// One sequence of `keys` tokens, prefill (q_len = k_len = keys): query i sits at position i. The inputs are
// standard normal draws (oracle/random.h) rounded to one decimal, F64, so a student can redo the arithmetic.
Problem MakeExplainProblem(const Config& config, int32_t keys, uint64_t seed);

// The trace of query `query` (every group, every head), from the reference's outputs on `problem`.
// Preconditions: problem made by MakeExplainProblem, reference = RunReference(problem), 0 <= query < keys.
std::string ExplainQuery(const Problem& problem, const Outputs& reference, int64_t query);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_EXPLAIN_H_
