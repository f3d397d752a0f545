// The FP64 canonical reference backend (SPEC sections 2-4): the living definition of MSA.
// Every function here evaluates in the canonical order, so its outputs are bit-reproducible for any
// thread count, compiler or machine. OpenMP splits rows across threads, never a sum.
#ifndef MSA_REFERENCE_REFERENCE_H_
#define MSA_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "msa/msa.h"

namespace msa::reference {

Backend ReferenceBackend();

// Where query row t sits: its sequence, its key position (k_len - q_len + i) and the first key row
// of its sequence. One entry per query row: [total_q].
struct QueryPlace {
  int64_t sequence;
  int64_t position;
  int64_t key_begin;
};
std::vector<QueryPlace> PlaceQueries(const Batch& batch);

// A view widened exactly to a packed double array [rows, heads, dim].
std::vector<double> Widen(const TensorView& view);

// Index branch. Preconditions: ValidateIndexInputs passed; outputs sized as in msa.h.
Status SelectBlocks(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                    const ProgressFn& progress);

// Orders one row of the selection (SPEC section 2): the first top_k - |F| candidates ranked by score
// descending then id ascending, then the init blocks ascending, then the local block last, then -1.
// scores: [visible] pooled block scores of one (query, group); row: [top_k].
void PlaceSelection(const Config& config, const double* scores, int64_t visible, int32_t* row);

// index_lse [Hidx, total_q] over the blocks of a given selection (valid prefix of each row, any order), in
// the canonical order: what SelectBlocks writes for its own selection. Lets the oracle judge an
// implementation's index_lse on that implementation's selection. Preconditions: ValidateIndexInputs and
// ValidateSelectionForAttend passed.
Status IndexLseForSelection(const Config& config, const IndexInputs& inputs, const SelectionView& selection,
                            double* index_lse);

// Main branch on a given selection. Preconditions: ValidateAttentionInputs and
// ValidateSelectionForAttend passed.
Status AttendSelected(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                      const AttentionOutputs& outputs, const ProgressFn& progress);

// Training (SPEC section 8) in its canonical order: the main branch's backward and the indexer's KL distillation on
// a given selection. Preconditions: ValidateAttentionInputs, ValidateSelectionForAttend and (Backward)
// ValidateGradientInputs or (IndexerKl) ValidateIndexInputs passed; outputs sized as in msa.h.
Status Backward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress);
Status IndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                 const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress);

// Dense causal GQA attention (every query sees keys 0..position), same canonical order; used for the
// dense-equivalence property and attention-mass recall. Precondition: ValidateAttentionInputs passed.
Status DenseCausalAttention(const Config& config, const AttentionInputs& inputs, const AttentionOutputs& outputs,
                            const ProgressFn& progress);

}  // namespace msa::reference

#endif  // MSA_REFERENCE_REFERENCE_H_
