// repro.cu's kernel launched as split-k's is (bench/results/synccheck_2026-12-06.md): in clusters of 16 CTAs, as a
// programmatic dependent of a primary kernel, with split-k's opening (a wait on the primary, a warp-0 ballot, a
// barrier) and its closing cluster barrier. Every barrier is reached by every thread with its warp converged in the
// source. Run it several times under compute-sanitizer --tool synccheck: a report here is a report on correct code.
// Exits non-zero if a CUDA call fails or a result is wrong. The argument picks the launch: `both` (the default, as
// above), `cluster` (clusters of 16, not a dependent) or `dependent` (a dependent, clusters of one).
#include <cstdio>
#include <cstring>

#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/mma.cuh"

namespace {

constexpr int kStride = 136;  // 128 dims + 8 of padding, in 16-bit elements
constexpr int kClusters = 64, kClusterSize = 16;

// Writes each cluster's key count (40 or 128 keys: warps 3-7 skip their mma, or none do), then lets the dependent go.
__global__ void PrimaryKernel(int* nkeys) {
  if (threadIdx.x == 0) nkeys[blockIdx.x] = blockIdx.x % 2 == 0 ? 40 : 128;
  msa::gpu::AllowDependents();
}

__global__ void __launch_bounds__(256, 2) DependentKernel(const int* nkeys_of, float* out) {
  __shared__ __align__(16) uint16_t q[16 * kStride];
  __shared__ __align__(16) uint16_t k[128 * kStride];
  __shared__ float warp_max[8 * 16];
  __shared__ int nkeys_shared;
  __shared__ uint32_t mask_shared;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  for (int e = tid; e < 16 * kStride; e += blockDim.x) q[e] = 0x3f80;  // bf16 1.0
  for (int e = tid; e < 128 * kStride; e += blockDim.x) k[e] = (e / kStride) % 7 == 0 ? 0x3f80 : 0;
  msa::gpu::WaitForPrimary();
  if (warp == 0) {  // as split-k's ids block
    const int n = nkeys_of[blockIdx.x / kClusterSize];
    const uint32_t mask = __ballot_sync(0xffffffffu, lane < n);
    if (lane == 0) {
      nkeys_shared = n;
      mask_shared = mask;
    }
  }
  __syncthreads();
  const int nkeys = nkeys_shared;
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
    out[blockIdx.x * 16 + tid] = mask_shared == 0 ? -1.0f : best;
  }
  msa::gpu::ClusterSync();
}

// DependentKernel's launch in `mode` (see the top of the file).
cudaError_t LaunchInMode(const char* mode, cudaStream_t stream, const int* nkeys, float* out) {
  const bool dependent = std::strcmp(mode, "cluster") != 0, clustered = std::strcmp(mode, "dependent") != 0;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (dependent) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (clustered) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count++].val.clusterDim = {unsigned(kClusterSize), 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusters * kClusterSize);
  config.blockDim = dim3(256);
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, DependentKernel, nkeys, out);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "both";
  if (std::strcmp(mode, "both") != 0 && std::strcmp(mode, "cluster") != 0 && std::strcmp(mode, "dependent") != 0) {
    std::printf("launch mode must be both, cluster or dependent, not %s\n", mode);
    return 2;
  }
  int* nkeys = nullptr;
  float* out = nullptr;
  if (cudaMalloc(&nkeys, kClusters * sizeof(int)) != cudaSuccess) return 2;
  if (cudaMalloc(&out, kClusters * kClusterSize * 16 * sizeof(float)) != cudaSuccess) return 2;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return 2;
  // Clusters of 16 CTAs are past the portable 8, as in SetSplitKAttributes.
  if (cudaFuncSetAttribute(DependentKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) return 2;
  int failures = 0;
  for (int round = 0; round < 4; ++round) {
    PrimaryKernel<<<kClusters, 32, 0, stream>>>(nkeys);
    const cudaError_t launch = LaunchInMode(mode, stream, nkeys, out);
    static float host[kClusters * kClusterSize * 16];
    const cudaError_t copy =
        launch == cudaSuccess ? cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost) : launch;
    if (copy != cudaSuccess) {
      std::printf("round %d: %s\n", round, cudaGetErrorString(copy));
      return 2;
    }
    // Every key row that is a multiple of 7 holds 128 ones: its dot with the all-ones query is 128.
    int wrong = 0;
    for (float value : host) wrong += value != 128.0f;
    std::printf("round %d: %d of %d maxima wrong\n", round, wrong, kClusters * kClusterSize * 16);
    failures += wrong != 0;
  }
  return failures == 0 ? 0 : 1;
}
