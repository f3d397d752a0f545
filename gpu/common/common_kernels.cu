// Kernels shared by both modes: input conversion (16-bit formats and e4m3), fills, the binary16 block scores of
// score_format fp16, and the exp-free top-k ranking (SPEC section 2).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/common/fp16_score.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu {
namespace {

constexpr int kThreads = 256;

inline unsigned GridFor(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__device__ double LoadWide(const void* src, int type, int64_t i) {
  switch (type) {
    case kInF64:
      return static_cast<const double*>(src)[i];
    case kInF32:
      return double(static_cast<const float*>(src)[i]);
    case kInBF16: {
      const uint32_t bits = uint32_t(static_cast<const uint16_t*>(src)[i]) << 16;
      return double(__uint_as_float(bits));
    }
    default: {
      const __half h = __ushort_as_half(static_cast<const uint16_t*>(src)[i]);
      return double(__half2float(h));  // exact: every fp16 is a float
    }
  }
}

__global__ void WidenKernel(const void* src, int type, int64_t n, double* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = LoadWide(src, type, i);
  }
}

// *first = min(*first, i) over the elements i that are not finite (NaN or +-inf).
__global__ void FirstNonFiniteKernel(const void* src, int type, int64_t n, unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (!isfinite(LoadWide(src, type, i))) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

// Round to nearest even from double: round to float toward zero with a sticky last bit (round to odd), then
// to the 16-bit format with round-to-nearest-even: no double-rounding error (float keeps > 2 extra bits).
__device__ uint16_t NarrowTo16(double x, int lowp) {
  float f = __double2float_rz(x);
  if (double(f) != x && x == x && f == f && !isinf(f)) f = __uint_as_float(__float_as_uint(f) | 1u);
  if (lowp == kLowpBF16) return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  return __half_as_ushort(__float2half_rn(f));
}

__global__ void RoundKernel(const void* src, int type, int64_t n, int lowp, uint16_t* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = NarrowTo16(LoadWide(src, type, i), lowp);
  }
}

// Round to nearest even from double to OCP E4M3FN (RoundToE4M3): |x| is scaled by a power of two onto the integer
// grid of its binade (the subnormals share the grid of binade -6, steps of 2^-9) and rounded once by rint, so no
// double rounding. steps lands in [8, 16] on a normal binade (16: the next binade's first code, which the linear
// code (exponent + 6) * 8 + steps gives) and in [0, 8] below 2^-6 (8: the smallest normal, code 8).
__device__ uint8_t NarrowToE4M3(double x) {
  if (x != x) return 0x7F;
  const uint8_t sign = signbit(x) ? 0x80 : 0x00;
  const double magnitude = fabs(x);
  if (magnitude >= 448.0) return sign | 0x7E;                 // saturate: 448 is the largest finite e4m3
  const int exponent = max(ilogb(magnitude), -6);             // ilogb(0) is FP_ILOGB0 (very negative)
  const double steps = rint(ldexp(magnitude, 3 - exponent));  // exact scaling, then one round to nearest even
  return sign | uint8_t((exponent + 6) * 8 + int(steps));     // at most 126 (0x7E = 448) below 448
}

// The value of an e4m3 byte: sign, exponent e (bias 7), mantissa m; e = 0: m * 2^-9; 0x7F / 0xFF: NaN.
__device__ float E4M3ToFloat(uint8_t code) {
  const uint32_t sign = uint32_t(code & 0x80) << 24, exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return __uint_as_float(sign | 0x7FC00000u);
  if (exponent == 0) return __uint_as_float(sign | __float_as_uint(float(mantissa) * 0x1p-9f));
  return __uint_as_float(sign | ((exponent + 120) << 23) | (mantissa << 20));  // float exponent bias 127 = 7 + 120
}

__global__ void RoundE4M3Kernel(const void* src, int type, int64_t n, uint8_t* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = NarrowToE4M3(LoadWide(src, type, i));
  }
}

__global__ void E4M3ToLowpKernel(const uint8_t* src, int64_t n, int lowp, uint16_t* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float value = E4M3ToFloat(src[i]);  // exact in bf16 and fp16: 4 significant bits, exponents -9..8
    dst[i] =
        lowp == kLowpBF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(value)) : __half_as_ushort(__float2half_rn(value));
  }
}

template <typename T>
__global__ void FillKernel(T* dst, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

unsigned CappedGrid(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// score_format fp16: every entry of the rows' block scores [rows, max_blocks] replaced by its binary16 value; a finite
// score that becomes +-inf records its row (t * Hidx + r) as overflowing. The entries are independent: no order.
template <typename S>
__global__ void RoundScoresKernel(S* bs, ChunkGeometry g, int64_t n, unsigned long long* overflow_row) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const S score = bs[i];
    const S rounded = Fp16Score(score);
    bs[i] = rounded;
    if (isfinite(score) && !isfinite(rounded)) {
      const int64_t row = i / g.max_blocks;
      atomicMin(overflow_row, static_cast<unsigned long long>((g.t0 + row / g.hidx) * g.hidx + row % g.hidx));
    }
  }
}

