// How far are the FP64 training functions (SPEC section 8) from the true values? dq, dk, dv, dqi, dki and kl_loss of
// the reference on the tiny training cases are compared with the same functions evaluated in MPFR at 256 bits from
// the same double inputs on the same selection (the formulas summed plainly, not in the canonical order). Each
// tensor's worst error is printed in ulps of the true value and conditioned, relative to eps times the sum of the
// absolute values of the terms the true value sums (a gradient can cancel to near zero, where ulps are unbounded
// for any floating-point algorithm). The conditioned error is asserted below a first-order bound: each term carries
// the roundings of its dot products (about D / 8 + 4 per CanonicalDot), of exp, of the softmax sums over at most n
// keys, and the sum itself adds at most the number of its terms, so 4 * (n + D + 16) leaves room for constants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/problem.h"
#include "reference/reference.h"
#include "tests/mpfr_real.h"

namespace msa {
namespace {

constexpr double kEps = 0x1p-52;

Real Add(const Real& a, const Real& b) {
  Real r;
  mpfr_add(r.get(), a.get(), b.get(), MPFR_RNDN);
  return r;
}
Real Sub(const Real& a, const Real& b) {
  Real r;
  mpfr_sub(r.get(), a.get(), b.get(), MPFR_RNDN);
  return r;
}
Real Mul(const Real& a, const Real& b) {
  Real r;
  mpfr_mul(r.get(), a.get(), b.get(), MPFR_RNDN);
  return r;
}
Real Div(const Real& a, double b) {
  Real r;
  mpfr_div_d(r.get(), a.get(), b, MPFR_RNDN);
  return r;
}
Real Exp(const Real& a) {
  Real r;
  mpfr_exp(r.get(), a.get(), MPFR_RNDN);
  return r;
}
Real Log(const Real& a) {
  Real r;
  mpfr_log(r.get(), a.get(), MPFR_RNDN);
  return r;
}
double Abs(const Real& a) { return std::abs(a.ToDouble()); }

// A true tensor and, per element, the sum of the sizes of the terms it adds up.
struct Truth {
  std::vector<Real> value;
  std::vector<double> terms;
  explicit Truth(size_t n) : value(n), terms(n, 0.0) {}
  // Adds `term`, whose own computation involves magnitudes up to `size` (|term| when it is a plain product).
  void Add(size_t i, const Real& term, double size) {
    value[i] = msa::Add(value[i], term);
    terms[i] += size;
  }
};

struct Worst {
  double ulps = 0, conditioned = 0;
};

Worst Compare(const std::string& name, const std::vector<double>& got, const Truth& truth, double bound) {
  Worst worst;
  for (size_t i = 0; i < got.size(); ++i) {
    worst.ulps = std::max(worst.ulps, UlpError(got[i], truth.value[i]));
    const double conditioned = truth.terms[i] > 0 ? AbsError(got[i], truth.value[i]) / (kEps * truth.terms[i]) : 0;
    worst.conditioned = std::max(worst.conditioned, conditioned);
    EXPECT_LE(conditioned, bound) << name << "[" << i << "]: got " << got[i] << ", true " << truth.value[i].ToDouble();
  }
  std::printf("  %-7s worst %10.3g ulps, %6.3g eps * sum|terms| (bound %g)\n", name.c_str(), worst.ulps,
              worst.conditioned, bound);
  return worst;
}

class TrainingAgainstMpfr : public testing::TestWithParam<TestCase> {};

TEST_P(TrainingAgainstMpfr, EveryGradientWithinItsBound) {
  const Problem problem = GenerateProblem(GetParam().spec);
  Outputs reference;
  ASSERT_TRUE(RunReference(problem, &reference).ok());
  const Config& c = problem.config;
  const Batch batch = problem.batch();
  const int64_t total_q = batch.total_q(), total_k = batch.total_k(), hq = c.num_q_heads, hkv = c.num_kv_heads;
  const int64_t d = c.head_dim, dv = c.value_dim, di = c.index_head_dim, g = c.group_size();
  const TensorView q = ViewOf(problem.q), k = ViewOf(problem.k), v = ViewOf(problem.v), iq = ViewOf(problem.index_q),
                   ik = ViewOf(problem.index_k);
  const GradientInputs gradients = problem.gradient_inputs();
  const auto dout = [&](int64_t t, int64_t h, int64_t e) { return gradients.dout.At(t, h, e); };
  const auto dlse = [&](int64_t t, int64_t h) { return gradients.dlse.data ? gradients.dlse.At(t, h, 0) : 0.0; };
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  const auto dot = [](const TensorView& a, int64_t ra, int64_t ha, const TensorView& b, int64_t rb, int64_t hb) {
    Real sum;
    for (int64_t e = 0; e < a.dim; ++e) sum = Add(sum, Mul(Real(a.At(ra, ha, e)), Real(b.At(rb, hb, e))));
    return sum;
  };
  const double rows = double(hkv * std::max<int64_t>(total_q, 1));
  Truth dq(reference.dq.size()), dk(reference.dk.size()), dvv(reference.dv.size()), dqi(reference.dqi.size()),
      dki(reference.dki.size()), kl(1);
  int64_t most_keys = 1;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < hkv; ++r) {
      std::vector<int64_t> keys;  // the key set's key rows
      const int32_t* row = &reference.topk_indices[(r * total_q + t) * c.top_k];
      for (int64_t s = 0; s <= places[t].position; ++s) {
        if (std::find(row, row + c.top_k, int32_t(s / c.block_size)) != row + c.top_k) {
          keys.push_back(places[t].key_begin + s);
        }
      }
      most_keys = std::max<int64_t>(most_keys, int64_t(keys.size()));
      std::vector<Real> pbar(keys.size());
      for (int64_t h = r * g; h < (r + 1) * g; ++h) {
        std::vector<Real> score(keys.size()), p(keys.size()), dp(keys.size());
        Real sum;
        for (size_t j = 0; j < keys.size(); ++j) score[j] = Mul(dot(q, t, h, k, keys[j], r), Real(c.SoftmaxScale()));
        for (size_t j = 0; j < keys.size(); ++j) sum = Add(sum, Exp(score[j]));
        const Real lse = Log(sum);
        std::vector<Real> out(dv);
        for (size_t j = 0; j < keys.size(); ++j) {
          p[j] = Exp(Sub(score[j], lse));
          pbar[j] = Add(pbar[j], Div(p[j], double(g)));
          for (int64_t e = 0; e < dv; ++e) out[e] = Add(out[e], Mul(p[j], Real(v.At(keys[j], r, e))));
          for (int64_t e = 0; e < dv; ++e) dp[j] = Add(dp[j], Mul(Real(dout(t, h, e)), Real(v.At(keys[j], r, e))));
        }
        Real delta;
        for (int64_t e = 0; e < dv; ++e) delta = Add(delta, Mul(Real(dout(t, h, e)), out[e]));
        for (size_t j = 0; j < keys.size(); ++j) {
          const Real ds = Mul(p[j], Add(Sub(dp[j], delta), Real(dlse(t, h))));
          // dS_j's own magnitudes: P_j (|dP_j| + |Delta| + |dlse|), times the scale.
          const double ds_size = c.SoftmaxScale() * Abs(p[j]) * (Abs(dp[j]) + Abs(delta) + std::abs(dlse(t, h)));
          const Real scaled = Mul(Real(c.SoftmaxScale()), ds);
          for (int64_t e = 0; e < d; ++e) {
            const double key = k.At(keys[j], r, e), query = q.At(t, h, e);
            dq.Add((t * hq + h) * d + e, Mul(scaled, Real(key)), ds_size * std::abs(key));
            dk.Add((keys[j] * hkv + r) * d + e, Mul(scaled, Real(query)), ds_size * std::abs(query));
          }
          for (int64_t e = 0; e < dv; ++e) {
            const Real term = Mul(p[j], Real(dout(t, h, e)));
            dvv.Add((keys[j] * hkv + r) * dv + e, term, Abs(term));
          }
        }
      }
      // The indexer: rho over the same keys, g = (rho - pbar) / N.
      std::vector<Real> x(keys.size());
      Real sum;
      for (size_t j = 0; j < keys.size(); ++j) x[j] = Mul(dot(iq, t, r, ik, keys[j], 0), Real(c.IndexScale()));
      for (size_t j = 0; j < keys.size(); ++j) sum = Add(sum, Exp(x[j]));
      const Real ilse = Log(sum);
      for (size_t j = 0; j < keys.size(); ++j) {
        const Real rho = Exp(Sub(x[j], ilse));
        const Real scaled = Mul(Real(c.IndexScale()), Div(Sub(rho, pbar[j]), rows));
        const double g_size = c.IndexScale() * (Abs(rho) + Abs(pbar[j])) / rows;  // g's own magnitudes
        for (int64_t e = 0; e < di; ++e) {
          const double key = ik.At(keys[j], 0, e), query = iq.At(t, r, e);
          dqi.Add((t * hkv + r) * di + e, Mul(scaled, Real(key)), g_size * std::abs(key));
          dki.Add(keys[j] * di + e, Mul(scaled, Real(query)), g_size * std::abs(query));
        }
        if (pbar[j].ToDouble() != 0) {
          const Real log_pbar = Log(pbar[j]), log_rho = Sub(x[j], ilse);
          kl.Add(0, Div(Mul(pbar[j], Sub(log_pbar, log_rho)), rows),
                 Abs(pbar[j]) * (Abs(log_pbar) + Abs(log_rho)) / rows);
        }
      }
    }
  }
  const double bound = 4.0 * double(most_keys + std::max({d, dv, di}) + 16);
  std::printf("%s (%lld keys at most in a row):\n", GetParam().name.c_str(), (long long)most_keys);
  Compare("dq", reference.dq, dq, bound);
  Compare("dk", reference.dk, dk, bound);
  Compare("dv", reference.dv, dvv, bound);
  Compare("dqi", reference.dqi, dqi, bound);
  Compare("dki", reference.dki, dki, bound);
  Compare("kl_loss", reference.kl_loss, kl, bound);
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainingAgainstMpfr, testing::ValuesIn(CasesTagged(kTagTrainingTiny)),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });

}  // namespace
}  // namespace msa
