// The main branch's row computation (SPEC sections 3 and 4), shared by the forward (attention.cc) and the training
// functions (training.cc), so that the backward and the KL see the forward's own bits.
#ifndef MSA_REFERENCE_ATTEND_ROW_H_
#define MSA_REFERENCE_ATTEND_ROW_H_

#include <cstdint>
#include <vector>

#include "msa/msa.h"

namespace msa::reference {

// A run of consecutive key positions [begin, end) of one sequence.
struct KeyRange {
  int64_t begin, end;
};

struct WidenedAttentionInputs {
  std::vector<double> q, k, v;  // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
};
WidenedAttentionInputs WidenAll(const AttentionInputs& inputs);

// The key set of a row: the valid prefix of `row` [top_k] as a set of blocks, visited in ascending block id, each
// block's keys up to `position` (ascending, disjoint ranges of sequence positions).
std::vector<KeyRange> SelectedKeyRanges(const Config& config, const int32_t* row, int64_t position);

// One (query t, head h) row: softmax over the keys of `ranges` of the sequence whose first key row is key_begin.
// Writes out [Dv] and *lse; with `scores`, also the scores s_j [|S|] in ascending key position.
void AttendRow(const Config& config, const WidenedAttentionInputs& in, int64_t t, int64_t h, int64_t key_begin,
               const std::vector<KeyRange>& ranges, double* out, double* lse, std::vector<double>* scores = nullptr);

}  // namespace msa::reference

#endif  // MSA_REFERENCE_ATTEND_ROW_H_
