// Device helpers of the tensor-core kernels (index_kernels.cu, attend_kernels.cu): 16-bit formats, mma.sync
// m16n8k16, ldmatrix and cp.async. Fragment layouts follow the PTX ISA (m16n8k16 .row.col): a[4] holds rows
// (g, g+8) x cols (2t, 2t+1) and (2t+8, 2t+9); b[2] holds rows (2t, 2t+1) and (2t+8, 2t+9) x col g; c[4]
// holds rows (g, g+8) x cols (2t, 2t+1), with g = lane / 4, t = lane % 4.
#ifndef MSA_GPU_MMA_CUH_
#define MSA_GPU_MMA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gpu/kernels.h"

namespace msa::gpu::mma {

inline constexpr unsigned kFullMask = 0xffffffffu;

template <int kLowp>
__device__ inline float ToFloat(uint16_t bits) {
  if constexpr (kLowp == kLowpBF16) return __uint_as_float(uint32_t(bits) << 16);
  return __half2float(__ushort_as_half(bits));
}

template <int kLowp>
__device__ inline uint16_t FromFloat(float x) {
  if constexpr (kLowp == kLowpBF16) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  return __half_as_ushort(__float2half_rn(x));
}

// A score as a plain same-precision evaluation materializes it: R(R(dot) * scale), R = the storage format.
template <int kLowp>
__device__ inline uint16_t Score16(float dot, float scale) {
  return FromFloat<kLowp>(ToFloat<kLowp>(FromFloat<kLowp>(dot)) * scale);
}

constexpr float kLog2e = 1.4426950408889634f;  // log2(e): exp(x) = 2^(x log2(e))

// The exponent offset of a softmax row whose maximum is m: m log2(e), so that exp(s - m) = 2^(s log2(e) - offset);
// 0 where m = -inf (every score of the row -inf: a padding row, or scores that overflowed), so that each of its p is
// 2^-inf = 0, a weight of 0, where m log2(e) would give 2^NaN.
__device__ inline float MaxLog2(float m) { return m == -INFINITY ? 0.0f : m * kLog2e; }

// 2^x by the special-function unit (ex2.approx.ftz.f32: relative error about 2^-22, far inside the storage format's
// rounding of p; 2^-inf = 0). exp2f is the same instruction where 2^x is a normal float; below 2^-126 it adds two
// multiplies and a compare per call to return the subnormal, where this returns 0. The softmax kernels take this one:
// a p under 2^-126 is lost in l (which holds the row maximum's term, about 1) and in O either way.
__device__ inline float Exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// (lo, hi) rounded to the storage format (nearest even, as FromFloat) in one paired conversion, lo in the low half.
template <int kLowp>
__device__ inline uint32_t Pack(float lo, float hi) {
  if constexpr (kLowp == kLowpBF16) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  const __half2 pair = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// The two halves of a Pack'd pair, widened back to float.
template <int kLowp>
__device__ inline float LowHalf(uint32_t pair) {
  return ToFloat<kLowp>(uint16_t(pair & 0xffffu));
}
template <int kLowp>
__device__ inline float HighHalf(uint32_t pair) {
  return ToFloat<kLowp>(uint16_t(pair >> 16));
}

// Score16 of two dots at once, Pack'd (lo in the low half): the same roundings, each a paired conversion.
template <int kLowp>
__device__ inline uint32_t ScorePair16(float dot_lo, float dot_hi, float scale) {
  const uint32_t dots = Pack<kLowp>(dot_lo, dot_hi);
  return Pack<kLowp>(LowHalf<kLowp>(dots) * scale, HighHalf<kLowp>(dots) * scale);
}

__device__ inline uint32_t SmemAddress(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// SPEC section 5's order (b) on one 16-byte chunk of Q in shared memory (8 storage-format values at `chunk`, a shared
// address): each becomes R(q * scale), in place (Pack's rounding). Kernels that scale their Q rows with it and take the
// fp32 dots as the scores give each other's bits. The chunk must be visible to the calling thread (its own copies after
// their wait); the caller makes the writes visible to the other threads and to wgmma.
template <int kLowp>
__device__ inline void ScaleSharedChunk(uint32_t chunk, float scale) {
  uint32_t pair[4];
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(pair[0]), "=r"(pair[1]), "=r"(pair[2]), "=r"(pair[3])
               : "r"(chunk));
#pragma unroll
  for (int i = 0; i < 4; ++i) pair[i] = Pack<kLowp>(LowHalf<kLowp>(pair[i]) * scale, HighHalf<kLowp>(pair[i]) * scale);
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(chunk), "r"(pair[0]), "r"(pair[1]), "r"(pair[2]),
               "r"(pair[3])
               : "memory");
}

template <int kLowp>
__device__ inline void Mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (kLowp == kLowpBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 16 bytes global -> shared, zero-filled when !valid (the global address is not read then).
__device__ inline void CopyAsync16(void* smem, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddress(smem)), "l"(global),
               "r"(valid ? 16 : 0));
}
__device__ inline void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ inline void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 16-bit matrices; lane l gives the row address of matrix l / 8, row l % 8.
__device__ inline void LoadMatrixX4(uint32_t r[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(smem)));
}
__device__ inline void LoadMatrixX4Trans(uint32_t r[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(smem)));
}

}  // namespace msa::gpu::mma

#endif  // MSA_GPU_MMA_CUH_
