// Per-target primitives of the SIMD training functions (simd/training.h), one overload set per element type, so
// that one algorithm (simd/training.cc) runs in either precision of the backend:
//   - double (precision exact): SPEC section 4's canonical FP64 order, bit-identical to the reference. Each forwards
//     to simd/exact-inl.h, whose primitives equal CanonicalDot, CanonicalExp, CanonicalLog, and take maxima and sums
//     in the reference's order; the element-wise operations are the reference's, one IEEE operation per lane
//     (Mul, then Add: the library compiles with -ffp-contract=off).
//   - float (precision fp32): fp32 arithmetic in any order (FMAs, lanes reduced in a tree, Highway's exp and log).
//     The order is fixed by the arguments alone, so the bits never depend on threads.
// Rows are zero padded: double rows to a multiple of 8 (simd/exact_inputs.h), float rows to a multiple of
// kFloatPad; every array an element-wise loop writes holds ScratchLength(n) elements (lanes past n are computed
// from whatever is there and ignored).
//
// Include this header after hwy/foreach_target.h and simd/exact-inl.h (multiple inclusion, once per target).
#if defined(MSA_SIMD_TRAINING_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_SIMD_TRAINING_INL_H_
#undef MSA_SIMD_TRAINING_INL_H_
#else
#define MSA_SIMD_TRAINING_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {

using DF32 = hn::ScalableTag<float>;
using VF32 = hn::Vec<DF32>;

// Float rows are padded to a multiple of 16: whole vectors on every target (16 lanes on AVX3, 8, 4 or 1 elsewhere).
constexpr int64_t kFloatPad = 16;

// The length of a scratch array for n elements: whole vectors of either type on every target, and one more.
inline size_t ScratchLength(int64_t n) { return size_t((n + kFloatPad - 1) / kFloatPad * kFloatPad + kFloatPad); }

// ---- dots ----------------------------------------------------------------------------------------------------

// out[i * stride + j] = dot(a[i], b[j], n) * scale for i < rows, j < cols; n is the padded row length.
template <typename TB>
HWY_INLINE void Dots(const double* const* a, size_t rows, const TB* const* b, size_t cols, size_t n, double scale,
                     double* out, size_t stride) {
  DotMatrix<TB>(a, rows, b, cols, n, scale, out, stride);
}

HWY_INLINE void Dots(const float* const* a, size_t rows, const float* const* b, size_t cols, size_t n, float scale,
                     float* out, size_t stride) {
  const DF32 d;
  const size_t lanes = hn::Lanes(d);
  for (size_t i = 0; i < rows; ++i) {
    size_t j = 0;
    for (; j + 4 <= cols; j += 4) {  // four dots share each load of a[i]
      VF32 sum0 = hn::Zero(d), sum1 = hn::Zero(d), sum2 = hn::Zero(d), sum3 = hn::Zero(d);
      for (size_t c = 0; c < n; c += lanes) {
        const VF32 x = hn::LoadU(d, a[i] + c);
        sum0 = hn::MulAdd(x, hn::LoadU(d, b[j] + c), sum0);
        sum1 = hn::MulAdd(x, hn::LoadU(d, b[j + 1] + c), sum1);
        sum2 = hn::MulAdd(x, hn::LoadU(d, b[j + 2] + c), sum2);
        sum3 = hn::MulAdd(x, hn::LoadU(d, b[j + 3] + c), sum3);
      }
      out[i * stride + j] = hn::GetLane(hn::SumOfLanes(d, sum0)) * scale;
      out[i * stride + j + 1] = hn::GetLane(hn::SumOfLanes(d, sum1)) * scale;
      out[i * stride + j + 2] = hn::GetLane(hn::SumOfLanes(d, sum2)) * scale;
      out[i * stride + j + 3] = hn::GetLane(hn::SumOfLanes(d, sum3)) * scale;
    }
    for (; j < cols; ++j) {
      VF32 sum = hn::Zero(d);
      for (size_t c = 0; c < n; c += lanes) sum = hn::MulAdd(hn::LoadU(d, a[i] + c), hn::LoadU(d, b[j] + c), sum);
      out[i * stride + j] = hn::GetLane(hn::SumOfLanes(d, sum)) * scale;
    }
  }
}

