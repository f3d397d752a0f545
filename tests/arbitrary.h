// The one rapidcheck generator of valid problems (DESIGN.md: one Arbitrary that encodes every validity rule,
// reused by all properties): GQA head counts, any dims, block sizes, 1 to 3 forced local blocks, top_k >=
// init_blocks + local_blocks, every pooling mode and fp16 block scores with max pooling, ragged batches with
// q_len <= k_len (empty sequences included), every input dtype.
#ifndef MSA_TESTS_ARBITRARY_H_
#define MSA_TESTS_ARBITRARY_H_

#include <ostream>

#include <rapidcheck.h>

#include "oracle/problem.h"

namespace msa {

inline void showValue(const ProblemSpec& spec, std::ostream& os) {
  os << DescribeConfig(spec.config) << " dtype=" << DTypeName(spec.dtype) << " seed=" << spec.seed << " lengths=";
  for (const auto& [q_len, k_len] : spec.lengths) os << "(" << q_len << "," << k_len << ")";
}

}  // namespace msa

namespace rc {

template <>
struct Arbitrary<msa::ProblemSpec> {
  static Gen<msa::ProblemSpec> arbitrary() {
    return gen::exec([] {
      msa::ProblemSpec spec;
      msa::Config& c = spec.config;
      c.num_kv_heads = *gen::inRange(1, 4);
      c.num_q_heads = c.num_kv_heads * *gen::inRange(1, 4);  // Hq % Hkv == 0
      c.head_dim = *gen::inRange(1, 20);
      c.value_dim = *gen::inRange(1, 12);
      c.index_head_dim = *gen::inRange(1, 20);
      c.block_size = *gen::inRange(1, 9);
      c.init_blocks = *gen::inRange(0, 3);
      c.local_blocks = *gen::weightedElement<int>({{4, 1}, {1, 2}, {1, 3}});
      const int forced = c.init_blocks + c.local_blocks;
      c.top_k = *gen::inRange(forced, forced + 6);  // covers the forced blocks
      c.pooling = *gen::element(msa::Pooling::kMax, msa::Pooling::kLse, msa::Pooling::kMean);
      if (c.pooling == msa::Pooling::kMax && *gen::inRange(0, 3) == 0) c.score_format = msa::ScoreFormat::kFp16;
      const int sequences = *gen::inRange(1, 4);
      for (int b = 0; b < sequences; ++b) {
        const int32_t k_len = *gen::inRange(0, 48);
        spec.lengths.push_back({*gen::inRange(0, k_len + 1), k_len});  // q_len <= k_len
      }
      spec.dtype = *gen::element(msa::DType::kF64, msa::DType::kF32, msa::DType::kBF16, msa::DType::kF16);
      spec.seed = *gen::arbitrary<uint64_t>();
      return spec;
    });
  }
};

}  // namespace rc

#endif  // MSA_TESTS_ARBITRARY_H_
