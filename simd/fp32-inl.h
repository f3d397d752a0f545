// Per-target kernels of the fp32 mode (simd/fp32.h), compiled once per Highway target by simd/fp32.cc.
// Every kernel computes each output element with the same operation sequence whatever tile or lane it lands
// in (a dot is one FMA chain over d ascending; a P V element one FMA chain over a step's keys ascending), so
// tiling never changes bits: a row's result does not depend on which other rows share its tile.
// Kernels of the main branch are templates on the accumulator type T: float, or double for short rows.
#if defined(MSA_SIMD_FAST_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_SIMD_FAST_INL_H_
#undef MSA_SIMD_FAST_INL_H_
#else
#define MSA_SIMD_FAST_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "msa/tensor.h"
#include "simd/fp32_common.h"

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Register budget: AVX-512 has 32 vector registers, the other x86 targets 16.
#if HWY_TARGET <= HWY_AVX3
inline constexpr int kAccumulators = 16;  // for narrow index tiles (two panels at a time)
inline constexpr int kIndexRows = 12;     // index tile: 12 rows x 2 key vectors = 24 accumulators
#else
inline constexpr int kAccumulators = 8;
inline constexpr int kIndexRows = 6;  // 6 x 2 = 12 accumulators
#endif
inline constexpr int kMaxHeadVectors = 4;  // a head chunk spans at most 4 vectors of heads

inline constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------------------------------------
// exp in fp32 (Cephes expf: ln2 split in two, degree-6 polynomial, 2^n through the exponent bits); about
// 1 ulp. Arguments below -87 (including -inf) give +0, so a softmax state that starts at -inf is harmless.
template <class D>
HWY_INLINE hn::Vec<D> CephesExp(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto underflow = hn::Lt(x, hn::Set(d, -87.0f));
  x = hn::Min(hn::Max(x, hn::Set(d, -87.0f)), hn::Set(d, 88.0f));
  const auto n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  auto r = hn::MulAdd(n, hn::Set(d, -0.693359375f), x);
  r = hn::MulAdd(n, hn::Set(d, 2.12194440e-4f), r);
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  return hn::IfThenZeroElse(underflow, hn::Mul(p, two_n));
}

// ---------------------------------------------------------------------------------------------------------
// Input conversion: one [dim] row of a view, widened or narrowed to fp32.
HWY_INLINE void LoadRow(const TensorView& view, int64_t row, int64_t head, float* HWY_RESTRICT out) {
  const DF df;
  const int64_t n = view.dim, offset = view.Offset(row, head, 0);
  const int64_t N = int64_t(hn::Lanes(df));
  switch (view.dtype) {
    case DType::kF32: {
      const float* in = static_cast<const float*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = in[i];
      break;
    }
    case DType::kF64: {
      const double* in = static_cast<const double*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = float(in[i]);
      break;
    }
    case DType::kBF16: {
      const hn::Rebind<hwy::bfloat16_t, DF> dh;
      const hwy::bfloat16_t* in = static_cast<const hwy::bfloat16_t*>(view.data) + offset;
      int64_t i = 0;
      for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, in + i)), df, out + i);
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (; i < n; ++i) out[i] = fp32::BF16ToFloat(bits[i]);
      break;
    }
    case DType::kF16: {
      const hn::Rebind<hwy::float16_t, DF> dh;
      const hwy::float16_t* in = static_cast<const hwy::float16_t*>(view.data) + offset;
      int64_t i = 0;
      for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, in + i)), df, out + i);
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (; i < n; ++i) out[i] = fp32::HalfToFloat(bits[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = float(view.At(row, head, i));
  }
}

