// The selection pattern as a picture: one panel per group, a row per query, a column per block.
// Written as an RGB PNG by our own minimal encoder (stored deflate blocks: no compression library).
#ifndef MSA_TOOLS_MSA_EXPLAIN_IMAGE_H_
#define MSA_TOOLS_MSA_EXPLAIN_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// Cell colours: ranked picks blue, init blocks green, the local block orange, visible but not selected light
// grey, not visible (future) white. Each cell is kSelectionCell pixels square; groups are kSelectionCell
// pixels apart. Size: width = Hidx * max_blocks * cell + (Hidx - 1) * cell, height = total_q * cell.
inline constexpr int kSelectionCell = 12;

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3]
};

// The picture of the selection [Hidx, total_q, top_k] of `problem`.
RgbImage DrawSelection(const Problem& problem, const std::vector<int32_t>& topk_indices);

// The image as PNG bytes (8-bit RGB, no interlace, filter 0, stored deflate).
std::vector<uint8_t> EncodePng(const RgbImage& image);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_EXPLAIN_IMAGE_H_
