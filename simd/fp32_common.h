// Target-independent pieces of the fp32 mode (simd/fp32.h): where queries sit, the (score, id) ranking of
// one selection row, and conversions of single elements. Plain C++, shared by every Highway target.
#ifndef MSA_SIMD_FAST_COMMON_H_
#define MSA_SIMD_FAST_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "msa/msa.h"

namespace msa::simd::fp32 {

// Query row t sits in `sequence` at key `position` (k_len - q_len + i); its keys start at row key_begin.
struct Place {
  int64_t sequence;
  int64_t position;
  int64_t key_begin;
};
std::vector<Place> PlaceQueries(const Batch& batch);

// A 64-bit key whose ascending order is: score descending, then block id ascending (SPEC section 2's rank
// order). -0 and +0 compare equal, as they do in the reference. Precondition: score is not NaN.
// docs:begin rank-key
inline uint64_t RankKey(float score, int32_t id) {
  score += 0.0f;  // -0 becomes +0
  uint32_t bits;
  std::memcpy(&bits, &score, sizeof(bits));
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);  // ascending floats -> ascending integers
  return (uint64_t(~bits) << 32) | uint32_t(id);
}
// docs:end rank-key

// One selection row (SPEC section 2, the forced blocks of msa/forced_blocks.h): the first `take` ranked
// candidates (partial selection with nth_element, then the few winners sorted), then the init blocks
// ascending, then the trailing forced blocks ascending (the local block last), then -1. scores: [visible];
// row: [top_k]; keys is scratch.
void PlaceRow(const Config& config, const float* scores, int64_t visible, int32_t* row, std::vector<uint64_t>* keys);

// Element conversions to fp32 (round to nearest even for f64).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = float(mantissa) * 5.9604644775390625e-8f;  // mantissa * 2^-24, exact
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits =
      exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13)) : (sign | ((exponent + 112) << 23) | (mantissa << 13));
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline float BF16ToFloat(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

}  // namespace msa::simd::fp32

#endif  // MSA_SIMD_FAST_COMMON_H_
