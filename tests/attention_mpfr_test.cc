// How far is the FP64 canonical reference from the true values? Its main-branch outputs (out, lse) and
// its index_lse are compared with the same quantities computed independently in MPFR at 256 bits, on
// small generated problems (prefill, ragged batch, decode; D = Dv = Di in {8, 16, 64}; every pooling
// mode; F64 and BF16 inputs), plus one hand-checkable case that validates the MPFR harness itself.
//
// The reference's own selection (topk_indices) is taken as given: this test measures the arithmetic of
// the main branch and of index_lse, not the ranking. Everything else (query positions, key sets, scores,
// softmax, log-sum-exp) is recomputed here from the inputs, read through ViewOf(tensor).At, which
// widens every dtype to double exactly. The scales are config.SoftmaxScale() / IndexScale() as doubles,
// exactly the numbers the reference multiplies by; MPFR then evaluates the exact function of those
// double inputs (relative error about 2^-250, nothing next to a double ulp).
//
// Error measures (all printed by ReferenceAgainstMpfr with the place of the worst value, and recorded as
// test properties worst_*):
//  (a) ulps: |ref - true| / ulp(true), where ulp(true) = 2^(e-53) for true in [2^(e-1), 2^e) (the
//      spacing of doubles in the binade of the exact value; never more lenient than the ulp of the
//      correctly rounded value).
//  (b) conditioned, for out: |ref - true| / (eps * sum_j p_j |v_jd|), eps = 2^-52, p_j the true softmax
//      weights. out_d = sum_j p_j v_jd can cancel to near zero, where (a) is unbounded for ANY
//      floating-point algorithm; (b) is the error relative to the size of the terms actually summed.
//      For lse and index_lse: |ref - true| / (eps * max(|lse|, sum_j p_j A_j)) (A_j below): lse can
//      also be near zero (a query that sees one key has lse = s_0, a possibly cancelling dot product).
//  (a) is also reported over the well-conditioned values only: sum_j p_j |v_jd| <= 2 |out_d| for out,
//      sum_j p_j A_j <= |lse| for lse and index_lse.
//
// Forward-error analysis of the canonical algorithm (SPEC section 4), u = 2^-53, first order in u (the
// second-order terms are below 1e-13 relative here, covered by a 1% slack):
//  1. score: s^_j = fl(fl(dot(q, k_j)) * scale). Each of the 8 partial sums adds ceil(n/8) products (at
//     most ceil(n/8) roundings per product, counting its own), the pairwise combination adds 3 levels,
//     the scale 1 more: |s^_j - s_j| <= (ceil(n/8) + 4) u * A_j =: Delta_j, A_j = scale * sum_i |q_i k_ji|.
//     Softmax weights are perturbed by at most a factor exp(+-2 Delta), Delta = max_j Delta_j; lse by
//     at most Delta (log-sum-exp is 1-Lipschitz in the max norm).
//  2. p^_j = Exp(fl(s^_j - m)): the subtraction rounds the argument (relative u, so p_j moves by
//     u |s_j - m|), Exp is within 1 ulp <= 2u relative: |theta_j| <= (d_max + 2) u, d_max = max |s_j - m|.
//     Normalised weights move by at most 2 theta_max.
//  3. l = sum p^_j (|S| - 1 roundings, the first addition to 0 is exact), acc_d = sum fl(p^_j v_jd)
//     (|S| roundings per term), out_d = fl(acc_d / l) (1 rounding): 2|S| u relative to sum_j p_j |v_jd|.
//  So |out^_d - out_d| <= [2 Delta + 2 (d_max + 2) u + 2 |S| u] * sum_j p_j |v_jd|, i.e. in units of
//  eps * sum_j p_j |v_jd|:   B_out = (ceil(D/8) + 4) A + d_max + 2 + |S|,   A = max_j A_j.
//  For lse = fl(m + Log(l)): Delta, plus log(l^/l~) <= theta_max + (|S| - 1) u, plus Log's 1 ulp
//  <= 2u |log l|, plus the final rounding <= u |lse|:
//      |lse^ - lse| <= u * [(ceil(n/8) + 4) A + d_max + 1 + |S| + 2 |log l| + |lse|]  (B_lse, absolute).
//  index_lse is the same log-sum-exp with index_q, index_k, Di and the index scale.
// These per-row bounds are asserted (with 1% slack). With standard normal inputs A ~ 0.64 sqrt(D), so for
// D = 64 the dot term alone allows ~60 eps; observed errors are random-walk sized, far smaller. The raw
// ulp errors are reported, not asserted: near cancellation (out_d ~ 0, or lse = s_0 ~ 0 for a query that
// sees one key) they are unbounded for any algorithm.
//
// Observed when this test was written (default scales, 54 problems, 5832 rows): out 3.8 eps*sum|p v|
// conditioned (8.8 ulp where well-conditioned; 4e4 raw ulp at a near-zero out_d), lse 1.65 ulp and
// index_lse 1.76 ulp where well-conditioned (1.2 and 0.96 conditioned), every error <= 0.21 of its bound.
// With scale 1 (scores ~ N(0, 64)) the score rounding dominates: out up to ~20 eps*sum|p v|.
#include <mpfr.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "msa/msa.h"
#include "oracle/problem.h"
#include "tests/mpfr_real.h"

