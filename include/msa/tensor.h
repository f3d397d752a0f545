// Non-owning views over packed variable-length ("THD") tensors: [rows, heads, dim], dim contiguous.
// Nothing crosses the API by ownership: the caller owns every buffer a view points at.
#ifndef MSA_TENSOR_H_
#define MSA_TENSOR_H_

#include <cstdint>
#include <span>
#include <string_view>

namespace msa {

enum class DType { kF64, kF32, kBF16, kF16, kI32, kI64 };

// Safetensors spelling ("F64", "BF16", ...) and element size in bytes.
std::string_view DTypeName(DType dtype);
int DTypeSize(DType dtype);
bool ParseDType(std::string_view name, DType* dtype);
bool IsFloating(DType dtype);

// Exact widening of one stored element to double (every F32/BF16/F16 value is a double exactly).
double LoadAsDouble(const void* data, DType dtype, int64_t element);
// Round-to-nearest-even narrowing, used to make low-precision inputs and outputs.
uint16_t DoubleToBF16(double value);
uint16_t DoubleToF16(double value);
double BF16ToDouble(uint16_t bits);
double F16ToDouble(uint16_t bits);

// Where a view's elements are: host memory, or the memory of a CUDA device (read only by a backend whose
// reads_device_memory is set; see msa.h).
enum class Memory { kHost, kCudaDevice };

// A read-only 3-D view [rows, heads, dim] of any floating dtype. Strides are in elements; dim is contiguous.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF64;
  int64_t rows = 0, heads = 0, dim = 0;
  int64_t row_stride = 0, head_stride = 0;
  Memory memory = Memory::kHost;
  int device = 0;  // the CUDA device ordinal, when memory is kCudaDevice

  int64_t Offset(int64_t row, int64_t head, int64_t d) const { return row * row_stride + head * head_stride + d; }
  // Precondition: memory is kHost.
  double At(int64_t row, int64_t head, int64_t d) const { return LoadAsDouble(data, dtype, Offset(row, head, d)); }
};

// A densely packed [rows, heads, dim] view (row_stride = heads*dim, head_stride = dim).
TensorView PackedView(const void* data, DType dtype, int64_t rows, int64_t heads, int64_t dim);

// Prefix sums of a packed batch: sequence b owns rows [cu[b], cu[b+1]). Both arrays have B+1 entries.
struct Batch {
  std::span<const int32_t> cu_seqlens_q;  // [B+1]
  std::span<const int32_t> cu_seqlens_k;  // [B+1]

  int64_t num_sequences() const { return cu_seqlens_q.empty() ? 0 : int64_t(cu_seqlens_q.size()) - 1; }
  int64_t total_q() const { return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back(); }
  int64_t total_k() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }
};

}  // namespace msa

#endif  // MSA_TENSOR_H_
