// Per-target (Highway) forms of the canonical FP64 primitives of SPEC section 4, bit-identical to
// reference/canonical.h (CanonicalDot) and reference/exp_log.h (CanonicalExp, CanonicalLog) on every target:
// every lane performs exactly the IEEE operations the scalar code performs, in the same order.
//
//   dot:  the eight partial sums P[i % 8] live in 8 / N vectors of N lanes (N = 8 on AVX3, 4 on AVX2,
//         2 on SSE4/SSSE3/EMU128, 1 on SCALAR): P[i % 8] += a[i] * b[i] is a Mul then an Add per lane
//         (never MulAdd; the library compiles with -ffp-contract=off). Rows are zero-padded to a multiple
//         of 8 (simd/exact_inputs.h), so the tail needs no special case. The final
//         ((P0+P1)+(P2+P3))+((P4+P5)+(P6+P7)) is three rounds of "add adjacent pairs" over the partial sums
//         of several dots laid end to end, each round one ConcatEven + ConcatOdd + Add per pair of vectors.
//         Several independent dots (a tile of rows x keys) run interleaved to hide the add latency.
//   exp, log: the scalar branches become per-lane masks; every branch's value is computed and the lane
//         keeps exactly the one the scalar code returns (special values included).
//
// Include this header after hwy/foreach_target.h (multiple inclusion, once per target).
#if defined(MSA_SIMD_EXACT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_SIMD_EXACT_INL_H_
#undef MSA_SIMD_EXACT_INL_H_
#else
#define MSA_SIMD_EXACT_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "reference/exp_log.h"

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<double>;
using VF = hn::Vec<DF>;

// Lanes of a double vector on this target (8, 4, 2 or 1), and the vectors that hold eight partial sums.
constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kPartialVectors = 8 / kLanes;
static_assert(kLanes >= 1 && kLanes <= 8 && 8 % kLanes == 0, "a double vector holds 1, 2, 4 or 8 lanes");

// ------------------------------------------------------------------------------------------------------
// exp and log (reference/exp_log.h), lane by lane.