namespace msa {
namespace {

constexpr double kU = 0x1p-53;    // unit roundoff
constexpr double kEps = 0x1p-52;  // machine epsilon
constexpr double kSlack = 1.01;   // second-order terms of the forward-error bounds

// True score dot(a[ra, ha], b[rb, hb]) * scale of double inputs; *abs_scaled = scale * sum |a_i b_i|.
Real TrueScore(const TensorView& a, int64_t ra, int64_t ha, const TensorView& b, int64_t rb, int64_t hb, double scale,
               double* abs_scaled) {
  Real sum, term;
  double abs_sum = 0.0;
  for (int64_t i = 0; i < a.dim; ++i) {
    const double x = a.At(ra, ha, i), y = b.At(rb, hb, i);
    mpfr_set_d(term.get(), x, MPFR_RNDN);
    mpfr_mul_d(term.get(), term.get(), y, MPFR_RNDN);  // exact: 106 bits
    mpfr_add(sum.get(), sum.get(), term.get(), MPFR_RNDN);
    abs_sum += std::fabs(x * y);
  }
  mpfr_mul_d(sum.get(), sum.get(), scale, MPFR_RNDN);
  *abs_scaled = std::fabs(scale) * abs_sum;
  return sum;
}

// The true softmax over `scores` and, when `values` is not empty, out = sum_j p_j values[j].
struct SoftmaxTruth {
  Real lse;
  std::vector<Real> out;          // [Dv]
  std::vector<double> abs_terms;  // [Dv]: sum_j p_j |v_jd| (rounded)
  double d_max = 0.0;             // max_j |s_j - m|
  double log_l = 0.0;             // log(sum_j exp(s_j - m))
  double weighted_a = 0.0;        // sum_j p_j A_j: how large the score terms lse depends on are
};

// a[j] = A_j = scale * sum_i |q_i k_ji| (may be empty).
SoftmaxTruth TrueSoftmax(const std::vector<Real>& scores, const std::vector<std::vector<double>>& values,
                         const std::vector<double>& a = {}) {
  SoftmaxTruth truth;
  Real m = scores[0];
  for (const Real& s : scores) mpfr_max(m.get(), m.get(), s.get(), MPFR_RNDN);
  std::vector<Real> e(scores.size());
  Real l;
  for (size_t j = 0; j < scores.size(); ++j) {
    mpfr_sub(e[j].get(), scores[j].get(), m.get(), MPFR_RNDN);
    truth.d_max = std::max(truth.d_max, std::fabs(e[j].ToDouble()));
    mpfr_exp(e[j].get(), e[j].get(), MPFR_RNDN);
    mpfr_add(l.get(), l.get(), e[j].get(), MPFR_RNDN);
  }
  Real log_l;
  mpfr_log(log_l.get(), l.get(), MPFR_RNDN);
  truth.log_l = log_l.ToDouble();
  mpfr_add(truth.lse.get(), m.get(), log_l.get(), MPFR_RNDN);
  for (size_t j = 0; j < a.size(); ++j) {
    Real p;
    mpfr_div(p.get(), e[j].get(), l.get(), MPFR_RNDN);
    truth.weighted_a += p.ToDouble() * a[j];
  }
  if (values.empty()) return truth;
  const size_t dv = values[0].size();
  truth.out.resize(dv);
  truth.abs_terms.assign(dv, 0.0);
  Real term;
  for (size_t j = 0; j < scores.size(); ++j) {
    mpfr_div(e[j].get(), e[j].get(), l.get(), MPFR_RNDN);  // p_j
    const double p = e[j].ToDouble();
    for (size_t d = 0; d < dv; ++d) {
      mpfr_mul_d(term.get(), e[j].get(), values[j][d], MPFR_RNDN);
      mpfr_add(truth.out[d].get(), truth.out[d].get(), term.get(), MPFR_RNDN);
      truth.abs_terms[d] += p * std::fabs(values[j][d]);
    }
  }
  return truth;
}

// Roundings a canonical score sees per term: ceil(n/8) in its partial sum, 3 combining, 1 for the scale.
double ScoreRoundings(int64_t n) { return double((n + 7) / 8 + 4); }

// B_lse of the header, in absolute terms.
double LseBound(int64_t n, double a_max, const SoftmaxTruth& t, int64_t keys) {
  return kSlack * kU *
         (ScoreRoundings(n) * a_max + t.d_max + 1.0 + double(keys) + 2.0 * std::fabs(t.log_l) +
          std::fabs(t.lse.ToDouble()));
}

// B_out of the header, in units of eps * sum_j p_j |v_jd|.
double OutBound(int64_t d, double a_max, const SoftmaxTruth& t, int64_t keys) {
  return kSlack * (ScoreRoundings(d) * a_max + t.d_max + 2.0 + double(keys));
}

// The worst value of one measure and where it happened.
struct Worst {
  double value = -1.0;
  double other = 0.0;  // the companion measure at the same place
  std::string where;
  void Offer(double candidate, double companion, const std::string& place) {
    if (candidate > value) {
      value = candidate;
      other = companion;
      where = place;
    }
  }
};

// The measures of one log-sum-exp output (lse or index_lse).
//  ulp:    raw ulps of the true value;
//  ulp_wc: the same over well-conditioned rows only, sum_j p_j A_j <= |lse| (the score terms lse depends
//          on are no larger than lse itself: no cancellation);
//  cond:   |ref - true| / (eps * max(|lse|, sum_j p_j A_j)), the error relative to the largest magnitude
//          the computation must resolve;
//  ratio:  |ref - true| / B_lse.
struct LseMeters {
  Worst ulp, ulp_wc, cond, ratio;
};

struct Summary {
  Worst out_ulp, out_ulp_wc, out_cond, out_ratio;  // out_ulp_wc: values with sum_j p_j |v_jd| <= 2 |out_d|
  LseMeters lse, idx;
  int64_t rows = 0, values = 0, violations = 0;
};

std::string Place(const std::string& name, int64_t t, int64_t h, int64_t d = -1) {
  std::string place = "case " + name + " t=" + std::to_string(t) + " h=" + std::to_string(h);
  if (d >= 0) place += " d=" + std::to_string(d);
  return place;
}

// Measures one log-sum-exp result; returns false when it breaks its bound B_lse.
bool MeasureLse(double ref, const SoftmaxTruth& truth, int64_t dim, double a_max, int64_t keys,
                const std::string& place, LseMeters* meters) {
  const double err = AbsError(ref, truth.lse), bound = LseBound(dim, a_max, truth, keys);
  const double ulps = UlpError(ref, truth.lse), magnitude = std::fabs(truth.lse.ToDouble());
  const double cond = err / (kEps * std::max(magnitude, truth.weighted_a));
  meters->ulp.Offer(ulps, cond, place);
  if (truth.weighted_a <= magnitude) meters->ulp_wc.Offer(ulps, cond, place);
  meters->cond.Offer(cond, ulps, place);
  meters->ratio.Offer(err / bound, ulps, place);
  return err <= bound;
}

// Checks one problem's reference outputs against MPFR and folds the errors into `summary`.
void CheckProblem(const std::string& name, const Problem& problem, Summary* summary) {
  SCOPED_TRACE(name);
  const Backend* backend = FindBackend("reference");
  ASSERT_NE(backend, nullptr);
  Outputs outputs;
  const Status status = RunBackend(*backend, problem, &outputs);
  ASSERT_TRUE(status.ok()) << status.message();

  const Config& c = problem.config;
  const int64_t hq = c.num_q_heads, g = c.group_size(), hkv = c.num_kv_heads, bk = c.block_size;
  const int64_t d = c.head_dim, dv = c.value_dim, di = c.index_head_dim;
  const int64_t total_q = problem.batch().total_q();
  const TensorView q = ViewOf(problem.q), k = ViewOf(problem.k), v = ViewOf(problem.v);
  const TensorView iq = ViewOf(problem.index_q), ik = ViewOf(problem.index_k);
  const double scale = c.SoftmaxScale(), index_scale = c.IndexScale();

  const auto violation = [&](const std::string& what) {
    if (++summary->violations <= 10) ADD_FAILURE() << what;
  };

  for (size_t b = 0; b + 1 < problem.cu_seqlens_q.size(); ++b) {
    const int64_t q_begin = problem.cu_seqlens_q[b], q_len = problem.cu_seqlens_q[b + 1] - q_begin;
    const int64_t key_begin = problem.cu_seqlens_k[b];
    const int64_t k_len = problem.cu_seqlens_k[b + 1] - key_begin;
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = q_begin + i, pos = k_len - q_len + i;
      for (int64_t r = 0; r < hkv; ++r) {
        // The key set S of (t, r): the selected blocks' keys <= pos, ascending (the valid prefix is a set).
        const int32_t* row = &outputs.topk_indices[(r * total_q + t) * c.top_k];
        std::vector<int64_t> blocks;
        for (int64_t slot = 0; slot < c.top_k && row[slot] != -1; ++slot) blocks.push_back(row[slot]);
        std::sort(blocks.begin(), blocks.end());
        std::vector<int64_t> keys;  // positions within the sequence
        for (int64_t blk : blocks) {
          for (int64_t s = blk * bk; s < std::min((blk + 1) * bk, pos + 1); ++s) keys.push_back(s);
        }
        ASSERT_FALSE(keys.empty()) << "t=" << t << " r=" << r;
        const int64_t n = int64_t(keys.size());

        // index_lse[r, t].
        {
          std::vector<Real> scores;
          std::vector<double> a(n);
          for (int64_t j = 0; j < n; ++j) {
            scores.push_back(TrueScore(iq, t, r, ik, key_begin + keys[j], 0, index_scale, &a[j]));
          }
          const double a_max = *std::max_element(a.begin(), a.end());
          const SoftmaxTruth truth = TrueSoftmax(scores, {}, a);
          if (!MeasureLse(outputs.index_lse[r * total_q + t], truth, di, a_max, n, Place(name, t, r), &summary->idx)) {
            violation("index_lse " + Place(name, t, r) + " breaks its bound");
          }
        }

        // out[t, h, :] and lse[t, h] for the G heads of group r.
        std::vector<std::vector<double>> values(n, std::vector<double>(dv));
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t e = 0; e < dv; ++e) values[j][e] = v.At(key_begin + keys[j], r, e);
        }
        for (int64_t h = r * g; h < (r + 1) * g; ++h) {
          std::vector<Real> scores;
          std::vector<double> a(n);
          for (int64_t j = 0; j < n; ++j) {
            scores.push_back(TrueScore(q, t, h, k, key_begin + keys[j], r, scale, &a[j]));
          }
          const double a_max = *std::max_element(a.begin(), a.end());
          const SoftmaxTruth truth = TrueSoftmax(scores, values, a);
          ++summary->rows;
          if (!MeasureLse(outputs.lse[t * hq + h], truth, d, a_max, n, Place(name, t, h), &summary->lse)) {
            violation("lse " + Place(name, t, h) + " breaks its bound");
          }

          const double out_bound = OutBound(d, a_max, truth, n);
          for (int64_t e = 0; e < dv; ++e) {
            ++summary->values;
            const double ref = outputs.out[(t * hq + h) * dv + e];
            const double ulps = UlpError(ref, truth.out[e]);
            const double cond = AbsError(ref, truth.out[e]) / (kEps * truth.abs_terms[e]);
            summary->out_ulp.Offer(ulps, cond, Place(name, t, h, e));
            summary->out_cond.Offer(cond, ulps, Place(name, t, h, e));
            if (truth.abs_terms[e] <= 2.0 * std::fabs(truth.out[e].ToDouble())) {
              summary->out_ulp_wc.Offer(ulps, cond, Place(name, t, h, e));
            }
            summary->out_ratio.Offer(cond / out_bound, cond, Place(name, t, h, e));
            if (!(cond <= out_bound)) {
              violation("out " + Place(name, t, h, e) + ": conditioned error " + std::to_string(cond) + " > bound " +
                        std::to_string(out_bound));
            }
          }
        }
      }
    }
  }
}

