// The current CUDA device as the planner sees it (gpu/common/device_caps.h), queried once per process; a device that
// cannot be read answers the defaults (compute capability 0.0, 1 SM, 48 KiB), which no sm_90a kernel accepts.
#ifndef MSA_GPU_COMMON_DEVICE_QUERY_H_
#define MSA_GPU_COMMON_DEVICE_QUERY_H_

#include "gpu/common/device_caps.h"

namespace msa::gpu {

const DeviceCaps& CurrentDeviceCaps();
// Multiprocessors of the current device (grid sizing).
inline int SmCount() { return CurrentDeviceCaps().sm_count; }

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_DEVICE_QUERY_H_