// CanonicalExp on every lane.
// docs:begin vector-exp
template <class D, class V = hn::VFromD<D>>
HWY_INLINE V CanonicalExpV(D d, V x) {
  using namespace exp_log_internal;
  const hn::RebindToSigned<D> di;
  // Special lanes (NaN, overflow, underflow) are replaced by 0 for the arithmetic and patched at the end.
  const auto is_nan = hn::IsNaN(x);  // not Ne(x, x): AVX3's != is an ordered compare
  const auto overflow = hn::Gt(x, hn::Set(d, kExpOverflow));
  const auto underflow = hn::Lt(x, hn::Set(d, kExpUnderflow));
  const V xs = hn::IfThenElse(hn::Or(is_nan, hn::Or(overflow, underflow)), hn::Zero(d), x);

  // The scalar code tests hx, the high word of |x|: hx > H <=> |x| > bits(H:FFFFFFFF), hx < H <=> |x| < bits(H:0).
  const V ax = hn::Abs(xs);
  const auto reduce = hn::Gt(ax, hn::Set(d, FromBits(0x3FD62E42FFFFFFFFULL)));    // |x| > 0.5*ln2: k != 0
  const auto one_step = hn::Lt(ax, hn::Set(d, FromBits(0x3FF0A2B200000000ULL)));  // |x| < 1.5*ln2: k = +-1
  const auto tiny = hn::Lt(ax, hn::Set(d, FromBits(0x3E30000000000000ULL)));      // |x| < 2^-28: 1 + x
  const auto negative = hn::Lt(xs, hn::Zero(d));  // the sign bit, for every lane where it matters

  // k: +-1 near zero, else trunc(kInvLn2 * x +- 0.5); 0 when no reduction. t = double(k).
  const V half = hn::IfThenElse(negative, hn::Set(d, -0.5), hn::Set(d, 0.5));
  const V k_rounded = hn::ConvertTo(d, hn::ConvertTo(di, hn::Add(hn::Mul(hn::Set(d, kInvLn2), xs), half)));
  const V k_one = hn::IfThenElse(negative, hn::Set(d, -1.0), hn::Set(d, 1.0));
  const V t = hn::IfThenElse(reduce, hn::IfThenElse(one_step, k_one, k_rounded), hn::Zero(d));
  // k = +-1: the scalar hi = x -+ kLn2Hi, lo = +-kLn2Lo equal x - t*kLn2Hi and t*kLn2Lo exactly (t*c = +-c).
  const V hi = hn::Sub(xs, hn::Mul(t, hn::Set(d, kLn2Hi)));
  const V lo = hn::Mul(t, hn::Set(d, kLn2Lo));
  const V r = hn::IfThenElse(reduce, hn::Sub(hi, lo), xs);

  const V rr = hn::Mul(r, r);
  V poly = hn::Add(hn::Set(d, kP4), hn::Mul(rr, hn::Set(d, kP5)));
  poly = hn::Add(hn::Set(d, kP3), hn::Mul(rr, poly));
  poly = hn::Add(hn::Set(d, kP2), hn::Mul(rr, poly));
  poly = hn::Add(hn::Set(d, kP1), hn::Mul(rr, poly));
  const V c = hn::Sub(r, hn::Mul(rr, poly));
  const V two = hn::Set(d, 2.0), one = hn::Set(d, 1.0);
  // k == 0: 1 - ((x*c)/(c-2) - x);  k != 0: y = 1 - ((lo - (x*c)/(2-c)) - hi).
  const V quotient = hn::Div(hn::Mul(r, c), hn::IfThenElse(reduce, hn::Sub(two, c), hn::Sub(c, two)));
  const V no_scale = hn::Sub(one, hn::Sub(quotient, r));
  const V y = hn::Sub(one, hn::Sub(hn::Sub(lo, quotient), hi));
  // y * 2^k, exactly; k = 1024 as (y*2) * 2^1023.
  const auto k = hn::ConvertTo(di, t);
  const auto k_big = hn::Gt(k, hn::Set(di, 1023));
  const auto k_scale = hn::IfThenElse(k_big, hn::Sub(k, hn::Set(di, 1)), k);
  const V y_scale = hn::IfThenElse(hn::RebindMask(d, k_big), hn::Mul(y, two), y);
  const V pow2 = hn::BitCast(d, hn::ShiftLeft<52>(hn::Add(k_scale, hn::Set(di, 1023))));
  const V scaled = hn::Mul(y_scale, pow2);

  V result = hn::IfThenElse(reduce, scaled, hn::IfThenElse(tiny, hn::Add(one, xs), no_scale));
  result = hn::IfThenElse(underflow, hn::Zero(d), result);
  result = hn::IfThenElse(overflow, hn::Set(d, FromBits(0x7FF0000000000000ULL)), result);
  return hn::IfThenElse(is_nan, x, result);
}
// docs:end vector-exp

