// Canonical exp and log for the FP64 reference (SPEC section 4).
//
// SPEC section 4 requires every backend's FP64 mode (reference, SIMD, CUDA)
// to produce bit-identical outputs. libm's exp/log differ between glibc
// versions, compilers and the CUDA math library, so the project carries its
// own definitions, built from IEEE-754 basic operations only (+, -, *, / on
// doubles, comparisons, integer arithmetic, double<->int conversion and bit
// reinterpretation). No libm call, no FMA: with contraction disabled
// (host -ffp-contract=off, device --fmad=false) every operation is correctly
// rounded, so this one header yields the same bits on every host and device.
// Each function is within 1 ulp of the true value (tests/exp_log_test.cc
// checks that against MPFR).
//
// The algorithms are the classic fdlibm ones (Sun Microsystems, 1993):
//  * exp: Cody-Waite reduction x = k*ln2 + r, |r| <= ln2/2, with ln2 split
//    into ln2_hi (trailing zero bits, so k*ln2_hi is exact) and ln2_lo; then
//    exp(r) = 1 + r + r*c/(2-c), c = r - r^2*(P1 + r^2*(P2 + ... P5)), and a
//    final exact scaling by 2^k.
//  * log: x = 2^k*(1+f) with 1+f in [sqrt(2)/2, sqrt(2)), s = f/(2+f),
//    log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)), R a degree-14 polynomial.
//
// Special values (part of the canonical definition):
//   CanonicalExp(x):
//     NaN                    -> x itself (payload preserved, no arithmetic)
//     x > 709.782712893384   -> +inf  (the largest x with a finite result is
//                               709.782712893383973096 = 0x40862E42FEFA39EF)
//     x < -708.0             -> +0.0 exactly (SPEC: exp(x) := +0 for x < -708,
//                               so no subnormal result is ever produced)
//     -inf                   -> +0.0;  +inf -> +inf
//     exp(+-0) = 1 exactly
//   CanonicalLog(x):
//     NaN                    -> x itself (payload preserved)
//     x < 0 (including -inf) -> the default quiet NaN 0x7FF8000000000000
//     x == +-0               -> -inf
//     +inf                   -> +inf
//     log(1) = +0 exactly; subnormal inputs are normalised by 2^54 first.

#ifndef MSA_REFERENCE_EXP_LOG_H_
#define MSA_REFERENCE_EXP_LOG_H_

#include <cstdint>
#include <cstring>

#include "msa/host_device.h"

