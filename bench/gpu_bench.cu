// gpu_bench: times the gpu backend's low-precision kernels on device-resident random inputs at M3 shapes
// (Hq 64, Hkv = Hidx 4, D = Dv = Di 128, Bk 128, top_k 16, max pooling, bf16), with no host packing or
// transfers: the index branch (BlockMaxScores), the top-k (RankTopK) and the main branch (KvOuterAttendWgmma on an
// sm_90 device, else KvOuterAttend; or the one named by main=...), each with CUDA events, after a
// warm-up, the median of the repetitions; the KV-outer main branches are also captured in a CUDA graph and their
// replays timed. Outputs are poisoned before every repetition and checked after the last one (every selection
// row valid, no NaN left in out / lse); with a KV-outer kernel, the Q-outer kernel then recomputes the main branch
// and the largest difference is reported (out_diff_vs_qouter); with KV-outer-wgmma, KvOuterAttend does too
// (out_diff_vs_kvouter, lse_diff_vs_kvouter: "wgmma_check" fails, and the exit status is 1, past 2e-2 on out or
// 1e-3 on lse, far above the bf16 rounding flips of two correct kernels and far below a layout error). With
// index=wgmma the index branch is BlockMaxScoresWgmma; after the timed runs BlockMaxScores recomputes every chunk's
// block scores on the same inputs into a second buffer (both poisoned alike first) and the two are compared bit for
// bit ("index_check": "ok" or "MISMATCH", "index_diff_entries": the differing entries, bad-row flags included; exit
// status 1 on a mismatch). The top-k is RankTopKThreshold on the chunks where RankTopKThresholdPaysOff (topk=fast:
// on every chunk; its split lists in a workspace sized by RankTopKThresholdWorkspaceBytes), RankTopK elsewhere;
// whenever RankTopKThreshold may run, RankTopK also ranks every chunk's block scores into a second selection buffer
// in the warm-up repetition, and after the timed runs the two selections (the last repetition's and RankTopK's) are
// compared entry for entry ("topk_check": "ok" or "MISMATCH", "topk_diff_entries"; the first differing row goes to
// stderr; exit status 1 on a mismatch; "topk_threshold_chunks": the chunks RankTopKThreshold ranked,
// "topk_splits": the splits of the last chunk's rows there, 0 where RankTopK ranked it). The KV-outer lists are
// the direct ones (KvOuterPlan::direct_lists: one kernel per chunk) where every sequence has one query (decode with
// q_len 1), the general ones elsewhere or with lists=general; with direct lists, after the timed runs the same
// main-branch kernel recomputes out / lse from the same selection with the general lists and the two are compared
// bit for bit ("lists_check": "ok" or "MISMATCH", "lists_diff_words": differing 32-bit words of out and lse; exit
// status 1 on a mismatch). In decode the index branch runs as one batched chunk (ChunkGeometry::sequences: one
// block-max launch and one top-k for every sequence) where the backend would batch it (IsDecodeBatch: q_len <= 16),
// per sequence with index_batch=per-sequence; batched, after the timed runs the per-sequence launches recompute the
// block scores and the selection on the same inputs and the two are compared bit for bit ("batch_check": "ok" or
// "MISMATCH", "batch_diff_entries": differing entries, bad-row flags included; the first difference goes to stderr;
// exit status 1 on a mismatch). In decode with a KV-outer main branch the whole step (index, top-k, main branch) is
// also captured as one CUDA graph and its replays timed ("step_graph_ms"; the selection and outputs poisoned before
// each replay, the last replay's checked as above).
// With index=fp8 (per sequence in decode) the random index_q / index_k are rounded to e4m3 on the device (RoundToE4M3,
// then E4M3ToLowp back into the bf16 copies, so both hold the same numbers) and the index branch is BlockMaxScoresFp8
// on the e4m3 copies; after the timed runs BlockMaxScores (bf16 mma.sync, exact products, fp32 accumulation)
// recomputes every chunk from the bf16 copies, and again from their absolute values (the magnitude of each entry:
// index_scale * the largest sum_i |q_i k_i| over the block's visible keys). Reported: "fp8_max_abs_diff" (score
// units), "fp8_max_rel_diff" (|diff| / that magnitude, per entry), "fp8_over_bound_entries" (entries past
// kFp8IndexRelBound * magnitude), "fp8_written_mismatch" (entries written by one kernel only, and a different bad
// row), and the selections of RankTopK on both as sets: "fp8_topk_diff_rows", "fp8_topk_diff_blocks" (ids in the fp8
// selection missing from the reference's; near-ties, not failures). "fp8_check": "ok" or "FAILED" (exit status 1)
// when an entry is past the bound or the written entries or bad rows differ. Prints one JSON object.
//
//   gpu_bench prefill N [reps] [main=...] [index=...] [topk=...] [lists=general]    one causal sequence of N tokens
//   gpu_bench decode L [reps] [batch=B] [q_len=Q] [main=...] [index=...] [topk=...] [lists=...] [index_batch=...]
//                                                                B sequences of L keys, Q queries each (1)
//   main=kv-outer-wgmma (default on sm_90) | kv-outer (mma.sync tiles; default elsewhere) | q-outer
//   index=wgmma (BlockMaxScoresWgmma, default on sm_90) | mma (BlockMaxScores; default elsewhere) | fp8
//         (BlockMaxScoresFp8 on e4m3-valued index inputs; sm_90 only)
//   topk=by-shape (default, see above) | warp (RankTopK) | fast (RankTopKThreshold on every chunk)
//   lists=direct (default where q_len is 1) | general (the default elsewhere; direct needs q_len 1)
//   index_batch=batched (default in decode with q_len <= 16) | per-sequence
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/kernels.h"

namespace msa::gpu {
namespace {

constexpr int kHq = 64, kHkv = 4, kDim = 128, kBk = 128, kTopK = 16;
constexpr int64_t kChunkBudgetBytes = int64_t(8) << 30;  // block scores of one index chunk
constexpr int64_t kMainBudgetBytes = int64_t(2) << 30;   // partial results of one KV-outer chunk (as the backend)

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
__global__ void CountBadSelections(const int32_t* topk, int64_t total_q, int64_t q_len, int hidx, int top_k,
                                   int64_t pos0, int bk, unsigned long long* bad) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= total_q * hidx) return;
  const int64_t t = row % total_q, pos = pos0 + t % q_len, local = pos / bk;
  const int32_t* sel = topk + row * top_k;
  const int64_t valid = local + 1 < top_k ? local + 1 : top_k;
  bool ok = sel[valid - 1] == local;
  for (int s = 0; s < top_k; ++s) ok = ok && (s < valid ? (sel[s] >= 0 && sel[s] <= local) : sel[s] == -1);
  if (!ok) atomicAdd(bad, 1ull);
}

// *max_bits = max(*max_bits, bits of |a[i] - b[i]| as a float) (non-negative floats order as their bits).
__global__ void MaxAbsDiff(const double* a, const double* b, int64_t n, unsigned* max_bits) {
  float local = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    local = fmaxf(local, float(fabs(a[i] - b[i])));
  }
  atomicMax(max_bits, __float_as_uint(local));
}

// count[0] += the number of i < n with a[i] and b[i] not the same bits; count[1] = min(count[1], the first such i).
__global__ void CountBitDiffs(const uint32_t* a, const uint32_t* b, int64_t n, unsigned long long* count) {
  unsigned long long local = 0, first = ~0ull;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (a[i] != b[i]) {
      ++local;
      if (first == ~0ull) first = static_cast<unsigned long long>(i);
    }
  }
  if (local) {
    atomicAdd(count, local);
    atomicMin(count + 1, first);
  }
}

