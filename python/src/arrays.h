// The caller's arrays (numpy, torch, anything with DLPack) as the library's views, without copies, and the checks
// that turn a wrong dtype, rank, stride or device into a ValueError naming the tensor. Every entry point of the
// module reads its arguments through these.
#ifndef MSA_PYTHON_ARRAYS_H_
#define MSA_PYTHON_ARRAYS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "io/safetensors.h"
#include "msa/msa.h"

namespace msa::python {

namespace nb = nanobind;

// Any array, read-only. uint16 arrays are bf16 bit patterns: the Python layer passes ml_dtypes bf16 numpy arrays
// (which DLPack cannot carry) as their uint16 view, and refuses a caller's own uint16 arrays.
using Array = nb::ndarray<nb::ro>;

// Where an array's memory is.
enum class Memory { kHost, kCuda };
Memory MemoryOf(const Array& array, const char* name);  // ValueError for any other device

// A float tensor [rows, heads, dim] (float64, float32, bfloat16 or float16) with its last axis contiguous, viewed
// in place, in host or CUDA device memory (the view says which: only a backend that reads device memory takes it).
// `shape_text` ("[total_q, Hq, D]") completes the messages. ValueError on anything else.
TensorView FloatTensor(const Array& array, const char* name, const char* shape_text);

// A one-dimensional contiguous int32 array on the host (cu_seqlens), viewed in place.
std::span<const int32_t> Int32Vector(const Array& array, const char* name);

// A C-contiguous int32 array of rank 3 on the host (a selection [Hidx, total_q, top_k]), viewed in place.
const int32_t* Int32Selection(const Array& array, const char* name, const std::vector<int64_t>& shape);

// The array's elements in C order as a safetensors tensor named `name` (float, int32 or int64; a copy: what the
// judge and the files it dumps hold). ValueError for other dtypes or device memory.
SafetensorsTensor ToSafetensors(const Array& array, const std::string& name);

// The dtype as the file contract spells it ("F64", "BF16", "I32", ...), or its DLPack code and bits.
std::string DTypeText(const Array& array);

// A new numpy array owning `values`, of the given shape.
template <typename T>
nb::ndarray<nb::numpy, T> NumpyArray(std::vector<T>&& values, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

// Raises the Python exception of a non-OK status: ValueError (invalid argument), msa_oracle.Unsupported (a
// RuntimeError), OSError (files), MemoryError, RuntimeError (device errors).
void ThrowIfError(const Status& status);

}  // namespace msa::python

#endif  // MSA_PYTHON_ARRAYS_H_
