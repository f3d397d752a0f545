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

// Whether two selections [Hidx, total_q, top_k] (of the same size) hold the same blocks in every row, in any
// order: per row, the slots before the first negative one hold the same ids up to order, and so do the slots
// from it on. Whatever reads each row as a set of blocks (attention, index_lse, the recall measures, the
// selection rules) gives the same result on both; exact-mode slot equality is a different, stricter test.
bool SameBlockSets(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t top_k);

}  // namespace msa

#endif  // MSA_ORACLE_SELECTION_CONTRACT_H_
