// FmaLoop per Highway target (hwy/foreach_target.h compiles this file once per target).
#include "bench/ceilings.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/ceilings.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace msa::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 16 chains: enough to cover FMA latency (4 cycles) times two FMA ports on every x86 target, and few enough to
// stay in the 16 (AVX2) or 32 (AVX-512) vector registers.
constexpr int kChains = 16;

double FmaLoopImpl(int64_t iterations, float* sink) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const V scale = hn::Set(d, 0.999999f), bias = hn::Set(d, 1e-7f);
  V chain[kChains];
  for (int c = 0; c < kChains; ++c) chain[c] = hn::Set(d, 1.0f + float(c) * 1e-3f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) chain[c] = hn::MulAdd(chain[c], scale, bias);
  }
  V total = chain[0];
  for (int c = 1; c < kChains; ++c) total = hn::Add(total, chain[c]);
  *sink = hn::GetLane(hn::SumOfLanes(d, total));
  return 2.0 * double(iterations) * kChains * double(hn::Lanes(d));
}

const char* FmaTargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace msa::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace msa::bench {

HWY_EXPORT(FmaLoopImpl);
HWY_EXPORT(FmaTargetNameImpl);

double FmaLoop(int64_t iterations, float* sink) { return HWY_DYNAMIC_DISPATCH(FmaLoopImpl)(iterations, sink); }

const char* FmaTargetName() { return HWY_DYNAMIC_DISPATCH(FmaTargetNameImpl)(); }

}  // namespace msa::bench
#endif  // HWY_ONCE
