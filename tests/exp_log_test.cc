// Checks msa::CanonicalExp / msa::CanonicalLog (reference/exp_log.h) against
// MPFR at 200 bits: error below 1 ulp over the ranges the reference uses,
// the documented special values, and monotonicity on consecutive doubles.
//
// Error measure: |result - truth| / ulp(truth), where ulp(truth) is the
// spacing of doubles in the binade of the exact value (for truth just below
// 2^e that is 2^(e-53), the smaller spacing). This is never more lenient than
// measuring against the ulp of the correctly rounded result.

#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/exp_log.h"

namespace msa {
namespace {

constexpr mpfr_prec_t kPrecision = 200;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = 0.6931471805599453094;      // rounded; only used for sampling
constexpr double kExpMax = 709.782712893383973096;  // 0x40862E42FEFA39EF

std::uint64_t Bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

double FromBits(std::uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

double Next(double x) { return std::nextafter(x, kInf); }
double Prev(double x) { return std::nextafter(x, -kInf); }

// SplitMix64 (Steele, Lea, Flood 2014): a fixed, portable bit stream.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1p-53; }

 private:
  std::uint64_t state_;
};

enum class Func { kExp, kLog };

// Tracks the largest ulp error of one function against MPFR.
class ErrorMeter {
 public:
  explicit ErrorMeter(Func func) : func_(func) {
    mpfr_inits2(kPrecision, x_, truth_, diff_, static_cast<mpfr_ptr>(nullptr));
  }
  ~ErrorMeter() { mpfr_clears(x_, truth_, diff_, static_cast<mpfr_ptr>(nullptr)); }
  ErrorMeter(const ErrorMeter&) = delete;
  ErrorMeter& operator=(const ErrorMeter&) = delete;

  // Arguments outside the finite-result domain (exp: [-708, kExpMax],
  // log: (0, max]) are skipped here; SpecialValues covers them.
  void Check(double arg) {
    if (func_ == Func::kExp ? !(arg >= -708.0 && arg <= kExpMax)
                            : !(arg > 0.0 && arg <= std::numeric_limits<double>::max())) {
      return;
    }
    const double got = func_ == Func::kExp ? CanonicalExp(arg) : CanonicalLog(arg);
    mpfr_set_d(x_, arg, MPFR_RNDN);
    if (func_ == Func::kExp) {
      mpfr_exp(truth_, x_, MPFR_RNDN);
    } else {
      mpfr_log(truth_, x_, MPFR_RNDN);
    }
    double err;
    if (mpfr_zero_p(truth_)) {  // log(1) only
      err = got == 0.0 ? 0.0 : kInf;
    } else if (!std::isfinite(got)) {
      err = kInf;
    } else {
      // truth = m * 2^e with 0.5 <= |m| < 1, so its binade's spacing is
      // 2^(e - 53), but never below the subnormal spacing 2^-1074.
      long ulp_exp = static_cast<long>(mpfr_get_exp(truth_)) - 53;
      if (ulp_exp < -1074) ulp_exp = -1074;
      mpfr_set_d(diff_, got, MPFR_RNDN);  // exact
      mpfr_sub(diff_, diff_, truth_, MPFR_RNDN);
      mpfr_mul_2si(diff_, diff_, -ulp_exp, MPFR_RNDN);
      err = std::fabs(mpfr_get_d(diff_, MPFR_RNDN));
    }
    ++count_;
    if (!(err <= max_ulps_)) {  // also catches NaN
      max_ulps_ = err;
      worst_arg_ = arg;
      worst_got_ = got;
    }
  }

  void Report(const char* name) const {
    std::printf("[%s] %lld points, max error %.6f ulp at x = %.17g (%a), result %.17g\n", name, count_, max_ulps_,
                worst_arg_, worst_arg_, worst_got_);
    std::fflush(stdout);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.6f", max_ulps_);
    ::testing::Test::RecordProperty("max_ulp", buf);
    std::snprintf(buf, sizeof buf, "%.17g", worst_arg_);
    ::testing::Test::RecordProperty("worst_arg", buf);
    ::testing::Test::RecordProperty("points", std::to_string(count_));
  }

  double max_ulps() const { return max_ulps_; }
  double worst_arg() const { return worst_arg_; }

