// gpu_bench: times the gpu backend's low-precision kernels on device-resident random inputs at M3 shapes
// (Hq 64, Hkv = Hidx 4, D = Dv = Di 128, Bk 128, top_k 16, max pooling, bf16), with no host packing or
// transfers: the index branch (BlockMaxScores), the top-k (RankTopK) and the main branch (QOuterAttend, as the
// backend picks it), each with CUDA events, after a
// warm-up, the median of the repetitions. Outputs are poisoned before every repetition and checked after
// the last one (every selection row valid, no NaN left in out / lse). Prints one JSON object.
//
//   gpu_bench prefill N [reps]     one causal sequence of N tokens (q_len = k_len = N)
//   gpu_bench decode L [reps]      one query (q_len 1) over L keys
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

constexpr int kHq = 64, kHkv = 4, kDim = 128, kBk = 128, kTopK = 16;
constexpr int64_t kChunkBudgetBytes = int64_t(8) << 30;  // block scores of one index chunk

#define BENCH_CHECK(expr)                                                                              \
  do {                                                                                                 \
    const cudaError_t bench_error_ = (expr);                                                           \
    if (bench_error_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "gpu_bench: %s failed at %s:%d: %s\n", #expr, __FILE__, __LINE__,           \
                   cudaGetErrorString(bench_error_));                                                  \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (false)

// Uniform [-1, 1) rounded to bf16, from a counter hash (SplitMix64 finalizer) of (seed, i).
__global__ void FillUniformBf16(uint16_t* dst, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + uint64_t(i);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = float(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    dst[i] = uint16_t(__float_as_uint(u) >> 16);  // exact: u has at most 24 significant bits, truncation is fine
  }
}

// Counts selection entries that break the contract (poison, id out of range, local block not last valid).
__global__ void CountBadSelections(const int32_t* topk, int64_t total_q, int hidx, int top_k, int64_t pos0,
                                   int bk, unsigned long long* bad) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= total_q * hidx) return;
  const int64_t t = row % total_q, pos = pos0 + t, local = pos / bk;
  const int32_t* sel = topk + row * top_k;
  const int64_t valid = local + 1 < top_k ? local + 1 : top_k;
  bool ok = sel[valid - 1] == local;
  for (int s = 0; s < top_k; ++s) ok = ok && (s < valid ? (sel[s] >= 0 && sel[s] <= local) : sel[s] == -1);
  if (!ok) atomicAdd(bad, 1ull);
}

__global__ void CountNonFinite(const double* x, int64_t n, unsigned long long* bad) {
  unsigned long long count = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    count += !isfinite(x[i]);
  }
  if (count) atomicAdd(bad, count);
}

template <typename T>
T* Allocate(int64_t count) {
  T* p = nullptr;
  BENCH_CHECK(cudaMalloc(&p, size_t(count) * sizeof(T)));
  return p;
}

