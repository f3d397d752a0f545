// The selection contract of SPEC section 5: what every valid selection row looks like, whoever made it.
#ifndef MSA_ORACLE_SELECTION_CONTRACT_H_
#define MSA_ORACLE_SELECTION_CONTRACT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// Where a selection row must hold its local block (SPEC section 5).
//   kStrict: in the last valid slot (the official contract: "valid TopK entries retain sparse, unordered
//            semantics, with the local block in the last valid position");
//   kAny:    anywhere: the valid prefix is a set (vLLM and SGLang put the forced blocks first, others sort ids).
enum class SelectionOrder { kStrict, kAny };
std::string_view SelectionOrderName(SelectionOrder order);  // "strict", "any"
bool ParseSelectionOrder(std::string_view name, SelectionOrder* order);

// What is wrong with one selection row, if anything.
struct RowFault {
  enum class Kind {
    kNone,     // a valid row
    kOrder,    // valid as a set, but under kStrict the local block is not in the last valid slot
    kInvalid,  // breaks the contract otherwise
  };
  Kind kind = Kind::kNone;
  std::string message;      // why (kOrder, kInvalid)
  int64_t local_slot = -1;  // kOrder: the slot the local block was found in
};

// One row [top_k] of a query with `visible` blocks: ids in [0, visible), no duplicates, exactly
// min(visible, top_k) valid ids, -1 in every slot after the valid prefix, every forced block present (the init
// blocks and the last local_blocks visible ones: msa/forced_blocks.h), and under kStrict the local block
// (visible - 1) in the last valid slot. A row whose only fault is that slot is a kOrder fault.
RowFault ClassifySelectionRow(const Config& config, int64_t visible, const int32_t* row, SelectionOrder order);

// ClassifySelectionRow under kStrict as a Status: Ok for a valid row, else InvalidArgument with the message.
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
