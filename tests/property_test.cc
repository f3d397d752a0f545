// SPEC section 5's properties (oracle/properties.h) on random valid problems (tests/arbitrary.h), for every
// available backend at every precision it supports. Failures print RC_PARAMS to reproduce.
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "oracle/properties.h"
#include "tests/arbitrary.h"

namespace msa {
namespace {

// Runs `check` for every available backend and supported precision; fails with the first broken property.
void ForEveryBackend(const ProblemSpec& spec, const std::function<Status(const Backend&, const ProblemSpec&)>& check) {
  for (const Backend& backend : AllBackends()) {
    if (!backend.is_available()) continue;
    for (Precision precision : SupportedPrecisions(backend, spec.config)) {
      ProblemSpec at = spec;
      at.config.precision = precision;
      const Status status = check(backend, at);
      if (!status.ok()) {
        RC_FAIL(std::string(backend.name) + " at " + std::string(PrecisionName(precision)) + ": " + status.message());
      }
    }
  }
}

RC_GTEST_PROP(Property, SelectionFollowsTheContract, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckSelectionContract);
}

RC_GTEST_PROP(Property, EqualsDenseAttentionWhenTopKCoversEveryBlock, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckDenseEquivalence);
}

RC_GTEST_PROP(Property, FutureKeysChangeNothing, (const ProblemSpec& spec, uint64_t seed)) {
  ForEveryBackend(spec, [seed](const Backend& b, const ProblemSpec& s) { return CheckCausality(b, s, seed); });
}

RC_GTEST_PROP(Property, HeadsOfAGroupShareOneSelection, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckGqaSharing);
}

RC_GTEST_PROP(Property, GroupsSelectIndependently, (ProblemSpec spec, uint64_t seed)) {
  const int group_size = spec.config.group_size();
  spec.config.num_kv_heads += 1;  // at least two groups
  spec.config.num_q_heads = spec.config.num_kv_heads * group_size;
  ForEveryBackend(spec, [seed](const Backend& b, const ProblemSpec& s) { return CheckGroupIndependence(b, s, seed); });
}

RC_GTEST_PROP(Property, AttentionIgnoresTheOrderOfSelectedBlocks, (const ProblemSpec& spec, uint64_t seed)) {
  ForEveryBackend(spec,
                  [seed](const Backend& b, const ProblemSpec& s) { return CheckBlockOrderInvariance(b, s, seed); });
}

RC_GTEST_PROP(Property, SelectionIgnoresAConstantShiftOfTheScores, (const ProblemSpec& spec, uint64_t seed)) {
  const double shift = double(*rc::gen::inRange(-5, 6));
  ForEveryBackend(spec,
                  [=](const Backend& b, const ProblemSpec& s) { return CheckShiftInvariance(b, s, seed, shift); });
}

RC_GTEST_PROP(Property, ScalingVByTwoScalesTheOutputExactly, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckScalingV);
}

RC_GTEST_PROP(Property, OutputIsLinearInV, (const ProblemSpec& spec, uint64_t seed)) {
  ForEveryBackend(spec, [seed](const Backend& b, const ProblemSpec& s) { return CheckLinearityInV(b, s, seed); });
}

RC_GTEST_PROP(Property, ChunkedPrefillEqualsTheSameRowsOfAFullPrefill, (const ProblemSpec& spec)) {
  const int32_t k_len = *rc::gen::inRange(1, 60), q_len = *rc::gen::inRange(1, k_len + 1);
  ForEveryBackend(spec, [=](const Backend& b, const ProblemSpec& s) { return CheckSuffixRule(b, s, k_len, q_len); });
}

RC_GTEST_PROP(Property, SoftmaxRowsSumToOne, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckSoftmaxRowsSumToOne);
}

RC_GTEST_PROP(Property, MaxPoolingSelectsEveryBlockWithATokenAboveTheThreshold, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckMaxDominance);
}

RC_GTEST_PROP(Property, PoisonAroundTheInputsIsNeverRead, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckPoisonedInputsNeverRead);
}

RC_GTEST_PROP(Property, EveryOutputIsWritten, (const ProblemSpec& spec)) {
  ForEveryBackend(spec, CheckOutputsFullyWritten);
}

}  // namespace
}  // namespace msa
