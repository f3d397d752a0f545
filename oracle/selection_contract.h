// The selection contract of SPEC section 5: what every valid selection row looks like, whoever made it.
#ifndef MSA_ORACLE_SELECTION_CONTRACT_H_
#define MSA_ORACLE_SELECTION_CONTRACT_H_

#include <cstdint>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// One row [top_k] of a query with `visible` blocks: ids in [0, visible), no duplicates, exactly
// min(visible, top_k) valid ids, the local block (visible - 1) in the last valid slot, the init blocks
// (those below the local block) present, -1 in every slot after the valid prefix.
Status CheckSelectionRow(const Config& config, int64_t visible, const int32_t* row);

// Every row of a selection [Hidx, total_q, top_k]; the message names the (group, query) of the first bad row.
Status CheckSelection(const Problem& problem, const std::vector<int32_t>& topk_indices);

}  // namespace msa

#endif  // MSA_ORACLE_SELECTION_CONTRACT_H_