// dot(a, b, n) of two padded rows: CanonicalDot for double (its eight partial sums, then its combination).
HWY_INLINE double RowDot(const double* a, const double* b, size_t n) {
  const DF d;
  VF partial[kPartialVectors];
  for (size_t part = 0; part < kPartialVectors; ++part) partial[part] = hn::Zero(d);
  for (size_t i = 0; i < n; i += 8) {
    for (size_t part = 0; part < kPartialVectors; ++part) {
      const size_t at = i + part * kLanes;
      partial[part] = hn::Add(partial[part], hn::Mul(hn::LoadU(d, a + at), hn::LoadU(d, b + at)));
    }
  }
  double p[8];  // P[i % 8]
  for (size_t part = 0; part < kPartialVectors; ++part) hn::StoreU(partial[part], d, p + part * kLanes);
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

HWY_INLINE float RowDot(const float* a, const float* b, size_t n) {
  const DF32 d;
  VF32 sum = hn::Zero(d);
  for (size_t c = 0; c < n; c += hn::Lanes(d)) sum = hn::MulAdd(hn::LoadU(d, a + c), hn::LoadU(d, b + c), sum);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// ---- exp, log, max, sum ----------------------------------------------------------------------------------------

// y[j] = exp(x[j] - shift) for j < n (x may be y).
HWY_INLINE void ExpMinus(const double* x, double shift, size_t n, double* y) { ExpShifted(x, shift, n, y); }

HWY_INLINE void ExpMinus(const float* x, float shift, size_t n, float* y) {
  const DF32 d;
  const VF32 s = hn::Set(d, shift);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, x + j), s)), d, y + j);
}

// y[j] = exp(x[j]) and y[j] = log(x[j]) for j < n (x may be y).
HWY_INLINE void ExpOf(const double* x, size_t n, double* y) { ExpArray(x, n, y); }
HWY_INLINE void LogOf(const double* x, size_t n, double* y) { LogArray(x, n, y); }

HWY_INLINE void ExpOf(const float* x, size_t n, float* y) {
  const DF32 d;
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::StoreU(hn::Exp(d, hn::LoadU(d, x + j)), d, y + j);
}
HWY_INLINE void LogOf(const float* x, size_t n, float* y) {
  const DF32 d;
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::StoreU(hn::Log(d, hn::LoadU(d, x + j)), d, y + j);
}

// The largest of x[0..n), n >= 1 (double: the reference's maximum, the first of equal values).
HWY_INLINE double MaxOf(const double* x, size_t n) { return CanonicalMax(x, n); }

