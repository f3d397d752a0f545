// Device stores of a low-precision main branch's fp32 results into DeviceAttendOutputs (gpu/common/geometry.h), in
// its format: kFp64 widens each value exactly, kBf16Fp32 rounds out to bf16 (to nearest, ties to even) and keeps lse
// in fp32. The format is a launch argument, so each store branches on it uniformly across the warp.
#ifndef MSA_GPU_COMMON_MAIN_OUTPUTS_CUH_
#define MSA_GPU_COMMON_MAIN_OUTPUTS_CUH_

#include <cstdint>

#include "gpu/common/geometry.h"
#include "gpu/common/mma.cuh"

namespace msa::gpu {

// out[i] = x.
__device__ inline void StoreOut(const DeviceAttendOutputs& o, int64_t i, float x) {
  if (o.format == OutputFormat::kBf16Fp32) {
    static_cast<uint16_t*>(o.out)[i] = mma::FromFloat<kLowpBF16>(x);
  } else {
    static_cast<double*>(o.out)[i] = double(x);
  }
}

// out[i], out[i + 1] = a, b; i even.
__device__ inline void StoreOutPair(const DeviceAttendOutputs& o, int64_t i, float a, float b) {
  if (o.format == OutputFormat::kBf16Fp32) {
    *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(o.out) + i) = mma::Pack<kLowpBF16>(a, b);
  } else {
    *reinterpret_cast<double2*>(static_cast<double*>(o.out) + i) = make_double2(double(a), double(b));
  }
}

// out[i .. i + 3] = x[0 .. 3]; i a multiple of 4.
__device__ inline void StoreOutQuad(const DeviceAttendOutputs& o, int64_t i, const float (&x)[4]) {
  if (o.format == OutputFormat::kBf16Fp32) {
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(o.out) + i) =
        make_uint2(mma::Pack<kLowpBF16>(x[0], x[1]), mma::Pack<kLowpBF16>(x[2], x[3]));
  } else {
    double2* dst = reinterpret_cast<double2*>(static_cast<double*>(o.out) + i);
    dst[0] = make_double2(double(x[0]), double(x[1]));
    dst[1] = make_double2(double(x[2]), double(x[3]));
  }
}

// lse[i] = x.
__device__ inline void StoreLse(const DeviceAttendOutputs& o, int64_t i, float x) {
  if (o.format == OutputFormat::kBf16Fp32) {
    static_cast<float*>(o.lse)[i] = x;
  } else {
    static_cast<double*>(o.lse)[i] = double(x);
  }
}

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_MAIN_OUTPUTS_CUH_
