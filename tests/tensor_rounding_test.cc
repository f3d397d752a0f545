// The narrowing conversions of msa/tensor.h (DoubleToBF16, DoubleToF16, F16ToDouble), which work on the
// double's bits, against their arithmetic definition kept here: scale the magnitude so that one quantum of
// the format is 1 (frexp, ldexp: exact), round with nearbyint (nearest-even), scale back. The two must agree
// on every double: checked on every value of each format, every midpoint between neighbours and one double
// ulp either side of both, the overflow and underflow boundaries, zeros, infinities, NaNs, double
// subnormals, and millions of random doubles (random bits, and random significands over each format's range).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "msa/tensor.h"
#include "oracle/random.h"

namespace msa {
namespace {

// The definitions (the project's routines before they moved to bit operations, unchanged).
uint16_t DefinitionDoubleToBF16(double value) {
  if (std::isnan(value)) return 0x7fc0;
  const double magnitude = std::fabs(value);
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7f80;
  int exponent;
  std::frexp(magnitude, &exponent);
  const int quantum_exponent = std::max(exponent, -125) - 8;
  const double rounded = std::nearbyint(std::ldexp(magnitude, -quantum_exponent));
  const double result = std::ldexp(rounded, quantum_exponent);
  const float as_float = float(result);
  if (std::isinf(as_float) || result > 3.3895313892515355e38) return sign | 0x7f80;
  return sign | uint16_t(std::bit_cast<uint32_t>(as_float) >> 16);
}

uint16_t DefinitionDoubleToF16(double value) {
  if (std::isnan(value)) return 0x7e00;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7c00;
  int exponent;
  std::frexp(magnitude, &exponent);
  const int quantum_exponent = std::max(exponent, -13) - 11;
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(magnitude, -quantum_exponent)), quantum_exponent);
  if (rounded > 65504.0) return sign | 0x7c00;
  if (rounded < std::ldexp(1.0, -14)) return sign | uint16_t(std::ldexp(rounded, 24));
  int e;
  const double m = std::frexp(rounded, &e);
  const uint16_t biased = uint16_t(e - 1 + 15);
  const uint16_t mantissa = uint16_t(std::ldexp(m, 11)) & 0x3ff;
  return sign | uint16_t(biased << 10) | mantissa;
}