__global__ void CountNonFinite(const double* x, int64_t n, unsigned long long* bad) {
  unsigned long long count = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    count += !isfinite(x[i]);
  }
  if (count) atomicAdd(bad, count);
}

// dst[i] = |src[i]| for n 16-bit floats (the sign bit cleared).
__global__ void AbsLowp(const uint16_t* src, int64_t n, uint16_t* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i] & 0x7fffu;
  }
}

// The fp8 index check over one chunk's block scores: fp8 (BlockMaxScoresFp8), ref (BlockMaxScores on the same values),
// magnitude (BlockMaxScores on their absolute values). Entries never written keep the all-ones poison.
struct Fp8Stats {
  unsigned max_abs_bits, max_rel_bits;  // max |fp8 - ref| and max |fp8 - ref| / magnitude, as float bits
  unsigned long long over_bound;        // entries with |fp8 - ref| > rel_bound * magnitude (or one side NaN)
  unsigned long long written_mismatch;  // entries written by one kernel only
};

__global__ void CompareFp8Scores(const float* fp8, const float* ref, const float* magnitude, int64_t n,
                                 float rel_bound, Fp8Stats* stats) {
  float max_abs = 0.0f, max_rel = 0.0f;
  unsigned long long over = 0, mismatch = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const bool written = __float_as_uint(fp8[i]) != 0xffffffffu;
    if (written != (__float_as_uint(ref[i]) != 0xffffffffu)) ++mismatch;
    if (!written) continue;
    const float diff = fabsf(fp8[i] - ref[i]);
    if (isnan(diff)) {
      over += !(isnan(fp8[i]) && isnan(ref[i]));
      continue;
    }
    const float rel = diff > 0.0f ? diff / magnitude[i] : 0.0f;  // magnitude 0: both dots exactly 0
    max_abs = fmaxf(max_abs, diff);
    max_rel = fmaxf(max_rel, rel);
    over += diff > rel_bound * magnitude[i];
  }
  atomicMax(&stats->max_abs_bits, __float_as_uint(max_abs));
  atomicMax(&stats->max_rel_bits, __float_as_uint(max_rel));
  if (over) atomicAdd(&stats->over_bound, over);
  if (mismatch) atomicAdd(&stats->written_mismatch, mismatch);
}

// counts[0] += rows (of top_k ids, -1 padded) whose id sets differ, counts[1] += ids of a missing from b.
__global__ void CountSelectionSetDiffs(const int32_t* a, const int32_t* b, int64_t rows, int top_k,
                                       unsigned long long* counts) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  int missing = 0;
  for (int s = 0; s < top_k; ++s) {
    const int32_t id = a[row * top_k + s];
    bool found = id < 0;
    for (int t = 0; t < top_k && !found; ++t) found = b[row * top_k + t] == id;
    missing += !found;
  }
  if (missing) {
    atomicAdd(counts, 1ull);
    atomicAdd(counts + 1, static_cast<unsigned long long>(missing));
  }
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

// The largest |out_a - out_b| and |lse_a - lse_b|, as floats (device-side reductions, then one copy).
std::pair<float, float> MaxDiffs(const double* out_a, const double* out_b, int64_t n_out, const double* lse_a,
                                 const double* lse_b, int64_t n_lse) {
  unsigned* diff_bits = Allocate<unsigned>(2);
  BENCH_CHECK(cudaMemset(diff_bits, 0, 8));
  MaxAbsDiff<<<2048, 256>>>(out_a, out_b, n_out, diff_bits);
  MaxAbsDiff<<<2048, 256>>>(lse_a, lse_b, n_lse, diff_bits + 1);
  BENCH_CHECK(cudaGetLastError());
  unsigned host_bits[2];
  BENCH_CHECK(cudaMemcpy(host_bits, diff_bits, 8, cudaMemcpyDeviceToHost));
  BENCH_CHECK(cudaFree(diff_bits));
  float diffs[2];
  std::memcpy(diffs, host_bits, 8);
  return {diffs[0], diffs[1]};
}

// Row `row` of a device selection [rows, kTopK] as text, " id id ...", for a mismatch report.
std::string SelectionRowText(const int32_t* selection, int64_t row) {
  int32_t ids[kTopK];
  BENCH_CHECK(cudaMemcpy(ids, selection + row * kTopK, sizeof ids, cudaMemcpyDeviceToHost));
  std::string text;
  for (const int32_t id : ids) text += " " + std::to_string(id);
  return text;
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
  void Begin(cudaStream_t stream = nullptr) { BENCH_CHECK(cudaEventRecord(start_, stream)); }
  void End(cudaStream_t stream = nullptr) {
    BENCH_CHECK(cudaEventRecord(stop_, stream));
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

// The work `enqueue(stream)` puts on `stream`, captured once as a CUDA graph and replayed reps + 1 times (the first
// untimed), `prepare()` (poisoning outputs) and a device synchronization before each replay: the median replay time.
template <class Enqueue, class Prepare>
double GraphReplayMs(cudaStream_t stream, int reps, PhaseTimer& timer, Enqueue&& enqueue, Prepare&& prepare) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream);
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> graph_ms;
  for (int rep = -1; rep < reps; ++rep) {
    prepare();
    BENCH_CHECK(cudaDeviceSynchronize());
    timer.Begin(stream);
    BENCH_CHECK(cudaGraphLaunch(exec, stream));
    timer.End(stream);
    const double ms = timer.TakeMs();
    if (rep >= 0) graph_ms.push_back(ms);
  }
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  return Median(graph_ms);
}

// The main-branch kernel a run times.
enum class Main { kKvOuter, kQOuter, kKvOuterWgmma };
const char* MainName(Main m) {
  return m == Main::kKvOuter ? "kv-outer" : m == Main::kQOuter ? "q-outer" : "kv-outer-wgmma";
}

// The index-branch kernel a run times.
enum class Index { kMma, kWgmma, kFp8 };
const char* IndexName(Index i) { return i == Index::kMma ? "mma" : i == Index::kWgmma ? "wgmma" : "fp8"; }

// The top-k kernel a run times.
enum class TopK { kByShape, kWarp, kThreshold };
const char* TopKName(TopK t) { return t == TopK::kByShape ? "by-shape" : t == TopK::kWarp ? "warp" : "fast"; }

// index=fp8: BlockMaxScoresFp8 against BlockMaxScores on the same e4m3 values (CheckFp8Index).
struct Fp8Check {
  bool compared = false;  // false: not run, or no room for the reference buffers
  float max_abs_diff = 0, max_rel_diff = 0;
  int64_t over_bound = 0, written_mismatch = 0;  // entries; written_mismatch counts a different bad row as one
  int64_t topk_diff_rows = 0, topk_diff_blocks = 0;
};

struct Result {
  double index_ms = 0, topk_ms = 0, main_ms = 0, main_graph_ms = 0;
  float out_diff_vs_qouter = -1, lse_diff_vs_qouter = -1;    // -1: not compared (not KV-outer, or no room)
  Main main = Main::kKvOuterWgmma;  // the kernel timed as the main branch
  Index index = Index::kWgmma;      // and as the index branch
  float out_diff_vs_kvouter = -1, lse_diff_vs_kvouter = -1;  // -1: not compared (not KV-outer-wgmma, or no room)
  uint64_t bad_rows = 0, nonfinite = 0;
  int64_t index_diffs = -1;  // entries where BlockMaxScoresWgmma and BlockMaxScores differ; -1: not compared
  TopK topk = TopK::kByShape;
  int64_t topk_threshold_chunks = 0;  // chunks RankTopKThreshold ranked
  int topk_splits = 0;       // RankTopKThreshold's splits of the last chunk (0: RankTopK ranked it)
  int64_t topk_diffs = -1;   // selection entries where RankTopKThreshold and RankTopK differ; -1: not compared
  bool direct_lists = false;  // the KV-outer main branch ran on the direct lists
  int64_t lists_diffs = -1;   // 32-bit words of out and lse where direct and general lists differ; -1: not compared
  bool batched = false;       // the index branch ran as one batched chunk
  int64_t batch_diffs = -1;   // block-score and selection entries (and bad-row flags) where batched and per-sequence
                              // differ; -1: not compared
  double step_graph_ms = 0;   // index + top-k + main branch as one replayed CUDA graph (decode, KV-outer); 0: not run
  Fp8Check fp8;
};

