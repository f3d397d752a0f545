// The properties of SPEC section 5 as reusable checks that run against ANY backend at any precision it
// supports (spec.config.precision). Each builds its problems from `spec` (and `seed` where it perturbs
// inputs), runs the backend, and returns OK or a Status naming the property and the first offending place.
// Where a property is exact for any deterministic kernel (causality, GQA sharing, scaling v by 2, poison),
// it is checked bit for bit; elsewhere exact precision demands bits and lower precisions the oracle rules.
#ifndef MSA_ORACLE_PROPERTIES_H_
#define MSA_ORACLE_PROPERTIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// The backend's own selection satisfies the contract; every output is finite.
Status CheckSelectionContract(const Backend& backend, const ProblemSpec& spec);
// With top_k covering every block, the backend equals dense causal GQA attention.
Status CheckDenseEquivalence(const Backend& backend, const ProblemSpec& spec);
// Rewriting keys, values and index keys after a cut position changes nothing for queries before it.
Status CheckCausality(const Backend& backend, const ProblemSpec& spec, uint64_t seed);
// Heads of a group given the same query produce the same outputs (they share one selection).
Status CheckGqaSharing(const Backend& backend, const ProblemSpec& spec);
// Rewriting group 0's index queries leaves every other group's selection unchanged.
Status CheckGroupIndependence(const Backend& backend, const ProblemSpec& spec, uint64_t seed);
// Attention over the reference selection with each row's blocks shuffled gives the same result.
Status CheckBlockOrderInvariance(const Backend& backend, const ProblemSpec& spec, uint64_t seed);
// With exactly representable index scores (small integers, scale 1/4), adding a constant to every score of
// a row leaves the selection unchanged (max pooling).
Status CheckShiftInvariance(const Backend& backend, const ProblemSpec& spec, uint64_t seed, double shift);
// out(2 v) == 2 out(v) and lse unchanged, bit for bit (v first rounded to the precision, so 2 v is exact in it).
Status CheckScalingV(const Backend& backend, const ProblemSpec& spec);
// out(v + w) = out(v) + out(w) up to rounding: 1e-13 relative to the largest |value| at exact precision,
// 8 ulps of the precision at that magnitude otherwise.
Status CheckLinearityInV(const Backend& backend, const ProblemSpec& spec, uint64_t seed);
// The suffix rule: a chunk of q_len queries over k_len keys gives the last q_len rows of the full prefill of
// k_len (bits at exact precision, the oracle's rules otherwise). Uses spec's config with one sequence.
Status CheckSuffixRule(const Backend& backend, const ProblemSpec& spec, int32_t k_len, int32_t q_len);
// With v = 1 every output is 1 (exactly at exact precision, within 4 ulps of the precision otherwise).
Status CheckSoftmaxRowsSumToOne(const Backend& backend, const ProblemSpec& spec);
// Max pooling: no token of a block left out scores above the lowest kept ranked block (by more than the
// oracle's tau at low precision), with FP64 token scores.
Status CheckMaxDominance(const Backend& backend, const ProblemSpec& spec);
// Inputs laid out with NaN poison between heads, between rows and after the end: never read, so the
// outputs equal those of packed inputs bit for bit.
Status CheckPoisonedInputsNeverRead(const Backend& backend, const ProblemSpec& spec);
// Outputs pre-filled with poison (NaN, INT32_MIN) are all overwritten.
Status CheckOutputsFullyWritten(const Backend& backend, const ProblemSpec& spec);

// The precisions `backend` supports for `config` (its `supports` says yes), in the order exact, fp32, bf16, fp16.
std::vector<Precision> SupportedPrecisions(const Backend& backend, const Config& config);

}  // namespace msa

#endif  // MSA_ORACLE_PROPERTIES_H_