HWY_INLINE float MaxOf(const float* x, size_t n) {
  const DF32 d;
  const size_t lanes = hn::Lanes(d);
  float m = x[0];
  size_t j = 0;
  if (n >= lanes) {
    VF32 lanes_max = hn::LoadU(d, x);
    for (j = lanes; j + lanes <= n; j += lanes) lanes_max = hn::Max(lanes_max, hn::LoadU(d, x + j));
    m = hn::GetLane(hn::MaxOfLanes(d, lanes_max));
  }
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// The sum of x[0..n) (double: in ascending order, from +0).
HWY_INLINE double SumOf(const double* x, size_t n) { return SequentialSum(x, n); }

HWY_INLINE float SumOf(const float* x, size_t n) {
  const DF32 d;
  const size_t lanes = hn::Lanes(d);
  VF32 sum = hn::Zero(d);
  size_t j = 0;
  for (; j + lanes <= n; j += lanes) sum = hn::Add(sum, hn::LoadU(d, x + j));
  float total = hn::GetLane(hn::SumOfLanes(d, sum));
  for (; j < n; ++j) total += x[j];
  return total;
}

// ---- weighted sums of rows ---------------------------------------------------------------------------------------

// acc[h][c] += sum_j p[h][j] * v[j][c] for h < heads, j < n, c < width (the padded row length). Double: j ascending,
// multiply then add, as the reference's loops.
template <typename TV>
HWY_INLINE void AddWeightedRows(const double* const* p, size_t heads, const TV* const* v, size_t n, size_t width,
                                double* const* acc) {
  WeightedSums<TV>(p, heads, v, n, width, acc);
}

HWY_INLINE void AddWeightedRows(const float* const* p, size_t heads, const float* const* v, size_t n, size_t width,
                                float* const* acc) {
  const DF32 d;
  const size_t lanes = hn::Lanes(d);
  for (size_t h = 0; h < heads; ++h) {
    size_t c = 0;
    for (; c + 4 * lanes <= width; c += 4 * lanes) {  // four vectors of acc stay in registers across j
      VF32 sum0 = hn::LoadU(d, acc[h] + c), sum1 = hn::LoadU(d, acc[h] + c + lanes);
      VF32 sum2 = hn::LoadU(d, acc[h] + c + 2 * lanes), sum3 = hn::LoadU(d, acc[h] + c + 3 * lanes);
      for (size_t j = 0; j < n; ++j) {
        const VF32 w = hn::Set(d, p[h][j]);
        sum0 = hn::MulAdd(w, hn::LoadU(d, v[j] + c), sum0);
        sum1 = hn::MulAdd(w, hn::LoadU(d, v[j] + c + lanes), sum1);
        sum2 = hn::MulAdd(w, hn::LoadU(d, v[j] + c + 2 * lanes), sum2);
        sum3 = hn::MulAdd(w, hn::LoadU(d, v[j] + c + 3 * lanes), sum3);
      }
      hn::StoreU(sum0, d, acc[h] + c);
      hn::StoreU(sum1, d, acc[h] + c + lanes);
      hn::StoreU(sum2, d, acc[h] + c + 2 * lanes);
      hn::StoreU(sum3, d, acc[h] + c + 3 * lanes);
    }
    for (; c < width; c += lanes) {
      VF32 sum = hn::LoadU(d, acc[h] + c);
      for (size_t j = 0; j < n; ++j) sum = hn::MulAdd(hn::Set(d, p[h][j]), hn::LoadU(d, v[j] + c), sum);
      hn::StoreU(sum, d, acc[h] + c);
    }
  }
}

// ---- element-wise steps of SPEC section 8 (the same operations in both precisions) --------------------------------

// ds[j] = p[j] * (dp[j] - delta), or p[j] * ((dp[j] - delta) + dlse) when has_dlse, for j < n.
template <typename T>
HWY_INLINE void ScoreGradients(const T* p, const T* dp, T delta, bool has_dlse, T dlse, size_t n, T* ds) {
  const hn::ScalableTag<T> d;
  const auto delta_v = hn::Set(d, delta), dlse_v = hn::Set(d, dlse);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    const auto centered = hn::Sub(hn::LoadU(d, dp + j), delta_v);
    hn::StoreU(hn::Mul(hn::LoadU(d, p + j), has_dlse ? hn::Add(centered, dlse_v) : centered), d, ds + j);
  }
}

// pbar[j] = (sum_{h < heads} p[h][j], h ascending from +0) / heads, for j < n.
template <typename T>
HWY_INLINE void GroupMean(const T* const* p, size_t heads, size_t n, T* pbar) {
  const hn::ScalableTag<T> d;
  const auto count = hn::Set(d, T(heads));
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    auto sum = hn::Zero(d);
    for (size_t h = 0; h < heads; ++h) sum = hn::Add(sum, hn::LoadU(d, p[h] + j));
    hn::StoreU(hn::Div(sum, count), d, pbar + j);
  }
}

// y[j] = x[j] - shift for j < n (x may be y).
template <typename T>
HWY_INLINE void Minus(const T* x, T shift, size_t n, T* y) {
  const hn::ScalableTag<T> d;
  const auto s = hn::Set(d, shift);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::StoreU(hn::Sub(hn::LoadU(d, x + j), s), d, y + j);
}

// g[j] = (rho[j] - pbar[j]) / rows for j < n.
template <typename T>
HWY_INLINE void KlGradients(const T* rho, const T* pbar, T rows, size_t n, T* g) {
  const hn::ScalableTag<T> d;
  const auto divisor = hn::Set(d, rows);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    hn::StoreU(hn::Div(hn::Sub(hn::LoadU(d, rho + j), hn::LoadU(d, pbar + j)), divisor), d, g + j);
  }
}

}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MSA_SIMD_TRAINING_INL_H_