// docs:begin gpu-rank One thread per chunk row: the first `take` ranked candidates kept sorted in the output
// row itself (score desc, id asc), by insertion; candidates arrive in ascending id, so an equal score never
// displaces an earlier one. Then the forced blocks (WriteForcedTail: init blocks ascending, the other forced
// trailing blocks ascending, the local block last), -1 padding.
template <typename S>
__global__ void RankKernel(const S* bs, ChunkGeometry g, int32_t* topk) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= g.nq * g.hidx) return;
  const RankRow<S> p = PlaceRankRow(bs, g, topk, row);
  const S* scores = p.scores;
  int32_t* out = p.out;
  const int64_t take = p.forced.take;
  int64_t count = 0;
  for (int64_t b = p.forced.init_end; b < p.forced.local_begin && take > 0; ++b) {
    const S s = scores[b];
    if (count == take) {
      if (!(s > scores[out[take - 1]])) continue;  // not better than the worst kept one
      count = take - 1;                            // the worst drops out
    }
    int64_t at = count;
    while (at > 0 && s > scores[out[at - 1]]) {  // strictly better than the one before: move past it
      out[at] = out[at - 1];
      --at;
    }
    out[at] = int32_t(b);
    ++count;
  }
  WriteForcedTail(p.forced, g.top_k, out);  // count == take: there are at least take candidates
}
// docs:end gpu-rank

}  // namespace

cudaError_t WidenToDouble(const void* src, int type, int64_t n, double* dst) {
  if (n <= 0) return cudaSuccess;
  WidenKernel<<<CappedGrid(n), kThreads>>>(src, type, n, dst);
  return cudaGetLastError();
}

cudaError_t FirstNonFinite(const void* src, int type, int64_t n, unsigned long long* first) {
  if (n <= 0) return cudaSuccess;
  FirstNonFiniteKernel<<<CappedGrid(n), kThreads>>>(src, type, n, first);
  return cudaGetLastError();
}

cudaError_t RoundToLowp(const void* src, int type, int64_t n, int lowp, uint16_t* dst) {
  if (n <= 0) return cudaSuccess;
  RoundKernel<<<CappedGrid(n), kThreads>>>(src, type, n, lowp, dst);
  return cudaGetLastError();
}

cudaError_t RoundToE4M3(const void* src, int type, int64_t n, uint8_t* dst) {
  if (n <= 0) return cudaSuccess;
  RoundE4M3Kernel<<<CappedGrid(n), kThreads>>>(src, type, n, dst);
  return cudaGetLastError();
}

cudaError_t E4M3ToLowp(const uint8_t* src, int64_t n, int lowp, uint16_t* dst) {
  if (n <= 0) return cudaSuccess;
  E4M3ToLowpKernel<<<CappedGrid(n), kThreads>>>(src, n, lowp, dst);
  return cudaGetLastError();
}

cudaError_t FillDouble(double* dst, int64_t n, double value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<double><<<CappedGrid(n), kThreads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t FillFloat(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<float><<<CappedGrid(n), kThreads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t RoundScoresToBinary16(double* bs, const ChunkGeometry& g, int64_t rows, unsigned long long* overflow_row,
                                  cudaStream_t stream) {
  const int64_t n = rows * g.max_blocks;
  if (n <= 0) return cudaSuccess;
  RoundScoresKernel<double><<<CappedGrid(n), kThreads, 0, stream>>>(bs, g, n, overflow_row);
  return cudaGetLastError();
}

cudaError_t RoundScoresToBinary16(float* bs, const ChunkGeometry& g, int64_t rows, unsigned long long* overflow_row,
                                  cudaStream_t stream) {
  const int64_t n = rows * g.max_blocks;
  if (n <= 0) return cudaSuccess;
  RoundScoresKernel<float><<<CappedGrid(n), kThreads, 0, stream>>>(bs, g, n, overflow_row);
  return cudaGetLastError();
}

cudaError_t RankDouble(const double* bs, const ChunkGeometry& g, int32_t* topk) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  RankKernel<double><<<GridFor(rows), kThreads>>>(bs, g, topk);
  return cudaGetLastError();
}

cudaError_t RankFloat(const float* bs, const ChunkGeometry& g, int32_t* topk) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  RankKernel<float><<<GridFor(rows), kThreads>>>(bs, g, topk);
  return cudaGetLastError();
}

}  // namespace msa::gpu
