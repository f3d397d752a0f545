// score_format fp16 (SPEC section 2, the official kernels' use_fp16_score): a block score as the binary16 value
// that is ranked, reported and added into index_lse. Shared by the rounding of the block scores (common_kernels.cu
// RoundScoresToBinary16) and the two index_lse kernels (exact_kernels.cu, lowp_kernels.cu).
#ifndef MSA_GPU_FP16_SCORE_CUH_
#define MSA_GPU_FP16_SCORE_CUH_

#include <cuda_fp16.h>

namespace msa::gpu {

// The nearest binary16 value, ties to even, rounded ONCE from the argument (cvt.rn.f16.f64 from a double: no
// detour through float, as msa::RoundToBinary16), widened back exactly. +-inf from |x| >= 65520; the sign of
// zero and NaN are kept.
__device__ inline double Fp16Score(double x) { return double(__half2float(__double2half(x))); }
__device__ inline float Fp16Score(float x) { return __half2float(__float2half_rn(x)); }

}  // namespace msa::gpu

#endif  // MSA_GPU_FP16_SCORE_CUH_
