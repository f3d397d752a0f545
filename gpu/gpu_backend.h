// The CUDA backend as a backend table entry: "gpu". Precision exact is the canonical FP64 order of SPEC
// section 4, bit-identical to the reference; bf16 and fp16 round the inputs to that format and accumulate in
// fp32 on tensor cores (judged by the oracle rules of SPEC section 5). fp32 is declined (kUnsupported).
// is_available() is false without a CUDA device of compute capability 8.0 or newer; every device failure
// (no device, out of memory, a bad launch) comes back as a Status, never as a crash.
#ifndef MSA_GPU_GPU_BACKEND_H_
#define MSA_GPU_GPU_BACKEND_H_

#include <cstdint>
#include <string>

#include "msa/msa.h"

namespace msa::gpu {

Backend GpuBackend();

// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)", or why no device is usable.
std::string DeviceDescription();

// Device time of the kernels of the most recent select or attend call of this thread, in seconds (0 after a training
// call, which records none; host
// packing and transfers excluded; 0 before any call).
double LastKernelSeconds();

// Bytes of input tensors (q, k, v, index_q, index_k, dout, dlse) the most recent call of this thread copied from
// host memory: 0 when every input was a view in device memory (TensorView::memory), read where it is.
int64_t LastInputUploadBytes();

}  // namespace msa::gpu

#endif  // MSA_GPU_GPU_BACKEND_H_