Config SmallConfig(int dim, int block_size, int top_k, Pooling pooling) {
  Config c;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = c.value_dim = c.index_head_dim = dim;
  c.block_size = block_size;
  c.top_k = top_k;
  c.pooling = pooling;
  return c;
}

// The harness itself on a case worked by hand. Sequence (q_len 2, k_len 2), D = 8, one block:
// query 0 sees key 0 only (out = v_0, lse = s_0 exactly); query 1 sees keys 0 and 1 with k_0 == k_1
// and index_k_0 == index_k_1, so both scores tie: out = (v_0 + v_1) / 2 and lse = log(2) + s.
// Dyadic inputs with scale 1/2 make every score exact (s = 3 * 0.5 = 1.5 for query 1), so the true
// values are known in closed form and the reference must hit out exactly.
TEST(AttentionMpfr, HarnessMatchesHandWorkedCase) {
  ProblemSpec spec;
  spec.config = SmallConfig(8, 4, 3, Pooling::kMax);
  spec.config.softmax_scale = 0.5;
  spec.config.index_scale = 0.5;
  spec.lengths = {{2, 2}};
  Problem problem = GenerateProblem(spec);
  for (int64_t kv = 0; kv < 2; ++kv) {
    for (int64_t e = 0; e < 8; ++e) {
      const double key = (e % 3 == 0) ? 1.0 : (e % 3 == 1 ? 0.5 : -0.25);
      for (int64_t s = 0; s < 2; ++s) {
        SetElement(problem.k, s, kv, e, key);
        SetElement(problem.v, s, kv, e, s == 0 ? 0.125 * double(e + 1) : -3.0 + 0.5 * double(e));
        if (kv == 0) SetElement(problem.index_k, s, 0, e, key);
      }
    }
  }
  // Every query row (main and index): q . key = 1 * 1 + 2 * 0.5 + (-4) * (-0.25) = 3 exactly.
  const double query[8] = {1.0, 2.0, -4.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t e = 0; e < 8; ++e) {
      for (int64_t h = 0; h < 4; ++h) SetElement(problem.q, t, h, e, query[e]);
      for (int64_t r = 0; r < 2; ++r) SetElement(problem.index_q, t, r, e, query[e]);
    }
  }
  const TensorView q = ViewOf(problem.q), k = ViewOf(problem.k), v = ViewOf(problem.v);

  // Score by hand: 3 * 0.5 = 1.5; A = 0.5 * (1 + 1 + 1).
  double a = 0.0;
  const Real s = TrueScore(q, 1, 0, k, 1, 0, 0.5, &a);
  EXPECT_EQ(s.ToDouble(), 1.5);
  EXPECT_EQ(a, 1.5);

  // Two tied keys: lse = 1.5 + log 2 (decimal literal, correctly rounded by the compiler).
  std::vector<std::vector<double>> values(2, std::vector<double>(8));
  for (int64_t j = 0; j < 2; ++j) {
    for (int64_t e = 0; e < 8; ++e) values[j][e] = v.At(j, 0, e);
  }
  const SoftmaxTruth two = TrueSoftmax({s, s}, values);
  EXPECT_EQ(two.lse.ToDouble(), 2.19314718055994530941723212145817656807550013436025525412068);
  EXPECT_EQ(two.log_l, 0.693147180559945309417232121458176568075500134360255254120680);
  for (int64_t e = 0; e < 8; ++e) {
    const double expected = (values[0][e] + values[1][e]) / 2.0;  // dyadic: exact
    EXPECT_EQ(mpfr_cmp_d(two.out[e].get(), expected), 0) << "d=" << e;
    EXPECT_EQ(UlpError(expected, two.out[e]), 0.0);
    EXPECT_EQ(two.abs_terms[e], (std::fabs(values[0][e]) + std::fabs(values[1][e])) / 2.0);
  }
  // The ulp measure: one double step away from a truth in [1, 2) is exactly 1 ulp.
  ASSERT_EQ((values[0][0] + values[1][0]) / 2.0, -1.4375);
  EXPECT_EQ(UlpError(std::nextafter(-1.4375, -2.0), two.out[0]), 1.0);
  EXPECT_EQ(UlpError(std::nextafter(-1.4375, 0.0), two.out[0]), 1.0);

  // One key: out = v_0 and lse = s_0 exactly.
  const SoftmaxTruth one = TrueSoftmax({s}, {values[0]});
  EXPECT_EQ(mpfr_cmp_d(one.lse.get(), 1.5), 0);
  for (int64_t e = 0; e < 8; ++e) EXPECT_EQ(mpfr_cmp_d(one.out[e].get(), values[0][e]), 0);

  // The reference on the same case: exact where the arithmetic is exact, within the bounds elsewhere.
  Outputs outputs;
  ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem, &outputs).ok());
  for (int64_t h = 0; h < 4; ++h) {
    const int64_t kv = h / 2;
    EXPECT_EQ(outputs.lse[0 * 4 + h], 1.5) << "h=" << h;
    for (int64_t e = 0; e < 8; ++e) {
      EXPECT_EQ(outputs.out[(0 * 4 + h) * 8 + e], v.At(0, kv, e)) << "t=0 h=" << h << " d=" << e;
      EXPECT_EQ(outputs.out[(1 * 4 + h) * 8 + e], (v.At(0, kv, e) + v.At(1, kv, e)) / 2.0)
          << "t=1 h=" << h << " d=" << e;
    }
    EXPECT_LE(UlpError(outputs.lse[1 * 4 + h], two.lse), 2.0) << "h=" << h;
  }
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(outputs.index_lse[r * 2 + 0], 1.5) << "r=" << r;  // index_lse [Hidx, total_q]
    EXPECT_LE(UlpError(outputs.index_lse[r * 2 + 1], two.lse), 2.0) << "r=" << r;
  }
  Summary summary;
  CheckProblem("hand", problem, &summary);
  EXPECT_EQ(summary.out_cond.value, 0.0);
  EXPECT_EQ(summary.violations, 0);
}