// CanonicalLog on every lane.
template <class D, class V = hn::VFromD<D>>
HWY_INLINE V CanonicalLogV(D d, V x) {
  using namespace exp_log_internal;
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  using VI = hn::VFromD<decltype(di)>;
  using VU = hn::VFromD<decltype(du)>;
  const auto is_nan = hn::IsNaN(x);  // not Ne(x, x): AVX3's != is an ordered compare
  const auto negative = hn::Lt(x, hn::Zero(d));
  const auto zero = hn::Eq(x, hn::Zero(d));
  const auto infinite = hn::Gt(x, hn::Set(d, 1.79769313486231570815e+308));
  const V one = hn::Set(d, 1.0);
  // Special lanes compute log(1) and are patched at the end.
  V xs = hn::IfThenElse(hn::Or(hn::Or(is_nan, negative), hn::Or(zero, infinite)), one, x);

  // Subnormal (biased exponent 0; xs > 0 here): scale by 2^54, k = -54.
  const auto subnormal = hn::Lt(xs, hn::Set(d, FromBits(0x0010000000000000ULL)));
  xs = hn::IfThenElse(subnormal, hn::Mul(xs, hn::Set(d, kTwo54)), xs);
  VI k = hn::IfThenElse(hn::RebindMask(di, subnormal), hn::Set(di, -54), hn::Zero(di));

  const VU bits = hn::BitCast(du, xs);
  const VU hx_full = hn::ShiftRight<32>(bits);
  const VU lx = hn::And(bits, hn::Set(du, 0xFFFFFFFFULL));
  k = hn::Add(k, hn::Sub(hn::BitCast(di, hn::ShiftRight<20>(hx_full)), hn::Set(di, 1023)));
  const VU hx = hn::And(hx_full, hn::Set(du, 0x000FFFFFULL));
  const VU i = hn::And(hn::Add(hx, hn::Set(du, 0x95F64ULL)), hn::Set(du, 0x100000ULL));
  const V xm = hn::BitCast(d, hn::Or(hn::ShiftLeft<32>(hn::Or(hx, hn::Xor(i, hn::Set(du, 0x3FF00000ULL)))), lx));
  k = hn::Add(k, hn::BitCast(di, hn::ShiftRight<20>(i)));
  const VI hx_signed = hn::BitCast(di, hx);  // <= 0xFFFFF: signed compares (native from SSE4 on) are exact
  const V f = hn::Sub(xm, one);
  const V dk = hn::ConvertTo(d, k);
  const auto k_zero = hn::RebindMask(d, hn::Eq(k, hn::Zero(di)));
  const V ln2_hi = hn::Set(d, kLn2Hi), ln2_lo = hn::Set(d, kLn2Lo);
  const V dk_hi = hn::Mul(dk, ln2_hi), dk_lo = hn::Mul(dk, ln2_lo);

  // -2^-20 < f < 2^-20: (0x000FFFFF & (2 + hx)) < 3.
  const auto near_one = hn::RebindMask(
      d, hn::Lt(hn::BitCast(di, hn::And(hn::Add(hx, hn::Set(du, 2ULL)), hn::Set(du, 0x000FFFFFULL))), hn::Set(di, 3)));
  const V exact_power = hn::IfThenElse(k_zero, hn::Zero(d), hn::Add(dk_hi, dk_lo));  // f == 0
  const V r_near = hn::Mul(hn::Mul(f, f), hn::Sub(hn::Set(d, 0.5), hn::Mul(hn::Set(d, 0.33333333333333333), f)));
  const V near_k0 = hn::Sub(f, r_near);
  const V near_k = hn::Sub(dk_hi, hn::Sub(hn::Sub(r_near, dk_lo), f));
  const V near_value = hn::IfThenElse(hn::Eq(f, hn::Zero(d)), exact_power, hn::IfThenElse(k_zero, near_k0, near_k));

  const V s = hn::Div(f, hn::Add(hn::Set(d, 2.0), f));
  const V z = hn::Mul(s, s);
  const V w = hn::Mul(z, z);
  const V t1 =
      hn::Mul(w, hn::Add(hn::Set(d, kLg2), hn::Mul(w, hn::Add(hn::Set(d, kLg4), hn::Mul(w, hn::Set(d, kLg6))))));
  const V t2 =
      hn::Mul(z, hn::Add(hn::Set(d, kLg1),
                         hn::Mul(w, hn::Add(hn::Set(d, kLg3),
                                            hn::Mul(w, hn::Add(hn::Set(d, kLg5), hn::Mul(w, hn::Set(d, kLg7))))))));
  const V r = hn::Add(t2, t1);
  // (ii | jj) > 0 <=> 0x6147A <= hx <= 0x6B851: the f^2/2 form.
  const auto band = hn::RebindMask(
      d, hn::And(hn::Gt(hx_signed, hn::Set(di, 0x6147A - 1)), hn::Lt(hx_signed, hn::Set(di, 0x6B851 + 1))));
  const V hfsq = hn::Mul(hn::Mul(hn::Set(d, 0.5), f), f);
  const V s_hfsq_r = hn::Mul(s, hn::Add(hfsq, r));
  const V band_k0 = hn::Sub(f, hn::Sub(hfsq, s_hfsq_r));
  const V band_k = hn::Sub(dk_hi, hn::Sub(hn::Sub(hfsq, hn::Add(s_hfsq_r, dk_lo)), f));
  const V s_f_r = hn::Mul(s, hn::Sub(f, r));
  const V plain_k0 = hn::Sub(f, s_f_r);
  const V plain_k = hn::Sub(dk_hi, hn::Sub(hn::Sub(s_f_r, dk_lo), f));
  const V main_value =
      hn::IfThenElse(band, hn::IfThenElse(k_zero, band_k0, band_k), hn::IfThenElse(k_zero, plain_k0, plain_k));

  V result = hn::IfThenElse(near_one, near_value, main_value);
  result = hn::IfThenElse(infinite, x, result);
  result = hn::IfThenElse(zero, hn::Set(d, FromBits(0xFFF0000000000000ULL)), result);
  result = hn::IfThenElse(negative, hn::Set(d, FromBits(0x7FF8000000000000ULL)), result);
  return hn::IfThenElse(is_nan, x, result);
}