namespace msa {
namespace exp_log_internal {

MSA_HOST_DEVICE inline std::uint64_t ToBits(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

MSA_HOST_DEVICE inline double FromBits(std::uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// 2^k as a double, for -1022 <= k <= 1023 (exact, normal).
MSA_HOST_DEVICE inline double Pow2(int k) { return FromBits(static_cast<std::uint64_t>(k + 1023) << 52); }

// ln2 = kLn2Hi + kLn2Lo; kLn2Hi has 32 significant bits (low 21 bits zero),
// so k*kLn2Hi is exact for |k| < 2^21.
constexpr double kLn2Hi = 6.93147180369123816490e-01;   // 0x3FE62E42FEE00000
constexpr double kLn2Lo = 1.90821492927058770002e-10;   // 0x3DEA39EF35793C76
constexpr double kInvLn2 = 1.44269504088896338700e+00;  // 0x3FF71547652B82FE

// exp: minimax coefficients of R(r^2) ~ r*(exp(r)+1)/(exp(r)-1) on
// |r| <= ln2/2 (fdlibm e_exp.c).
constexpr double kP1 = 1.66666666666666019037e-01;   // 0x3FC555555555553E
constexpr double kP2 = -2.77777777770155933842e-03;  // 0xBF66C16C16BEBD93
constexpr double kP3 = 6.61375632143793436117e-05;   // 0x3F11566AAF25DE2C
constexpr double kP4 = -1.65339022054652515390e-06;  // 0xBEBBBD41C5D26BF1
constexpr double kP5 = 4.13813679705723846039e-08;   // 0x3E66376972BEA4D0

// Largest x with finite exp(x) (just below 1024*ln2).
constexpr double kExpOverflow = 7.09782712893383973096e+02;  // 0x40862E42FEFA39EF
constexpr double kExpUnderflow = -708.0;

// log: minimax coefficients of Lg1*z + ... + Lg7*z^7 ~ (log(1+f) - 2s)/s,
// z = s^2, |s| <= 0.1716; approximation error below 2^-58.45 (fdlibm e_log.c).
constexpr double kLg1 = 6.666666666666735130e-01;  // 0x3FE5555555555593
constexpr double kLg2 = 3.999999999940941908e-01;  // 0x3FD999999997FA04
constexpr double kLg3 = 2.857142874366239149e-01;  // 0x3FD2492494229359
constexpr double kLg4 = 2.222219843214978396e-01;  // 0x3FCC71C51D8E78AF
constexpr double kLg5 = 1.818357216161805012e-01;  // 0x3FC7466496CB03DE
constexpr double kLg6 = 1.531383769920937332e-01;  // 0x3FC39A09D078C69F
constexpr double kLg7 = 1.479819860511658591e-01;  // 0x3FC2F112DF3E5244

constexpr double kTwo54 = 1.80143985094819840000e+16;  // 0x4350000000000000

}  // namespace exp_log_internal

MSA_HOST_DEVICE inline double CanonicalExp(double x) {
  using namespace exp_log_internal;
  if (x != x) return x;                                          // NaN
  if (x > kExpOverflow) return FromBits(0x7FF0000000000000ULL);  // +inf
  if (x < kExpUnderflow) return 0.0;                             // includes -inf

  const std::uint64_t bits = ToBits(x);
  const std::uint32_t hx = static_cast<std::uint32_t>(bits >> 32) & 0x7FFFFFFFu;
  const bool negative = (bits >> 63) != 0;

  double hi = 0.0;
  double lo = 0.0;
  int k = 0;
  if (hx > 0x3FD62E42u) {    // |x| > 0.5*ln2
    if (hx < 0x3FF0A2B2u) {  // |x| < 1.5*ln2: k = +-1
      if (negative) {
        hi = x + kLn2Hi;
        lo = -kLn2Lo;
        k = -1;
      } else {
        hi = x - kLn2Hi;
        lo = kLn2Lo;
        k = 1;
      }
    } else {
      // Truncation toward zero of x/ln2 +- 0.5 is round-to-nearest of x/ln2.
      k = static_cast<int>(kInvLn2 * x + (negative ? -0.5 : 0.5));
      const double t = static_cast<double>(k);
      hi = x - t * kLn2Hi;  // exact
      lo = t * kLn2Lo;
    }
    x = hi - lo;
  } else if (hx < 0x3E300000u) {  // |x| < 2^-28: exp(x) rounds like 1 + x
    return 1.0 + x;
  }

  const double t = x * x;
  const double c = x - t * (kP1 + t * (kP2 + t * (kP3 + t * (kP4 + t * kP5))));
  if (k == 0) return 1.0 - ((x * c) / (c - 2.0) - x);
  const double y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi);
  // Here -1021 <= k <= 1024 and y is in about [0.7, 1.42]; y*2^k is normal
  // (or overflows only beyond kExpOverflow, already excluded), so the
  // scaling is exact. 2^1024 is not a double: scale in two steps.
  if (k > 1023) return (y * 2.0) * Pow2(k - 1);
  return y * Pow2(k);
}

MSA_HOST_DEVICE inline double CanonicalLog(double x) {
  using namespace exp_log_internal;
  if (x != x) return x;                                  // NaN
  if (x < 0.0) return FromBits(0x7FF8000000000000ULL);   // default qNaN
  if (x == 0.0) return FromBits(0xFFF0000000000000ULL);  // -inf
  if (x > 1.79769313486231570815e+308) return x;         // +inf

  int k = 0;
  std::uint64_t bits = ToBits(x);
  if ((bits >> 52) == 0) {  // subnormal: scale into the normal range
    k = -54;
    x = x * kTwo54;
    bits = ToBits(x);
  }
  std::uint32_t hx = static_cast<std::uint32_t>(bits >> 32);
  const std::uint32_t lx = static_cast<std::uint32_t>(bits);
  k += static_cast<int>(hx >> 20) - 1023;
  hx &= 0x000FFFFFu;
  // i = 0x100000 when the mantissa 1.m >= sqrt(2) (0x95F64 + m overflows
  // into bit 20); then use (1.m)/2 and k+1, so 1+f is in [sqrt(2)/2, sqrt(2)).
  const std::uint32_t i = (hx + 0x95F64u) & 0x100000u;
  x = FromBits((static_cast<std::uint64_t>(hx | (i ^ 0x3FF00000u)) << 32) | lx);
  k += static_cast<int>(i >> 20);
  const double f = x - 1.0;  // exact
  const double dk = static_cast<double>(k);

  if ((0x000FFFFFu & (2 + hx)) < 3) {  // -2^-20 < f < 2^-20
    if (f == 0.0) {
      if (k == 0) return 0.0;
      return dk * kLn2Hi + dk * kLn2Lo;
    }
    const double r = f * f * (0.5 - 0.33333333333333333 * f);
    if (k == 0) return f - r;
    return dk * kLn2Hi - ((r - dk * kLn2Lo) - f);
  }

  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double t1 = w * (kLg2 + w * (kLg4 + w * kLg6));
  const double t2 = z * (kLg1 + w * (kLg3 + w * (kLg5 + w * kLg7)));
  const double r = t2 + t1;
  // (ii | jj) > 0 iff 0x6147A <= hx <= 0x6B851, i.e. the input mantissa is in
  // about [1.38, 1.42]; there fdlibm uses the f^2/2 form.
  const std::int32_t ii = static_cast<std::int32_t>(hx) - 0x6147A;
  const std::int32_t jj = 0x6B851 - static_cast<std::int32_t>(hx);
  if ((ii | jj) > 0) {
    const double hfsq = 0.5 * f * f;
    if (k == 0) return f - (hfsq - s * (hfsq + r));
    return dk * kLn2Hi - ((hfsq - (s * (hfsq + r) + dk * kLn2Lo)) - f);
  }
  if (k == 0) return f - s * (f - r);
  return dk * kLn2Hi - ((s * (f - r) - dk * kLn2Lo) - f);
}

}  // namespace msa

#endif  // MSA_REFERENCE_EXP_LOG_H_
