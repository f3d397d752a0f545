// The training reference (SPEC section 8) from independent routes: finite differences of the FP64 forward,
// Richardson-extrapolated, on every gradient element of the tiny cases; a dense backward written here from the
// formulas (another summation order) when top_k covers every block; and the properties: dv linear in dout, kl_loss
// >= 0 and zero (with zero gradients) when the index scores are the log of the teacher's mean plus a constant, the
// gradients of a key outside every selection exactly 0, the same bits for 1, 2 and 7 threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/problem.h"
#include "reference/reference.h"

namespace msa {
namespace {

// The reference's own selection of the problem: every function below is evaluated on it, held fixed.
std::vector<int32_t> SelectionOf(const Problem& problem) {
  Outputs outputs;
  EXPECT_TRUE(RunReference(problem, &outputs).ok());
  return outputs.topk_indices;
}

// L = sum(dout * out) + sum(dlse * lse): the function whose gradients Backward returns.
double MainLoss(const Problem& problem, const std::vector<int32_t>& selection) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q();
  std::vector<double> out(total_q * c.num_q_heads * c.value_dim), lse(total_q * c.num_q_heads);
  EXPECT_TRUE(
      reference::AttendSelected(c, problem.attention_inputs(), {selection.data()}, {out.data(), lse.data()}, {}).ok());
  const GradientInputs g = problem.gradient_inputs();
  double loss = 0;
  for (size_t i = 0; i < out.size(); ++i) loss += LoadAsDouble(g.dout.data, g.dout.dtype, int64_t(i)) * out[i];
  if (g.dlse.data != nullptr) {
    for (size_t i = 0; i < lse.size(); ++i) loss += LoadAsDouble(g.dlse.data, g.dlse.dtype, int64_t(i)) * lse[i];
  }
  return loss;
}

struct KlResult {
  double loss = 0;
  std::vector<double> dqi, dki, teacher_lse, indexer_lse;
};

KlResult Kl(const Problem& problem, const std::vector<int32_t>& selection) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), total_k = problem.batch().total_k();
  KlResult r;
  r.dqi.resize(total_q * c.num_kv_heads * c.index_head_dim);
  r.dki.resize(total_k * c.index_head_dim);
  r.teacher_lse.resize(total_q * c.num_q_heads);
  r.indexer_lse.resize(c.num_kv_heads * total_q);
  EXPECT_TRUE(IndexerKl(*FindBackend("reference"), c, problem.index_inputs(), problem.attention_inputs(),
                        {selection.data()},
                        {&r.loss, r.dqi.data(), r.dki.data(), r.teacher_lse.data(), r.indexer_lse.data()})
                  .ok());
  return r;
}

// The derivative of f at an element of `tensor` by central differences at h, h/2, h/4, Richardson-extrapolated twice
// (error O(h^6)): the element is moved and restored.
double FiniteDifference(SafetensorsTensor& tensor, int64_t element, const std::function<double()>& f) {
  const double x = LoadAsDouble(tensor.bytes.data(), tensor.dtype, element);
  const auto central = [&](double h) {
    StoreElement(tensor, element, x + h);
    const double up = f();
    StoreElement(tensor, element, x - h);
    const double down = f();
    StoreElement(tensor, element, x);
    return (up - down) / (2 * h);
  };
  const double h = 1.0 / 64;
  const double d1 = central(h), d2 = central(h / 2), d4 = central(h / 4);
  const double r1 = (4 * d2 - d1) / 3, r2 = (4 * d4 - d2) / 3;
  return (16 * r2 - r1) / 15;
}

