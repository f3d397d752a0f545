#include "gpu/common/device_query.h"

#include <cuda_runtime.h>

#include "gpu/kernels.h"

namespace msa::gpu {

const DeviceCaps& CurrentDeviceCaps() {
  static const DeviceCaps caps = [] {
    DeviceCaps c;
    int device = 0, major = 0, minor = 0, sms = 0, shared = 0, l2 = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
      cudaGetLastError();  // no device: the defaults
      return c;
    }
    c.major = major;
    c.minor = minor;
    c.sm_count = sms > 0 ? sms : 1;
    c.max_shared_bytes = shared;
    c.l2_bytes = l2;
    c.max_split_k_cluster = c.RunsSm90a() ? SplitKLargestCluster() : 0;
    return c;
  }();
  return caps;
}

}  // namespace msa::gpu