double DefinitionF16ToDouble(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(double(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? HUGE_VAL : std::nan("");
  } else {
    magnitude = std::ldexp(double(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

double FromBits(uint64_t bits) { return std::bit_cast<double>(bits); }

// Checks both narrowings on `value` and on its negation; returns the number of disagreements (reported once).
int64_t CheckBoth(double value) {
  int64_t bad = 0;
  for (double x : {value, -value}) {
    const uint16_t bf16 = DoubleToBF16(x), bf16_expected = DefinitionDoubleToBF16(x);
    const uint16_t f16 = DoubleToF16(x), f16_expected = DefinitionDoubleToF16(x);
    if (bf16 != bf16_expected) {
      if (++bad <= 1)
        ADD_FAILURE() << "DoubleToBF16(" << std::hexfloat << x << ") = 0x" << std::hex << bf16 << ", definition 0x"
                      << bf16_expected;
    }
    if (f16 != f16_expected) {
      if (++bad <= 1)
        ADD_FAILURE() << "DoubleToF16(" << std::hexfloat << x << ") = 0x" << std::hex << f16 << ", definition 0x"
                      << f16_expected;
    }
  }
  return bad;
}

// `value`, the doubles one and two ulps either side of it, and their negations.
int64_t CheckAround(double value) {
  int64_t bad = CheckBoth(value);
  double below = value, above = value;
  for (int step = 0; step < 2; ++step) {
    below = std::nextafter(below, -HUGE_VAL);
    above = std::nextafter(above, HUGE_VAL);
    bad += CheckBoth(below) + CheckBoth(above);
  }
  return bad;
}

// Every non-negative finite value of a 16-bit format (`to_double`), the midpoint to the next one (including
// the one past the largest, where overflow starts), and the doubles around both.
template <typename ToDouble>
int64_t CheckEveryValueAndMidpoint(uint16_t inf_bits, ToDouble to_double, int fraction_bits, int bias) {
  int64_t bad = 0;
  for (uint32_t bits = 0; bits < inf_bits; ++bits) {
    const double value = to_double(uint16_t(bits));
    const int exponent_field = int(bits >> fraction_bits);
    const int quantum_exponent = std::max(exponent_field, 1) - bias - fraction_bits;
    bad += CheckAround(value) + CheckAround(value + std::ldexp(1.0, quantum_exponent - 1));
  }
  return bad;
}

TEST(TensorRounding, F16ToDoubleMatchesTheDefinitionOnEveryInput) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double got = F16ToDouble(uint16_t(bits)), expected = DefinitionF16ToDouble(uint16_t(bits));
    ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(expected)) << "bits 0x" << std::hex << bits;
  }
}

TEST(TensorRounding, NarrowingMatchesTheDefinitionOnEveryValueAndMidpoint) {
  EXPECT_EQ(CheckEveryValueAndMidpoint(0x7f80, BF16ToDouble, 7, 127), 0);
  EXPECT_EQ(CheckEveryValueAndMidpoint(0x7c00, F16ToDouble, 10, 15), 0);
}

TEST(TensorRounding, NarrowingMatchesTheDefinitionOnSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values = {0.0,
                                inf,
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::signaling_NaN(),
                                FromBits(0x7ff0000000000001),
                                FromBits(0x7fffffffffffffff),
                                FromBits(0x7ff8000000000123),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::max(),
                                FromBits(0x000fffffffffffff),
                                1.0,
                                65504.0,
                                65519.0,
                                65520.0,
                                65536.0,
                                3.3895313892515355e38,
                                3.3961775292304957e38 /* bf16 overflow midpoint */,
                                3.4028234663852886e38,
                                1e300,
                                std::ldexp(1.0, -24),
                                std::ldexp(1.0, -25),
                                std::ldexp(3.0, -26),
                                std::ldexp(1.0, -26),
                                std::ldexp(1.0, -133),
                                std::ldexp(1.0, -134),
                                std::ldexp(3.0, -135),
                                std::ldexp(1.0, -135),
                                std::ldexp(1.0, -126),
                                std::ldexp(1.0, -127),
                                std::ldexp(1.0, -14),
                                std::ldexp(1.0, -15),
                                std::ldexp(1.0, -149),
                                std::ldexp(1.0, -150),
                                std::ldexp(1.0, -1022),
                                std::ldexp(1.0, -1074)};
  for (int e = -1074; e <= 1023; ++e) values.push_back(std::ldexp(1.0, e));  // every power of two
  int64_t bad = 0;
  for (double value : values) bad += CheckAround(value);
  EXPECT_EQ(bad, 0);
  // NaN of either sign narrows to the one canonical quiet NaN of each format.
  EXPECT_EQ(DoubleToBF16(-std::numeric_limits<double>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(DoubleToF16(-std::numeric_limits<double>::quiet_NaN()), 0x7e00);
}

TEST(TensorRounding, NarrowingMatchesTheDefinitionOnRandomDoubles) {
  RandomStream random(20260611, 1);
  int64_t bad = 0;
  for (int i = 0; i < 1000000; ++i) {
    bad += CheckBoth(FromBits(random.NextBits()));  // any bits: every exponent, NaN payloads, subnormals
    // A random significand at an exponent around each format's range (subnormal to overflow).
    const uint64_t significand = random.NextBits() & ((uint64_t(1) << 52) - 1);
    const int bf16_exponent = -140 + int(random.Below(270));  // 2^-140 .. 2^129
    const int f16_exponent = -28 + int(random.Below(46));     // 2^-28 .. 2^17
    bad += CheckBoth(FromBits((uint64_t(bf16_exponent + 1023) << 52) | significand));
    bad += CheckBoth(FromBits((uint64_t(f16_exponent + 1023) << 52) | significand));
    // A double a few ulps from a random midpoint of bf16 (ties are where a wrong rounding shows).
    const uint64_t tie =
        (uint64_t(bf16_exponent + 1023) << 52) | (significand & ~((uint64_t(1) << 45) - 1)) | (uint64_t(1) << 44);
    bad += CheckBoth(FromBits(tie + random.Below(9) - 4));
    const uint64_t f16_tie =
        (uint64_t(f16_exponent + 1023) << 52) | (significand & ~((uint64_t(1) << 42) - 1)) | (uint64_t(1) << 41);
    bad += CheckBoth(FromBits(f16_tie + random.Below(9) - 4));
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace msa
