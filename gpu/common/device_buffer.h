// Owned device memory and the translation of CUDA errors into msa::Status (host code only).
#ifndef MSA_GPU_DEVICE_BUFFER_H_
#define MSA_GPU_DEVICE_BUFFER_H_

#include <cstdint>
#include <string>
#include <utility>

#include <cuda_runtime.h>

#include "msa/status.h"

namespace msa::gpu {

// kOutOfMemory for allocation failures, kDeviceError otherwise; the message names the call and the place.
inline Status CudaStatus(cudaError_t error, const char* what, const char* file, int line) {
  const std::string message = std::string("gpu: ") + what + " failed at " + file + ":" + std::to_string(line) + ": " +
                              cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  return Status(error == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError, message);
}

#define MSA_CUDA_RETURN_IF_ERROR(expr)                                              \
  do {                                                                              \
    const cudaError_t msa_cuda_error_ = (expr);                                     \
    if (msa_cuda_error_ != cudaSuccess) {                                           \
      cudaGetLastError(); /* clear a non-sticky error so later calls start clean */ \
      return ::msa::gpu::CudaStatus(msa_cuda_error_, #expr, __FILE__, __LINE__);    \
    }                                                                               \
  } while (false)

// A device array of T, freed on destruction. Allocate returns kOutOfMemory instead of throwing.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }

  Status Allocate(int64_t count, const char* name) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = count;
    if (count <= 0) return Status::Ok();
    const cudaError_t error = cudaMalloc(reinterpret_cast<void**>(&data_), size_t(count) * sizeof(T));
    if (error != cudaSuccess) {
      cudaGetLastError();
      data_ = nullptr;
      return Status(error == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError,
                    std::string("gpu: cannot allocate ") + name + " (" + std::to_string(size_t(count) * sizeof(T)) +
                        " bytes on the device): " + cudaGetErrorString(error));
    }
    return Status::Ok();
  }

  T* get() const { return data_; }
  int64_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace msa::gpu

#endif  // MSA_GPU_DEVICE_BUFFER_H_
