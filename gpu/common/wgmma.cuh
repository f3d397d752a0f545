// Device helpers for Hopper's warpgroup MMA (wgmma, sm_90a only) as gpu/attend/kv_outer_wgmma.cu uses it: shared-memory
// matrix descriptors for the 128-byte swizzle, wgmma.mma_async m64n128k16 with fp32 accumulators (A from shared
// memory or from registers; m64n128k32 on e4m3 for gpu/index/block_max_fp8.cu), and the fence / commit / wait protocol.
// Section numbers are those of the PTX ISA 8.x / 9.0 ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions", 9.7.15).
//
// Everything here compiles to PTX only for compute_90a (MSA_WGMMA_ENABLED); the other targets see no-op bodies
// that trap if they were ever reached (the launcher refuses non-sm_90 devices first).
//
// Shared-memory layout, 128-byte swizzle (9.7.15.5.1.2, Table "swizzling mode / leading dimension"; canonical
// layout Swizzle<3,4,3>): a tile is stored as rows of 128 bytes (64 16-bit elements); in each run of 8 rows
// (one 1024-byte "swizzle atom", which must start on a 1024-byte boundary for base offset 0, 9.7.15.5.1.2.2) the
// 16-byte chunk c of row r sits at chunk position c ^ (r % 8). The hardware applies the XOR to address bits
// [4,7) with bits [7,10) of the shared address, so a tile whose base is 1024-byte aligned can be addressed by
// plain offsets in its descriptors. A tile wider than 64 elements along its contiguous dimension is stored as
// several such column blocks, one after the other.
//
// Register fragments (9.7.15.5.1.1.1, m64nNk16): warp w of the warpgroup owns rows 16w..16w+15. Accumulator D
// (fp32): d[4j + 2h + e] holds row 16w + lane/4 + 8h, column 8j + 2(lane%4) + e (j < N/8, h, e in {0,1}), i.e. the
// mma.sync m16n8 C layout repeated along N. A from registers (16-bit): a[0] = rows (lane/4) x cols 2(lane%4)+{0,1},
// a[1] = row + 8, a[2] = cols + 8, a[3] = row + 8 and cols + 8: the mma.sync m16n8k16 A layout. So two adjacent
// n8 column chunks of an fp32 accumulator, packed pairwise, are exactly one k16 A fragment (as FlashAttention-3
// feeds P to its second GEMM).
#ifndef MSA_GPU_WGMMA_CUH_
#define MSA_GPU_WGMMA_CUH_

#include <cstdint>

#include "gpu/common/mma.cuh"
#include "gpu/kernels.h"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MSA_WGMMA_ENABLED 1
#endif

