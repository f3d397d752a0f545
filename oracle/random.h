// The project's own counter-based random numbers: SplitMix64 and our own uniform and normal mappings,
// built from IEEE basic operations and CanonicalLog, so generated inputs (and the goldens made from them)
// are identical with every compiler and standard library. Never use std::*_distribution for inputs.
#ifndef MSA_ORACLE_RANDOM_H_
#define MSA_ORACLE_RANDOM_H_

#include <cstdint>

namespace msa {

// The SplitMix64 finalizer: a bijective mix of a 64-bit counter.
uint64_t SplitMix64(uint64_t counter);

class RandomStream {
 public:
  // Streams with different (seed, stream) pairs are independent.
  RandomStream(uint64_t seed, uint64_t stream);

  uint64_t NextBits();
  double Uniform();          // in [0, 1), 53 random bits
  double Normal();           // standard normal, Marsaglia's polar method with CanonicalLog
  int64_t Below(int64_t n);  // uniform in [0, n), n >= 1

 private:
  uint64_t counter_;
  double spare_normal_ = 0;
  bool has_spare_ = false;
};

}  // namespace msa

#endif  // MSA_ORACLE_RANDOM_H_
