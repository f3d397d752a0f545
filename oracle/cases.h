// The one list of test cases (DESIGN.md; ggml's make_test_cases_eval / make_test_cases_perf): each case is one
// entry of a table (oracle/case_list.cc), written with designated initialisers and carrying tags that say which
// tests, golden suites and benchmarks take it. Tests iterate CasesTagged(tag); none defines its own shapes.
#ifndef MSA_ORACLE_CASES_H_
#define MSA_ORACLE_CASES_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "oracle/problem.h"

namespace msa {

// What a case is used for: a bit set (a case may carry several).
enum CaseTag : uint32_t {
  kTagCanonical = 1u << 0,      // small cases: reproducibility hashes, conformance, smoke goldens, every simd target
  kTagLarge = 1u << 1,          // M3 dims at longer lengths: the full golden suite adds them
  kTagDialects = 1u << 2,       // the dialect emulations of known implementations (suite "dialects", SPEC section 9)
  kTagForcedAndFp16 = 1u << 3,  // overlapping forced blocks and fp16 block-score ties at small dims (simd tests)
  kTagLongRows = 1u << 4,       // rows of more than 512 selected keys at small dims (simd fp32 path)
  kTagM3Size = 1u << 5,         // M3-shaped problems for the fast backends (left out of the sanitizer run)
  kTagThreadSplit = 1u << 6,    // few rows over long keys: work split over threads (determinism tests)
  kTagBench = 1u << 7,          // the CPU benchmark's layer (bench/cpu_bench.cc)
  // The gpu backend's tests (tests/gpu_*_test.cc): shapes that steer its planner to one kernel or path.
  kTagGpuGathered = 1u << 8,        // dims or top_k * Bk both tensor-core attention kernels decline: GatheredAttend
  kTagGpuTiedBlockMax = 1u << 9,    // few-valued index inputs: exactly tied block maxima at bf16 and fp16
  kTagGpuIndexOverflow = 1u << 10,  // index scores at fp32's edge: overflowing ones (refused alike), index_scale > 1
  kTagGpuTopKSplit = 1u << 11,      // few rows over many blocks (split top-k lists), and rows shorter than top_k
  kTagGpuDecodeLists = 1u << 12,    // decode batches of one query per sequence (the KV-outer direct lists)
  kTagGpuDecodeBatch = 1u << 13,    // decode batches of up to 16 queries per sequence (the batched index branch)
  kTagGpuLocalBlocks = 1u << 14,    // local_blocks > 1: overlapping forced sets, rows with nothing to rank
  kTagGpuFp16Ties = 1u << 15,       // fp16 block scores; the test writes index inputs whose binary16 scores tie
  kTagGpuFp16Overflow = 1u << 16,   // fp16 block scores; the test writes index inputs that overflow binary16
  kTagGpuLongDecode = 1u << 17,     // q_len 1..16 over 8K+ keys at M3 dims
  kTagGpuPlans = 1u << 18,          // every runnable kernel plan (tests/gpu_plans_test.cc)
  // Training (SPEC section 8): cases with dout (some with dlse).
  kTagTraining = 1u << 19,      // the golden suite "training": prefill, chunked, ragged, GQA, large logits, every
                                // pooling, local_blocks > 1, decode, an M3-dimensioned chunk
  kTagTrainingTiny = 1u << 20,  // a few dozen elements per tensor: finite differences and MPFR on every element
  // The golden suite "long": one M3 layer decoding over a million keys (GBs of inputs: no test generates it).
  kTagLong = 1u << 21,
};

struct TestCase {
  std::string name;  // e.g. "prefill_b1_hq8_hkv2_d32_bs16_k4_i0_max_f64"
  ProblemSpec spec;
  uint32_t tags = 0;  // CaseTag bits
};

// One entry of the case list (oracle/case_list.cc), flat so that it reads as designated initialisers. D = Dv = Di =
// dim; the name is CaseName(kind, spec) unless `name` is given.
struct CaseEntry {
  const char* kind = "";
  const char* name = nullptr;
  int hq = 4, hkv = 2, dim = 16, block_size = 8, top_k = 4, init_blocks = 0, local_blocks = 1;
  Pooling pooling = Pooling::kMax;
  std::vector<std::pair<int32_t, int32_t>> lengths;  // (q_len, k_len) per sequence
  DType dtype = DType::kF64;
  uint64_t seed = 0;
  double query_scale = 1.0;
  bool few_valued_index = false;
  std::optional<double> index_scale = std::nullopt;  // unset: Config's default
  IndexFormat index_format = IndexFormat::kNative;
  ScoreFormat score_format = ScoreFormat::kNative;
  Precision precision = Precision::kExact;
  bool training = false, with_dlse = false;  // ProblemSpec's: dout (and dlse) generated too
  uint32_t tags = 0;
};

// The whole list, in its canonical order (golden suites and hash lists follow it).
const std::vector<CaseEntry>& CaseList();
TestCase MakeCase(const CaseEntry& entry);
// Every case carrying any of `tags`, in list order.
std::vector<TestCase> CasesTagged(uint32_t tags);
// The case named `name` among CasesTagged(tags); the empty case (name "") when there is none.
TestCase CaseNamed(uint32_t tags, const std::string& name);

// GoogleTest prints a parameter with this instead of its bytes.
inline void PrintTo(const TestCase& test_case, std::ostream* os) { *os << test_case.name; }

// A spec with D = Dv = Di = dim, the other config fields as given and scales left at their defaults.
ProblemSpec MakeSpec(int hq, int hkv, int dim, int block_size, int top_k, int init_blocks, Pooling pooling,
                     std::vector<std::pair<int32_t, int32_t>> lengths, DType dtype, uint64_t seed);

// "<kind>_b<B>_hq<Hq>_hkv<Hkv>_d<D>_bs<Bk>_k<top_k>_i<init>[_l<local_blocks>]_<pooling>_<dtype>", the local_blocks
// part only when it is not 1.
std::string CaseName(const std::string& kind, const ProblemSpec& spec);

// CasesTagged(kTagCanonical): prefill at the boundary lengths, chunked prefill, decode with q_len 1..16, ragged
// batches, ties, large logits, init blocks, every pooling mode, every input dtype, an M3-shaped decode, the fp8
// index mode at M3 dims, several forced local blocks and fp16 block scores; cheap enough on the reference for every
// test run.
std::vector<TestCase> CanonicalCases();
// CasesTagged(kTagLarge): M3 dims at prefill lengths 1024-4096, full-M3-head decode over 16K keys, lse and mean
// pooling, large logits and ties at M3 dims, a ragged batch of nine sequences and a long chunked prefill.
std::vector<TestCase> LargeCases();
// CasesTagged(kTagDialects): M3-scaled index scores in decode and prefill, an init block with two forced local
// blocks, large logits in fp32, total_q == Hidx (the layout the shape cannot tell), fp16 block scores, a chunked
// fp32 prefill.
std::vector<TestCase> DialectCases();

}  // namespace msa

#endif  // MSA_ORACLE_CASES_H_