void Report(const char* what, const Worst& worst, const char* unit, const char* other) {
  if (worst.value < 0.0) {
    std::printf("%s: no such values\n", what);
    return;
  }
  std::printf("%s: %.3g %s (%s: %.3g) at %s\n", what, worst.value, unit, other, worst.other, worst.where.c_str());
}

std::string Format(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

std::string Describe(const Worst& worst) {
  return worst.value < 0.0 ? "none" : Format(worst.value) + " at " + worst.where;
}

// Prints the worst values of `total` and records them as test properties named prefix + "worst_...".
void PrintSummary(const char* title, const std::string& prefix, const Summary& total) {
  const auto Property = [](const std::string& key, const std::string& value) {
    ::testing::Test::RecordProperty(key, value);
  };
  std::printf("-- %s: %lld (t, h) rows, %lld out values\n", title, (long long)total.rows, (long long)total.values);
  Report("worst out error", total.out_cond, "eps*sum|p v| conditioned", "raw ulp");
  Report("worst out error", total.out_ulp, "ulp", "conditioned eps*sum|p v|");
  Report("worst out error (sum|p v| <= 2|out|)", total.out_ulp_wc, "ulp", "conditioned eps*sum|p v|");
  Report("worst out error", total.out_ratio, "x its bound B_out", "conditioned eps*sum|p v|");
  for (const auto& [what, meters] : {std::pair<std::string, const LseMeters*>{"lse", &total.lse},
                                     std::pair<std::string, const LseMeters*>{"index_lse", &total.idx}}) {
    Report(("worst " + what + " error").c_str(), meters->ulp, "ulp", "conditioned eps*max(|lse|,sum p A)");
    Report(("worst " + what + " error (sum p A <= |lse|)").c_str(), meters->ulp_wc, "ulp",
           "conditioned eps*max(|lse|,sum p A)");
    Report(("worst " + what + " error").c_str(), meters->cond, "eps*max(|lse|,sum p A) conditioned", "raw ulp");
    Report(("worst " + what + " error").c_str(), meters->ratio, "x its bound B_lse", "raw ulp");
    Property(prefix + "worst_" + what + "_ulp", Describe(meters->ulp));
    Property(prefix + "worst_" + what + "_ulp_well_conditioned", Describe(meters->ulp_wc));
    Property(prefix + "worst_" + what + "_conditioned_eps", Describe(meters->cond));
  }
  Property(prefix + "worst_out_conditioned_eps", Describe(total.out_cond));
  Property(prefix + "worst_out_ulp", Describe(total.out_ulp));
  Property(prefix + "worst_out_ulp_well_conditioned", Describe(total.out_ulp_wc));
  Property(prefix + "worst_fraction_of_bound",
           Format(std::max({total.out_ratio.value, total.lse.ratio.value, total.idx.ratio.value})));
}

TEST(AttentionMpfr, ReferenceAgainstMpfr) {
  const auto start = std::chrono::steady_clock::now();
  struct Shape {
    const char* name;
    std::vector<std::pair<int32_t, int32_t>> lengths;
  };
  const std::vector<Shape> shapes = {
      {"prefill", {{40, 40}}},
      {"ragged", {{5, 23}, {17, 17}, {1, 9}, {12, 30}}},
      {"decode", {{1, 50}, {1, 33}, {3, 64}, {1, 7}}},
  };
  const Pooling poolings[] = {Pooling::kMax, Pooling::kLse, Pooling::kMean};
  const DType dtypes[] = {DType::kF64, DType::kBF16};

  Summary total, sharp;
  int variant = 0;
  for (const Shape& shape : shapes) {
    for (int dim : {8, 16, 64}) {
      for (Pooling pooling : poolings) {
        for (DType dtype : dtypes) {
          ProblemSpec spec;
          spec.config = SmallConfig(dim, 4 + variant % 5, 3 + variant % 3, pooling);
          spec.lengths = shape.lengths;
          spec.dtype = dtype;
          spec.seed = 1000 + variant;
          ++variant;
          const std::string name = std::string(shape.name) + "_D" + std::to_string(dim) + "_" +
                                   std::string(PoolingName(pooling)) + "_" + std::string(DTypeName(dtype));
          CheckProblem(name, GenerateProblem(spec), &total);
        }
      }
    }
  }
  // Sharper softmax (scale 1: scores spread over tens, many weights near exp(-40)), and an init block.
  for (DType dtype : dtypes) {
    ProblemSpec spec;
    spec.config = SmallConfig(64, 8, 4, Pooling::kMax);
    spec.config.softmax_scale = 1.0;
    spec.config.index_scale = 1.0;
    spec.config.init_blocks = 1;
    spec.lengths = {{5, 23}, {17, 17}, {1, 64}};
    spec.dtype = dtype;
    spec.seed = 2000 + int(dtype);
    const std::string name = "sharp_D64_init1_" + std::string(DTypeName(dtype));
    CheckProblem(name, GenerateProblem(spec), &sharp);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("checked %d generated problems against MPFR (%d bits) in %.2f s\n", variant + 2, int(kBits), seconds);
  PrintSummary("default scales", "", total);
  PrintSummary("sharp (scale 1)", "sharp_", sharp);
  EXPECT_EQ(total.violations + sharp.violations, 0);
}

}  // namespace
}  // namespace msa
