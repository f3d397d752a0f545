// Shared-memory barriers for warp-specialized kernels (sm_90): mbarrier objects (PTX ISA 9.7.13.15, "Parallel
// Synchronization and Communication Instructions: mbarrier"), the bulk tensor copies that complete on them, and named
// barriers (bar.sync / bar.arrive, 9.7.13.1).
// An mbarrier completes a phase when its expected arrival count is reached; a waiter names the phase by its parity
// (phase n: n & 1). arrive has release and the waits acquire semantics at CTA scope, so shared-memory writes
// before an arrive are visible after the matching wait. Addresses are shared-state-space addresses (wgmma.cuh
// SharedAddress). Named barrier 0 is __syncthreads'; callers use ids 1-15.
#ifndef MSA_GPU_COMMON_MBARRIER_CUH_
#define MSA_GPU_COMMON_MBARRIER_CUH_

#include <cstdint>

namespace msa::gpu::mbarrier {

// One thread initializes, then calls FenceInit once after its last Init; a __syncthreads() must follow before any
// other thread uses the barrier.
__device__ inline void Init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the calling thread's earlier Inits visible to the async proxy, whose bulk copies complete on the barriers
// (fence.mbarrier_init, PTX ISA "membar/fence").
__device__ inline void FenceInit() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ inline void Arrive(uint32_t bar) {
  asm volatile(
      "{\n"
      ".reg .b64 state;\n"
      "mbarrier.arrive.shared::cta.b64 state, [%0];\n"
      "}\n" ::"r"(bar)
      : "memory");
}

// setmaxnreg (9.7.17.1): a warpgroup gives registers back (Release) or takes them (Take); every warp of the
// warpgroup executes it, and the kernel must have a register cap at entry (__launch_bounds__(threads, 1)).
template <int kRegisters>
__device__ inline void ReleaseRegisters() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ inline void TakeRegisters() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Arrives and adds `bytes` to the transactions the current phase waits for (the bulk copies' complete_tx).
__device__ inline void ArriveExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "{\n"
      ".reg .b64 state;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n"
      "}\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}

// Bulk tensor copy (9.7.9.25, cp.async.bulk.tensor, sm_90) of the box at (c0, c1, c2) of a 3-D tensor map into
// shared memory at `dst`, completing `bytes` = the box size as transactions on mbarrier `bar`.
__device__ inline void TensorLoad3d(uint32_t dst, const void* tensor_map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(dst),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Blocks until the phase of parity `parity` has completed.
__device__ inline void Wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Named barriers: `threads` (a multiple of 32) arrivals complete barrier `id`; Sync waits for them, Arrive does not.
__device__ inline void NamedSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void NamedArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace msa::gpu::mbarrier

#endif  // MSA_GPU_COMMON_MBARRIER_CUH_
