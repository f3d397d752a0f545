// Inputs of the SIMD exact mode as rows whose length is padded with zeros to a multiple of 8, so the
// canonical dot (SPEC section 4: eight partial sums, P[i % 8]) runs on whole groups of eight with no tail:
// a padded element adds +0 * +0 = +0 to its partial sum, which leaves every partial sum unchanged (a partial
// sum starts at +0 and can never become -0, so P + (+0) == P bit for bit, NaN and infinities included).
//
// Rows are stored as double (F64 inputs) or as float (F32, BF16 and F16 inputs: every such value is a float
// exactly, and a float widens to double exactly in the kernels), which halves the memory traffic of the
// key and value rows without changing a bit of the arithmetic.
#ifndef MSA_SIMD_EXACT_INPUTS_H_
#define MSA_SIMD_EXACT_INPUTS_H_

#include <cstdint>
#include <vector>

#include "msa/tensor.h"

namespace msa::simd {

// Rounds n up to a multiple of 8: the padded row length of the exact mode.
inline int64_t PaddedLength(int64_t n) { return (n + 7) / 8 * 8; }

// A read-only [rows, heads, padded_dim] tensor of T (double or float). Either the caller's data itself (its
// dtype is T and dim is already a multiple of 8: no copy, the caller's strides) or an exact conversion into
// owned, packed, zero-padded storage.
template <typename T>
struct PaddedRows {
  const T* data = nullptr;
  int64_t row_stride = 0, head_stride = 0;
  int64_t dim = 0, padded_dim = 0;
  std::vector<T> storage;  // [rows, heads, padded_dim] when converted

  PaddedRows() = default;
  PaddedRows(PaddedRows&&) = default;  // a moved vector keeps its buffer, so `data` stays valid
  PaddedRows(const PaddedRows&) = delete;
  PaddedRows& operator=(const PaddedRows&) = delete;

  const T* Row(int64_t row, int64_t head) const { return data + row * row_stride + head * head_stride; }
};

// `view` converted exactly to T, rows padded with +0 to PaddedLength(dim). T = float requires a dtype other
// than F64. Rows run in parallel (OpenMP). Reads only the elements the view describes.
template <typename T>
PaddedRows<T> WidenPadded(const TensorView& view);

// Whether a tensor of this dtype can be stored as float exactly (F32, BF16, F16).
inline bool FitsFloat(DType dtype) { return dtype != DType::kF64; }

}  // namespace msa::simd

#endif  // MSA_SIMD_EXACT_INPUTS_H_