// y[i] = CanonicalExp(x[i] - shift) for i < n. Both arrays hold at least RoundUp(n, kLanes) elements (the
// lanes past n are computed from whatever x holds there and must be ignored).
HWY_INLINE void ExpShifted(const double* x, double shift, size_t n, double* y) {
  const DF d;
  const VF s = hn::Set(d, shift);
  for (size_t i = 0; i < n; i += kLanes) hn::StoreU(CanonicalExpV(d, hn::Sub(hn::LoadU(d, x + i), s)), d, y + i);
}

// y[i] = CanonicalExp(x[i]) for i < n; arrays padded as for ExpShifted.
HWY_INLINE void ExpArray(const double* x, size_t n, double* y) {
  const DF d;
  for (size_t i = 0; i < n; i += kLanes) hn::StoreU(CanonicalExpV(d, hn::LoadU(d, x + i)), d, y + i);
}

// y[i] = CanonicalLog(x[i]) for i < n; arrays padded as for ExpShifted.
HWY_INLINE void LogArray(const double* x, size_t n, double* y) {
  const DF d;
  for (size_t i = 0; i < n; i += kLanes) hn::StoreU(CanonicalLogV(d, hn::LoadU(d, x + i)), d, y + i);
}

// ------------------------------------------------------------------------------------------------------
// max and sums in the reference's order.

// The reference's maximum (std::max_element / the std::max fold): m = x[0], then m = (m < x[j]) ? x[j] : m.
// That is the FIRST element equal to the largest non-NaN value, or NaN when x[0] is NaN. Lanes fold their
// own elements the same way from x[0]; the only thing a lane split can change is the sign of a zero
// maximum, so that case takes the first zero. Precondition: n >= 1.
HWY_INLINE double CanonicalMax(const double* x, size_t n) {
  const DF d;
  double m = x[0];
  size_t j = 1;
  if (n >= kLanes) {
    VF lanes_max = hn::Set(d, x[0]);
    for (j = 0; j + kLanes <= n; j += kLanes) {
      const VF v = hn::LoadU(d, x + j);
      lanes_max = hn::IfThenElse(hn::Lt(lanes_max, v), v, lanes_max);
    }
    HWY_ALIGN double lane[kLanes];
    hn::Store(lanes_max, d, lane);
    for (size_t l = 0; l < kLanes; ++l) m = (m < lane[l]) ? lane[l] : m;
  }
  for (; j < n; ++j) m = (m < x[j]) ? x[j] : m;
  if (m == 0.0) {
    for (j = 0; j < n; ++j) {
      if (x[j] == 0.0) return x[j];
    }
  }
  return m;
}

// l = sum of x[0..n) in ascending order, from +0.
HWY_INLINE double SequentialSum(const double* x, size_t n) {
  double l = 0.0;
  for (size_t j = 0; j < n; ++j) l += x[j];
  return l;
}

// ------------------------------------------------------------------------------------------------------
// Canonical dots in tiles.

// kLanes elements of a row as doubles: a double row as is, a float row widened exactly.
template <typename T>
HWY_INLINE VF LoadWide(const T* p) {
  const DF d;
  if constexpr (sizeof(T) == sizeof(double)) {
    return hn::LoadU(d, p);
  } else {
    return hn::PromoteTo(d, hn::LoadU(hn::Rebind<float, DF>(), p));
  }
}

// Dots per tile: a multiple of kLanes that keeps the accumulators (kTileDots * 8 / kLanes vectors) within
// the target's registers: 16 dots = 16 zmm on AVX3, 4 dots = 8 ymm on AVX2, 2 dots = 8 xmm on SSE4/SSSE3.
constexpr size_t kTileDots = kLanes == 8 ? 16 : kLanes == 4 ? 4 : kLanes == 2 ? 2 : 1;

