// The cost model of SPEC section 6 (see cost_model.h). docs/performance.md quotes the tagged regions.
#include "tools/msa/cost_model.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace msa {
namespace {

// docs:begin gpu-table
// Peak dense bf16 tensor-core FLOP/s and memory bandwidth. Datasheets quote tensor rates "with sparsity"
// (2:4 structured); the dense rate, which attention gets, is half of that.
constexpr GpuSpec kGpus[] = {
    {"H100", 989.5e12, 3.35e12,
     "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
     "GPU memory bandwidth 3.35 TB/s (https://www.nvidia.com/en-us/data-center/h100/)"},
    {"H200", 989.5e12, 4.8e12,
     "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
     "GPU memory bandwidth 4.8 TB/s (https://www.nvidia.com/en-us/data-center/h200/)"},
    {"H800", 989.5e12, 3.35e12,
     "NVIDIA H800 Tensor Core GPU datasheet, H800 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
     "GPU memory bandwidth 3.35 TB/s (https://www.nvidia.cn/data-center/h800/)"},
    {"B200", 2250e12, 8.0e12,
     "NVIDIA HGX B200 specifications (8 GPUs): FP16/BF16 Tensor Core 36 PFLOPS with sparsity, HBM3e "
     "bandwidth 64 TB/s; per GPU 4.5 PFLOPS sparse, 8 TB/s (https://www.nvidia.com/en-us/data-center/hgx/)"},
    {"H200-measured", 750e12, 4.1e12,
     "measured on this project's H200 (SPEC section 6, ../shared/anchors/h200_peers.py): bf16 GEMM "
     "8192^3 750-790 TFLOP/s and device copy 4.1-4.2 TB/s (read + write); the low ends"},
};
// docs:end gpu-table

bool SameNameIgnoringCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

long double AsLongDouble(ExactCount count) { return static_cast<long double>(count); }

// D + Dv, without int overflow.
long double KeyAndValueDims(const Config& c) { return 1.0L * c.head_dim + c.value_dim; }

// docs:begin flops
// One (query, key) pair costs a Di-long dot product per index head (2*Di FLOPs: multiply and add) and, per
// query head, q.k plus p*v (2*D + 2*Dv). Dense causal attention visits every visible pair: the causal half,
// N(N+1)/2 pairs (SPEC section 6's 2*Hq*D*N^2). MSA's main branch visits only the selected keys, sum |S_t|.
long double IndexFlops(const Config& c, long double pairs) { return 2.0L * c.num_kv_heads * c.index_head_dim * pairs; }
long double AttentionFlops(const Config& c, long double keys) {
  return 2.0L * c.num_q_heads * KeyAndValueDims(c) * keys;
}
// docs:end flops

// docs:begin bytes
// The bytes one sequence must move, every input read once and every output written once.
void CountBytes(const CostQuery& query, long double selected_keys, CostEstimate* cost) {
  const Config& c = query.config;
  const bool prefill = query.mode == CostMode::kPrefill;
  const long double n = query.length, element = query.element_bytes;
  const long double queries = prefill ? n : 1;
  const long double kv_token = 1.0L * c.num_kv_heads * KeyAndValueDims(c) * element;  // K and V, all heads
  const long double index_key = 1.0L * c.index_head_dim * element;                    // one shared head
  const long double selections = queries * c.num_kv_heads * c.top_k * 4;              // int32 topk_indices
  const long double q_and_out = queries * c.num_q_heads * KeyAndValueDims(c) * element;
  // Prefill: every block is some query's local block, so all of K and V is read (once, at best).
  // Decode: each group reads only its selected keys of its own kv head.
  const long double main_kv = prefill ? n * kv_token : selected_keys * kv_token;
  cost->index.bytes = queries * c.num_kv_heads * index_key + n * index_key + selections;
  cost->main.bytes = q_and_out + selections + main_kv;
  cost->dense.bytes = q_and_out + n * kv_token;
  cost->kv_cache_bytes = n * kv_token;
  cost->index_cache_bytes = n * index_key;
}
// docs:end bytes

// Fills the roofline time of a branch whose flops and bytes are set.
void Roofline(const GpuSpec& gpu, BranchCost* branch) {
  const long double compute = branch->flops / gpu.peak_flops;
  const long double memory = branch->bytes / gpu.bandwidth;
  branch->memory_bound = memory > compute;
  branch->seconds = std::max(compute, memory);
}

}  // namespace

