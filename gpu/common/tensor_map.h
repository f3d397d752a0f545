// Tensor maps for the bulk tensor copies of the sm_90 kernels (cp.async.bulk.tensor, gpu/common/mbarrier.cuh).
#ifndef MSA_GPU_COMMON_TENSOR_MAP_H_
#define MSA_GPU_COMMON_TENSOR_MAP_H_

#include <cuda.h>  // CUtensorMap (types only: the encoder comes through the runtime's driver entry point)
#include <cuda_runtime.h>

#include <cstdint>

namespace msa::gpu {

// A [rows][heads][dims] tensor of `element_bytes`-byte values (2: bf16 / fp16, 1: e4m3) at `base` as a tensor map of
// [box_rows][box_heads][128 bytes of dims] boxes, 128-byte swizzle (the layout of gpu/common/wgmma.cuh's K-major
// tiles), zero fill past its bounds (cuTensorMapEncodeTiled, through the runtime's driver entry point). A box is
// always delivered whole: its bytes past the bounds are zeros, and it completes box_rows * box_heads * 128 bytes.
// The caller keeps cuTensorMapEncodeTiled's preconditions: base 16-byte aligned, dims * element_bytes a multiple of
// 16, 1 <= rows < 2^32. cudaErrorNotSupported: no driver entry point; cudaErrorInvalidValue: the driver refused.
cudaError_t EncodeBoxMap(const void* base, int element_bytes, int64_t rows, int heads, int dims, int box_rows,
                         int box_heads, CUtensorMap* map);

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_TENSOR_MAP_H_
