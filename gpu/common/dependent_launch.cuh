// Programmatic dependent launch and thread block clusters (compute capability 9.0). A kernel launched by
// LaunchDependent may start while the kernel before it on the stream (its primary) is still running, once every CTA
// of the primary has called AllowDependents or exited; it must call WaitForPrimary before it touches any memory the
// primary writes or reads (WaitForPrimary returns when the primary has completed and its writes are visible). On older
// devices the launch is an ordinary one and both calls do nothing. Graph capture keeps the programmatic edge.
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

// Thread block clusters (compute capability 9.0): every thread of every CTA of the cluster arrives, then waits for all
// of them. Release and acquire at cluster scope: the memory writes of the cluster's threads before the barrier are
// visible to the cluster's threads after it. Every thread of the CTA calls it (the .aligned form). Before sm_90 (no
// clusters: each CTA is its own) a CTA barrier.
__device__ inline void ClusterSync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __syncthreads();
#endif
}

// The two halves of ClusterSync, for a CTA that works between them: ClusterArrive (relaxed: it orders no memory) says
// that this CTA has started, so that the others may store into its shared memory once their ClusterWait returns.
// Every thread of the CTA calls each, in turn. Before sm_90 nothing (each CTA is its own cluster).
__device__ inline void ClusterArrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ inline void ClusterWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
// A 64-bit store into the shared memory of the cluster's CTA `rank`, at the address `local` has in this CTA (visible
// to that CTA after the next ClusterSync). Before sm_90: into this CTA's (rank 0, the only one).
__device__ inline void StoreToClusterCta(unsigned long long* local, unsigned rank, unsigned long long value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned address = unsigned(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  asm volatile("st.shared::cluster.u64 [%0], %1;" ::"r"(remote), "l"(value) : "memory");
#else
  if (rank == 0) *local = value;
#endif
}
// kernel<<<grid, block, smem, stream>>>(args...) in clusters of `cluster` consecutive CTAs along x (1: no cluster), as
// a programmatic dependent of the stream's previous kernel where the kernel's binary is sm_90 code (so that its
// WaitForPrimary is compiled in: a binary JIT-compiled from older PTX waits for nothing, and is launched as an ordinary
// one); returns the launch's error. Clusters need sm_90 code: cudaErrorNotSupported otherwise.
template <typename... Params, typename... Args>
cudaError_t LaunchDependentCluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, unsigned cluster,
                                   cudaStream_t stream, Args&&... args) {
  cudaFuncAttributes binary{};
  const cudaError_t err = cudaFuncGetAttributes(&binary, kernel);
  if (err != cudaSuccess) return err;
  const bool sm90 = binary.binaryVersion >= 90;
  if (cluster > 1 && !sm90) return cudaErrorNotSupported;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (sm90) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count++].val.clusterDim = {cluster, 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// LaunchDependentCluster without clusters.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            Args&&... args) {
  return LaunchDependentCluster(kernel, grid, block, smem, 1, stream, std::forward<Args>(args)...);
}

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_DEPENDENT_LAUNCH_CUH_
