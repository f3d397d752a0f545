// The cost model of SPEC section 6 (paper Eq. 12) for one MSA layer, at lengths nobody runs on a laptop:
// FLOPs of the index and main branches and of dense causal GQA, the bytes that must move, the KV-cache and
// index-cache sizes, and a roofline time on a named GPU. Pure arithmetic; `msa cost` prints it.
//
// Arithmetic: the counts (query-key pairs, sum |S_t|) are exact in unsigned __int128 for any int64 length
// (they stay below 2^126); FLOPs, bytes and seconds are long double (64-bit significand: exact below 2^64,
// relative error at most 2^-64 above), so N^2 at 1M+ times any batch cannot overflow.
#ifndef MSA_TOOLS_MSA_COST_MODEL_H_
#define MSA_TOOLS_MSA_COST_MODEL_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "msa/config.h"

namespace msa {

using ExactCount = unsigned __int128;  // counts of query-key pairs and keys: exact for any int64 length

// A GPU's peak dense (no 2:4 sparsity) bf16 tensor-core rate and its memory bandwidth.
struct GpuSpec {
  std::string_view name;
  double peak_flops;  // FLOP/s
  double bandwidth;   // bytes/s
  std::string_view source;
};

std::span<const GpuSpec> KnownGpus();
const GpuSpec* FindGpu(std::string_view name);  // case-insensitive; nullptr when unknown

enum class CostMode {
  kPrefill,  // N queries over their own N keys (q_len == k_len == N)
  kDecode,   // one new query at position N - 1 over a KV cache of N keys (its own key included)
};

// Preconditions (EstimateCost does not check them): ValidateConfig(config) is OK, length >= 1, batch >= 1,
// element_bytes >= 1.
struct CostQuery {
  Config config;  // heads, dims, block_size, top_k, init_blocks; Hidx == Hkv
  CostMode mode = CostMode::kPrefill;
  int64_t length = 1;     // N
  int64_t batch = 1;      // independent sequences, each of length N
  int element_bytes = 2;  // q, k, v, index_q, index_k, out (bf16: 2); selections are int32
};

// One branch (or dense attention) on one GPU.
struct BranchCost {
  long double flops = 0;
  long double bytes = 0;    // must move: every input read once, every output written once
  long double seconds = 0;  // roofline: max(flops / peak, bytes / bandwidth)
  bool memory_bound = false;
};

struct CostEstimate {
  ExactCount query_key_pairs = 0;  // per sequence: sum over the queries of their visible keys (pos + 1)
  ExactCount selected_keys = 0;    // per sequence: sum over the queries of |S_t|
  BranchCost index, main, dense;
  long double kv_cache_bytes = 0;     // batch * N * Hkv * (D + Dv) * element_bytes
  long double index_cache_bytes = 0;  // batch * N * Di * element_bytes (one index-key head)

  long double msa_flops() const { return index.flops + main.flops; }
  long double msa_seconds() const { return index.seconds + main.seconds; }
  long double flop_ratio() const { return dense.flops / msa_flops(); }  // dense / MSA
  long double speedup() const { return dense.seconds / msa_seconds(); }
};

// |S| of the query at position `pos`: the keys of its min(visible, top_k) selected blocks that are <= pos.
// Every selected block but the local one is full, so |S| does not depend on the scores.
ExactCount SelectedKeysAt(const Config& config, int64_t pos);

// The sum of SelectedKeysAt over pos = 0 .. n - 1, in closed form.
ExactCount SumSelectedKeys(const Config& config, int64_t n);

CostEstimate EstimateCost(const CostQuery& query, const GpuSpec& gpu);

// SPEC section 6's closed forms for a causal prefill of length n (D and Dv may differ: (D + Dv) / 2 stands
// for D): dense Hq*(D+Dv)*n^2, MSA Hkv*Di*n^2 + 2*Hq*(D+Dv)*n*top_k*Bk. Their ratio, its limit as n grows
// (Hq*(D+Dv) / (Hkv*Di), 2G when D = Dv = Di) and the n above which MSA needs fewer FLOPs (+inf if never).
long double ClosedFormMainFlops(const Config& config, int64_t n);
long double ClosedFormRatio(const Config& config, int64_t n);
long double ClosedFormRatioCeiling(const Config& config);
long double ClosedFormCrossover(const Config& config);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_COST_MODEL_H_
