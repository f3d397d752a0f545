// The SIMD backend's fp32 mode (`--precision fp32`, SPEC sections 2, 3 and 5): inputs of any dtype are
// widened or narrowed to fp32 and evaluated in whatever order is fastest; results are judged by the oracle's
// rules, not by bits. Deterministic all the same: the same inputs give the same bits for any thread count,
// and a row's bits never depend on other rows (causality and GQA-sharing properties compare bits).
//
// Index branch: index keys are packed once per sequence into panels [Di][2 * lanes]; a register-blocked FMA
// micro-kernel scores a tile of (query, group) rows against a chunk of panels, and the tile's scores are
// pooled by block (max, lse; mean pooling runs the micro-kernel against packed block-mean keys) before the
// next chunk, so no more than a tile of the N x N scores ever exists. Top-k runs on packed 64-bit
// (score, id) keys with nth_element (score descending, then id ascending), around the forced blocks of
// msa/forced_blocks.h. score_format fp16 ranks and reports the fp32 block maxima rounded to binary16, and its
// index_lse adds each selected block's log-sum-exp relative to its max to that rounded score.
// f64 inputs beyond the fp32 range, and scores that overflow fp32, are refused with InvalidArgument; so is an
// fp16 block score beyond binary16, in the reference's words.
//
// Main branch: per (query, group) the selected blocks are visited once, in ascending key order, and the G query
// heads of the group are processed together (heads in vector lanes for Q K^T, value dims in lanes for P V)
// with an online softmax over steps of up to 128 keys: running max in fp32, scores, p and each step's P V in
// fp32 FMAs, the running sums (l, o) in double. Rows of at most 512 selected keys (a few percent of a long
// prefill) are evaluated in double from the inputs as given: fp32 in another order than the oracle's naive
// fp32 evaluation is as accurate as it, not twice better, so small tensors would fail its 2x rule by luck.
// The selection is cut into fixed segments of blocks whose softmax states are merged in a fixed order, so
// splitting one row over threads (decode) never changes its bits.
#ifndef MSA_SIMD_FAST_H_
#define MSA_SIMD_FAST_H_

#include "msa/msa.h"

namespace msa::simd {

// Select (index branch) at precision fp32. Preconditions: ValidateIndexInputs passed, outputs sized as in
// msa.h (block_scores and index_lse may be nullptr). Writes fp32 values widened to double.
Status Fp32Select(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress);

// Attend (main branch) at precision fp32 on any valid selection (rows are sets). Preconditions:
// ValidateAttentionInputs and ValidateSelectionForAttend passed.
Status Fp32Attend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress);

// Both record the Highway target they ran on (simd/simd_backend.h: LastDispatchedTarget).

}  // namespace msa::simd

#endif  // MSA_SIMD_FAST_H_
