// Measures of what a selection keeps (SPEC section 5, recall of distant evidence).
#ifndef MSA_TOOLS_MSA_RECALL_H_
#define MSA_TOOLS_MSA_RECALL_H_

#include <cstdint>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// Whether row (query t, group r) of a selection [Hidx, total_q, top_k] holds `block`.
bool SelectionHolds(const Problem& problem, const std::vector<int32_t>& topk_indices, int64_t t, int64_t r,
                    int64_t block);

// Share of the (query, key) pairs of dense causal attention that the selection keeps: sum |S_t| / sum (pos+1),
// over all queries and groups.
double KeptKeyFraction(const Problem& problem, const std::vector<int32_t>& topk_indices);

struct MassRecall {
  double mean = 0, min = 1;
  int64_t rows = 0;  // (query, head) rows measured
};

// Attention-mass recall: for each measured (query t, head h), the share of the dense causal softmax mass
// sum_{s in S} exp(x_s - m) / sum_{s <= pos} exp(x_s - m), with x_s the main-branch scores.
// Measures every head of `num_queries` queries spread evenly over the batch (all queries if fewer).
MassRecall SampledMassRecall(const Problem& problem, const std::vector<int32_t>& topk_indices, int64_t num_queries);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_H_