// What one run measures: `batch` sequences of k_len keys, each with the causal suffix of q_len queries.
struct Shape {
  int64_t q_len = 0, k_len = 0, batch = 1;
  Main main = Main::kKvOuterWgmma;
  bool main_named = false;  // main=... given: no fallback from kv-outer-wgmma
  Index index = Index::kWgmma;
  bool index_named = false;  // index=... given: no fallback from wgmma
  TopK topk = TopK::kByShape;
  bool general_lists = false;  // lists=general: never the direct lists
  bool decode = false;         // decode mode: the whole step is also timed as one CUDA graph
  bool batched = false;        // the index branch as one batched chunk (decode batches, index_batch=batched)
  bool kv_outer() const { return main != Main::kQOuter; }  // the list-based kernels (workspace, graph)
};

// index=fp8, after the timed runs: every chunk again with BlockMaxScoresFp8 (into bs, bs_entries floats) and with
// BlockMaxScores on the bf16 copies of the same values and on their absolute values; the entries compared
// (CompareFp8Scores) and RankTopK's selections of both compared as sets. index_q [n_index_q] / index_k [n_index_k]:
// bf16 holding e4m3 values; index_q8 / index_k8 their e4m3 bytes. Not compared where the device has no room for the
// two more block-score buffers.
Fp8Check CheckFp8Index(const std::vector<ChunkGeometry>& chunks, const uint16_t* index_q, const uint16_t* index_k,
                       const uint8_t* index_q8, const uint8_t* index_k8, int64_t n_index_q, int64_t n_index_k,
                       float index_scale, float* bs, int64_t bs_entries, int64_t total_q) {
  Fp8Check check;
  const int64_t sel_rows = kHkv * total_q;
  float *bs_ref = nullptr, *bs_magnitude = nullptr;
  uint16_t *abs_q = nullptr, *abs_k = nullptr;
  int32_t *topk_fp8 = nullptr, *topk_ref = nullptr;  // [Hidx, total_q, top_k] each
  const bool room = cudaMalloc(&bs_ref, size_t(bs_entries) * 4) == cudaSuccess &&
                    cudaMalloc(&bs_magnitude, size_t(bs_entries) * 4) == cudaSuccess &&
                    cudaMalloc(&abs_q, size_t(n_index_q) * 2) == cudaSuccess &&
                    cudaMalloc(&abs_k, size_t(n_index_k) * 2) == cudaSuccess &&
                    cudaMalloc(&topk_fp8, size_t(sel_rows * kTopK) * 4) == cudaSuccess &&
                    cudaMalloc(&topk_ref, size_t(sel_rows * kTopK) * 4) == cudaSuccess;
  if (room) {
    AbsLowp<<<4096, 256>>>(index_q, n_index_q, abs_q);
    AbsLowp<<<4096, 256>>>(index_k, n_index_k, abs_k);
    BENCH_CHECK(cudaGetLastError());
    Fp8Stats* stats = Allocate<Fp8Stats>(1);
    unsigned long long* bad = Allocate<unsigned long long>(3);  // first bad rows: fp8, reference, magnitude runs
    unsigned long long* set_diffs = Allocate<unsigned long long>(2);
    BENCH_CHECK(cudaMemset(stats, 0, sizeof(Fp8Stats)));
    BENCH_CHECK(cudaMemset(set_diffs, 0, 2 * 8));
    for (const ChunkGeometry& g : chunks) {
      const int64_t n = g.nq * kHkv * g.max_blocks;
      for (float* p : {bs, bs_ref, bs_magnitude}) BENCH_CHECK(cudaMemset(p, 0xff, size_t(n) * 4));
      BENCH_CHECK(cudaMemset(bad, 0xff, 3 * 8));
      BENCH_CHECK(BlockMaxScoresFp8(index_q8, index_k8, g, index_scale, bs, bad));
      BENCH_CHECK(BlockMaxScores(kLowpBF16, index_q, index_k, g, index_scale, bs_ref, bad + 1));
      BENCH_CHECK(BlockMaxScores(kLowpBF16, abs_q, abs_k, g, index_scale, bs_magnitude, bad + 2));
      CompareFp8Scores<<<2048, 256>>>(bs, bs_ref, bs_magnitude, n, kFp8IndexRelBound, stats);
      BENCH_CHECK(cudaGetLastError());
      BENCH_CHECK(RankTopK(bs, g, topk_fp8));
      BENCH_CHECK(RankTopK(bs_ref, g, topk_ref));
      unsigned long long host_bad[2];
      BENCH_CHECK(cudaMemcpy(host_bad, bad, sizeof host_bad, cudaMemcpyDeviceToHost));
      if (host_bad[0] != host_bad[1]) {
        ++check.written_mismatch;
        std::fprintf(stderr, "gpu_bench: fp8 bad-row MISMATCH in the chunk at t0 %lld: fp8 %llx, mma %llx\n",
                     (long long)g.t0, host_bad[0], host_bad[1]);
      }
    }
    CountSelectionSetDiffs<<<unsigned((sel_rows + 255) / 256), 256>>>(topk_fp8, topk_ref, sel_rows, kTopK, set_diffs);
    BENCH_CHECK(cudaGetLastError());
    Fp8Stats host_stats;
    unsigned long long host_set_diffs[2];
    BENCH_CHECK(cudaMemcpy(&host_stats, stats, sizeof host_stats, cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(host_set_diffs, set_diffs, sizeof host_set_diffs, cudaMemcpyDeviceToHost));
    check.compared = true;
    std::memcpy(&check.max_abs_diff, &host_stats.max_abs_bits, 4);
    std::memcpy(&check.max_rel_diff, &host_stats.max_rel_bits, 4);
    check.over_bound = int64_t(host_stats.over_bound);
    check.written_mismatch += int64_t(host_stats.written_mismatch);
    check.topk_diff_rows = int64_t(host_set_diffs[0]);
    check.topk_diff_blocks = int64_t(host_set_diffs[1]);
    for (void* p : {static_cast<void*>(stats), static_cast<void*>(bad), static_cast<void*>(set_diffs)}) {
      BENCH_CHECK(cudaFree(p));
    }
  } else {
    cudaGetLastError();  // out of memory: not compared
  }
  for (void* p : {static_cast<void*>(bs_ref), static_cast<void*>(bs_magnitude), static_cast<void*>(abs_q),
                  static_cast<void*>(abs_k), static_cast<void*>(topk_fp8), static_cast<void*>(topk_ref)}) {
    if (p != nullptr) BENCH_CHECK(cudaFree(p));
  }
  return check;
}

// The index branch (in chunks of one sequence, or one batched chunk), the top-k and the main branch; the main branch
// is also captured once in a CUDA graph (kv-outer only) and its replays timed, and in decode the whole step too.
Result Run(Shape shape, int reps) {
  const int64_t q_len = shape.q_len, k_len = shape.k_len, total_q = shape.batch * q_len;
  const int64_t total_k = shape.batch * k_len;
  const int64_t pos0 = k_len - q_len, max_blocks = (k_len + kBk - 1) / kBk;
  uint16_t* index_q = RandomBf16(total_q * kHkv * kDim, 1);   // [total_q, Hidx, Di]
  uint16_t* index_k = RandomBf16(total_k * kDim, 2);          // [total_k, Di]
  uint16_t* q = RandomBf16(total_q * kHq * kDim, 3);          // [total_q, Hq, D]
  uint16_t* k = RandomBf16(total_k * kHkv * kDim, 4);         // [total_k, Hkv, D]
  uint16_t* v = RandomBf16(total_k * kHkv * kDim, 5);         // [total_k, Hkv, Dv]
  const int64_t nq_chunk = std::min<int64_t>(q_len, kChunkBudgetBytes / (kHkv * max_blocks * 4));
  // Block-score rows: one chunk's, or (batched) every query's: [bs_rows, max_blocks]
  const int64_t bs_rows = (shape.batched ? total_q : nq_chunk) * kHkv;
  float* bs = Allocate<float>(bs_rows * max_blocks);
  int32_t* topk = Allocate<int32_t>(kHkv * total_q * kTopK);  // [Hidx, total_q, top_k]
  double* out = Allocate<double>(total_q * kHq * kDim);       // [total_q, Hq, Dv]
  double* lse = Allocate<double>(total_q * kHq);              // [total_q, Hq]
  unsigned long long* flags = Allocate<unsigned long long>(3);  // bad index row, bad selections, NaNs
  std::vector<int64_t> position(total_q), key_begin(total_q);
  std::vector<int32_t> first_block(total_q);
  for (int64_t t = 0; t < total_q; ++t) {
    position[t] = pos0 + t % q_len;
    key_begin[t] = (t / q_len) * k_len;
    first_block[t] = int32_t((t / q_len) * max_blocks);
  }
  int64_t* d_position = Allocate<int64_t>(total_q);
  int64_t* d_key_begin = Allocate<int64_t>(total_q);
  int32_t* d_first_block = Allocate<int32_t>(total_q);
  BENCH_CHECK(cudaMemcpy(d_position, position.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_key_begin, key_begin.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_first_block, first_block.data(), size_t(total_q) * 4, cudaMemcpyHostToDevice));

  const float index_scale = 1.0f / std::sqrt(float(kDim)), scale = index_scale;
  AttendGeometry ag;
  ag.total_q = total_q;
  ag.hq = kHq;
  ag.hkv = kHkv;
  ag.d = ag.dv = kDim;
  ag.bk = kBk;
  ag.top_k = kTopK;
  KvOuterPlan plan = PlanKvOuter(ag, shape.batch * max_blocks, kMainBudgetBytes, q_len == 1);
  if (shape.general_lists) plan.direct_lists = false;
  KvOuterPlan general_plan = plan;  // the same workspace layout, the general lists (the direct lists' check)
  general_plan.direct_lists = false;
  if (shape.kv_outer() && (!KvOuterAttendFits(ag) || !plan.ok)) {
    std::fprintf(stderr, "gpu_bench: KvOuterAttend does not take this shape\n");
    std::exit(1);
  }
  if (shape.main == Main::kKvOuterWgmma && !KvOuterWgmmaFits(ag) && !shape.main_named) shape.main = Main::kKvOuter;
  if (shape.main == Main::kKvOuterWgmma && !KvOuterWgmmaFits(ag)) {
    std::fprintf(stderr, "gpu_bench: KvOuterAttendWgmma does not take this shape or device (needs sm_90)\n");
    std::exit(1);
  }
  if (shape.index == Index::kWgmma && !BlockMaxScoresWgmmaFits(kDim, kBk, index_scale) && !shape.index_named) {
    shape.index = Index::kMma;
  }
  if (shape.index == Index::kWgmma && !BlockMaxScoresWgmmaFits(kDim, kBk, index_scale)) {
    std::fprintf(stderr, "gpu_bench: BlockMaxScoresWgmma does not take this shape or device (needs sm_90)\n");
    std::exit(1);
  }
  if (shape.index == Index::kFp8 && !BlockMaxScoresFp8Fits(kDim, kBk, index_scale)) {
    std::fprintf(stderr, "gpu_bench: BlockMaxScoresFp8 does not take this shape or device (needs sm_90)\n");
    std::exit(1);
  }
  uint8_t* index_q8 = nullptr;  // index=fp8: [total_q, Hidx, Di] e4m3
  uint8_t* index_k8 = nullptr;  // [total_k, Di] e4m3
  if (shape.index == Index::kFp8) {  // the index inputs become e4m3 values; their bf16 copies hold the same numbers
    index_q8 = Allocate<uint8_t>(total_q * kHkv * kDim);
    index_k8 = Allocate<uint8_t>(total_k * kDim);
    BENCH_CHECK(RoundToE4M3(index_q, kInBF16, total_q * kHkv * kDim, index_q8));
    BENCH_CHECK(RoundToE4M3(index_k, kInBF16, total_k * kDim, index_k8));
    BENCH_CHECK(E4M3ToLowp(index_q8, total_q * kHkv * kDim, kLowpBF16, index_q));
    BENCH_CHECK(E4M3ToLowp(index_k8, total_k * kDim, kLowpBF16, index_k));
  }
  // The chunks of the index branch, in order (every sequence, chunks of nq_chunk queries).
  std::vector<ChunkGeometry> chunks;
  for (int64_t seq = 0; seq < shape.batch; ++seq) {
    for (int64_t c0 = 0; c0 < q_len; c0 += nq_chunk) {
      ChunkGeometry g;
      g.t0 = seq * q_len + c0;
      g.nq = std::min(nq_chunk, q_len - c0);
      g.pos0 = pos0 + c0;
      g.key_begin = seq * k_len;
      g.k_len = k_len;
      g.total_q = total_q;
      g.hidx = kHkv;
      g.di = kDim;
      g.bk = kBk;
      g.top_k = kTopK;
      g.max_blocks = max_blocks;
      chunks.push_back(g);
    }
  }
  // The index launches: the chunks one by one, or (batched) one chunk over every sequence, whose rows are every
  // query's (t * Hidx + r: its t0 is 0); the bench's sequences are alike, so its bounds are exact.
  std::vector<ChunkGeometry> launches = chunks;
  SequenceChunk* d_sequences = nullptr;  // [batch]
  if (shape.batched) {
    std::vector<SequenceChunk> sequences;
    for (const ChunkGeometry& g : chunks) sequences.push_back(SequenceChunk{g.t0, g.nq, g.pos0, g.key_begin, g.k_len});
    d_sequences = Allocate<SequenceChunk>(int64_t(sequences.size()));
    BENCH_CHECK(cudaMemcpy(d_sequences, sequences.data(), sequences.size() * sizeof(SequenceChunk),
                           cudaMemcpyHostToDevice));
    ChunkGeometry g = chunks.front();
    g.sequences = d_sequences;
    g.num_sequences = int64_t(sequences.size());
    launches = {g};
  }
  const auto launch_rows = [](const ChunkGeometry& g) { return g.num_sequences * g.nq * kHkv; };
  const auto block_max = [&](const ChunkGeometry& g, float* scores, unsigned long long* bad_row, cudaStream_t on) {
    if (shape.index == Index::kWgmma) {
      BENCH_CHECK(BlockMaxScoresWgmma(kLowpBF16, index_q, index_k, g, index_scale, scores, bad_row, on));
    } else if (shape.index == Index::kFp8) {
      BENCH_CHECK(BlockMaxScoresFp8(index_q8, index_k8, g, index_scale, scores, bad_row, on));
    } else {
      BENCH_CHECK(BlockMaxScores(kLowpBF16, index_q, index_k, g, index_scale, scores, bad_row, on));
    }
  };
  // RankTopKThreshold's split lists, and RankTopK's selection on the same block scores (topk=fast).
  const bool threshold = shape.topk != TopK::kWarp;  // RankTopKThreshold may rank a chunk
  const auto ranks_by_threshold = [&](const ChunkGeometry& g) {
    return shape.topk == TopK::kThreshold || (shape.topk == TopK::kByShape && RankTopKThresholdPaysOff(g));
  };
  const size_t topk_ws_bytes = threshold ? RankTopKThresholdWorkspaceBytes(bs_rows, kTopK) : 0;
  void* topk_ws = topk_ws_bytes > 0 ? static_cast<void*>(Allocate<unsigned char>(int64_t(topk_ws_bytes))) : nullptr;
  int32_t* topk_ref = threshold ? Allocate<int32_t>(kHkv * total_q * kTopK) : nullptr;  // [Hidx, total_q, top_k]
  if (threshold) BENCH_CHECK(cudaMemset(topk_ref, 0x7f, size_t(kHkv * total_q * kTopK) * 4));
  void* workspace = shape.kv_outer() ? static_cast<void*>(Allocate<unsigned char>(int64_t(plan.bytes))) : nullptr;
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CHECK(cudaDeviceSynchronize());
  const auto main_branch = [&](cudaStream_t on) {
    if (shape.main == Main::kKvOuterWgmma) {
      BENCH_CHECK(KvOuterAttendWgmma(kLowpBF16, q, k, v, topk, d_position, d_key_begin, d_first_block, ag, scale,
                                     plan, workspace, out, lse, on));
    } else if (shape.main == Main::kKvOuter) {
      BENCH_CHECK(KvOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, d_first_block, ag, scale, plan,
                                workspace, out, lse, on));
    } else {
      BENCH_CHECK(QOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, ag, scale, out, lse));
    }
  };
  // The selection of a launch's rows from `scores` into `selection`, by the chosen top-k kernel.
  const auto rank = [&](const ChunkGeometry& g, const float* scores, int32_t* selection, cudaStream_t on) {
    if (ranks_by_threshold(g)) {
      BENCH_CHECK(RankTopKThreshold(scores, g, topk_ws, topk_ws_bytes, selection, on));
    } else {
      BENCH_CHECK(RankTopK(scores, g, selection, on));
    }
  };
  const auto poison_outputs = [&] {
    BENCH_CHECK(cudaMemset(out, 0xff, size_t(total_q * kHq * kDim) * 8));  // NaN
    BENCH_CHECK(cudaMemset(lse, 0xff, size_t(total_q * kHq) * 8));
  };
  PhaseTimer index_timer, topk_timer, main_timer;
  std::vector<double> index_ms, topk_ms, main_ms;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
    BENCH_CHECK(cudaMemset(topk, 0x7f, size_t(kHkv * total_q * kTopK) * 4));
    poison_outputs();
    BENCH_CHECK(cudaMemset(flags, 0xff, 8));  // flags[0]: the first bad index row (none: all ones)
    BENCH_CHECK(cudaMemset(flags + 1, 0, 2 * 8));
    for (const ChunkGeometry& g : launches) {
      BENCH_CHECK(cudaMemset(bs, 0xff, size_t(launch_rows(g) * max_blocks) * 4));  // NaN: never ranked unwritten
      index_timer.Begin();
      block_max(g, bs, flags, nullptr);
      index_timer.End();
      topk_timer.Begin();
      rank(g, bs, topk, nullptr);
      topk_timer.End();
      if (threshold && rep == -1) BENCH_CHECK(RankTopK(bs, g, topk_ref));  // the reference twin, untimed
    }
    main_timer.Begin();
    main_branch(nullptr);
    main_timer.End();
    const double i_ms = index_timer.TakeMs(), t_ms = topk_timer.TakeMs(), m_ms = main_timer.TakeMs();
    if (rep >= 0) {
      index_ms.push_back(i_ms);
      topk_ms.push_back(t_ms);
      main_ms.push_back(m_ms);
    }
  }
  Result result;
  result.main = shape.main;
  result.index = shape.index;
  result.topk = shape.topk;
  result.batched = shape.batched;
  if (threshold) {  // the last repetition's selection against RankTopK's, entry for entry
    result.topk_threshold_chunks = std::count_if(launches.begin(), launches.end(), ranks_by_threshold);
    result.topk_splits =
        ranks_by_threshold(launches.back()) ? RankTopKThresholdSplits(launches.back(), topk_ws_bytes) : 0;
    const int64_t n = kHkv * total_q * kTopK;
    unsigned long long* check = Allocate<unsigned long long>(2);  // differing entries, the first one
    BENCH_CHECK(cudaMemset(check, 0, 8));
    BENCH_CHECK(cudaMemset(check + 1, 0xff, 8));
    CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(topk), reinterpret_cast<const uint32_t*>(topk_ref),
                                 n, check);
    BENCH_CHECK(cudaGetLastError());
    unsigned long long host_check[2];
    BENCH_CHECK(cudaMemcpy(host_check, check, sizeof host_check, cudaMemcpyDeviceToHost));
    result.topk_diffs = int64_t(host_check[0]);
    if (host_check[0] > 0) {
      const int64_t row = int64_t(host_check[1]) / kTopK;  // [Hidx, total_q] row
      const std::string got_text = SelectionRowText(topk, row), want_text = SelectionRowText(topk_ref, row);
      std::fprintf(stderr,
                   "gpu_bench: topk MISMATCH: %llu entries; first in group %lld, query %lld (position %lld):\n"
                   "  fast:%s\n  warp:%s\n",
                   host_check[0], (long long)(row / total_q), (long long)(row % total_q),
                   (long long)(pos0 + (row % total_q) % q_len), got_text.c_str(), want_text.c_str());
    }
    BENCH_CHECK(cudaFree(check));
  }
  result.index_ms = Median(index_ms);
  result.topk_ms = Median(topk_ms);
  result.main_ms = Median(main_ms);
  if (shape.kv_outer()) {  // the main branch as one graph: capture once, replay (outputs poisoned before each)
    result.main_graph_ms = GraphReplayMs(stream, reps, main_timer, main_branch, poison_outputs);
  }
  if (shape.kv_outer() && shape.decode) {  // the whole decode step as one graph: index, top-k, main branch
    const auto step = [&](cudaStream_t on) {
      for (const ChunkGeometry& g : launches) {
        block_max(g, bs, flags, on);
        rank(g, bs, topk, on);
      }
      main_branch(on);
    };
    const auto poison_selection_and_outputs = [&] {
      BENCH_CHECK(cudaMemset(topk, 0x7f, size_t(kHkv * total_q * kTopK) * 4));
      poison_outputs();
    };
    result.step_graph_ms = GraphReplayMs(stream, reps, main_timer, step, poison_selection_and_outputs);
  }
  size_t free_bytes = 0, total_bytes = 0;
  BENCH_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t compare_bytes = size_t(total_q * kHq) * (kDim + 1) * 8 + (size_t(1) << 30);  // + 1 GiB headroom
  result.direct_lists = shape.kv_outer() && plan.direct_lists;
  if (shape.kv_outer() && compare_bytes < free_bytes) {  // independent kernels' answers on the same selection
    double* out_ref = Allocate<double>(total_q * kHq * kDim);
    double* lse_ref = Allocate<double>(total_q * kHq);
    if (result.direct_lists) {  // the same tile kernel on the general lists: out and lse bit for bit
      BENCH_CHECK(cudaMemset(out_ref, 0xff, size_t(total_q * kHq * kDim) * 8));
      BENCH_CHECK(cudaMemset(lse_ref, 0xff, size_t(total_q * kHq) * 8));
      if (shape.main == Main::kKvOuterWgmma) {
        BENCH_CHECK(KvOuterAttendWgmma(kLowpBF16, q, k, v, topk, d_position, d_key_begin, d_first_block, ag, scale,
                                       general_plan, workspace, out_ref, lse_ref));
      } else {
        BENCH_CHECK(KvOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, d_first_block, ag, scale,
                                  general_plan, workspace, out_ref, lse_ref));
      }
      unsigned long long* check = Allocate<unsigned long long>(4);  // out: count, first; lse: count, first
      BENCH_CHECK(cudaMemset(check, 0, 4 * 8));
      BENCH_CHECK(cudaMemset(check + 1, 0xff, 8));
      BENCH_CHECK(cudaMemset(check + 3, 0xff, 8));
      // Doubles as pairs of 32-bit words: a differing double counts once or twice, zero only when all bits agree.
      CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(out), reinterpret_cast<const uint32_t*>(out_ref),
                                   total_q * kHq * kDim * 2, check);
      CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(lse), reinterpret_cast<const uint32_t*>(lse_ref),
                                   total_q * kHq * 2, check + 2);
      BENCH_CHECK(cudaGetLastError());
      unsigned long long host_check[4];
      BENCH_CHECK(cudaMemcpy(host_check, check, sizeof host_check, cudaMemcpyDeviceToHost));
      result.lists_diffs = int64_t(host_check[0] + host_check[2]);
      for (int which = 0; which < 2; ++which) {
        if (host_check[2 * which] == 0) continue;
        const int64_t i = int64_t(host_check[2 * which + 1]) / 2;  // the double
        double got = 0, want = 0;
        const double* a = which == 0 ? out : lse;
        const double* b = which == 0 ? out_ref : lse_ref;
        BENCH_CHECK(cudaMemcpy(&got, a + i, 8, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(&want, b + i, 8, cudaMemcpyDeviceToHost));
        const int64_t row = which == 0 ? i / kDim : i;  // (query, head)
        std::fprintf(stderr,
                     "gpu_bench: lists MISMATCH in %s: %llu words differ; first at query %lld, head %lld%s: "
                     "direct %.17g, general %.17g\n",
                     which == 0 ? "out" : "lse", host_check[2 * which], (long long)(row / kHq),
                     (long long)(row % kHq), which == 0 ? (", dim " + std::to_string(i % kDim)).c_str() : "", got,
                     want);
      }
      BENCH_CHECK(cudaFree(check));
    }
    if (shape.main == Main::kKvOuterWgmma) {  // the mma.sync tiles on the same lists (the workspace is free now)
      BENCH_CHECK(KvOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, d_first_block, ag, scale, plan,
                                workspace, out_ref, lse_ref));
      std::tie(result.out_diff_vs_kvouter, result.lse_diff_vs_kvouter) =
          MaxDiffs(out, out_ref, total_q * kHq * kDim, lse, lse_ref, total_q * kHq);
    }
    if (QOuterAttendFits(ag)) {
      BENCH_CHECK(QOuterAttend(kLowpBF16, q, k, v, topk, d_position, d_key_begin, ag, scale, out_ref, lse_ref));
      std::tie(result.out_diff_vs_qouter, result.lse_diff_vs_qouter) =
          MaxDiffs(out, out_ref, total_q * kHq * kDim, lse, lse_ref, total_q * kHq);
    }
    BENCH_CHECK(cudaFree(out_ref));
    BENCH_CHECK(cudaFree(lse_ref));
  }
  if (shape.index == Index::kWgmma) {  // BlockMaxScores on the same launches, bit for bit (bs is free now)
    float* bs_ref = nullptr;
    const size_t bs_bytes = size_t(bs_rows * max_blocks) * 4;
    if (cudaMalloc(&bs_ref, bs_bytes) == cudaSuccess) {
      // wgmma bad row, mma bad row, differing entries, first differing entry
      unsigned long long* check = Allocate<unsigned long long>(4);
      int64_t diffs = 0, reported = 0;
      for (const ChunkGeometry& g : launches) {
        const int64_t n = launch_rows(g) * max_blocks;
        BENCH_CHECK(cudaMemset(bs, 0xff, size_t(n) * 4));
        BENCH_CHECK(cudaMemset(bs_ref, 0xff, size_t(n) * 4));
        BENCH_CHECK(cudaMemset(check, 0xff, 4 * 8));  // no bad row, no first difference: all ones
        BENCH_CHECK(cudaMemset(check + 2, 0, 8));
        BENCH_CHECK(BlockMaxScoresWgmma(kLowpBF16, index_q, index_k, g, index_scale, bs, check));
        BENCH_CHECK(BlockMaxScores(kLowpBF16, index_q, index_k, g, index_scale, bs_ref, check + 1));
        CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(bs), reinterpret_cast<const uint32_t*>(bs_ref),
                                     n, check + 2);
        BENCH_CHECK(cudaGetLastError());
        unsigned long long host_check[4];
        BENCH_CHECK(cudaMemcpy(host_check, check, sizeof host_check, cudaMemcpyDeviceToHost));
        diffs += int64_t(host_check[2]) + (host_check[0] != host_check[1]);  // a different bad row counts as one
        if (host_check[2] > 0 && reported++ < 4) {  // where: the first differing entry of the chunk, both values
          const int64_t i = int64_t(host_check[3]);
          float got = 0, want = 0;
          BENCH_CHECK(cudaMemcpy(&got, bs + i, 4, cudaMemcpyDeviceToHost));
          BENCH_CHECK(cudaMemcpy(&want, bs_ref + i, 4, cudaMemcpyDeviceToHost));
          std::fprintf(stderr,
                       "gpu_bench: index MISMATCH in the chunk at t0 %lld (pos0 %lld, %lld queries): %llu entries; "
                       "first at row %lld (query %lld, group %lld), block %lld: wgmma %.9g, mma %.9g\n",
                       (long long)g.t0, (long long)g.pos0, (long long)g.nq, host_check[2], (long long)(i / max_blocks),
                       (long long)(i / max_blocks / kHkv), (long long)(i / max_blocks % kHkv),
                       (long long)(i % max_blocks), got, want);
        }
        if (host_check[0] != host_check[1] && reported++ < 4) {
          std::fprintf(stderr, "gpu_bench: index bad-row MISMATCH in the chunk at t0 %lld: wgmma %llx, mma %llx\n",
                       (long long)g.t0, host_check[0], host_check[1]);
        }
      }
      result.index_diffs = diffs;
      BENCH_CHECK(cudaFree(check));
      BENCH_CHECK(cudaFree(bs_ref));
    } else {
      cudaGetLastError();  // no room for a second block-score buffer: not compared
    }
  }
  if (shape.batched) {  // the per-sequence launches on the same inputs: block scores and selection bit for bit
    // bs holds the batched chunk's block scores, bs_seq each chunk's at its rows' place in the batch (row offset
    // t0 * Hidx); topk holds the last batched selection (the step graph's where it ran), topk_seq the per-sequence one.
    float* bs_seq = Allocate<float>(bs_rows * max_blocks);           // [total_q * Hidx, max_blocks]
    int32_t* topk_seq = Allocate<int32_t>(kHkv * total_q * kTopK);  // [Hidx, total_q, top_k]
    // batched bad row, per-sequence bad row, block-score entries differing, the first; selection entries, the first
    unsigned long long* check = Allocate<unsigned long long>(6);
    const unsigned long long check_init[6] = {~0ull, ~0ull, 0, ~0ull, 0, ~0ull};
    BENCH_CHECK(cudaMemcpy(check, check_init, sizeof check_init, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemset(bs, 0xff, size_t(bs_rows * max_blocks) * 4));
    BENCH_CHECK(cudaMemset(bs_seq, 0xff, size_t(bs_rows * max_blocks) * 4));
    BENCH_CHECK(cudaMemset(topk_seq, 0x7f, size_t(kHkv * total_q * kTopK) * 4));
    block_max(launches.front(), bs, check, nullptr);
    for (const ChunkGeometry& g : chunks) {
      float* chunk_bs = bs_seq + g.t0 * kHkv * max_blocks;
      block_max(g, chunk_bs, check + 1, nullptr);
      rank(g, chunk_bs, topk_seq, nullptr);
    }
    CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(bs), reinterpret_cast<const uint32_t*>(bs_seq),
                                 bs_rows * max_blocks, check + 2);
    CountBitDiffs<<<2048, 256>>>(reinterpret_cast<const uint32_t*>(topk), reinterpret_cast<const uint32_t*>(topk_seq),
                                 kHkv * total_q * kTopK, check + 4);
    BENCH_CHECK(cudaGetLastError());
    unsigned long long host_check[6];
    BENCH_CHECK(cudaMemcpy(host_check, check, sizeof host_check, cudaMemcpyDeviceToHost));
    result.batch_diffs = int64_t(host_check[2] + host_check[4]) + (host_check[0] != host_check[1]);
    if (host_check[2] > 0) {  // the first differing block score: [total_q * Hidx, max_blocks]
      const int64_t i = int64_t(host_check[3]);
      float got = 0, want = 0;
      BENCH_CHECK(cudaMemcpy(&got, bs + i, 4, cudaMemcpyDeviceToHost));
      BENCH_CHECK(cudaMemcpy(&want, bs_seq + i, 4, cudaMemcpyDeviceToHost));
      std::fprintf(stderr,
                   "gpu_bench: batch MISMATCH in block scores: %llu entries; first at query %lld, group %lld, block "
                   "%lld: batched %.9g, per-sequence %.9g\n",
                   host_check[2], (long long)(i / max_blocks / kHkv), (long long)(i / max_blocks % kHkv),
                   (long long)(i % max_blocks), got, want);
    }
    if (host_check[4] > 0) {  // the first differing selection row: [Hidx, total_q] rows
      const int64_t row = int64_t(host_check[5]) / kTopK;
      const std::string got_text = SelectionRowText(topk, row), want_text = SelectionRowText(topk_seq, row);
      std::fprintf(stderr,
                   "gpu_bench: batch MISMATCH in the selection: %llu entries; first in group %lld, query %lld:\n"
                   "  batched:     %s\n  per-sequence:%s\n",
                   host_check[4], (long long)(row / total_q), (long long)(row % total_q), got_text.c_str(),
                   want_text.c_str());
    }
    if (host_check[0] != host_check[1]) {
      std::fprintf(stderr, "gpu_bench: batch bad-row MISMATCH: batched %llx, per-sequence %llx\n", host_check[0],
                   host_check[1]);
    }
    for (void* p : {static_cast<void*>(bs_seq), static_cast<void*>(topk_seq), static_cast<void*>(check)}) {
      BENCH_CHECK(cudaFree(p));
    }
  }
  if (shape.index == Index::kFp8) {
    result.fp8 = CheckFp8Index(chunks, index_q, index_k, index_q8, index_k8, total_q * kHkv * kDim, total_k * kDim,
                               index_scale, bs, nq_chunk * kHkv * max_blocks, total_q);
  }
  const int64_t sel_rows = kHkv * total_q;
  CountBadSelections<<<unsigned((sel_rows + 255) / 256), 256>>>(topk, total_q, q_len, kHkv, kTopK, pos0, kBk,
                                                               flags + 1);
  CountNonFinite<<<2048, 256>>>(out, total_q * kHq * kDim, flags + 2);
  CountNonFinite<<<2048, 256>>>(lse, total_q * kHq, flags + 2);
  BENCH_CHECK(cudaGetLastError());
  unsigned long long host_flags[3];
  BENCH_CHECK(cudaMemcpy(host_flags, flags, sizeof host_flags, cudaMemcpyDeviceToHost));
  result.bad_rows = host_flags[1];
  result.nonfinite = host_flags[2];
  if (host_flags[0] != ~0ull) result.bad_rows += 1;  // a non-finite index score
  for (void* p : {static_cast<void*>(index_q), static_cast<void*>(index_k), static_cast<void*>(q),
                  static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(bs), static_cast<void*>(topk),
                  static_cast<void*>(out), static_cast<void*>(lse), static_cast<void*>(flags),
                  static_cast<void*>(d_position), static_cast<void*>(d_key_begin), static_cast<void*>(d_first_block),
                  workspace, topk_ws, static_cast<void*>(topk_ref), static_cast<void*>(d_sequences),
                  static_cast<void*>(index_q8), static_cast<void*>(index_k8)}) {
    if (p != nullptr) BENCH_CHECK(cudaFree(p));
  }
  BENCH_CHECK(cudaStreamDestroy(stream));
  return result;
}

