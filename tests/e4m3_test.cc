// The fp8 index mode (Config::index_format == kE4M3): RoundToE4M3 against a brute-force definition kept here
// (decode all 256 E4M3 codes from the format's fields, take the nearest, ties to the even code), and msa::Select
// in that mode against the native mode on inputs this test rounded itself.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "msa/msa.h"
#include "oracle/cases.h"
#include "oracle/problem.h"
#include "oracle/random.h"

namespace msa {
namespace {

// The value of a non-negative E4M3FN code (bias 7, 3 fraction bits; 0x7f is NaN): the definition.
double DecodeE4M3(int code) {
  const int exponent_field = code >> 3, fraction = code & 7;
  if (exponent_field == 0) return std::ldexp(double(fraction), -9);  // subnormals: fraction * 2^-6 * 2^-3
  return std::ldexp(double(8 + fraction), exponent_field - 7 - 3);
}

// The nearest E4M3 value to x (|x| <= 448), ties to the even code, by comparing with every finite code.
double NearestE4M3(double x) {
  const double magnitude = std::fabs(x);
  int best = 0;
  for (int code = 1; code < 0x7f; ++code) {
    const double gap = std::fabs(DecodeE4M3(code) - magnitude), best_gap = std::fabs(DecodeE4M3(best) - magnitude);
    if (gap < best_gap || (gap == best_gap && code % 2 == 0)) best = code;
  }
  return std::copysign(DecodeE4M3(best), x);
}

void ExpectSameAsDefinition(double x) {
  const double got = RoundToE4M3(x), want = NearestE4M3(x);
  EXPECT_TRUE(got == want && std::signbit(got) == std::signbit(want))
      << std::hexfloat << "RoundToE4M3(" << x << ") = " << got << ", definition " << want;
}

TEST(E4M3, TheCodesSpanTheFormat) {  // the definition itself: 2^-9 .. 448, 126 finite positive values
  EXPECT_EQ(DecodeE4M3(1), std::ldexp(1.0, -9));
  EXPECT_EQ(DecodeE4M3(0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(DecodeE4M3(0x7e), 448.0);
  EXPECT_EQ(DecodeE4M3(0x38), 1.0);
}

TEST(E4M3, RoundingMatchesTheDefinitionOnEveryValueAndMidpoint) {
  for (int code = 0; code < 0x7e; ++code) {
    const double value = DecodeE4M3(code), midpoint = 0.5 * (value + DecodeE4M3(code + 1));
    for (double x : {value, midpoint}) {
      for (double y : {x, std::nextafter(x, 0.0), std::nextafter(x, 1e9)}) {
        ExpectSameAsDefinition(y);
        ExpectSameAsDefinition(-y);
      }
    }
  }
  ExpectSameAsDefinition(448.0);
  ExpectSameAsDefinition(-448.0);
}

TEST(E4M3, RoundingKeepsTheSignOfZeroAndFlushesBelowHalfTheSmallestStep) {
  EXPECT_TRUE(std::signbit(RoundToE4M3(-0.0)));
  EXPECT_EQ(RoundToE4M3(std::ldexp(1.0, -10)), 0.0);  // the midpoint between 0 and 2^-9: ties to even (0)
  EXPECT_EQ(RoundToE4M3(std::nextafter(std::ldexp(1.0, -10), 1.0)), std::ldexp(1.0, -9));
  EXPECT_EQ(RoundToE4M3(std::numeric_limits<double>::denorm_min()), 0.0);
  EXPECT_TRUE(std::signbit(RoundToE4M3(-1e-300)));
}

TEST(E4M3, RoundingMatchesTheDefinitionOnRandomDoubles) {
  RandomStream random(2026, 0);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(random.Uniform() * 2 - 1, int(random.Below(21)) - 11);  // |x| < 2^-11 ... 2^9
    if (std::fabs(x) <= kE4M3Max) ExpectSameAsDefinition(x);
  }
}

TEST(E4M3, TheFormatNamesRoundTrip) {
  IndexFormat format = IndexFormat::kNative;
  ASSERT_TRUE(ParseIndexFormat("e4m3", &format));
  EXPECT_EQ(format, IndexFormat::kE4M3);
  EXPECT_EQ(IndexFormatName(format), "e4m3");
  EXPECT_FALSE(ParseIndexFormat("fp8", &format));
  Config config;
  EXPECT_EQ(ConfigToJson(config).find("index_format"), std::string::npos);  // the default keeps v1's keys
  config.index_format = IndexFormat::kE4M3;
  EXPECT_NE(ConfigToJson(config).find("\"index_format\":\"e4m3\""), std::string::npos);
}

ProblemSpec SmallSpec(DType dtype) {
  return MakeSpec(4, 2, 16, 8, 4, 0, Pooling::kMax, {{40, 40}, {1, 77}, {5, 30}}, dtype, 31);
}

// Every index input replaced by NearestE4M3 of its value (the test's own rounding).
Problem WithIndexInputsRounded(Problem problem) {
  for (SafetensorsTensor* tensor : {&problem.index_q, &problem.index_k}) {
    const TensorView view = ViewOf(*tensor);
    for (int64_t row = 0; row < view.rows; ++row)
      for (int64_t head = 0; head < view.heads; ++head)
        for (int64_t d = 0; d < view.dim; ++d) SetElement(*tensor, row, head, d, NearestE4M3(view.At(row, head, d)));
  }
  return problem;
}

// Select in the e4m3 mode gives exactly what the native mode gives on the rounded inputs, on every backend in
// exact precision (the reference defines the function; the others equal it bit for bit).
TEST(E4M3, SelectOnE4M3MatchesSelectOnInputsRoundedByTheTest) {
  for (DType dtype : {DType::kF64, DType::kBF16}) {
    ProblemSpec spec = SmallSpec(dtype);
    spec.query_scale = 3.0;  // spreads index_q over several binades, so the rounding changes many scores
    const Problem native = GenerateProblem(spec);
    Problem e4m3 = native;
    e4m3.config.index_format = IndexFormat::kE4M3;
    const Problem rounded = WithIndexInputsRounded(native);
    for (const Backend& backend : AllBackends()) {
      if (!backend.is_available() || !backend.supports(native.config).ok()) continue;
      Outputs got, want;
      ASSERT_TRUE(RunBackend(backend, e4m3, &got).ok()) << backend.name;
      ASSERT_TRUE(RunBackend(backend, rounded, &want).ok()) << backend.name;
      EXPECT_EQ(got.topk_indices, want.topk_indices) << backend.name;
      EXPECT_EQ(got.block_scores, want.block_scores) << backend.name;
      EXPECT_EQ(got.index_lse, want.index_lse) << backend.name;
      Outputs unrounded;
      ASSERT_TRUE(RunBackend(backend, native, &unrounded).ok()) << backend.name;
      EXPECT_NE(got.block_scores, unrounded.block_scores) << backend.name << ": the rounding changed nothing";
    }
  }
}

TEST(E4M3, SelectRefusesValuesOutsideTheFormatNamingThem) {
  Problem problem = GenerateProblem(SmallSpec(DType::kF64));
  problem.config.index_format = IndexFormat::kE4M3;
  const Backend& reference = *FindBackend("reference");
  // Beyond the format, and (refused by the shared validation already) not finite.
  for (double bad : {448.5, -1000.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    Problem with_bad = problem;
    SetElement(with_bad.index_k, 3, 0, 5, bad);
    Outputs outputs;
    const Status status = RunBackend(reference, with_bad, &outputs);
    ASSERT_FALSE(status.ok()) << bad;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("index_k[3, 0, 5] = "), std::string::npos) << status.message();
    if (std::isfinite(bad)) {
      EXPECT_NE(status.message().find("[-448, 448]"), std::string::npos) << status.message();
    }
  }
  SetElement(problem.index_q, 0, 1, 2, 448.0);  // the largest value is taken
  Outputs outputs;
  EXPECT_TRUE(RunBackend(reference, problem, &outputs).ok());
}

}  // namespace
}  // namespace msa
