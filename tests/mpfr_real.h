// 256-bit MPFR numbers for the tests that measure the FP64 reference against the truth (attention_mpfr_test,
// training_mpfr_test), and the error measures they report.
#ifndef MSA_TESTS_MPFR_REAL_H_
#define MSA_TESTS_MPFR_REAL_H_

#include <mpfr.h>

#include <limits>

namespace msa {

inline constexpr mpfr_prec_t kBits = 256;

// A 256-bit MPFR number with value semantics.
class Real {
 public:
  Real() {
    mpfr_init2(x_, kBits);
    mpfr_set_zero(x_, 1);
  }
  explicit Real(double value) : Real() { mpfr_set_d(x_, value, MPFR_RNDN); }
  Real(const Real& other) : Real() { mpfr_set(x_, other.x_, MPFR_RNDN); }
  Real& operator=(const Real& other) {
    mpfr_set(x_, other.x_, MPFR_RNDN);
    return *this;
  }
  ~Real() { mpfr_clear(x_); }
  mpfr_ptr get() { return x_; }
  mpfr_srcptr get() const { return x_; }
  double ToDouble() const { return mpfr_get_d(x_, MPFR_RNDN); }  // correctly rounded

 private:
  mpfr_t x_;
};

// |computed - truth| as a double (rounded; only used as a measurement).
inline double AbsError(double computed, const Real& truth) {
  Real diff(computed);
  mpfr_sub(diff.get(), diff.get(), truth.get(), MPFR_RNDN);
  mpfr_abs(diff.get(), diff.get(), MPFR_RNDN);
  return diff.ToDouble();
}

// |computed - truth| / ulp(truth), ulp(truth) = 2^(e-53) for |truth| in [2^(e-1), 2^e).
inline double UlpError(double computed, const Real& truth) {
  if (mpfr_zero_p(truth.get())) return computed == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  Real diff(computed);
  mpfr_sub(diff.get(), diff.get(), truth.get(), MPFR_RNDN);
  mpfr_abs(diff.get(), diff.get(), MPFR_RNDN);
  mpfr_mul_2si(diff.get(), diff.get(), 53 - mpfr_get_exp(truth.get()), MPFR_RNDN);
  return diff.ToDouble();
}

}  // namespace msa

#endif  // MSA_TESTS_MPFR_REAL_H_
