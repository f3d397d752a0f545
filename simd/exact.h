// The SIMD backend's exact mode (precision exact): SPEC section 4's canonical FP64 order with Highway vectors
// and OpenMP, bit-identical to the reference (reference/) on every compiled Highway target and for any
// thread count. Each call dispatches to the best target the CPU supports (HWY_DYNAMIC_DISPATCH).
#ifndef MSA_SIMD_EXACT_H_
#define MSA_SIMD_EXACT_H_

#include <cstddef>

#include "msa/msa.h"

namespace msa::simd {

// Index branch (SPEC section 2): the same outputs, bit for bit, as reference::SelectBlocks, including its
// errors for non-finite scores and for score_format fp16 block scores beyond binary16. Preconditions:
// ValidateIndexInputs passed; outputs sized as in msa.h.
Status ExactSelect(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                   const ProgressFn& progress);

// Main branch (SPEC section 3) on a given selection: the same bits as reference::AttendSelected.
// Preconditions: ValidateAttentionInputs and ValidateSelectionForAttend passed.
Status ExactAttend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                   const AttentionOutputs& outputs, const ProgressFn& progress);

// The vector primitives on arrays, for tests (each equals the scalar canonical function element by element):
// y[i] = CanonicalExp(x[i]) and y[i] = CanonicalLog(x[i]) for i < n;
void CanonicalExpArray(const double* x, size_t n, double* y);
void CanonicalLogArray(const double* x, size_t n, double* y);
// out[i * cols + j] = CanonicalDot(&a[i * n], &b[j * n], n) for i < rows, j < cols (a [rows, n], b [cols, n]).
void CanonicalDotMatrix(const double* a, size_t rows, const double* b, size_t cols, size_t n, double* out);

}  // namespace msa::simd

#endif  // MSA_SIMD_EXACT_H_
