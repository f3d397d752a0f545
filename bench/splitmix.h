// SplitMix64 with the few draws the benchmarks' input generators need: the same numbers on every compiler (the
// standard library's distributions are not).
#ifndef MSA_BENCH_SPLITMIX_H_
#define MSA_BENCH_SPLITMIX_H_

#include <cmath>
#include <cstdint>

namespace msa::bench {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t Below(int64_t n) { return int64_t(Next() % uint64_t(n)); }  // bias < n / 2^64
  double Uniform() { return double(Next() >> 11) * 0x1.0p-53; }       // [0, 1)
  float Normal() {                                                    // Box-Muller
    const double u1 = (double(Next() >> 11) + 0.5) * 0x1.0p-53, u2 = Uniform();
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

}  // namespace msa::bench

#endif  // MSA_BENCH_SPLITMIX_H_