// Keys the main branch reads for one sequence's query positions [pos0, pos0 + q_len): the selected blocks'
// visible keys.
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
    std::fprintf(stderr,
                 "usage: gpu_bench prefill N [reps] [main=kv-outer-wgmma|kv-outer|q-outer] [index=mma|wgmma|fp8]"
                 " [topk=by-shape|warp|fast] [lists=general]\n"
                 "       gpu_bench decode L [reps] [batch=B] [q_len=Q] [main=kv-outer-wgmma|kv-outer|q-outer]"
                 " [index=mma|wgmma|fp8] [topk=by-shape|warp|fast] [lists=direct|general]"
                 " [index_batch=batched|per-sequence]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t n = std::atoll(argv[2]);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool prefill = mode == "prefill";
  Shape shape;
  bool lists_direct = false;  // lists=direct given
  bool per_sequence = false;  // index_batch=per-sequence given
  shape.q_len = prefill ? n : 1;
  shape.k_len = n;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("batch=", 0) == 0) shape.batch = std::atoll(arg.c_str() + 6);
    else if (arg.rfind("q_len=", 0) == 0) shape.q_len = std::atoll(arg.c_str() + 6);
    else if (arg == "main=q-outer") shape.main = Main::kQOuter, shape.main_named = true;
    else if (arg == "main=kv-outer-wgmma") shape.main = Main::kKvOuterWgmma, shape.main_named = true;
    else if (arg == "main=kv-outer") shape.main = Main::kKvOuter, shape.main_named = true;
    else if (arg == "index=wgmma") shape.index = Index::kWgmma, shape.index_named = true;
    else if (arg == "index=mma") shape.index = Index::kMma, shape.index_named = true;
    else if (arg == "index=fp8") shape.index = Index::kFp8, shape.index_named = true;
    else if (arg == "topk=by-shape") shape.topk = TopK::kByShape;
    else if (arg == "topk=warp") shape.topk = TopK::kWarp;
    else if (arg == "topk=fast") shape.topk = TopK::kThreshold;
    else if (arg == "lists=direct") lists_direct = true, shape.general_lists = false;
    else if (arg == "lists=general") lists_direct = false, shape.general_lists = true;
    else if (arg == "index_batch=batched") per_sequence = false;
    else if (arg == "index_batch=per-sequence") per_sequence = true;
    else {
      std::fprintf(stderr, "gpu_bench: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (shape.batch < 1 || shape.q_len < 1 || shape.q_len > shape.k_len || (prefill && shape.batch != 1)) {
    std::fprintf(stderr, "gpu_bench: need batch >= 1, 1 <= q_len <= N, and batch 1 for prefill\n");
    return 2;
  }
  if (lists_direct && shape.q_len != 1) {
    std::fprintf(stderr, "gpu_bench: lists=direct needs one query per sequence (q_len 1)\n");
    return 2;
  }
  shape.decode = !prefill;
  // Batched where the backend would batch: decode batches (q_len <= 16; the bench's block scores of every query fit
  // its chunk budget far beyond the batches it is run at).
  // BlockMaxScoresFp8 takes one sequence per chunk: index=fp8 runs per sequence.
  shape.batched = shape.decode && !per_sequence && shape.index != Index::kFp8 && IsDecodeBatch(shape.q_len, shape.batch);
  const Result r = Run(shape, reps);
  const double keys = double(shape.batch) * SelectedKeys(shape.q_len, shape.k_len - shape.q_len);
  // Useful FLOPs (SPEC section 6): index Hkv * Di * N^2 for a causal prefill (one dot per visible (q, k) pair
  // and group, 2 FLOPs each, half the square), main 4 * Hq * D * sum |S_t|.
  const double index_flops = prefill ? double(kHkv) * kDim * double(n) * double(n)
                                     : 2.0 * kHkv * kDim * double(n) * double(shape.q_len * shape.batch);
  const double main_flops = 4.0 * kHq * kDim * keys;
  // Bytes a decode step must read: index keys, the index and main queries, K and V of the selected keys
  // (counted once per query: the q_len queries of a sequence may share blocks).
  const double decode_bytes =
      double(shape.batch) * (double(n) * kDim * 2 + double(shape.q_len) * (kHkv + kHq) * kDim * 2) +
      keys * kHkv * kDim * 2 * 2;
  // KV-outer-wgmma against KvOuterAttend: two correct kernels differ by bf16 rounding flips of single scores
  // (KV-outer vs Q-outer measured 2.8e-3 on out, 9.5e-7 on lse); a wrong layout or descriptor moves whole rows.
  const bool wgmma_compared = r.out_diff_vs_kvouter >= 0;
  const bool wgmma_ok = !wgmma_compared || (r.out_diff_vs_kvouter <= 2e-2f && r.lse_diff_vs_kvouter <= 1e-3f);
  const char* wgmma_check = r.main != Main::kKvOuterWgmma ? "not run"
                            : !wgmma_compared                  ? "not compared"
                            : wgmma_ok                         ? "ok"
                                                               : "FAILED";
  // The wgmma index kernel against the mma.sync one: the same bits everywhere (both accumulate the same fp32 dots).
  const bool index_ok = r.index != Index::kWgmma || r.index_diffs <= 0;
  const char* index_check = r.index != Index::kWgmma ? "not run"
                            : r.index_diffs < 0          ? "not compared"
                            : index_ok                   ? "ok"
                                                         : "MISMATCH";
  // RankTopKThreshold against RankTopK: the same selection entry for entry (both exact, the same order).
  const bool topk_ok = r.topk == TopK::kWarp || r.topk_diffs == 0;
  const char* topk_check = r.topk == TopK::kWarp ? "not run" : topk_ok ? "ok" : "MISMATCH";
  // The direct lists against the general ones: the same tiles, the same partials, the same merge: the same bits.
  const bool lists_ok = !r.direct_lists || r.lists_diffs <= 0;
  const char* lists_name = !shape.kv_outer() ? "none" : r.direct_lists ? "direct" : "general";
  const char* lists_check = !r.direct_lists      ? "not run"
                            : r.lists_diffs < 0  ? "not compared"
                            : lists_ok           ? "ok"
                                                 : "MISMATCH";
  // The batched index branch against the per-sequence one: the same block scores and selection, entry for entry.
  const bool batch_ok = !r.batched || r.batch_diffs == 0;
  const char* batch_check = !r.batched ? "not run" : batch_ok ? "ok" : "MISMATCH";
  // BlockMaxScoresFp8 against BlockMaxScores on the same e4m3 values: within kFp8IndexRelBound of each entry's
  // magnitude (the fp8 MMA's reduced-precision adds), the same entries written, the same bad rows.
  const bool fp8_ok = !r.fp8.compared || (r.fp8.over_bound == 0 && r.fp8.written_mismatch == 0);
  const char* fp8_check = r.index != Index::kFp8 ? "not run"
                          : !r.fp8.compared        ? "not compared"
                          : fp8_ok                 ? "ok"
                                                   : "FAILED";
  char fp8_fields[512];
  std::snprintf(fp8_fields, sizeof fp8_fields,
                ", \"fp8_check\": \"%s\", \"fp8_rel_bound\": %.3e, \"fp8_max_abs_diff\": %.3e, "
                "\"fp8_max_rel_diff\": %.3e, \"fp8_over_bound_entries\": %lld, \"fp8_written_mismatch\": %lld, "
                "\"fp8_topk_diff_rows\": %lld, \"fp8_topk_diff_blocks\": %lld",
                fp8_check, double(kFp8IndexRelBound), double(r.fp8.max_abs_diff), double(r.fp8.max_rel_diff),
                (long long)r.fp8.over_bound, (long long)r.fp8.written_mismatch, (long long)r.fp8.topk_diff_rows,
                (long long)r.fp8.topk_diff_blocks);
  std::printf(
      "{\"mode\": \"%s\", \"main_kernel\": \"%s\", \"batch\": %lld, \"q_len\": %lld, \"k_len\": %lld, "
      "\"index_kernel\": \"%s\", \"reps\": %d, \"index_ms\": %.4f, \"topk_ms\": %.4f, \"main_ms\": %.4f, "
      "\"main_graph_ms\": %.4f, "
      "\"out_diff_vs_qouter\": %.3e, \"lse_diff_vs_qouter\": %.3e, \"out_diff_vs_kvouter\": %.3e, "
      "\"lse_diff_vs_kvouter\": %.3e, \"wgmma_check\": \"%s\", \"total_ms\": %.4f, \"index_flops\": %.6e, "
      "\"main_flops\": %.6e, \"decode_bytes\": %.6e, "
      "\"bad_selection_rows\": %llu, \"nonfinite_outputs\": %llu, \"index_check\": \"%s\", "
      "\"index_diff_entries\": %lld, \"topk_kernel\": \"%s\", \"topk_threshold_chunks\": %lld, "
      "\"topk_splits\": %d, \"topk_check\": \"%s\", \"topk_diff_entries\": %lld, \"lists\": \"%s\", "
      "\"lists_check\": \"%s\", \"lists_diff_words\": %lld, \"index_batch\": \"%s\", \"batch_check\": \"%s\", "
      "\"batch_diff_entries\": %lld, \"step_graph_ms\": %.4f%s}\n",
      mode.c_str(), MainName(r.main), (long long)shape.batch, (long long)shape.q_len, (long long)shape.k_len,
      IndexName(r.index), reps, r.index_ms, r.topk_ms, r.main_ms, r.main_graph_ms, r.out_diff_vs_qouter,
      r.lse_diff_vs_qouter, r.out_diff_vs_kvouter, r.lse_diff_vs_kvouter, wgmma_check,
      r.index_ms + r.topk_ms + r.main_ms, index_flops, main_flops, decode_bytes, (unsigned long long)r.bad_rows,
      (unsigned long long)r.nonfinite, index_check, (long long)r.index_diffs, TopKName(r.topk),
      (long long)r.topk_threshold_chunks, r.topk_splits,
      topk_check, (long long)r.topk_diffs, lists_name, lists_check, (long long)r.lists_diffs,
      r.batched ? "batched" : "per-sequence", batch_check, (long long)r.batch_diffs, r.step_graph_ms, fp8_fields);
  return r.bad_rows == 0 && r.nonfinite == 0 && wgmma_ok && index_ok && topk_ok && lists_ok && batch_ok && fp8_ok
             ? 0
             : 1;
}