uint16_t* RandomBf16(int64_t n, uint64_t seed) {
  uint16_t* p = Allocate<uint16_t>(n);
  FillUniformBf16<<<4096, 256>>>(p, n, seed);
  BENCH_CHECK(cudaGetLastError());
  return p;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Sums the device time of the launches between Begin() and End() over one repetition.
class PhaseTimer {
 public:
  PhaseTimer() {
    BENCH_CHECK(cudaEventCreate(&start_));
    BENCH_CHECK(cudaEventCreate(&stop_));
  }
  void Begin() { BENCH_CHECK(cudaEventRecord(start_)); }
  void End() {
    BENCH_CHECK(cudaEventRecord(stop_));
    BENCH_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    sum_ms_ += ms;
  }
  double TakeMs() { return std::exchange(sum_ms_, 0.0); }

 private:
  cudaEvent_t start_, stop_;
  double sum_ms_ = 0;
};

struct Result {
  double index_ms = 0, topk_ms = 0, main_ms = 0;
  uint64_t bad_rows = 0, nonfinite = 0;
};

// One sequence of q_len queries, the causal suffix of k_len keys: index branch in chunks, top-k, main branch.
Result Run(int64_t q_len, int64_t k_len, int reps) {
  const int64_t pos0 = k_len - q_len, max_blocks = (k_len + kBk - 1) / kBk;
  uint16_t* index_q = RandomBf16(q_len * kHkv * kDim, 1);   // [q_len, Hidx, Di]
  uint16_t* index_k = RandomBf16(k_len * kDim, 2);          // [k_len, Di]
  uint16_t* q = RandomBf16(q_len * kHq * kDim, 3);          // [q_len, Hq, D]
  uint16_t* k = RandomBf16(k_len * kHkv * kDim, 4);         // [k_len, Hkv, D]
  uint16_t* v = RandomBf16(k_len * kHkv * kDim, 5);         // [k_len, Hkv, Dv]
  const int64_t nq_chunk = std::min<int64_t>(q_len, kChunkBudgetBytes / (kHkv * max_blocks * 4));
  float* bs = Allocate<float>(nq_chunk * kHkv * max_blocks);  // [nq_chunk * Hidx, max_blocks]
  int32_t* topk = Allocate<int32_t>(kHkv * q_len * kTopK);   // [Hidx, q_len, top_k]
  double* out = Allocate<double>(q_len * kHq * kDim);        // [q_len, Hq, Dv]
  double* lse = Allocate<double>(q_len * kHq);               // [q_len, Hq]
  unsigned long long* flags = Allocate<unsigned long long>(3);  // bad index row, bad selections, NaNs
  std::vector<int64_t> position(q_len), key_begin(q_len, 0);
  for (int64_t t = 0; t < q_len; ++t) position[t] = pos0 + t;
  int64_t* d_position = Allocate<int64_t>(q_len);
  int64_t* d_key_begin = Allocate<int64_t>(q_len);
  BENCH_CHECK(cudaMemcpy(d_position, position.data(), size_t(q_len) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_key_begin, key_begin.data(), size_t(q_len) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaDeviceSynchronize());

  const float index_scale = 1.0f / std::sqrt(float(kDim)), scale = index_scale;
  AttendGeometry ag;
  ag.total_q = q_len;
  ag.hq = kHq;
  ag.hkv = kHkv;
  ag.d = ag.dv = kDim;
  ag.bk = kBk;
  ag.top_k = kTopK;
  PhaseTimer index_timer, topk_timer, main_timer;
  std::vector<double> index_ms, topk_ms, main_ms;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
    BENCH_CHECK(cudaMemset(topk, 0x7f, size_t(kHkv * q_len * kTopK) * 4));
    BENCH_CHECK(cudaMemset(out, 0xff, size_t(q_len * kHq * kDim) * 8));  // NaN
    BENCH_CHECK(cudaMemset(lse, 0xff, size_t(q_len * kHq) * 8));
    BENCH_CHECK(cudaMemset(flags, 0xff, 8));  // flags[0]: the first bad index row (none: all ones)
    BENCH_CHECK(cudaMemset(flags + 1, 0, 2 * 8));
    for (int64_t c0 = 0; c0 < q_len; c0 += nq_chunk) {
      ChunkGeometry g;
      g.t0 = c0;
      g.nq = std::min(nq_chunk, q_len - c0);
      g.pos0 = pos0 + c0;
      g.key_begin = 0;
      g.k_len = k_len;
      g.total_q = q_len;
      g.hidx = kHkv;
      g.di = kDim;
      g.bk = kBk;
      g.top_k = kTopK;
      g.max_blocks = max_blocks;
      BENCH_CHECK(cudaMemset(bs, 0xff, size_t(g.nq * kHkv * max_blocks) * 4));  // NaN: never ranked unwritten
      index_timer.Begin();
      BENCH_CHECK(BlockMaxScores(kLowpBF16, index_q, index_k, g, index_scale, bs, flags));
      index_timer.End();
      topk_timer.Begin();
      BENCH_CHECK(RankTopK(bs, g, topk));
      topk_timer.End();
    }
    main_timer.Begin();
    if (QOuterAttendFits(ag)) {
      BENCH_CHECK(QOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, ag, scale, out, lse));
    } else {
      BENCH_CHECK(LowpAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, ag, scale, out, lse));
    }
    main_timer.End();
    const double i_ms = index_timer.TakeMs(), t_ms = topk_timer.TakeMs(), m_ms = main_timer.TakeMs();
    if (rep >= 0) {
      index_ms.push_back(i_ms);
      topk_ms.push_back(t_ms);
      main_ms.push_back(m_ms);
    }
  }
  Result result;
  result.index_ms = Median(index_ms);
  result.topk_ms = Median(topk_ms);
  result.main_ms = Median(main_ms);
  const int64_t sel_rows = kHkv * q_len;
  CountBadSelections<<<unsigned((sel_rows + 255) / 256), 256>>>(topk, q_len, kHkv, kTopK, pos0, kBk, flags + 1);
  CountNonFinite<<<2048, 256>>>(out, q_len * kHq * kDim, flags + 2);
  CountNonFinite<<<2048, 256>>>(lse, q_len * kHq, flags + 2);
  BENCH_CHECK(cudaGetLastError());
  unsigned long long host_flags[3];
  BENCH_CHECK(cudaMemcpy(host_flags, flags, sizeof host_flags, cudaMemcpyDeviceToHost));
  result.bad_rows = host_flags[1];
  result.nonfinite = host_flags[2];
  if (host_flags[0] != ~0ull) result.bad_rows += 1;  // a non-finite index score
  for (void* p : {static_cast<void*>(index_q), static_cast<void*>(index_k), static_cast<void*>(q),
                  static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(bs), static_cast<void*>(topk),
                  static_cast<void*>(out), static_cast<void*>(lse), static_cast<void*>(flags),
                  static_cast<void*>(d_position), static_cast<void*>(d_key_begin)}) {
    BENCH_CHECK(cudaFree(p));
  }
  return result;
}

