// The shared-memory layout of QOuterAttend (gpu/attend/q_outer_attend.cu), as plain arithmetic: the kernel launches
// with it and the planner (gpu/common/kernel_fits.h QOuterAttendFits) compares its size with the device's limit.
#ifndef MSA_GPU_ATTEND_Q_OUTER_LAYOUT_H_
#define MSA_GPU_ATTEND_Q_OUTER_LAYOUT_H_

#include <cstddef>

#include "gpu/common/geometry.h"

namespace msa::gpu::q_outer {

inline constexpr int kDimPad = 128;          // head dims are zero-padded to this
inline constexpr int kStride = kDimPad + 8;  // halves per smem row of Q, K, V: ldmatrix conflict-free
inline constexpr int kKeyTile = 64;          // gathered keys per stage; warp w takes keys 16w..16w+15 of a tile
inline constexpr int kWarps = 4;

struct SharedLayout {
  int max_keys_pad = 0;  // top_k * bk rounded up to the key tile
  int s_stride = 0;      // halves per score row
  size_t keypos = 0, qs = 0, kv = 0, scores = 0, bytes = 0;
};

inline SharedLayout PlanLayout(const AttendGeometry& g) {
  SharedLayout l;
  l.max_keys_pad = (g.top_k * g.bk + kKeyTile - 1) / kKeyTile * kKeyTile;
  l.s_stride = l.max_keys_pad + 8;
  l.keypos = (size_t(2 * g.top_k + 2) * 4 + 15) / 16 * 16;  // after blocks[top_k], prefix[top_k + 1], nb
  l.qs = l.keypos + (size_t(l.max_keys_pad) * 4 + 15) / 16 * 16;
  l.kv = l.qs + size_t(16) * kStride * 2;
  l.scores = l.kv + size_t(2) * kKeyTile * kStride * 2;
  const size_t score_bytes = size_t(16) * l.s_stride * 2, partial_bytes = size_t(kWarps) * 16 * kDimPad * 4;
  l.bytes = l.scores + (score_bytes > partial_bytes ? score_bytes : partial_bytes);  // O partials reuse it
  return l;
}

}  // namespace msa::gpu::q_outer

#endif  // MSA_GPU_ATTEND_Q_OUTER_LAYOUT_H_