namespace msa::gpu::wgmma {

// Matrix descriptor (9.7.15.5.1.2.2): bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4,
// 32-45 stride-dimension byte offset >> 4, 49-51 base offset (0: atoms start on 1024-byte boundaries), 62-63
// swizzle mode (1 = 128-byte swizzle). Every field is (x & 0x3FFFF) >> 4.
//
// K-major operand with 128-byte swizzle (canonical ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8 16-bit elements):
// rows of 128 bytes, SBO = 1024 (from one 8-row atom to the next along M/N), LBO unused ("assumed 1").
// MN-major operand with 128-byte swizzle (canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))): rows along K of 128
// bytes holding 64 consecutive M/N elements; SBO = byte offset from one group of 8 K-rows to the next, LBO = byte
// offset from one 64-element M/N column block to the next.
__host__ __device__ constexpr uint64_t DescriptorEncode(uint32_t bytes) { return uint64_t((bytes & 0x3FFFFu) >> 4); }
__host__ __device__ constexpr uint64_t MakeDescriptor(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return DescriptorEncode(smem_address) | (DescriptorEncode(lbo_bytes) << 16) | (DescriptorEncode(sbo_bytes) << 32) |
         (uint64_t(1) << 62);
}
// A descriptor moved by `bytes` (a multiple of 16) within the same tile: only the start-address field changes
// (no carry out of its 14 bits: shared addresses stay below 2^18).
__host__ __device__ constexpr uint64_t AdvanceDescriptor(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` inside a swizzled column block of 128-byte rows.
__host__ __device__ constexpr uint32_t SwizzledOffset(uint32_t row, uint32_t chunk) {
  return row * 128u + ((chunk ^ (row % 8u)) * 16u);
}

__device__ inline uint32_t SharedAddress(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Bytes from `shared_address` to the next 1024-byte boundary (swizzle atoms must start on one).
__device__ inline uint32_t PadTo1024(uint32_t shared_address) { return (1024u - shared_address % 1024u) % 1024u; }

// 16 bytes global -> shared (shared address), zero-filled when !valid (the global address is not read then).
__device__ inline void CopyAsync16(uint32_t smem_address, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address), "l"(global), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ inline void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Shared memory written through the generic proxy (cp.async, st.shared) and read next by wgmma (the async proxy,
// 9.7.15.4) needs this fence in each writing thread after its writes complete and before the barrier that
// publishes them.
__device__ inline void FenceProxyAsyncShared() {
#if defined(MSA_WGMMA_ENABLED)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// wgmma.fence (9.7.15.7.1): orders earlier register accesses (accumulators, A fragments) before the wgmma that
// follows; needed before the first wgmma of a batch whenever those registers were touched by other instructions.
__device__ inline void Fence() {
#if defined(MSA_WGMMA_ENABLED)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
// wgmma.commit_group (9.7.15.7.2): the wgmmas issued since the last commit form one group.
__device__ inline void CommitGroup() {
#if defined(MSA_WGMMA_ENABLED)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// wgmma.wait_group (9.7.15.7.3): wait until at most kPending groups are in flight.
template <int kPending>
__device__ inline void WaitGroup() {
#if defined(MSA_WGMMA_ENABLED)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// After WaitGroup: ties every later read of the accumulators to this point, so the compiler cannot move a read
// above the wait (the wgmma asm statements "write" them at issue as far as the compiler knows).
__device__ inline void FenceOperands(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ inline void FenceOperands(uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

#define MSA_WGMMA_D64                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MSA_WGMMA_OUT8(i)                                                                                     \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define MSA_WGMMA_OUT64                                                                             \
  MSA_WGMMA_OUT8(0), MSA_WGMMA_OUT8(8), MSA_WGMMA_OUT8(16), MSA_WGMMA_OUT8(24), MSA_WGMMA_OUT8(32), \
      MSA_WGMMA_OUT8(40), MSA_WGMMA_OUT8(48), MSA_WGMMA_OUT8(56)

// D[64 x 128] (+)= A[64 x 16] B[16 x 128], A and B both K-major in shared memory (descriptors), imm-trans-a =
// imm-trans-b = 0 (9.7.15.5.2). accumulate == 0 gives D = A B (scale-d false).
template <int kLowp>
__device__ inline void MmaSS(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int accumulate) {
#if defined(MSA_WGMMA_ENABLED)
  if constexpr (kLowp == kLowpBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MSA_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : MSA_WGMMA_OUT64
        : "l"(a_desc), "l"(b_desc), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : MSA_WGMMA_OUT64
        : "l"(a_desc), "l"(b_desc), "r"(accumulate));
  }
#else
  (void)d, (void)a_desc, (void)b_desc, (void)accumulate;
  __trap();
#endif
}

// D[64 x 128] (+)= A[64 x 16] B[16 x 128], A from registers (fragment layout above), B in shared memory: kTransB = 1
// for B MN-major (imm-trans-b = 1: B's N index is the contiguous one, as in V stored [keys][dims],
// gpu/attend/kv_outer_wgmma.cu), 0 for B K-major (B's K index contiguous, as in index_k stored [keys][dims],
// gpu/index/block_max_wgmma.cu).
// S = Q K^T of one warpgroup over 128 dims: Q [2][64 rows][128 B] (dims 0-63 | 64-127, q_half_bytes apart) and K
// [2][128 rows][128 B] (k_half_bytes apart), both K-major with the 128-byte swizzle; k-step kk covers dims
// 16kk..16kk+15: column block kk / 4, 32 bytes per step inside it. Issued only (no fence, commit or wait).
template <int kLowp>
__device__ inline void MmaQKt128(float (&s)[64], uint64_t q_desc, uint64_t k_desc, uint32_t q_half_bytes,
                                 uint32_t k_half_bytes) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t step = (kk % 4) * 32;
    MmaSS<kLowp>(s, AdvanceDescriptor(q_desc, (kk / 4) * q_half_bytes + step),
                 AdvanceDescriptor(k_desc, (kk / 4) * k_half_bytes + step), kk > 0);
  }
}

// Calls f(j, h, key, lo, hi) for this thread's (lane % 4 = tig) two rows h of a 64 x 128 fp32 accumulator tile, a
// pair of adjacent keys at a time, keys ascending within a row: lo = s[4j + 2h] and hi = s[4j + 2h + 1] are keys
// key = 8j + 2 tig and key + 1 of row h.
template <typename F>
__device__ inline void ForEachScorePair(float (&s)[64], int tig, F&& f) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) f(j, h, j * 8 + tig * 2, s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
  }
}

// The fp32 accumulators of a 64 x 128 score tile rounded as a plain same-precision evaluation materializes them,
// R(R(dot) * scale) (mma::ScorePair16: Score16's roundings, two keys of a row at a time), -inf from key_limit[h] on
// (kMasked; without it every key is visible to both rows), and folded into the row maxima m in ascending key order.
template <int kLowp, bool kMasked>
__device__ inline void RoundScoresAndMax(float (&s)[64], const int (&key_limit)[2], float scale, int tig,
                                         float (&m)[2]) {
  ForEachScorePair(s, tig, [&](int, int h, int key, float& lo, float& hi) {
    const uint32_t scores = mma::ScorePair16<kLowp>(lo, hi, scale);
    lo = !kMasked || key < key_limit[h] ? mma::LowHalf<kLowp>(scores) : -INFINITY;
    hi = !kMasked || key + 1 < key_limit[h] ? mma::HighHalf<kLowp>(scores) : -INFINITY;
    m[h] = fmaxf(fmaxf(m[h], lo), hi);
  });
}

template <int kLowp, int kTransB>
__device__ inline void MmaRS(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc, int accumulate) {
  static_assert(kTransB == 0 || kTransB == 1, "imm-trans-b is 0 or 1");
#if defined(MSA_WGMMA_ENABLED)
  if constexpr (kLowp == kLowpBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MSA_WGMMA_D64
        ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : MSA_WGMMA_OUT64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate), "n"(kTransB));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WGMMA_D64
        ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : MSA_WGMMA_OUT64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate), "n"(kTransB));
  }
#else
  (void)d, (void)a, (void)b_desc, (void)accumulate;
  __trap();
#endif
}

// D[64 x 128] (+)= A[64 x 32] B[32 x 128] on OCP e4m3 inputs (wgmma .m64n128k32 .e4m3.e4m3, 9.7.15.5.1.1.1 and
// 9.7.15.5.2), A from registers, B K-major in shared memory (fp8 wgmma takes no transpose immediates: both operands
// are K-major). The 8-bit A fragment is the 16-bit one byte for byte: a[0] holds row lane/4, K bytes 4(lane%4)..+3,
// a[1] the row + 8, a[2] K + 16, a[3] both; so ldmatrix .b16 over rows of bytes loads it. A K-major B row of 128
// e4m3 bytes is one 128-byte swizzle row; a k32 step is 32 bytes along it. The hardware adds the products with less
// than fp32 precision (gpu/index/block_max_fp8.cu states the bound).
__device__ inline void MmaRSE4M3(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc, int accumulate) {
#if defined(MSA_WGMMA_ENABLED)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " MSA_WGMMA_D64
      ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : MSA_WGMMA_OUT64
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate));
#else
  (void)d, (void)a, (void)b_desc, (void)accumulate;
  __trap();
#endif
}

#undef MSA_WGMMA_D64
#undef MSA_WGMMA_OUT8
#undef MSA_WGMMA_OUT64

}  // namespace msa::gpu::wgmma

#endif  // MSA_GPU_WGMMA_CUH_