// out[q * out_stride + k] = CanonicalDot(a[q], b[k], n) * scale for q < kRows, k < kCols (kRows * kCols ==
// kTileDots); n is a multiple of 8 (padded rows). Only [rows, cols) of the tile are written; the pointers of
// the rest may repeat valid ones (their dots are computed and dropped).
// `next` (or nullptr): kCols rows of the next tile, prefetched a cache line per step. The b rows are double
// or float (widened exactly as they load).
template <size_t kRows, size_t kCols, typename TB>
HWY_INLINE void DotTile(const double* const* a, const TB* const* b, size_t n, double scale, size_t rows, size_t cols,
                        double* out, size_t out_stride, const TB* const* next) {
  static_assert(kRows * kCols == kTileDots, "a tile holds kTileDots dots");
  const DF d;
  VF acc[kTileDots * kPartialVectors];
  for (size_t i = 0; i < kTileDots * kPartialVectors; ++i) acc[i] = hn::Zero(d);
  for (size_t i = 0; i < n; i += 8) {
    if (next != nullptr) {
      for (size_t k = 0; k < kCols; ++k) hwy::Prefetch(next[k] + i);  // 8 elements: at most one line
    }
    for (size_t part = 0; part < kPartialVectors; ++part) {
      VF bv[kCols];
      for (size_t k = 0; k < kCols; ++k) bv[k] = LoadWide(b[k] + i + part * kLanes);
      for (size_t q = 0; q < kRows; ++q) {
        const VF av = hn::LoadU(d, a[q] + i + part * kLanes);
        for (size_t k = 0; k < kCols; ++k) {
          VF& p = acc[(q * kCols + k) * kPartialVectors + part];
          p = hn::Add(p, hn::Mul(av, bv[k]));  // P[i % 8] += a[i] * b[i]: multiply, then add
        }
      }
    }
  }
  HWY_ALIGN double dots[kTileDots];
#if HWY_TARGET == HWY_SCALAR
  // One lane: acc[8 * dot + lane] is P[lane] of the dot.
  for (size_t dot = 0; dot < kTileDots; ++dot) {
    double lane[8];
    for (size_t l = 0; l < 8; ++l) lane[l] = hn::GetLane(acc[8 * dot + l]);
    dots[dot] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
  for (size_t dot = 0; dot < kTileDots; ++dot) dots[dot] = dots[dot] * scale;
#else
  // The partial sums of the tile's dots lie end to end (dot 0's P0..P7, then dot 1's, ...). Three rounds of
  // adjacent-pair sums give (P0+P1), then (P0+P1)+(P2+P3), then the canonical total of each dot, in order.
  size_t count = kTileDots * kPartialVectors;
  for (int round = 0; round < 3; ++round) {
    for (size_t v = 0; v < count / 2; ++v) {
      acc[v] = hn::Add(hn::ConcatEven(d, acc[2 * v + 1], acc[2 * v]), hn::ConcatOdd(d, acc[2 * v + 1], acc[2 * v]));
    }
    count /= 2;
  }
  const VF s = hn::Set(d, scale);
  for (size_t v = 0; v < kTileDots / kLanes; ++v) hn::Store(hn::Mul(acc[v], s), d, dots + v * kLanes);
#endif
  for (size_t q = 0; q < rows; ++q) {
    for (size_t k = 0; k < cols; ++k) out[q * out_stride + k] = dots[q * kCols + k];
  }
}

// out[q * out_stride + k] = CanonicalDot(a[q], b[k], n) * scale for q < rows, k < cols; n a multiple of 8.
// Keys are the outer loop, so a tile of keys stays in L1 while every row passes over it.
template <size_t kRows, typename TB>
HWY_INLINE void DotMatrixRows(const double* const* a, size_t rows, const TB* const* b, size_t cols, size_t n,
                              double scale, double* out, size_t out_stride) {
  constexpr size_t kCols = kTileDots / kRows;
  const double* at[kRows];
  const TB* bt[kCols];
  const TB* bn[kCols];  // the next tile's rows: prefetched while the first row tile runs
  for (size_t k0 = 0; k0 < cols; k0 += kCols) {
    const size_t kc = cols - k0 < kCols ? cols - k0 : kCols;
    for (size_t k = 0; k < kCols; ++k) bt[k] = b[k0 + (k < kc ? k : kc - 1)];
    const size_t next = k0 + kCols;
    for (size_t k = 0; k < kCols; ++k) bn[k] = b[next + k < cols ? next + k : cols - 1];
    for (size_t q0 = 0; q0 < rows; q0 += kRows) {
      const size_t qc = rows - q0 < kRows ? rows - q0 : kRows;
      for (size_t q = 0; q < kRows; ++q) at[q] = a[q0 + (q < qc ? q : qc - 1)];
      DotTile<kRows, kCols, TB>(at, bt, n, scale, qc, kc, out + q0 * out_stride + k0, out_stride,
                                q0 == 0 && next < cols ? bn : nullptr);
    }
  }
}

template <typename TB>
HWY_INLINE void DotMatrix(const double* const* a, size_t rows, const TB* const* b, size_t cols, size_t n, double scale,
                          double* out, size_t out_stride) {
  if (rows == 0 || cols == 0) return;
  if constexpr (kTileDots >= 4) {
    if (rows >= 4) return DotMatrixRows<4, TB>(a, rows, b, cols, n, scale, out, out_stride);
  }
  if constexpr (kTileDots >= 2) {
    if (rows >= 2) return DotMatrixRows<2, TB>(a, rows, b, cols, n, scale, out, out_stride);
  }
  DotMatrixRows<1, TB>(a, rows, b, cols, n, scale, out, out_stride);
}

// ------------------------------------------------------------------------------------------------------
// Softmax-weighted sums of value rows.

// acc[h][c] += p[h][j] * v[j][c] for j in [j0, j1) ascending (multiply, then add), h < kHeads, and the
// kVectors vectors of c starting at `first`. The accumulators stay in registers across j.
// With `prefetch`, the value rows kPrefetchAhead keys ahead are prefetched (their lines of this tile).
constexpr size_t kPrefetchAhead = 8;
template <size_t kHeads, size_t kVectors, typename TV>
HWY_INLINE void WeightedSumTile(const double* const* p, const TV* const* v, size_t j0, size_t j1, size_t first,
                                double* const* acc, size_t n, bool prefetch) {
  const DF d;
  VF sum[kHeads][kVectors];
  for (size_t h = 0; h < kHeads; ++h) {
    for (size_t c = 0; c < kVectors; ++c) sum[h][c] = hn::LoadU(d, acc[h] + first + c * kLanes);
  }
  for (size_t j = j0; j < j1; ++j) {
    if (prefetch && j + kPrefetchAhead < n) {
      for (size_t c = 0; c < kVectors * kLanes; c += 64 / sizeof(TV)) hwy::Prefetch(v[j + kPrefetchAhead] + first + c);
    }
    VF value[kVectors];
    for (size_t c = 0; c < kVectors; ++c) value[c] = LoadWide(v[j] + first + c * kLanes);
    for (size_t h = 0; h < kHeads; ++h) {
      const VF weight = hn::Set(d, p[h][j]);
      for (size_t c = 0; c < kVectors; ++c) sum[h][c] = hn::Add(sum[h][c], hn::Mul(weight, value[c]));
    }
  }
  for (size_t h = 0; h < kHeads; ++h) {
    for (size_t c = 0; c < kVectors; ++c) hn::StoreU(sum[h][c], d, acc[h] + first + c * kLanes);
  }
}

// Head and value-vector tile of WeightedSums: 4 x 4 vectors on AVX3 (32 registers), 2 x 4 elsewhere.
constexpr size_t kSumHeads = kLanes == 8 ? 4 : 2;
constexpr size_t kSumVectors = 4;

// acc[h][c] += sum_j p[h][j] * v[j][c] for h < heads, j < n ascending, c < width (a multiple of kLanes);
// keys go in chunks so a chunk's value rows stay in cache while every head passes over them.
template <typename TV>
HWY_INLINE void WeightedSums(const double* const* p, size_t heads, const TV* const* v, size_t n, size_t width,
                             double* const* acc) {
  constexpr size_t kChunk = 64;
  const size_t vectors = width / kLanes;
  for (size_t j0 = 0; j0 < n; j0 += kChunk) {
    const size_t j1 = n - j0 < kChunk ? n : j0 + kChunk;
    size_t c = 0;
    for (; c + kSumVectors <= vectors; c += kSumVectors) {
      size_t h = 0;
      for (; h + kSumHeads <= heads; h += kSumHeads) {
        WeightedSumTile<kSumHeads, kSumVectors, TV>(p + h, v, j0, j1, c * kLanes, acc + h, n, h == 0);
      }
      for (; h < heads; ++h) WeightedSumTile<1, kSumVectors, TV>(p + h, v, j0, j1, c * kLanes, acc + h, n, h == 0);
    }
    for (; c < vectors; ++c) {
      size_t h = 0;
      for (; h + kSumHeads <= heads; h += kSumHeads) {
        WeightedSumTile<kSumHeads, 1, TV>(p + h, v, j0, j1, c * kLanes, acc + h, n, h == 0);
      }
      for (; h < heads; ++h) WeightedSumTile<1, 1, TV>(p + h, v, j0, j1, c * kLanes, acc + h, n, h == 0);
    }
  }
}

}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MSA_SIMD_EXACT_INL_H_
