#include "oracle/random.h"

#include <cmath>

#include "reference/exp_log.h"

namespace msa {

uint64_t SplitMix64(uint64_t counter) {
  uint64_t z = counter + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

RandomStream::RandomStream(uint64_t seed, uint64_t stream)
    : counter_(SplitMix64(seed ^ SplitMix64(stream + 0x632be59bd9b4e019ULL))) {}

uint64_t RandomStream::NextBits() {
  counter_ += 0x9e3779b97f4a7c15ULL;
  return SplitMix64(counter_);
}

double RandomStream::Uniform() { return double(NextBits() >> 11) * 0x1.0p-53; }

double RandomStream::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_normal_;
  }
  double u, v, s;
  do {
    u = 2.0 * Uniform() - 1.0;
    v = 2.0 * Uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * CanonicalLog(s) / s);  // sqrt is correctly rounded IEEE
  spare_normal_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

int64_t RandomStream::Below(int64_t n) { return int64_t(NextBits() % uint64_t(n)); }

}  // namespace msa
