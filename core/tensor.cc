#include "msa/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "msa/assert.h"

namespace msa {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return "F64";
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  return "?";
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
  }
  return 0;
}

bool ParseDType(std::string_view name, DType* dtype) {
  for (DType d : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    if (DTypeName(d) == name) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

bool IsFloating(DType dtype) { return dtype != DType::kI32 && dtype != DType::kI64; }

double BF16ToDouble(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

double F16ToDouble(uint16_t bits) {
  const uint64_t sign = uint64_t(bits >> 15) << 63;
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 31) {
    const double magnitude = mantissa == 0 ? HUGE_VAL : std::nan("");
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact (a product with a power of two)
    const double magnitude = double(mantissa) * 0x1p-24;
    return sign ? -magnitude : magnitude;
  }
  // normal: (1 + mantissa / 2^10) * 2^(exponent - 15), assembled as the double's fields
  return std::bit_cast<double>(sign | (uint64_t(exponent - 15 + 1023) << 52) | (uint64_t(mantissa) << 42));
}

namespace {

// Rounds the finite, non-negative double with bits `magnitude` (sign cleared) to a binary format with
// `fraction_bits` stored fraction bits, smallest normal exponent `min_exponent` (unbiased, value 2^min_exponent)
// and subnormal quantum 2^(min_exponent - fraction_bits), nearest-even, and returns the format's bits
// (exponent and fraction, no sign) where values past `max_bits` (the largest finite value's bits) become
// `inf_bits`. Only integer operations: the double's significand is shifted right with the dropped bits
// deciding the rounding, which is exact by construction.
inline uint16_t RoundDoubleBits(uint64_t magnitude, int fraction_bits, int min_exponent, int exponent_bias,
                                uint16_t max_bits, uint16_t inf_bits) {
  constexpr uint64_t kFractionMask = (uint64_t(1) << 52) - 1;
  const int biased = int(magnitude >> 52);  // the double's biased exponent; 0 for zero and subnormals
  if (biased >= min_exponent + 1023) {
    // Normal in the target format: drop 52 - fraction_bits fraction bits, nearest-even. A carry out of the
    // fraction increments the exponent field, which is the correctly rounded value (2^(e+1)).
    const int drop = 52 - fraction_bits;
    const uint64_t half_minus_one = (uint64_t(1) << (drop - 1)) - 1;
    const uint64_t rounded = (magnitude + half_minus_one + ((magnitude >> drop) & 1)) >> drop;
    const int64_t exponent = int64_t(rounded >> fraction_bits) - 1023 + exponent_bias;  // target's biased exponent
    const uint64_t fraction = rounded & ((uint64_t(1) << fraction_bits) - 1);
    const uint64_t result = (uint64_t(exponent) << fraction_bits) | fraction;
    return result > max_bits ? inf_bits : uint16_t(result);
  }
  // Subnormal (or zero) in the target format: n = round(magnitude / quantum), quantum = 2^(min_exponent -
  // fraction_bits); n <= 2^fraction_bits, and n = 2^fraction_bits is the smallest normal's bits.
  if (biased == 0) return 0;  // a double subnormal or zero: far below half a quantum of either format
  const uint64_t significand =
      (magnitude & kFractionMask) | (uint64_t(1) << 52);               // value = significand * 2^(biased - 1075)
  const int shift = (1075 - biased) + (min_exponent - fraction_bits);  // n = significand / 2^shift
  if (shift >= 54) return 0;  // significand < 2^53 <= half of 2^shift: rounds to zero
  const uint64_t n = significand >> shift, rest = significand & ((uint64_t(1) << shift) - 1);
  const uint64_t half = uint64_t(1) << (shift - 1);
  return uint16_t(n + (rest > half || (rest == half && (n & 1))));
}

}  // namespace

// Rounds a double straight to bf16 (never through float, which would round twice), nearest-even, by integer
// operations on the double's bits (RoundDoubleBits). tests/tensor_rounding_test.cc checks it against the
// scale-and-nearbyint definition (frexp, ldexp, nearbyint) on every boundary and on random doubles.
uint16_t DoubleToBF16(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const uint16_t sign = uint16_t((bits >> 48) & 0x8000);
  const uint64_t magnitude = bits & ~(uint64_t(1) << 63);
  if (magnitude > 0x7ff0000000000000) return 0x7fc0;  // NaN (any sign): the canonical quiet NaN
  if (magnitude == 0x7ff0000000000000) return sign | 0x7f80;
  // bf16: 7 fraction bits, float's exponent range (smallest normal 2^-126, bias 127), largest 0x7f7f
  return sign | RoundDoubleBits(magnitude, 7, -126, 127, 0x7f7f, 0x7f80);
}

// Same as DoubleToBF16 with f16's 10 fraction bits and exponent range (smallest normal 2^-14, bias 15,
// largest 65504 = 0x7bff).
uint16_t DoubleToF16(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const uint16_t sign = uint16_t((bits >> 48) & 0x8000);
  const uint64_t magnitude = bits & ~(uint64_t(1) << 63);
  if (magnitude > 0x7ff0000000000000) return 0x7e00;
  if (magnitude == 0x7ff0000000000000) return sign | 0x7c00;
  return sign | RoundDoubleBits(magnitude, 10, -14, 15, 0x7bff, 0x7c00);
}

double LoadAsDouble(const void* data, DType dtype, int64_t element) {
  switch (dtype) {
    case DType::kF64:
      return static_cast<const double*>(data)[element];
    case DType::kF32:
      return static_cast<const float*>(data)[element];
    case DType::kBF16:
      return BF16ToDouble(static_cast<const uint16_t*>(data)[element]);
    case DType::kF16:
      return F16ToDouble(static_cast<const uint16_t*>(data)[element]);
    case DType::kI32:
      return static_cast<const int32_t*>(data)[element];
    case DType::kI64:
      return double(static_cast<const int64_t*>(data)[element]);
  }
  MSA_ASSERT(false);
  return 0;
}

TensorView PackedView(const void* data, DType dtype, int64_t rows, int64_t heads, int64_t dim) {
  return TensorView{data, dtype, rows, heads, dim, heads * dim, dim};
}

}  // namespace msa
