// gpu_bench's own device helpers (bench/gpu_bench_checks.h): random inputs and the output checks.
#include "bench/gpu_bench_checks.h"

#include "gpu/common/geometry.h"

namespace msa::gpu::bench {
namespace {

// Uniform [-1, 1) rounded to bf16, from a counter hash (SplitMix64 finalizer) of (seed, i).
__global__ void FillUniformBf16Kernel(uint16_t* dst, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + uint64_t(i);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = float(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    dst[i] = uint16_t(__float_as_uint(u) >> 16);  // exact: u has at most 24 significant bits, truncation is fine
  }
}

// Counts selection rows that break the contract (poison, id out of range, local block not last valid).
__global__ void CountBadSelectionsKernel(const int32_t* topk, int64_t total_q, int64_t q_len, int hidx, int top_k,
                                         int64_t pos0, int bk, unsigned long long* bad) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= total_q * hidx) return;
  const int64_t t = row % total_q, pos = pos0 + t % q_len, local = pos / bk;
  const int32_t* sel = topk + row * top_k;
  const int64_t valid = local + 1 < top_k ? local + 1 : top_k;
  bool ok = sel[valid - 1] == local;
  for (int s = 0; s < top_k; ++s) ok = ok && (s < valid ? (sel[s] >= 0 && sel[s] <= local) : sel[s] == -1);
  if (!ok) atomicAdd(bad, 1ull);
}

// Entry i of x [n] of `type`: its value widened to double, and its bits.
__device__ inline double ValueAt(const void* x, int type, int64_t i) {
  if (type == kInF64) return static_cast<const double*>(x)[i];
  if (type == kInF32) return static_cast<const float*>(x)[i];
  return __uint_as_float(uint32_t(static_cast<const uint16_t*>(x)[i]) << 16);  // bf16
}
__device__ inline uint64_t BitsAt(const void* x, int type, int64_t i) {
  if (type == kInF64) return uint64_t(__double_as_longlong(static_cast<const double*>(x)[i]));
  if (type == kInF32) return __float_as_uint(static_cast<const float*>(x)[i]);
  return static_cast<const uint16_t*>(x)[i];
}

__global__ void CountNonFiniteKernel(const void* x, int type, int64_t n, unsigned long long* bad) {
  unsigned long long count = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    count += !isfinite(ValueAt(x, type, i));
  }
  if (count) atomicAdd(bad, count);
}

__global__ void AddBitsDigestKernel(const void* x, int type, int64_t n, unsigned long long* digest) {
  unsigned long long sum = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    unsigned long long h = (BitsAt(x, type, i) + uint64_t(i) * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    sum += h ^ (h >> 31);
  }
  atomicAdd(digest, sum);
}

}  // namespace

cudaError_t FillUniformBf16(uint16_t* dst, int64_t n, uint64_t seed) {
  FillUniformBf16Kernel<<<4096, 256>>>(dst, n, seed);
  return cudaGetLastError();
}

cudaError_t CountBadSelections(const int32_t* topk, int64_t total_q, int64_t q_len, int hidx, int top_k, int64_t pos0,
                               int bk, unsigned long long* bad) {
  const int64_t rows = total_q * hidx;
  CountBadSelectionsKernel<<<unsigned((rows + 255) / 256), 256>>>(topk, total_q, q_len, hidx, top_k, pos0, bk, bad);
  return cudaGetLastError();
}

cudaError_t CountNonFinite(const void* x, int type, int64_t n, unsigned long long* bad) {
  CountNonFiniteKernel<<<2048, 256>>>(x, type, n, bad);
  return cudaGetLastError();
}

cudaError_t AddBitsDigest(const void* x, int type, int64_t n, unsigned long long* digest) {
  AddBitsDigestKernel<<<2048, 256>>>(x, type, n, digest);
  return cudaGetLastError();
}

}  // namespace msa::gpu::bench
