// Cases the simd tests add to CanonicalCases() (simd_exact_test, simd_fp32_test) for the paths of local_blocks
// and score_format fp16 that the canonical cases reach only in part.
#ifndef MSA_TESTS_SIMD_CASES_H_
#define MSA_TESTS_SIMD_CASES_H_

#include <cmath>
#include <string>
#include <vector>

#include "oracle/cases.h"

namespace msa {

// - local_blocks 2..5 with 0..2 init blocks, Bk = 4, over sequences of 1 to 10 visible blocks: the forced sets
//   overlap each other on the short ones, leave no room for a ranked candidate where top_k = init + local, and
//   leave some on the long ones; every pooling mode, every dtype.
// - score_format fp16 with ties the binary16 rounding makes or keeps:
//   midpoints: index inputs in {-1, 0, 1} and index_scale 1 + 2^-11, so a score k * (1 + 2^-11) with |k| a
//     power of two lies exactly halfway between two binary16 values (ties to even), and equal k tie exactly;
//   subnormal: scores around 4e-7, binary16 subnormals 2^-24 apart: distinct scores round to equal ones;
//   zeros: scores around 1e-10 round to +0 or -0, which tie (the id decides);
//   large: scores around a thousand, binary16 values 0.5 to 2 apart;
//   each with local_blocks 1 or 2 and an init block or none.
inline std::vector<TestCase> ForcedBlocksAndFp16ScoreCases() {
  std::vector<TestCase> cases;
  const std::vector<std::pair<int32_t, int32_t>> short_and_long = {{1, 1}, {4, 4}, {3, 9}, {5, 13}, {2, 21}, {8, 40}};
  struct Forced {
    int local_blocks, init_blocks, top_k;
    Pooling pooling;
    DType dtype;
  };
  const Forced forced[] = {{2, 0, 2, Pooling::kMax, DType::kF64},  {3, 1, 6, Pooling::kMax, DType::kF32},
                           {3, 2, 5, Pooling::kLse, DType::kBF16}, {4, 1, 7, Pooling::kMean, DType::kF16},
                           {5, 2, 8, Pooling::kMax, DType::kF32}};
  uint64_t seed = 601;
  for (const Forced& f : forced) {
    ProblemSpec spec = MakeSpec(4, 2, 8, 4, f.top_k, f.init_blocks, f.pooling, short_and_long, f.dtype, seed++);
    spec.config.local_blocks = f.local_blocks;
    cases.push_back({CaseName("simd_local_overlap", spec), spec});
  }

  const auto fp16 = [&](const std::string& kind, int local_blocks, int init_blocks, double index_scale,
                        double query_scale, bool few_valued, DType dtype) {
    ProblemSpec spec =
        MakeSpec(4, 2, 16, 4, 3 + init_blocks + local_blocks, init_blocks, Pooling::kMax, {{40, 40}, {3, 25}}, dtype,
                 seed++);
    spec.config.local_blocks = local_blocks;
    spec.config.score_format = ScoreFormat::kFp16;
    spec.config.index_scale = index_scale;
    spec.query_scale = query_scale;
    spec.few_valued_index = few_valued;
    cases.push_back({CaseName(kind, spec), spec});
  };
  fp16("simd_fp16_midpoints", 2, 1, 1 + std::ldexp(1.0, -11), 1, true, DType::kF32);
  fp16("simd_fp16_midpoints", 1, 0, 1 + std::ldexp(1.0, -11), 1, true, DType::kBF16);
  fp16("simd_fp16_subnormal", 2, 0, 1e-7, 1, false, DType::kF32);
  fp16("simd_fp16_zeros", 1, 1, 1e-10, 1, false, DType::kF16);
  fp16("simd_fp16_large", 2, 1, 2, 100, false, DType::kF32);
  return cases;
}

}  // namespace msa

#endif  // MSA_TESTS_SIMD_CASES_H_
