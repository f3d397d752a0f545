// gpu_bench's own device helpers: random bf16 inputs and the checks of its outputs (bench/gpu_bench_checks.cu).
#ifndef MSA_BENCH_GPU_BENCH_CHECKS_H_
#define MSA_BENCH_GPU_BENCH_CHECKS_H_

#include <cstdint>

#include <cuda_runtime.h>

namespace msa::gpu::bench {

// dst[i] = uniform [-1, 1) rounded to bf16, from a counter hash of (seed, i); n 16-bit values.
cudaError_t FillUniformBf16(uint16_t* dst, int64_t n, uint64_t seed);
// *bad += the rows of topk [Hidx, total_q, top_k] that break the selection contract for queries at positions
// pos0 + t % q_len (poison, an id out of range, the local block not the last valid id).
cudaError_t CountBadSelections(const int32_t* topk, int64_t total_q, int64_t q_len, int hidx, int top_k, int64_t pos0,
                               int bk, unsigned long long* bad);
// x [n] of `type` (kInF64, kInF32 or kInBF16 of gpu/common/geometry.h: the main branch's output formats).
// *bad += the entries of x that are not finite.
cudaError_t CountNonFinite(const void* x, int type, int64_t n, unsigned long long* bad);
// *digest += a digest of the bits of x at their positions (a sum mod 2^64 of one mixed word per entry and index: any
// one entry changed, or two entries swapped, changes it but for a 2^-64 chance; the same for any launch order).
cudaError_t AddBitsDigest(const void* x, int type, int64_t n, unsigned long long* digest);

}  // namespace msa::gpu::bench

#endif  // MSA_BENCH_GPU_BENCH_CHECKS_H_