double MaxAbs(const std::vector<double>& values) {
  double m = 0;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

// Every element of `tensor` against its gradient: |fd - grad| <= 1e-9 * max|grad|.
void ExpectGradientMatchesFiniteDifferences(const std::string& name, SafetensorsTensor& tensor,
                                            const std::vector<double>& gradient, const std::function<double()>& f) {
  ASSERT_EQ(int64_t(gradient.size()), tensor.num_elements());
  const double scale = MaxAbs(gradient);
  ASSERT_GT(scale, 0) << name;
  double worst = 0;
  for (int64_t e = 0; e < tensor.num_elements(); ++e) {
    const double fd = FiniteDifference(tensor, e, f);
    worst = std::max(worst, std::abs(fd - gradient[e]) / scale);
    EXPECT_LE(std::abs(fd - gradient[e]), 1e-9 * scale)
        << name << "[" << e << "]: finite differences " << fd << ", reference " << gradient[e];
  }
  std::printf("  %-4s %3lld elements, worst |fd - grad| / max|grad| = %.2e\n", name.c_str(),
              (long long)tensor.num_elements(), worst);
}

class TinyTraining : public testing::TestWithParam<TestCase> {};

TEST_P(TinyTraining, BackwardMatchesFiniteDifferencesOfTheForward) {
  Problem problem = GenerateProblem(GetParam().spec);
  const std::vector<int32_t> selection = SelectionOf(problem);
  Outputs outputs;
  ASSERT_TRUE(RunReference(problem, &outputs).ok());
  const auto loss = [&] { return MainLoss(problem, selection); };
  ExpectGradientMatchesFiniteDifferences("dq", problem.q, outputs.dq, loss);
  ExpectGradientMatchesFiniteDifferences("dk", problem.k, outputs.dk, loss);
  ExpectGradientMatchesFiniteDifferences("dv", problem.v, outputs.dv, loss);
}

TEST_P(TinyTraining, KlGradientsMatchFiniteDifferencesOfTheLoss) {
  Problem problem = GenerateProblem(GetParam().spec);
  const std::vector<int32_t> selection = SelectionOf(problem);
  const KlResult kl = Kl(problem, selection);
  const auto loss = [&] { return Kl(problem, selection).loss; };
  ExpectGradientMatchesFiniteDifferences("dqi", problem.index_q, kl.dqi, loss);
  ExpectGradientMatchesFiniteDifferences("dki", problem.index_k, kl.dki, loss);
}

INSTANTIATE_TEST_SUITE_P(Cases, TinyTraining, testing::ValuesIn(CasesTagged(kTagTrainingTiny)),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });

// With top_k covering every block, the backward is dense causal GQA's: here its formulas in another order (Delta as
// sum_j P_j dP_j, libm's exp, plain loops), within 1e-12 of the largest gradient.
TEST(TrainingDense, BackwardEqualsDenseCausalAttentionsBackward) {
  TestCase test_case = CasesTagged(kTagTraining).front();
  ProblemSpec& spec = test_case.spec;
  spec.config.top_k = 8;  // 37 keys of blocks of 8: 5 blocks
  spec.lengths = {{37, 37}, {6, 19}};
  const Problem problem = GenerateProblem(spec);
  Outputs outputs;
  ASSERT_TRUE(RunReference(problem, &outputs).ok());
  const Config& c = problem.config;
  const int64_t hq = c.num_q_heads, hkv = c.num_kv_heads, d = c.head_dim, dv = c.value_dim, g = c.group_size();
  const std::vector<double> q = reference::Widen(ViewOf(problem.q)), k = reference::Widen(ViewOf(problem.k)),
                            v = reference::Widen(ViewOf(problem.v)), dout = reference::Widen(ViewOf(*problem.dout));
  const GradientInputs gradients = problem.gradient_inputs();
  const std::vector<double> dlse = reference::Widen(gradients.dlse);
  std::vector<double> dq(outputs.dq.size(), 0.0), dk(outputs.dk.size(), 0.0), dvv(outputs.dv.size(), 0.0);
  const double scale = c.SoftmaxScale();
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t t = 0; t < int64_t(places.size()); ++t) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t r = h / g, n = places[t].position + 1, k0 = places[t].key_begin;
      std::vector<double> s(n), p(n), dp(n);
      double m = -INFINITY, l = 0, delta = 0;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[(t * hq + h) * d + e] * k[((k0 + j) * hkv + r) * d + e];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j < n; ++j) l += std::exp(s[j] - m);
      for (int64_t j = 0; j < n; ++j) {
        p[j] = std::exp(s[j] - m) / l;
        dp[j] = 0;
        for (int64_t e = 0; e < dv; ++e) dp[j] += dout[(t * hq + h) * dv + e] * v[((k0 + j) * hkv + r) * dv + e];
        delta += p[j] * dp[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        const double ds = p[j] * (dp[j] - delta + dlse[t * hq + h]);
        for (int64_t e = 0; e < d; ++e) {
          dq[(t * hq + h) * d + e] += scale * ds * k[((k0 + j) * hkv + r) * d + e];
          dk[((k0 + j) * hkv + r) * d + e] += scale * ds * q[(t * hq + h) * d + e];
        }
        for (int64_t e = 0; e < dv; ++e) dvv[((k0 + j) * hkv + r) * dv + e] += p[j] * dout[(t * hq + h) * dv + e];
      }
    }
  }
  for (const auto& [name, got, want] :
       {std::tuple{"dq", &outputs.dq, &dq}, {"dk", &outputs.dk, &dk}, {"dv", &outputs.dv, &dvv}}) {
    double largest = 0;
    for (double x : *want) largest = std::max(largest, std::abs(x));
    for (size_t i = 0; i < want->size(); ++i) {
      ASSERT_LE(std::abs((*got)[i] - (*want)[i]), 1e-12 * largest) << name << "[" << i << "]";
    }
  }
}