// One [dim] row of a view widened exactly to double (short rows: f64 inputs keep every bit).
HWY_INLINE void LoadRowF64(const TensorView& view, int64_t row, int64_t head, double* HWY_RESTRICT out) {
  const int64_t n = view.dim, offset = view.Offset(row, head, 0);
  switch (view.dtype) {
    case DType::kF64: {
      const double* in = static_cast<const double*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = in[i];
      break;
    }
    case DType::kF32: {
      const float* in = static_cast<const float*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = in[i];
      break;
    }
    case DType::kBF16: {
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = fp32::BF16ToFloat(bits[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = fp32::HalfToFloat(bits[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = view.At(row, head, i);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Index micro-kernel. q: R rows [R][di] (row stride di); panels: NP consecutive packed key panels, each
// [di][2N] (key j of a panel at lane j); out: [R][out_stride], columns 0..NP*2N-1 written with the raw dots.
// docs:begin index-micro-kernel
template <int R, int NP>
HWY_INLINE void ScorePanels(const float* HWY_RESTRICT q, int64_t di, const float* HWY_RESTRICT panels,
                            float* HWY_RESTRICT out, int64_t out_stride) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df)), W = 2 * N, panel_size = di * W;
  VF acc[R][2 * NP];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 2 * NP; ++j) acc[i][j] = hn::Zero(df);
  }
  for (int64_t d = 0; d < di; ++d) {
    VF k[2 * NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      k[2 * p] = hn::Load(df, panels + p * panel_size + d * W);
      k[2 * p + 1] = hn::Load(df, panels + p * panel_size + d * W + N);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const VF qb = hn::Set(df, q[i * di + d]);
#pragma GCC unroll 4
      for (int j = 0; j < 2 * NP; ++j) acc[i][j] = hn::MulAdd(qb, k[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 2 * NP; ++j) hn::StoreU(acc[i][j], df, out + i * out_stride + j * N);
  }
}
// docs:end index-micro-kernel

// Scores `rows` (1..kIndexRows) rows against `num_panels` consecutive panels.
template <int R>
HWY_INLINE void ScorePanelRange(const float* HWY_RESTRICT q, int64_t di, const float* HWY_RESTRICT panels,
                                int64_t num_panels, float* HWY_RESTRICT out, int64_t out_stride) {
  const DF df;
  const int64_t W = 2 * int64_t(hn::Lanes(df)), panel_size = di * W;
  int64_t p = 0;
  if constexpr (R * 4 <= 2 * kAccumulators) {  // few rows: two panels at a time keep enough FMA chains
    for (; p + 2 <= num_panels; p += 2) ScorePanels<R, 2>(q, di, panels + p * panel_size, out + p * W, out_stride);
  }
  for (; p < num_panels; ++p) ScorePanels<R, 1>(q, di, panels + p * panel_size, out + p * W, out_stride);
}

HWY_INLINE void ScoreRows(int rows, const float* HWY_RESTRICT q, int64_t di, const float* HWY_RESTRICT panels,
                          int64_t num_panels, float* HWY_RESTRICT out, int64_t out_stride) {
  // clang-format off
  switch (rows) {
#define MSA_FP32_ROWS_CASE(R) \
  case R:                     \
    if constexpr (R <= kIndexRows) return ScorePanelRange<R>(q, di, panels, num_panels, out, out_stride); \
    break;
    MSA_FP32_ROWS_CASE(1) MSA_FP32_ROWS_CASE(2) MSA_FP32_ROWS_CASE(3) MSA_FP32_ROWS_CASE(4)
    MSA_FP32_ROWS_CASE(5) MSA_FP32_ROWS_CASE(6) MSA_FP32_ROWS_CASE(7) MSA_FP32_ROWS_CASE(8)
    MSA_FP32_ROWS_CASE(9) MSA_FP32_ROWS_CASE(10) MSA_FP32_ROWS_CASE(11) MSA_FP32_ROWS_CASE(12)
#undef MSA_FP32_ROWS_CASE
    default:
      break;
  }
  // clang-format on
}

// The last n < Lanes(df) floats of a row as a full vector, the other lanes `fill`. Copies through a stack buffer:
// a masked load may read the whole vector (Highway 1.0.3 on some targets), past the end of the row's buffer.
HWY_INLINE VF LoadTail(DF df, const float* HWY_RESTRICT x, int64_t n, float fill) {
  HWY_ALIGN float lanes[hn::MaxLanes(DF())];
  for (size_t lane = 0; lane < hn::Lanes(df); ++lane) lanes[lane] = int64_t(lane) < n ? x[lane] : fill;
  return hn::Load(df, lanes);
}

// max of x[0..n), n >= 1.
HWY_INLINE float SegmentMax(const float* HWY_RESTRICT x, int64_t n) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df));
  VF m = hn::Set(df, kMinusInf);
  int64_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::LoadU(df, x + i));
  if (i < n) {
    m = hn::Max(m, LoadTail(df, x + i, n - i, kMinusInf));
  }
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

// sum of exp(x_i * s + shift) over x[0..n), lanes counted from x[0] (so the value depends only on the segment).
HWY_INLINE float SegmentSumExp(const float* HWY_RESTRICT x, int64_t n, float s, float shift) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df));
  const VF vs = hn::Set(df, s), vshift = hn::Set(df, shift);
  VF sum = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) sum = hn::Add(sum, CephesExp(df, hn::MulAdd(hn::LoadU(df, x + i), vs, vshift)));
  if (i < n) {
    const auto mask = hn::FirstN(df, size_t(n - i));
    const VF e = CephesExp(df, hn::MulAdd(LoadTail(df, x + i, n - i, 0.0f), vs, vshift));
    sum = hn::Add(sum, hn::IfThenElseZero(mask, e));
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// dot(a, b) over n in lanes (vector partial sums, then the lanes).
HWY_INLINE float LaneDot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t n) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df));
  VF sum = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) sum = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), sum);
  if (i < n) {
    sum = hn::MulAdd(LoadTail(df, a + i, n - i, 0.0f), LoadTail(df, b + i, n - i, 0.0f), sum);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// ---------------------------------------------------------------------------------------------------------
// Main branch. A head chunk of the group is V vectors of N heads ("heads in lanes").
//
// Raw dots of KR keys with the heads in T (float; double for short rows): qt [D][V*NT] (the chunk's queries,
// transposed), key j at k + j * k_stride (D values); s: [KR][V*NT].
// docs:begin score-keys
template <typename T, int V, int KR>
HWY_INLINE void ScoreKeys(const T* HWY_RESTRICT qt, int64_t dim, const T* HWY_RESTRICT k, int64_t k_stride,
                          T* HWY_RESTRICT s) {
  const hn::ScalableTag<T> d;
  using VT = hn::Vec<decltype(d)>;
  const int64_t NT = int64_t(hn::Lanes(d));
  VT acc[KR][V];
#pragma GCC unroll 16
  for (int j = 0; j < KR; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[j][v] = hn::Zero(d);
  }
  for (int64_t i = 0; i < dim; ++i) {
    VT q[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) q[v] = hn::Load(d, qt + (i * V + v) * NT);
#pragma GCC unroll 16
    for (int j = 0; j < KR; ++j) {
      const VT kb = hn::Set(d, k[j * k_stride + i]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[j][v] = hn::MulAdd(q[v], kb, acc[j][v]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < KR; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) hn::Store(acc[j][v], d, s + (j * V + v) * NT);
  }
}
// docs:end score-keys

// Largest power of two keys per step with KR * V <= 8 accumulators: enough FMA chains to hide the latency,
// and few enough key rows that their base pointers stay in general registers (16 rows spill them).
template <int V>
constexpr int KeysPerStep() {
  int kr = 1;
  while (kr * 2 * V <= 8) kr *= 2;
  return kr;
}

template <typename T, int V>
HWY_INLINE void ScoreKeyRange(const T* HWY_RESTRICT qt, int64_t dim, const T* HWY_RESTRICT k, int64_t k_stride,
                              int64_t n, T* HWY_RESTRICT s) {
  const int64_t row = V * int64_t(hn::Lanes(hn::ScalableTag<T>()));
  constexpr int kKR = KeysPerStep<V>();
  int64_t j = 0;
  for (; j + kKR <= n; j += kKR) ScoreKeys<T, V, kKR>(qt, dim, k + j * k_stride, k_stride, s + j * row);
  if constexpr (kKR > 8) {
    if (j + 8 <= n) {
      ScoreKeys<T, V, 8>(qt, dim, k + j * k_stride, k_stride, s + j * row);
      j += 8;
    }
  }
  if constexpr (kKR > 4) {
    if (j + 4 <= n) {
      ScoreKeys<T, V, 4>(qt, dim, k + j * k_stride, k_stride, s + j * row);
      j += 4;
    }
  }
  if constexpr (kKR > 2) {
    if (j + 2 <= n) {
      ScoreKeys<T, V, 2>(qt, dim, k + j * k_stride, k_stride, s + j * row);
      j += 2;
    }
  }
  if constexpr (kKR > 1) {
    if (j < n) {
      ScoreKeys<T, V, 1>(qt, dim, k + j * k_stride, k_stride, s + j * row);
      ++j;
    }
  }
}

// e^x: CephesExp for float, Highway's for double (short rows).
template <class D>
HWY_INLINE hn::Vec<D> VecExp(D d, hn::Vec<D> x) {
  if constexpr (sizeof(hn::TFromD<D>) == sizeof(float)) {
    return CephesExp(d, x);
  } else {
    return hn::Exp(d, x);
  }
}

// Online softmax over one chunk of n keys in T: s [n][V*NT] raw dots in, probabilities out (in place); m
// [V*N] the running max of the scaled scores (fp32, updated), alpha [V*NT] the factor the old state must be
// scaled by, and chunk_sum [V*NT] = sum of the chunk's p_j for j ascending, from zero: the same operations
// P V applies to a value of 1 (so softmax rows with v = 1 give exactly l / l).
// p = exp(dot * scale - m) with the product and the difference in one FMA, so the score is never rounded on
// its own: the keys that dominate (score near the max) get an almost exact exponent.
// docs:begin online-softmax
template <typename T, int V>
HWY_INLINE void SoftmaxChunk(T* HWY_RESTRICT s, int64_t n, T scale, float* HWY_RESTRICT m, T* HWY_RESTRICT alpha,
                             T* HWY_RESTRICT chunk_sum) {
  const hn::ScalableTag<T> d;
  const hn::Rebind<float, decltype(d)> df;
  using VT = hn::Vec<decltype(d)>;
  const int64_t NT = int64_t(hn::Lanes(d));
  const VT vscale = hn::Set(d, scale);
  VT chunk_max[V], neg_max[V], sum[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) chunk_max[v] = hn::Set(d, T(kMinusInf));
  for (int64_t j = 0; j < n; ++j) {  // scale > 0: the max of the dots gives the max score
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) chunk_max[v] = hn::Max(chunk_max[v], hn::Load(d, s + (j * V + v) * NT));
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    const auto old_max32 = hn::LoadU(df, m + v * NT);
    VT old_max, new_max;
    if constexpr (sizeof(T) == sizeof(float)) {
      old_max = old_max32;
      new_max = hn::Max(old_max, hn::Mul(chunk_max[v], vscale));
      hn::StoreU(new_max, df, m + v * NT);
    } else {  // the running max is kept in fp32: round the new one, then use it exactly
      old_max = hn::PromoteTo(d, old_max32);
      const auto new_max32 = hn::DemoteTo(df, hn::Max(old_max, hn::Mul(chunk_max[v], vscale)));
      hn::StoreU(new_max32, df, m + v * NT);
      new_max = hn::PromoteTo(d, new_max32);
    }
    neg_max[v] = hn::Neg(new_max);
    hn::Store(VecExp(d, hn::Sub(old_max, new_max)), d, alpha + v * NT);
    sum[v] = hn::Zero(d);
  }
  for (int64_t j = 0; j < n; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const VT p = VecExp(d, hn::MulAdd(hn::Load(d, s + (j * V + v) * NT), vscale, neg_max[v]));
      hn::Store(p, d, s + (j * V + v) * NT);
      sum[v] = hn::Add(sum[v], p);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) hn::Store(sum[v], d, chunk_sum + v * NT);
}
// docs:end online-softmax

// o[h][dv] = o[h][dv] * alpha[h] (or 0 with kZeroInit) + sum_j p[j][h] * v_j[dv] for HR heads and DVV vectors of
// value dims ("value dims in lanes"), in T (float, or double for short rows); p column h at p[j * p_stride + h];
// value row j at v + j * v_stride; o rows o + h * o_stride.
// docs:begin accumulate-values
template <typename T, int HR, int DVV, bool kZeroInit>
HWY_INLINE void AccumulateValues(const T* HWY_RESTRICT p, int64_t p_stride, const T* HWY_RESTRICT v, int64_t v_stride,
                                 int64_t n, const T* HWY_RESTRICT alpha, T* HWY_RESTRICT o, int64_t o_stride) {
  const hn::ScalableTag<T> d;
  using VT = hn::Vec<decltype(d)>;
  const int64_t NT = int64_t(hn::Lanes(d));
  VT acc[HR][DVV];
#pragma GCC unroll 8
  for (int h = 0; h < HR; ++h) {
    const VT a = hn::Set(d, kZeroInit ? T(0) : alpha[h]);
#pragma GCC unroll 4
    for (int x = 0; x < DVV; ++x) {
      acc[h][x] = kZeroInit ? hn::Zero(d) : hn::Mul(hn::LoadU(d, o + h * o_stride + x * NT), a);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    VT vv[DVV];
#pragma GCC unroll 4
    for (int x = 0; x < DVV; ++x) vv[x] = hn::LoadU(d, v + j * v_stride + x * NT);
#pragma GCC unroll 8
    for (int h = 0; h < HR; ++h) {
      const VT pb = hn::Set(d, p[j * p_stride + h]);
#pragma GCC unroll 4
      for (int x = 0; x < DVV; ++x) acc[h][x] = hn::MulAdd(pb, vv[x], acc[h][x]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < HR; ++h) {
#pragma GCC unroll 4
    for (int x = 0; x < DVV; ++x) hn::StoreU(acc[h][x], d, o + h * o_stride + x * NT);
  }
}
// docs:end accumulate-values

#if HWY_TARGET <= HWY_AVX3
inline constexpr int kValueHeads = 4, kValueVectors = 4;
#else
inline constexpr int kValueHeads = 4, kValueVectors = 2;
#endif

template <typename T, int HR, bool kZeroInit>
HWY_INLINE void AccumulateValueDims(const T* HWY_RESTRICT p, int64_t p_stride, const T* HWY_RESTRICT v,
                                    int64_t v_stride, int64_t n, const T* HWY_RESTRICT alpha, T* HWY_RESTRICT o,
                                    int64_t o_stride, int64_t value_dims) {
  const int64_t NT = int64_t(hn::Lanes(hn::ScalableTag<T>())), value_vectors = value_dims / NT;
  int64_t x = 0;
  for (; x + kValueVectors <= value_vectors; x += kValueVectors) {
    AccumulateValues<T, HR, kValueVectors, kZeroInit>(p, p_stride, v + x * NT, v_stride, n, alpha, o + x * NT,
                                                      o_stride);
  }
  if constexpr (kValueVectors > 2) {
    if (x + 2 <= value_vectors) {
      AccumulateValues<T, HR, 2, kZeroInit>(p, p_stride, v + x * NT, v_stride, n, alpha, o + x * NT, o_stride);
      x += 2;
    }
  }
  if (x < value_vectors) {
    AccumulateValues<T, HR, 1, kZeroInit>(p, p_stride, v + x * NT, v_stride, n, alpha, o + x * NT, o_stride);
  }
}

// All heads [0, heads) of a chunk: o [heads][o_stride], value_dims = padded Dv (a multiple of the float lanes).
template <typename T, bool kZeroInit>
HWY_INLINE void AccumulateAllHeads(const T* HWY_RESTRICT p, int64_t p_stride, int64_t heads, const T* HWY_RESTRICT v,
                                   int64_t v_stride, int64_t n, const T* HWY_RESTRICT alpha, T* HWY_RESTRICT o,
                                   int64_t o_stride, int64_t value_dims) {
  int64_t h = 0;
  for (; h + kValueHeads <= heads; h += kValueHeads) {
    AccumulateValueDims<T, kValueHeads, kZeroInit>(p + h, p_stride, v, v_stride, n, alpha + h, o + h * o_stride,
                                                   o_stride, value_dims);
  }
  if (h + 2 <= heads) {
    AccumulateValueDims<T, 2, kZeroInit>(p + h, p_stride, v, v_stride, n, alpha + h, o + h * o_stride, o_stride,
                                         value_dims);
    h += 2;
  }
  if (h < heads) {
    AccumulateValueDims<T, 1, kZeroInit>(p + h, p_stride, v, v_stride, n, alpha + h, o + h * o_stride, o_stride,
                                         value_dims);
  }
}

}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MSA_SIMD_FAST_INL_H_ (toggle)
