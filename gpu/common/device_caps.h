// What the planner needs to know about a device, as plain data: the backend reads it once
// (gpu/common/device_query.h CurrentDeviceCaps), tests write it by hand.
#ifndef MSA_GPU_COMMON_DEVICE_CAPS_H_
#define MSA_GPU_COMMON_DEVICE_CAPS_H_

#include <cstdint>

namespace msa::gpu {

struct DeviceCaps {
  int major = 0, minor = 0;              // compute capability
  int sm_count = 1;                      // multiprocessors
  int64_t max_shared_bytes = 48 * 1024;  // the opt-in shared-memory limit of one block
  int max_split_k_cluster = 0;           // most split-k CTAs placed as one thread block cluster (0: no clusters)
  int64_t l2_bytes = 0;                  // the L2 cache (0: not known)

  // sm_90a machine code (the wgmma and fp8 kernels) runs on compute capability 9.0 only (H100 / H200).
  bool RunsSm90a() const { return major == 9 && minor == 0; }
};

// An H200 (sm_90, 132 SMs, 227 KiB of shared memory per block, split-k clusters of 16 CTAs, 50 MiB of L2) and an A100
// (sm_80, 108 SMs, 163 KiB, no clusters, 40 MiB): the devices the planner's tests describe.
inline constexpr DeviceCaps kH200Caps{9, 0, 132, 232448, 16, 50 << 20};
inline constexpr DeviceCaps kA100Caps{8, 0, 108, 166912, 0, 40 << 20};

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_DEVICE_CAPS_H_
