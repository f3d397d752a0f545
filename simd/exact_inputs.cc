#include "simd/exact_inputs.h"

#include "msa/assert.h"

namespace msa::simd {
namespace {

template <typename T>
constexpr DType kDType = DType::kF64;
template <>
constexpr DType kDType<float> = DType::kF32;

}  // namespace

template <typename T>
PaddedRows<T> WidenPadded(const TensorView& view) {
  MSA_ASSERT(sizeof(T) == sizeof(double) || FitsFloat(view.dtype));
  PaddedRows<T> rows;
  rows.dim = view.dim;
  rows.padded_dim = PaddedLength(view.dim);
  if (view.dtype == kDType<T> && view.dim == rows.padded_dim) {  // already whole groups of eight: no copy
    rows.data = static_cast<const T*>(view.data);
    rows.row_stride = view.row_stride;
    rows.head_stride = view.head_stride;
    return rows;
  }
  rows.head_stride = rows.padded_dim;
  rows.row_stride = view.heads * rows.padded_dim;
  rows.storage.assign(size_t(view.rows * rows.row_stride), T(0));
  T* packed = rows.storage.data();
#pragma omp parallel for schedule(static) if (view.rows * rows.row_stride >= (int64_t(1) << 16))
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      T* to = packed + row * rows.row_stride + head * rows.head_stride;
      for (int64_t d = 0; d < view.dim; ++d) to[d] = T(view.At(row, head, d));  // exact (FitsFloat)
    }
  }
  rows.data = packed;
  return rows;
}

template PaddedRows<double> WidenPadded<double>(const TensorView& view);
template PaddedRows<float> WidenPadded<float>(const TensorView& view);

}  // namespace msa::simd
