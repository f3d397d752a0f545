// The one canonical list of test cases (DESIGN.md, like ggml's test-backend-ops): each is data with a
// printable name. It drives the reproducibility hashes, the conformance tests and the golden suites.
#ifndef MSA_ORACLE_CASES_H_
#define MSA_ORACLE_CASES_H_

#include <ostream>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracle/problem.h"

namespace msa {

struct TestCase {
  std::string name;  // e.g. "prefill_b1_hq8_hkv2_d32_bs16_k4_i0_max_f64"
  ProblemSpec spec;
};

// GoogleTest prints a parameter with this instead of its bytes.
inline void PrintTo(const TestCase& test_case, std::ostream* os) { *os << test_case.name; }

// A spec with D = Dv = Di = dim, the other config fields as given and scales left at their defaults.
ProblemSpec MakeSpec(int hq, int hkv, int dim, int block_size, int top_k, int init_blocks, Pooling pooling,
                     std::vector<std::pair<int32_t, int32_t>> lengths, DType dtype, uint64_t seed);

// "<kind>_b<B>_hq<Hq>_hkv<Hkv>_d<D>_bs<Bk>_k<top_k>_i<init>[_l<local_blocks>]_<pooling>_<dtype>", the local_blocks
// part only when it is not 1.
std::string CaseName(const std::string& kind, const ProblemSpec& spec);

// Small cases (cheap enough on the reference for every test run): prefill at the boundary lengths, chunked
// prefill, decode with q_len 1..16, ragged batches, ties, large logits, init blocks, every pooling mode,
// every input dtype, an M3-shaped decode, the fp8 index mode (index_format e4m3) at M3 dims, several forced
// local blocks (local_blocks 2, 3) and fp16 block scores (score_format fp16).
std::vector<TestCase> CanonicalCases();

// Larger cases (seconds each on the reference) that the full golden suite adds to CanonicalCases: M3 dims at
// prefill lengths 1024-4096, full-M3-head decode over 16K keys, lse and mean pooling, large logits and ties at
// M3 dims, a ragged batch of nine sequences and a long chunked prefill.
std::vector<TestCase> LargeCases();

// The cases the dialect emulations of known implementations are judged on (SPEC section 9; suite "dialects"):
// M3-scaled index scores in decode and prefill, an init block with two forced local blocks, large logits in
// fp32, total_q == Hidx (the layout the shape cannot tell), fp16 block scores, a chunked fp32 prefill.
std::vector<TestCase> DialectCases();

}  // namespace msa

#endif  // MSA_ORACLE_CASES_H_
