// Programmatic dependent launch (compute capability 9.0): a kernel launched by LaunchDependent may start while the
// kernel before it on the stream (its primary) is still running, once every CTA of the primary has called
// AllowDependents or exited; it must call WaitForPrimary before it touches any memory the primary writes or reads
// (WaitForPrimary returns when the primary has completed and its writes are visible). On older devices the launch is
// an ordinary one and both calls do nothing. Graph capture keeps the programmatic edge.
#ifndef MSA_GPU_COMMON_DEPENDENT_LAUNCH_CUH_
#define MSA_GPU_COMMON_DEPENDENT_LAUNCH_CUH_

#include <utility>

#include <cuda_runtime.h>

namespace msa::gpu {

__device__ inline void WaitForPrimary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ inline void AllowDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent of the stream's previous kernel where the
// kernel's binary is sm_90 code (so that its WaitForPrimary is compiled in: a binary JIT-compiled from older PTX waits
// for nothing, and is launched as an ordinary one); returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            Args&&... args) {
  cudaFuncAttributes binary{};
  const cudaError_t err = cudaFuncGetAttributes(&binary, kernel);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = binary.binaryVersion >= 90 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_DEPENDENT_LAUNCH_CUH_