 private:
  Func func_;
  mpfr_t x_, truth_, diff_;
  long long count_ = 0;
  double max_ulps_ = 0.0;
  double worst_arg_ = 0.0;
  double worst_got_ = 0.0;
};

// Checks x and its `radius` neighbours on each side.
void CheckAround(ErrorMeter& meter, double x, int radius) {
  meter.Check(x);
  double up = x, down = x;
  for (int i = 0; i < radius; ++i) {
    up = Next(up);
    down = Prev(down);
    meter.Check(up);
    meter.Check(down);
  }
}

TEST(CanonicalExpTest, WithinOneUlpOverUsedRange) {
  ErrorMeter meter(Func::kExp);
  constexpr double kLo = -708.0;
  constexpr double kHi = kExpMax;

  // Evenly spaced.
  constexpr int kEven = 1000000;
  for (int i = 0; i <= kEven; ++i) {
    meter.Check(kLo + (kHi - kLo) * (static_cast<double>(i) / kEven));
  }
  // Uniform random over the range.
  SplitMix64 rng(0x5EEDE4B0ULL);
  for (int i = 0; i < 700000; ++i) {
    meter.Check(kLo + (kHi - kLo) * rng.Uniform());
  }
  // Log-uniform magnitudes 2^-70 .. 2^9 with random sign and mantissa, so
  // small |x| (the k = 0 and |x| < 2^-28 paths) are well covered.
  for (int i = 0; i < 400000; ++i) {
    const std::uint64_t r = rng.Next();
    const std::uint64_t exponent = 1023 - 70 + (r >> 56) % 80;
    const double x = FromBits(((r & 1) << 63) | (exponent << 52) | (rng.Next() & 0x000FFFFFFFFFFFFFULL));
    if (x >= kLo && x <= kHi) meter.Check(x);
  }
  // Hard cases.
  for (double x : {0.0, -0.0, 1e-300, -1e-300, 0x1p-60, -0x1p-60, 0x1p-28, -0x1p-28, 0x1p-1074, -0x1p-1074, 1.0, -1.0,
                   kLo, kHi, -0x1.837743af3aa6p+7 /* 0.93 ulp, worst of 3e7 random */}) {
    CheckAround(meter, x, 16);
  }
  // Branch thresholds in the high word: |x| vs 0.5*ln2, 1.5*ln2, 2^-28.
  for (std::uint64_t hi : {0x3FD62E42ULL, 0x3FD62E43ULL, 0x3FF0A2B2ULL, 0x3FF0A2B1ULL, 0x3E300000ULL}) {
    for (std::uint64_t sign : {0ULL, 1ULL}) {
      CheckAround(meter, FromBits((sign << 63) | (hi << 32)), 16);
      CheckAround(meter, FromBits((sign << 63) | (hi << 32) | 0xFFFFFFFFULL), 16);
    }
  }
  // Near every multiple of ln2/2 in range: odd multiples are where k changes
  // (largest |r|), even ones where r ~ 0 (cancellation in x - k*ln2).
  for (int j = -2044; j <= 2048; ++j) {
    const double x = j * (0.5 * kLn2);
    if (x >= kLo && x <= kHi) CheckAround(meter, x, 8);
  }
  // Top and bottom of the range (k = 1024 two-step scaling, k = -1021).
  for (int i = 0; i < 20000; ++i) {
    meter.Check(kHi - 0.35 * (i / 20000.0));
    meter.Check(kLo + 0.35 * (i / 20000.0));
  }

  meter.Report("exp");
  EXPECT_LT(meter.max_ulps(), 1.0) << "at x = " << meter.worst_arg();
}

TEST(CanonicalLogTest, WithinOneUlpOverPositiveDoubles) {
  ErrorMeter meter(Func::kLog);
  SplitMix64 rng(0x10C0FFEEULL);

  // [1, 2^20] densely: the range of a softmax denominator.
  constexpr int kEven = 600000;
  for (int i = 0; i <= kEven; ++i) {
    meter.Check(1.0 + (0x1p20 - 1.0) * (static_cast<double>(i) / kEven));
  }
  // Log-uniform over [1, 2^20] (random exponent 0..19, random mantissa).
  for (int i = 0; i < 500000; ++i) {
    const std::uint64_t exponent = 1023 + rng.Next() % 20;
    meter.Check(FromBits((exponent << 52) | (rng.Next() & 0x000FFFFFFFFFFFFFULL)));
  }
  // Random positive normal doubles across all exponents.
  for (int i = 0; i < 400000; ++i) {
    const std::uint64_t exponent = 1 + rng.Next() % 2046;
    meter.Check(FromBits((exponent << 52) | (rng.Next() & 0x000FFFFFFFFFFFFFULL)));
  }
  // Subnormals (random, plus the extremes).
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t mantissa = rng.Next() >> (12 + rng.Next() % 52);
    if (mantissa != 0) meter.Check(FromBits(mantissa));
  }
  for (double x : {0x1p-1074, 0x1p-1073, 3 * 0x1p-1074, 0x1p-1023, 0x1p-1022}) {
    CheckAround(meter, x, 16);
  }
  // Near 1, where log(x) ~ x - 1 and cancellation is hardest.
  for (int i = 1; i <= 100000; ++i) {
    meter.Check(1.0 + i * 0x1p-52);
    meter.Check(1.0 - i * 0x1p-53);
  }
  for (int e = 1; e <= 53; ++e) {
    CheckAround(meter, 1.0 + std::ldexp(1.0, -e), 8);
    CheckAround(meter, 1.0 - std::ldexp(1.0, -e), 8);
  }
  // 1 +- up to 1/2 uniformly (the k == 0 paths).
  for (int i = 0; i < 200000; ++i) meter.Check(0.5 + rng.Uniform());
  // Branch boundaries of the reduction for every binade that matters:
  // powers of two, sqrt(2)*2^e (mantissa high word 0x6A09E/0x6A09F), and the
  // f^2/2-form window 0x6147A..0x6B851.
  for (int e = -1022; e <= 1023; e += (e > -40 && e < 40) ? 1 : 17) {
    const std::uint64_t biased = static_cast<std::uint64_t>(e + 1023);
    for (std::uint64_t m_hi : {0x00000ULL, 0x6A09EULL, 0x6A09FULL, 0x6147AULL, 0x6B851ULL, 0xFFFFFULL}) {
      CheckAround(meter, FromBits((biased << 52) | (m_hi << 32)), 4);
    }
  }
  CheckAround(meter, std::numeric_limits<double>::max(), 16);
  CheckAround(meter, 0x1.4720a0b717bfdp+0, 16);  // 0.92 ulp, worst of 3e7 random

