// The SIMD backend's training functions (SPEC section 8): the main branch's backward and the indexer's KL
// distillation on a given selection, in the backend's two precisions. One algorithm serves both (simd/training.cc):
//   - exact: SPEC section 8's canonical FP64 order, bit-identical to reference::Backward / reference::IndexerKl on
//     every compiled Highway target and for any OpenMP thread count;
//   - fp32: fp32 arithmetic in any order (FMAs, vectorised), judged by the oracle's rules; deterministic all the
//     same (the bits never depend on the thread count). f64 inputs beyond the fp32 range are refused, and so is a
//     result that overflows fp32, with InvalidArgument naming the tensor and element.
// Outputs are double arrays in both precisions. Each call dispatches to the best Highway target the CPU supports and
// records it (simd/simd_backend.h: LastDispatchedTarget).
//
// How the work is split (never inside a sum): rows (query t, group r, up to 16 heads) for dq and (t, r) for dqi and
// the KL terms; (block, group r, up to 64 keys) for dk and dv, and (block, up to 64 keys) for dki, whose sums run over
// the block's contributor rows in ascending (query, head) or (query, group) order, a row whose position is before a
// key adding an exact +0 (every sum starts at +0 and never becomes -0, so +-0 leaves it unchanged bit for bit).
#ifndef MSA_SIMD_TRAINING_H_
#define MSA_SIMD_TRAINING_H_

#include "msa/msa.h"

namespace msa::simd {

// The main branch's backward: dq, dk, dv (SPEC section 8). Preconditions: ValidateAttentionInputs,
// ValidateSelectionForAttend and ValidateGradientInputs passed; outputs sized as in msa.h.
Status ExactBackward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                     const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress);
Status Fp32Backward(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                    const GradientInputs& gradients, const AttentionGradients& outputs, const ProgressFn& progress);

// The indexer's KL distillation: kl_loss, dqi, dki and the optional teacher_lse / indexer_lse (SPEC section 8), on
// index inputs already rounded as config.index_format asks (the front end, msa::IndexerKl, does it). Preconditions:
// ValidateIndexInputs, ValidateAttentionInputs and ValidateSelectionForAttend passed; outputs sized as in msa.h.
Status ExactIndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                      const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress);
Status Fp32IndexerKl(const Config& config, const IndexInputs& index_inputs, const AttentionInputs& inputs,
                     const SelectionView& selection, const IndexerKlOutputs& outputs, const ProgressFn& progress);

}  // namespace msa::simd

#endif  // MSA_SIMD_TRAINING_H_
