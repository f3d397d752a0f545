// A minimal kernel with OneQueryTile's shape of code (bench/results/synccheck_2026-12-06.md): 8 warps, warp w scores
// keys [16 w, 16 w + 16) of a 128-key tile with ldmatrix + mma.sync over 8 dim steps when 16 w < nkeys (warp-uniform),
// then a shuffle reduction and __syncthreads. Correct by construction: every barrier is reached by every thread with
// its warp converged in the source. Run under compute-sanitizer --tool synccheck with nkeys 40 (warps 3-7 skip) and
// 128 (none skip); exits non-zero if a CUDA call fails or the result is wrong.
#include <cstdio>

#include "gpu/common/mma.cuh"

namespace {

constexpr int kStride = 136;  // 128 dims + 8 of padding, in 16-bit elements

__global__ void __launch_bounds__(256, 2) ReproKernel(int nkeys, float* out) {
  __shared__ __align__(16) uint16_t q[16 * kStride];
  __shared__ __align__(16) uint16_t k[128 * kStride];
  __shared__ float warp_max[8 * 16];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  for (int e = tid; e < 16 * kStride; e += blockDim.x) q[e] = 0x3f80;  // bf16 1.0
  for (int e = tid; e < 128 * kStride; e += blockDim.x) k[e] = (e / kStride) % 7 == 0 ? 0x3f80 : 0;
  __syncthreads();
  const int k_key = (lane / 16) * 8 + lane % 8, k_dim = ((lane / 8) % 2) * 8;
  float sc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t a[4];
    msa::gpu::mma::LoadMatrixX4(a, q + (lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
    if (warp * 16 < nkeys) {
      uint32_t b[4];
      msa::gpu::mma::LoadMatrixX4(b, k + (warp * 16 + k_key) * kStride + kk * 16 + k_dim);
      msa::gpu::mma::Mma16816<msa::gpu::kLowpBF16>(sc[0], a, b[0], b[1]);
      msa::gpu::mma::Mma16816<msa::gpu::kLowpBF16>(sc[1], a, b[2], b[3]);
    }
  }
  float m[2] = {-INFINITY, -INFINITY};
  for (int n = 0; n < 2; ++n) {
    for (int e = 0; e < 4; ++e) {
      const int key = warp * 16 + n * 8 + tig * 2 + (e & 1);
      if (key < nkeys) m[e / 2] = fmaxf(m[e / 2], sc[n][e]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 1));
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 2));
    if (tig == 0) warp_max[warp * 16 + gid + 8 * h] = m[h];
  }
  __syncthreads();
  if (tid < 16) {
    float best = warp_max[tid];
    for (int w = 1; w < 8; ++w) best = fmaxf(best, warp_max[w * 16 + tid]);
    out[tid] = best;
  }
}

}  // namespace

int main() {
  float* out = nullptr;
  if (cudaMalloc(&out, 16 * sizeof(float)) != cudaSuccess) return 2;
  int failures = 0;
  for (const int nkeys : {40, 128}) {
    ReproKernel<<<1, 256>>>(nkeys, out);
    float host[16];
    const cudaError_t err = cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
      std::printf("nkeys %d: %s\n", nkeys, cudaGetErrorString(err));
      return 2;
    }
    // Every key row that is a multiple of 7 holds 128 ones: its dot with the all-ones query is 128.
    const bool ok = host[0] == 128.0f && host[15] == 128.0f;
    std::printf("nkeys %d: max %g (expected 128) %s\n", nkeys, host[0], ok ? "ok" : "WRONG");
    failures += !ok;
  }
  return failures == 0 ? 0 : 1;
}
