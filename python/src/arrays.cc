#include "python/src/arrays.h"

#include <cstring>
#include <stdexcept>

#include "python/src/errors.h"

namespace msa::python {
namespace {

// The dtype of a float array, or false.
bool FloatDType(const Array& array, DType* dtype) {
  const nb::dlpack::dtype t = array.dtype();
  if (t.lanes != 1) return false;
  if (t.code == uint8_t(nb::dlpack::dtype_code::Float)) {
    if (t.bits == 64) *dtype = DType::kF64;
    if (t.bits == 32) *dtype = DType::kF32;
    if (t.bits == 16) *dtype = DType::kF16;
    return t.bits == 64 || t.bits == 32 || t.bits == 16;
  }
  const bool bf16 = (t.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && t.bits == 16) ||
                    (t.code == uint8_t(nb::dlpack::dtype_code::UInt) && t.bits == 16);  // bf16 bit patterns
  if (bf16) *dtype = DType::kBF16;
  return bf16;
}

bool IntDType(const Array& array, int bits) {
  const nb::dlpack::dtype t = array.dtype();
  return t.lanes == 1 && t.code == uint8_t(nb::dlpack::dtype_code::Int) && t.bits == bits;
}

std::string Shape(const Array& array) {
  std::vector<int64_t> shape(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) shape[i] = int64_t(array.shape(i));
  return ShapeString(shape);
}

bool CContiguous(const Array& array) {
  int64_t expected = 1;
  for (size_t i = array.ndim(); i-- > 0;) {
    if (array.shape(i) != 1 && array.stride(i) != expected) return false;
    expected *= int64_t(array.shape(i));
  }
  return true;
}

void RequireHost(const Array& array, const char* name) {
  if (MemoryOf(array, name) != Memory::kHost) {
    throw nb::value_error((std::string(name) + ": must be in host memory here (it is on a CUDA device)").c_str());
  }
}

}  // namespace

Memory MemoryOf(const Array& array, const char* name) {
  const int device = array.device_type();
  if (device == nb::device::cpu::value) return Memory::kHost;
  if (device == nb::device::cuda::value) return Memory::kCuda;
  throw nb::value_error((std::string(name) + ": device type " + std::to_string(device) +
                         " is not supported: arrays must be in host memory or on a CUDA device")
                            .c_str());
}

std::string DTypeText(const Array& array) {
  DType dtype;
  if (FloatDType(array, &dtype)) return std::string(DTypeName(dtype));
  if (IntDType(array, 32)) return "I32";
  if (IntDType(array, 64)) return "I64";
  const nb::dlpack::dtype t = array.dtype();
  static const char* kCodes[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"};
  const std::string code = t.code < std::size(kCodes) ? kCodes[t.code] : "code " + std::to_string(t.code);
  return code + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

TensorView FloatTensor(const Array& array, const char* name, const char* shape_text) {
  const Memory memory = MemoryOf(array, name);
  DType dtype;
  if (!FloatDType(array, &dtype)) {
    throw nb::value_error((std::string(name) + ": dtype " + DTypeText(array) +
                           " is not accepted: float64, float32, bfloat16 or float16 (no conversion is made)")
                              .c_str());
  }
  if (array.ndim() != 3) {
    throw nb::value_error((std::string(name) + ": shape " + Shape(array) + " must be rank 3 " + shape_text).c_str());
  }
  if (array.shape(2) > 1 && array.stride(2) != 1) {
    throw nb::value_error((std::string(name) + ": its last axis has stride " + std::to_string(array.stride(2)) +
                           " elements: it must be contiguous (stride 1); pass a contiguous copy")
                              .c_str());
  }
  TensorView view;
  view.data = array.data();
  view.dtype = dtype;
  view.rows = int64_t(array.shape(0));
  view.heads = int64_t(array.shape(1));
  view.dim = int64_t(array.shape(2));
  view.row_stride = array.stride(0);
  view.head_stride = array.stride(1);
  if (memory == Memory::kCuda) {
    view.memory = msa::Memory::kCudaDevice;
    view.device = array.device_id();
  }
  return view;
}

std::span<const int32_t> Int32Vector(const Array& array, const char* name) {
  RequireHost(array, name);
  if (!IntDType(array, 32) || array.ndim() != 1) {
    throw nb::value_error((std::string(name) + ": " + DTypeText(array) + " " + Shape(array) +
                           " is not accepted: must be int32 [B+1] (no conversion is made)")
                              .c_str());
  }
  if (array.shape(0) > 1 && array.stride(0) != 1) {
    throw nb::value_error(
        (std::string(name) + ": stride " + std::to_string(array.stride(0)) + ": must be contiguous (stride 1)")
            .c_str());
  }
  return {static_cast<const int32_t*>(array.data()), array.shape(0)};
}

const int32_t* Int32Selection(const Array& array, const char* name, const std::vector<int64_t>& shape) {
  RequireHost(array, name);
  if (!IntDType(array, 32)) {
    throw nb::value_error(
        (std::string(name) + ": dtype " + DTypeText(array) + " is not accepted: must be int32 (no conversion is made)")
            .c_str());
  }
  std::vector<int64_t> got(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) got[i] = int64_t(array.shape(i));
  if (got != shape) {
    throw nb::value_error((std::string(name) + ": shape " + ShapeString(got) + " must be " + ShapeString(shape) +
                           " [Hidx, total_q, top_k] (head-major; msa_oracle.layouts.topk converts other layouts)")
                              .c_str());
  }
  if (!CContiguous(array)) {
    throw nb::value_error((std::string(name) + ": must be C-contiguous; pass a contiguous copy").c_str());
  }
  return static_cast<const int32_t*>(array.data());
}

SafetensorsTensor ToSafetensors(const Array& array, const std::string& name) {
  RequireHost(array, name.c_str());
  SafetensorsTensor tensor;
  tensor.name = name;
  if (!FloatDType(array, &tensor.dtype)) {
    if (IntDType(array, 32)) {
      tensor.dtype = DType::kI32;
    } else if (IntDType(array, 64)) {
      tensor.dtype = DType::kI64;
    } else {
      throw nb::value_error((name + ": dtype " + DTypeText(array) +
                             " is not accepted: float64, float32, bfloat16, float16, int32 or int64")
                                .c_str());
    }
  }
  tensor.shape.resize(array.ndim());
  int64_t count = 1;
  for (size_t i = 0; i < array.ndim(); ++i) {
    tensor.shape[i] = int64_t(array.shape(i));
    count *= tensor.shape[i];
  }
  const int64_t element_size = DTypeSize(tensor.dtype);
  tensor.bytes.resize(size_t(count * element_size));
  if (count == 0) return tensor;
  const auto* base = static_cast<const uint8_t*>(array.data());
  if (CContiguous(array)) {
    std::memcpy(tensor.bytes.data(), base, tensor.bytes.size());
    return tensor;
  }
  // Strided: walk the elements in C order.
  std::vector<int64_t> index(array.ndim(), 0);
  for (int64_t e = 0; e < count; ++e) {
    int64_t offset = 0;
    for (size_t i = 0; i < array.ndim(); ++i) offset += index[i] * array.stride(i);
    std::memcpy(&tensor.bytes[size_t(e * element_size)], base + offset * element_size, size_t(element_size));
    for (size_t i = array.ndim(); i-- > 0;) {
      if (++index[i] < tensor.shape[i]) break;
      index[i] = 0;
    }
  }
  return tensor;
}

void ThrowIfError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return;
    case StatusCode::kInvalidArgument:
      throw nb::value_error(status.message().c_str());
    case StatusCode::kUnsupported:
      throw UnsupportedError(status.message());
    case StatusCode::kOutOfMemory:
      throw std::bad_alloc();
    case StatusCode::kIoError:
      throw FileError(status.message());
    case StatusCode::kDeviceError:
      throw std::runtime_error(status.message());
  }
}

}  // namespace msa::python
