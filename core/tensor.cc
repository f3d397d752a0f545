#include "msa/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "msa/assert.h"

namespace msa {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64: return "F64";
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
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
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(double(mantissa), -24);  // subnormal: mantissa * 2^-24, exact
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? HUGE_VAL : std::nan("");
  } else {
    magnitude = std::ldexp(double(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// Rounds a double straight to bf16 (never through float, which would round twice), nearest-even:
// scale so one bf16 quantum is 1, round with nearbyint (ties to even), scale back. All steps are exact
// except the one rounding.
uint16_t DoubleToBF16(double value) {
  if (std::isnan(value)) return 0x7fc0;
  const double magnitude = std::fabs(value);
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7f80;
  int exponent;
  std::frexp(magnitude, &exponent);                 // magnitude = m * 2^exponent, m in [0.5, 1)
  const int min_exponent = -125;                    // bf16 shares float's exponent range
  const int quantum_exponent = std::max(exponent, min_exponent) - 8;  // 8 significand bits
  const double scaled = std::ldexp(magnitude, -quantum_exponent);      // exact
  const double rounded = std::nearbyint(scaled);    // ties to even in the default rounding mode
  const double result = std::ldexp(rounded, quantum_exponent);
  const float as_float = float(result);             // exact: result has at most 8 significant bits
  if (std::isinf(as_float) || result > 3.3895313892515355e38) return sign | 0x7f80;
  return sign | uint16_t(std::bit_cast<uint32_t>(as_float) >> 16);
}

// Same scheme as DoubleToBF16 with f16's 11 significant bits and exponent range.
uint16_t DoubleToF16(double value) {
  if (std::isnan(value)) return 0x7e00;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7c00;
  int exponent;
  std::frexp(magnitude, &exponent);
  const int quantum_exponent = std::max(exponent, -13) - 11;  // 11 significand bits; subnormal quantum 2^-24
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(magnitude, -quantum_exponent)), quantum_exponent);
  if (rounded > 65504.0) return sign | 0x7c00;  // past the largest f16: overflow to inf
  if (rounded < std::ldexp(1.0, -14)) return sign | uint16_t(std::ldexp(rounded, 24));  // subnormal
  int e;
  const double m = std::frexp(rounded, &e);  // rounded = m * 2^e, m in [0.5, 1)
  const uint16_t biased = uint16_t(e - 1 + 15);
  const uint16_t mantissa = uint16_t(std::ldexp(m, 11)) & 0x3ff;
  return sign | uint16_t(biased << 10) | mantissa;
}

double LoadAsDouble(const void* data, DType dtype, int64_t element) {
  switch (dtype) {
    case DType::kF64: return static_cast<const double*>(data)[element];
    case DType::kF32: return static_cast<const float*>(data)[element];
    case DType::kBF16: return BF16ToDouble(static_cast<const uint16_t*>(data)[element]);
    case DType::kF16: return F16ToDouble(static_cast<const uint16_t*>(data)[element]);
    case DType::kI32: return static_cast<const int32_t*>(data)[element];
    case DType::kI64: return double(static_cast<const int64_t*>(data)[element]);
  }
  MSA_ASSERT(false);
  return 0;
}

TensorView PackedView(const void* data, DType dtype, int64_t rows, int64_t heads, int64_t dim) {
  return TensorView{data, dtype, rows, heads, dim, heads * dim, dim};
}

}  // namespace msa