std::span<const GpuSpec> KnownGpus() { return kGpus; }

const GpuSpec* FindGpu(std::string_view name) {
  for (const GpuSpec& gpu : kGpus) {
    if (SameNameIgnoringCase(gpu.name, name)) return &gpu;
  }
  return nullptr;
}

// docs:begin selected-keys
ExactCount SelectedKeysAt(const Config& config, int64_t pos) {
  const ExactCount block_size = config.block_size, top_k = config.top_k, position = pos;
  const ExactCount local = position / block_size;
  if (local < top_k) return position + 1;  // at most top_k blocks visible: all selected, every key attended
  // top_k - 1 full history blocks, plus the local block up to pos
  return (top_k - 1) * block_size + (position - local * block_size + 1);
}

ExactCount SumSelectedKeys(const Config& config, int64_t n) {
  const ExactCount block_size = config.block_size, top_k = config.top_k, count = n;
  const ExactCount window = top_k * block_size;  // positions below it see at most top_k blocks
  const ExactCount early = std::min(count, window);
  ExactCount sum = early * (early + 1) / 2;  // sum of (pos + 1)
  if (count > window) {
    const ExactCount late = count - window;  // positions window .. n - 1; window is a block boundary
    const ExactCount full_blocks = late / block_size, rest = late % block_size;
    sum += late * (top_k - 1) * block_size                      // the full history blocks
           + full_blocks * (block_size * (block_size + 1) / 2)  // local block: 1 .. Bk keys
           + rest * (rest + 1) / 2;                             // the last, unfinished local block
  }
  return sum;
}
// docs:end selected-keys

CostEstimate EstimateCost(const CostQuery& query, const GpuSpec& gpu) {
  const Config& c = query.config;
  CostEstimate cost;
  if (query.mode == CostMode::kPrefill) {
    const ExactCount count = static_cast<ExactCount>(query.length);
    cost.query_key_pairs = count * (count + 1) / 2;
    cost.selected_keys = SumSelectedKeys(c, query.length);
  } else {
    cost.query_key_pairs = static_cast<ExactCount>(query.length);
    cost.selected_keys = SelectedKeysAt(c, query.length - 1);
  }
  const long double pairs = AsLongDouble(cost.query_key_pairs), selected = AsLongDouble(cost.selected_keys);
  cost.index.flops = IndexFlops(c, pairs);
  cost.main.flops = AttentionFlops(c, selected);
  cost.dense.flops = AttentionFlops(c, pairs);
  CountBytes(query, selected, &cost);
  const long double batch = query.batch;
  for (BranchCost* branch : {&cost.index, &cost.main, &cost.dense}) {
    branch->flops *= batch;
    branch->bytes *= batch;
    Roofline(gpu, branch);
  }
  cost.kv_cache_bytes *= batch;
  cost.index_cache_bytes *= batch;
  return cost;
}

long double ClosedFormMainFlops(const Config& config, int64_t n) {
  return 2.0L * config.num_q_heads * KeyAndValueDims(config) * static_cast<long double>(n) * config.top_k *
         config.block_size;
}

// docs:begin closed-form
long double ClosedFormRatio(const Config& config, int64_t n) {
  const long double length = n;
  const long double dense = 1.0L * config.num_q_heads * KeyAndValueDims(config) * length * length;
  const long double index = 1.0L * config.num_kv_heads * config.index_head_dim * length * length;
  return dense / (index + ClosedFormMainFlops(config, n));
}

long double ClosedFormRatioCeiling(const Config& config) {
  return 1.0L * config.num_q_heads * KeyAndValueDims(config) / (1.0L * config.num_kv_heads * config.index_head_dim);
}

long double ClosedFormCrossover(const Config& config) {
  const long double dense_per_n2 = 1.0L * config.num_q_heads * KeyAndValueDims(config);
  const long double gain = dense_per_n2 - 1.0L * config.num_kv_heads * config.index_head_dim;
  if (gain <= 0) return std::numeric_limits<long double>::infinity();
  return 2 * dense_per_n2 * config.top_k * config.block_size / gain;
}
// docs:end closed-form

}  // namespace msa
