#include "oracle/cases.h"

#include <algorithm>
#include <cctype>

namespace msa {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return lower;
}

}  // namespace

ProblemSpec MakeSpec(int hq, int hkv, int dim, int block_size, int top_k, int init_blocks, Pooling pooling,
                     std::vector<std::pair<int32_t, int32_t>> lengths, DType dtype, uint64_t seed) {
  ProblemSpec spec;
  Config& c = spec.config;
  c.num_q_heads = hq;
  c.num_kv_heads = hkv;
  c.head_dim = c.value_dim = c.index_head_dim = dim;
  c.block_size = block_size;
  c.top_k = top_k;
  c.init_blocks = init_blocks;
  c.pooling = pooling;
  spec.lengths = std::move(lengths);
  spec.dtype = dtype;
  spec.seed = seed;
  return spec;
}

std::string CaseName(const std::string& kind, const ProblemSpec& spec) {
  const Config& c = spec.config;
  return kind + "_b" + std::to_string(spec.lengths.size()) + "_hq" + std::to_string(c.num_q_heads) + "_hkv" +
         std::to_string(c.num_kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size) +
         "_k" + std::to_string(c.top_k) + "_i" + std::to_string(c.init_blocks) +
         (c.local_blocks == 1 ? "" : "_l" + std::to_string(c.local_blocks)) + "_" +
         std::string(PoolingName(c.pooling)) + "_" + Lower(DTypeName(spec.dtype));
}

std::vector<TestCase> CanonicalCases() { return CasesTagged(kTagCanonical); }
std::vector<TestCase> LargeCases() { return CasesTagged(kTagLarge); }
std::vector<TestCase> DialectCases() { return CasesTagged(kTagDialects); }

}  // namespace msa