// Keys the main branch reads for query positions [pos0, pos0 + q_len): the selected blocks' visible keys.
double SelectedKeys(int64_t q_len, int64_t pos0) {
  double sum = 0;
  for (int64_t t = 0; t < q_len; ++t) {
    const int64_t pos = pos0 + t, local = pos / kBk;
    const int64_t blocks = std::min<int64_t>(local + 1, kTopK);
    sum += double((blocks - 1) * kBk + (pos % kBk + 1));
  }
  return sum;
}

}  // namespace
}  // namespace msa::gpu

int main(int argc, char** argv) {
  using namespace msa::gpu;
  if (argc < 3) {
    std::fprintf(stderr, "usage: gpu_bench prefill N [reps] | gpu_bench decode L [reps]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t n = std::atoll(argv[2]);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool prefill = mode == "prefill";
  const int64_t q_len = prefill ? n : 1, k_len = n;
  const Result r = Run(q_len, k_len, reps);
  const double keys = SelectedKeys(q_len, k_len - q_len);
  // Useful FLOPs (SPEC section 6): index Hkv * Di * N^2 for a causal prefill (one dot per visible (q, k) pair
  // and group, 2 FLOPs each, half the square), main 4 * Hq * D * sum |S_t|.
  const double index_flops = prefill ? double(kHkv) * kDim * double(n) * double(n) : 2.0 * kHkv * kDim * double(n);
  const double main_flops = 4.0 * kHq * kDim * keys;
  // Bytes a decode step must read: index keys, the index and main queries, K and V of the selected keys.
  const double decode_bytes = double(k_len) * kDim * 2 + double(kHkv + kHq) * kDim * 2 + keys * kHkv * kDim * 2 * 2;
  std::printf(
      "{\"mode\": \"%s\", \"q_len\": %lld, \"k_len\": %lld, \"reps\": %d, \"index_ms\": %.4f, \"topk_ms\": %.4f, "
      "\"main_ms\": %.4f, \"total_ms\": %.4f, \"index_flops\": %.6e, \"main_flops\": %.6e, \"decode_bytes\": %.6e, "
      "\"bad_selection_rows\": %llu, \"nonfinite_outputs\": %llu}\n",
      mode.c_str(), (long long)q_len, (long long)k_len, reps, r.index_ms, r.topk_ms, r.main_ms,
      r.index_ms + r.topk_ms + r.main_ms, index_flops, main_flops, decode_bytes, (unsigned long long)r.bad_rows,
      (unsigned long long)r.nonfinite);
  return r.bad_rows == 0 && r.nonfinite == 0 ? 0 : 1;
}