// The indexer's scores set to the log of the teacher's mean distribution (plus a constant): the student equals the
// teacher, so kl_loss and every gradient vanish (to rounding). One-hot index keys (Di = total_k) and index_scale 1
// make each score exactly the index query's entry.
TEST(TrainingKl, VanishesWhenTheStudentIsTheTeacher) {
  Problem problem = GenerateProblem(CasesTagged(kTagTrainingTiny).front().spec);
  const std::vector<int32_t> selection = SelectionOf(problem);
  const KlResult first = Kl(problem, selection);  // the teacher's lse
  Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), total_k = problem.batch().total_k();
  const int64_t hq = c.num_q_heads, hkv = c.num_kv_heads, d = c.head_dim, g = c.group_size();
  const std::vector<double> q = reference::Widen(ViewOf(problem.q)), k = reference::Widen(ViewOf(problem.k));
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  c.index_head_dim = int(total_k);
  c.index_scale = 1.0;
  SafetensorsTensor index_q = problem.index_q, index_k = problem.index_k;
  index_q.shape = {total_q, hkv, total_k};
  index_k.shape = {total_k, 1, total_k};
  index_q.bytes.assign(total_q * hkv * total_k * DTypeSize(index_q.dtype), 0);
  index_k.bytes.assign(total_k * total_k * DTypeSize(index_k.dtype), 0);
  for (int64_t s = 0; s < total_k; ++s) StoreElement(index_k, s * total_k + s, 1.0);
  const double constant = 0.75;
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < hkv; ++r) {
      for (int64_t s = places[t].key_begin; s <= places[t].key_begin + places[t].position; ++s) {
        double pbar = 0;  // the teacher's mean probability of key s (zero weight outside the key set is harmless)
        for (int64_t h = r * g; h < (r + 1) * g; ++h) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q[(t * hq + h) * d + e] * k[(s * hkv + r) * d + e];
          pbar += std::exp(dot * c.SoftmaxScale() - first.teacher_lse[t * hq + h]) / double(g);
        }
        StoreElement(index_q, (t * hkv + r) * total_k + s, std::log(pbar) + constant);
      }
    }
  }
  problem.index_q = index_q;
  problem.index_k = index_k;
  const KlResult kl = Kl(problem, selection);
  EXPECT_LE(std::abs(kl.loss), 1e-14) << kl.loss;
  EXPECT_LE(MaxAbs(kl.dqi), 1e-14);
  EXPECT_LE(MaxAbs(kl.dki), 1e-14);
  EXPECT_GT(first.loss, 1e-3);  // the random indexer was far from the teacher
}