  meter.Report("log");
  EXPECT_LT(meter.max_ulps(), 1.0) << "at x = " << meter.worst_arg();
}

TEST(CanonicalExpLogTest, SpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();

  EXPECT_EQ(Bits(CanonicalExp(0.0)), Bits(1.0));
  EXPECT_EQ(Bits(CanonicalExp(-0.0)), Bits(1.0));
  EXPECT_EQ(Bits(CanonicalExp(-708.0000001)), Bits(0.0));  // +0, not -0
  EXPECT_EQ(Bits(CanonicalExp(Prev(-708.0))), Bits(0.0));
  EXPECT_EQ(Bits(CanonicalExp(-1000.0)), Bits(0.0));
  EXPECT_EQ(Bits(CanonicalExp(-kInf)), Bits(0.0));
  EXPECT_GT(CanonicalExp(-708.0), 0.0);
  EXPECT_GE(CanonicalExp(-708.0), std::numeric_limits<double>::min());  // normal
  EXPECT_EQ(CanonicalExp(710.0), kInf);
  EXPECT_EQ(CanonicalExp(Next(kExpMax)), kInf);
  EXPECT_EQ(CanonicalExp(kInf), kInf);
  EXPECT_LT(CanonicalExp(kExpMax), kInf);
  EXPECT_EQ(709.782712893384, kExpMax);  // the documented threshold literal
  EXPECT_TRUE(std::isnan(CanonicalExp(nan)));
  EXPECT_TRUE(std::isnan(CanonicalExp(-nan)));
  // NaN is returned unchanged (payload preserved, no arithmetic).
  const double payload_nan = FromBits(0x7FF8000000001234ULL);
  EXPECT_EQ(Bits(CanonicalExp(payload_nan)), Bits(payload_nan));
  EXPECT_EQ(Bits(CanonicalLog(payload_nan)), Bits(payload_nan));

  EXPECT_EQ(Bits(CanonicalLog(1.0)), Bits(0.0));  // +0 exactly
  EXPECT_EQ(CanonicalLog(0.0), -kInf);
  EXPECT_EQ(CanonicalLog(-0.0), -kInf);
  EXPECT_EQ(CanonicalLog(kInf), kInf);
  EXPECT_TRUE(std::isnan(CanonicalLog(-1.0)));
  EXPECT_TRUE(std::isnan(CanonicalLog(-0x1p-1074)));
  EXPECT_TRUE(std::isnan(CanonicalLog(-kInf)));
  EXPECT_EQ(Bits(CanonicalLog(-1.0)), 0x7FF8000000000000ULL);
  EXPECT_TRUE(std::isnan(CanonicalLog(nan)));
  EXPECT_TRUE(std::isfinite(CanonicalLog(0x1p-1074)));
  EXPECT_LT(CanonicalLog(0x1p-1074), -744.0);
  EXPECT_TRUE(std::isfinite(CanonicalLog(std::numeric_limits<double>::max())));
}

// Walks `steps` consecutive doubles upward from `start`, requiring f never to
// decrease. Returns false (and reports) at the first violation.
template <typename F>
bool MonotoneFrom(F f, const char* name, double start, int steps) {
  double x = start;
  double fx = f(x);
  for (int i = 0; i < steps; ++i) {
    const double next = Next(x);
    const double fnext = f(next);
    if (fnext < fx) {
      ADD_FAILURE() << name << " decreases: f(" << x << ") = " << fx << " > f(" << next << ") = " << fnext;
      return false;
    }
    x = next;
    fx = fnext;
  }
  return true;
}

TEST(CanonicalExpLogTest, MonotoneOnConsecutiveDoubles) {
  auto exp_f = [](double x) { return CanonicalExp(x); };
  auto log_f = [](double x) { return CanonicalLog(x); };
  constexpr int kWalk = 2000;
  long long steps = 0;

  // exp: around every k boundary and every multiple of ln2/2 in range.
  for (int j = -2044; j <= 2048; ++j) {
    const double x = j * (0.5 * kLn2);
    if (x < -708.0 || x > kExpMax) continue;
    double start = x;
    for (int i = 0; i < kWalk / 2; ++i) start = Prev(start);
    ASSERT_TRUE(MonotoneFrom(exp_f, "exp", start, kWalk));
    steps += kWalk;
  }
  // exp: around its branch thresholds, 0, and the range ends.
  for (std::uint64_t hi : {0x3FD62E42ULL, 0x3FD62E43ULL, 0x3FF0A2B2ULL, 0x3FF0A2B1ULL, 0x3E300000ULL, 0x3E2FFFFFULL}) {
    for (std::uint64_t sign : {0ULL, 1ULL}) {
      double start = FromBits((sign << 63) | (hi << 32));
      for (int i = 0; i < kWalk; ++i) start = Prev(start);
      ASSERT_TRUE(MonotoneFrom(exp_f, "exp", start, 2 * kWalk + 0x100));
      steps += 2 * kWalk;
    }
  }
  ASSERT_TRUE(MonotoneFrom(exp_f, "exp", -708.0, 100000));
  double top = kExpMax;
  for (int i = 0; i < 100000; ++i) top = Prev(top);
  ASSERT_TRUE(MonotoneFrom(exp_f, "exp", top, 100000 + 1));  // ends at +inf
  // exp: random starts.
  SplitMix64 rng(0xA0A0A0A0ULL);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(MonotoneFrom(exp_f, "exp", -708.0 + 1417.0 * rng.Uniform(), 1000));
  }

