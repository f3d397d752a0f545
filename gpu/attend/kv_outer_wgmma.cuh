// What the two wgmma tile kernels of the KV-outer main branch share (gpu/attend/kv_outer_wgmma.cu and its
// warp-specialized twin gpu/attend/kv_outer_ws.cu): the tile's geometry in shared memory and its softmax, so that the
// two give the same bits by construction. Internal to gpu/attend.
#ifndef MSA_GPU_ATTEND_KV_OUTER_WGMMA_CUH_
#define MSA_GPU_ATTEND_KV_OUTER_WGMMA_CUH_

#include <cmath>
#include <cstdint>

#include "gpu/common/mma.cuh"
#include "gpu/common/wgmma.cuh"

namespace msa::gpu::kv_outer_wgmma {

constexpr int kTileRows = 64;        // (query, head) rows per tile: the wgmma M
constexpr int kKeys = 128;           // keys of one block, zero-padded (block_size <= 128): the S N and the O K
constexpr int kDims = 128;           // head dims, zero-padded: the S K and the O N
constexpr uint32_t kRowBytes = 128;  // one swizzled row: 64 16-bit elements
constexpr uint32_t kAtomBytes = 8 * kRowBytes;           // one 128-byte-swizzle atom: 8 rows (the descriptors' SBO)
constexpr uint32_t kQHalfBytes = kTileRows * kRowBytes;  // dims 0-63 (or 64-127) of the Q tile: 8 KiB
constexpr uint32_t kQBytes = 2 * kQHalfBytes;
constexpr uint32_t kKvHalfBytes = kKeys * kRowBytes;  // dims 0-63 (or 64-127) of K or V: 16 KiB
constexpr uint32_t kKvBytes = 2 * kKvHalfBytes;

#if defined(MSA_WGMMA_ENABLED)
// The softmax of one tile on S's accumulators (64 per thread: rows 16 warp + lane / 4 (+ 8), wgmma.cuh's layout):
// s = R(R(dot) * scale) in the storage format, keys at or past key_limit[h] -> -inf, m = the row maxima (4-lane
// shuffles), p = exp2(s log2e - m log2e) (ex2.approx), l = the row sums of p (fp32, each lane's keys in ascending
// order, then the 4-lane shuffles), P packed to the storage format (keys 16kk..16kk+15 = one A fragment of O = P V).
// A row without a key (padding, or every score -inf) gets m = -inf and p = 0, not NaN.
template <int kLowp>
__device__ inline void TileSoftmax(float (&s)[64], const int (&key_limit)[2], float scale, int tig, float (&m_row)[2],
                                   float (&l_row)[2], uint32_t (&pa)[kKeys / 16][4]) {
  m_row[0] = m_row[1] = -INFINITY;
  wgmma::RoundScoresAndMax<kLowp, true>(s, key_limit, scale, tig, m_row);
  float m_log2[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(mma::kFullMask, m_row[h], 1));
    m_row[h] = fmaxf(m_row[h], __shfl_xor_sync(mma::kFullMask, m_row[h], 2));
    m_log2[h] = mma::MaxLog2(m_row[h]);
  }
  l_row[0] = l_row[1] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    float p[8];
#pragma unroll
    for (int x = 0; x < 8; ++x) {
      p[x] = mma::Exp2Approx(fmaf(s[8 * kk + x], mma::kLog2e, -m_log2[(x % 4) / 2]));
      l_row[(x % 4) / 2] += p[x];
    }
    pa[kk][0] = mma::Pack<kLowp>(p[0], p[1]);
    pa[kk][1] = mma::Pack<kLowp>(p[2], p[3]);
    pa[kk][2] = mma::Pack<kLowp>(p[4], p[5]);
    pa[kk][3] = mma::Pack<kLowp>(p[6], p[7]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_row[h] += __shfl_xor_sync(mma::kFullMask, l_row[h], 1);
    l_row[h] += __shfl_xor_sync(mma::kFullMask, l_row[h], 2);
  }
}
#endif  // MSA_WGMMA_ENABLED

}  // namespace msa::gpu::kv_outer_wgmma

#endif  // MSA_GPU_ATTEND_KV_OUTER_WGMMA_CUH_
