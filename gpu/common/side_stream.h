// A second stream beside the caller's, for work that runs alongside a kernel of its own: fork is recorded on the
// caller's stream and waited by the side stream, join is recorded on the side stream and waited by the caller's. The
// pattern is the one CUDA graph capture records as a fork and a join, so a capture of the caller's stream takes both.
#ifndef MSA_GPU_COMMON_SIDE_STREAM_H_
#define MSA_GPU_COMMON_SIDE_STREAM_H_

#include <utility>

#include <cuda_runtime.h>

#include "gpu/common/device_buffer.h"
#include "msa/status.h"

namespace msa::gpu {

// The handles, as the launch functions take them (all null: no side stream, everything on the caller's stream).
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

// Owns a SideStream: a non-blocking stream of the device's highest priority (its few small kernels are scheduled
// ahead of the waiting blocks of a long kernel on the caller's stream) and two events without timing.
class OwnedSideStream {
 public:
  OwnedSideStream() = default;
  OwnedSideStream(const OwnedSideStream&) = delete;
  OwnedSideStream& operator=(const OwnedSideStream&) = delete;
  OwnedSideStream(OwnedSideStream&& other) noexcept : handles_(std::exchange(other.handles_, SideStream{})) {}
  OwnedSideStream& operator=(OwnedSideStream&& other) noexcept {
    if (this != &other) {
      Release();
      handles_ = std::exchange(other.handles_, SideStream{});
    }
    return *this;
  }
  ~OwnedSideStream() { Release(); }

  Status Create() {
    Release();
    int least = 0, greatest = 0;
    MSA_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    MSA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&handles_.stream, cudaStreamNonBlocking, greatest));
    MSA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&handles_.fork, cudaEventDisableTiming));
    MSA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&handles_.join, cudaEventDisableTiming));
    return Status::Ok();
  }
  const SideStream& handles() const { return handles_; }

 private:
  void Release() {
    if (handles_.join != nullptr) cudaEventDestroy(handles_.join);
    if (handles_.fork != nullptr) cudaEventDestroy(handles_.fork);
    if (handles_.stream != nullptr) cudaStreamDestroy(handles_.stream);
    handles_ = SideStream{};
  }

  SideStream handles_;
};

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_SIDE_STREAM_H_
