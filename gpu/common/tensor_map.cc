#include "gpu/common/tensor_map.h"

#include <cudaTypedefs.h>

namespace msa::gpu {

cudaError_t EncodeBoxMap(const void* base, int element_bytes, int64_t rows, int heads, int dims, int box_rows,
                         int box_heads, CUtensorMap* map) {
  // Looked up once, under the thread-safe initialization of a local static.
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found;
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found);
    return err == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry)
               : nullptr;
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  if (element_bytes != 1 && element_bytes != 2) return cudaErrorInvalidValue;
  const CUtensorMapDataType type = element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const cuuint64_t dim[3] = {cuuint64_t(dims), cuuint64_t(heads), cuuint64_t(rows)};
  const cuuint64_t row_bytes = cuuint64_t(dims) * cuuint64_t(element_bytes);
  const cuuint64_t stride[2] = {row_bytes, row_bytes * cuuint64_t(heads)};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {cuuint32_t(128 / element_bytes), cuuint32_t(box_heads), cuuint32_t(box_rows)};
  const cuuint32_t element_stride[3] = {1, 1, 1};
  const CUresult result =
      encode(map, type, 3, const_cast<void*>(base), dim, stride, box, element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace msa::gpu