// ---- properties on the training suite ----

class Training : public testing::TestWithParam<TestCase> {};

TEST_P(Training, DvIsLinearInDout) {
  Problem problem = GenerateProblem(GetParam().spec);
  Outputs base, doubled;
  ASSERT_TRUE(RunReference(problem, &base).ok());
  const TensorView dout = ViewOf(*problem.dout);
  for (int64_t e = 0; e < problem.dout->num_elements(); ++e) {
    StoreElement(*problem.dout, e, 2 * LoadAsDouble(dout.data, dout.dtype, e));  // exact in every dtype
  }
  problem.dlse.reset();  // dlse adds to dS, not to dv
  ASSERT_TRUE(RunReference(problem, &doubled).ok());
  for (size_t i = 0; i < base.dv.size(); ++i) ASSERT_EQ(doubled.dv[i], 2 * base.dv[i]) << i;
}

TEST_P(Training, KlLossIsNonNegativeAndKeysOutsideEverySelectionHaveZeroGradients) {
  const Problem problem = GenerateProblem(GetParam().spec);
  Outputs outputs;
  ASSERT_TRUE(RunReference(problem, &outputs).ok());
  EXPECT_GE(outputs.kl_loss[0], 0.0);
  const Config& c = problem.config;
  const Batch batch = problem.batch();
  const int64_t total_q = batch.total_q();
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  int64_t unselected = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    for (int64_t s = batch.cu_seqlens_k[b]; s < batch.cu_seqlens_k[b + 1]; ++s) {
      bool any_group = false;
      for (int64_t r = 0; r < c.num_kv_heads; ++r) {
        bool selected = false;  // by a query of this sequence that sees the key
        for (int64_t t = batch.cu_seqlens_q[b]; t < batch.cu_seqlens_q[b + 1]; ++t) {
          const int64_t key = s - batch.cu_seqlens_k[b];
          for (int64_t slot = 0; slot < c.top_k; ++slot) {
            selected |= outputs.topk_indices[(r * total_q + t) * c.top_k + slot] == key / c.block_size &&
                        key <= places[t].position;
          }
        }
        any_group |= selected;
        if (selected) continue;
        ++unselected;
        for (int64_t e = 0; e < c.head_dim; ++e) ASSERT_EQ(outputs.dk[(s * c.num_kv_heads + r) * c.head_dim + e], 0.0);
        for (int64_t e = 0; e < c.value_dim; ++e)
          ASSERT_EQ(outputs.dv[(s * c.num_kv_heads + r) * c.value_dim + e], 0.0);
      }
      if (!any_group) {
        for (int64_t e = 0; e < c.index_head_dim; ++e) ASSERT_EQ(outputs.dki[s * c.index_head_dim + e], 0.0);
      }
    }
  }
  std::printf("  %lld (key, group) pairs outside every selection\n", (long long)unselected);
}

TEST_P(Training, TheSameBitsForOneTwoAndSevenThreads) {
  const Problem problem = GenerateProblem(GetParam().spec);
  const int default_threads = omp_get_max_threads();
  Outputs first;
  for (int threads : {1, 2, 7}) {
    omp_set_num_threads(threads);
    Outputs outputs;
    ASSERT_TRUE(RunReference(problem, &outputs).ok());
    if (threads == 1) {
      first = outputs;
      continue;
    }
    for (const auto member :
         {&Outputs::dq, &Outputs::dk, &Outputs::dv, &Outputs::dqi, &Outputs::dki, &Outputs::kl_loss}) {
      ASSERT_EQ(0, std::memcmp((outputs.*member).data(), (first.*member).data(), (first.*member).size() * 8));
    }
  }
  omp_set_num_threads(default_threads);
}

INSTANTIATE_TEST_SUITE_P(Cases, Training, testing::ValuesIn(CasesTagged(kTagTraining | kTagTrainingTiny)),
                         [](const testing::TestParamInfo<TestCase>& info) { return info.param.name; });

}  // namespace
}  // namespace msa