  // log: around 1 (both sides; the |f| < 2^-20 path), powers of two,
  // sqrt(2)*2^e and the f^2/2-form window edges.
  double start = 1.0;
  for (int i = 0; i < 300000; ++i) start = Prev(start);
  ASSERT_TRUE(MonotoneFrom(log_f, "log", start, 600000));
  for (int e = -1022; e <= 1023; e += (e > -40 && e < 40) ? 1 : 7) {
    const std::uint64_t biased = static_cast<std::uint64_t>(e + 1023);
    for (std::uint64_t m_hi :
         {0x00000ULL, 0x6A09EULL, 0x6A09FULL, 0x6147AULL, 0x6B851ULL, 0x6B852ULL, 0x00001ULL, 0xFFFFEULL}) {
      double s = FromBits((biased << 52) | (m_hi << 32));
      for (int i = 0; i < kWalk / 2; ++i) s = Prev(s);
      ASSERT_TRUE(MonotoneFrom(log_f, "log", s, kWalk));
      steps += kWalk;
    }
  }
  ASSERT_TRUE(MonotoneFrom(log_f, "log", 0x1p-1074, 100000));  // subnormals
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t exponent = 1 + rng.Next() % 2046;
    const double s = FromBits((exponent << 52) | (rng.Next() & 0x000FFFFFFFFFFFFFULL));
    ASSERT_TRUE(MonotoneFrom(log_f, "log", s, 1000));
  }
  std::printf("[monotone] boundary walks: %lld steps\n", steps);
}

}  // namespace
}  // namespace msa
