// gpu_training_bench: times the gpu backend's bf16 backward (dq, dk, dv; SPEC section 8, gpu/training/training.h
// BackwardOnDevice) on device-resident random inputs at M3 shapes (Hq 64, Hkv 4, D = Dv 128, Bk 128, top_k 16), one
// causal prefill of N tokens, on an i.i.d. random selection (every row: top_k - 1 distinct earlier blocks drawn
// uniformly, then its local block: the worst case for locality, as FlashInfer's benchmarks draw them). The kernels are
// timed with CUDA events (the lists' upload and the downloads left out), the median of the repetitions after one
// warm-up; the backend poisons its outputs before every run, and after the last one dq, dk, dv are downloaded and
// checked finite (exit status 1 otherwise). Prints one JSON object with the useful FLOPs (2.5x the forward main
// branch's, 4 * Hq * D * sum|S_t|).
//
//   gpu_training_bench N [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_exit.h"
#include "bench/gpu_bench_checks.h"
#include "gpu/common/device_buffer.h"
#include "gpu/training/training.h"
#include "oracle/random.h"

namespace msa::gpu {
namespace {

constexpr int kHq = 64, kHkv = 4, kDim = 128, kBk = 128, kTopK = 16;

constexpr char kBenchProgram[] = "gpu_training_bench";

DeviceBuffer<uint16_t> RandomBf16(int64_t n, uint64_t seed, const char* name) {
  DeviceBuffer<uint16_t> buffer;
  BENCH_OK(buffer.Allocate(n, name));
  BENCH_CHECK(bench::FillUniformBf16(buffer.get(), n, seed));
  return buffer;
}

// The i.i.d. random selection [Hkv, n, top_k] and sum over (t, r) of |S_t|, the keys it holds.
std::vector<int32_t> RandomSelection(int64_t n, double* kept_keys) {
  std::vector<int32_t> topk(int64_t(kHkv) * n * kTopK, -1);
  RandomStream random(7, 1);
  *kept_keys = 0;
  std::vector<int32_t> earlier;
  for (int64_t r = 0; r < kHkv; ++r) {
    for (int64_t t = 0; t < n; ++t) {
      const int32_t local = int32_t(t / kBk);
      earlier.resize(local);
      for (int32_t b = 0; b < local; ++b) earlier[b] = b;
      const int32_t take = std::min(kTopK - 1, local);
      for (int32_t i = 0; i < take; ++i) {  // a partial Fisher-Yates shuffle
        std::swap(earlier[i], earlier[i + int32_t(random.Below(uint64_t(local - i)))]);
      }
      int32_t* row = &topk[(r * n + t) * kTopK];
      std::copy(earlier.begin(), earlier.begin() + take, row);
      row[take] = local;
      *kept_keys += double(take) * kBk + double(t - int64_t(local) * kBk + 1);
    }
  }
  return topk;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_training_bench N [reps]\n");
    return 2;
  }
  const int64_t n = std::atoll(argv[1]);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  Config config;  // M3 defaults: Hq 64, Hkv 4, D = Dv = Di 128, Bk 128, top_k 16
  config.precision = Precision::kBf16;
  const std::vector<int32_t> cu = {0, int32_t(n)};
  const Batch batch{cu, cu};
  double kept_keys = 0;
  const std::vector<int32_t> topk = RandomSelection(n, &kept_keys);
  DeviceBuffer<uint16_t> q = RandomBf16(n * kHq * kDim, 3, "q"), k = RandomBf16(n * kHkv * kDim, 4, "k"),
                         v = RandomBf16(n * kHkv * kDim, 5, "v"), dout = RandomBf16(n * kHq * kDim, 6, "dout");
  DeviceTrainingInputs inputs;
  inputs.q = q.get();
  inputs.k = k.get();
  inputs.v = v.get();
  inputs.dout = dout.get();
  std::vector<double> seconds;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0: the warm-up
    double kernel_seconds = 0;
    BENCH_OK(BackwardOnDevice(config, batch, SelectionView{topk.data()}, inputs, {}, &kernel_seconds));
    if (rep > 0) seconds.push_back(kernel_seconds);
  }
  std::vector<double> dq(n * kHq * kDim), dk(n * kHkv * kDim), dv(n * kHkv * kDim);
  BENCH_OK(BackwardOnDevice(config, batch, SelectionView{topk.data()}, inputs, {dq.data(), dk.data(), dv.data()}));
  int64_t non_finite = 0;
  for (const std::vector<double>* values : {&dq, &dk, &dv}) {
    for (double x : *values) non_finite += std::isfinite(x) ? 0 : 1;
  }
  std::sort(seconds.begin(), seconds.end());
  const double median_ms = 1e3 * seconds[seconds.size() / 2];
  const double flops = 2.5 * 4.0 * kHq * kDim * kept_keys / kHkv;  // kept_keys counts the Hkv groups' rows
  std::printf(
      "{\"n\": %lld, \"reps\": %d, \"backward_ms\": %.4f, \"backward_flops\": %.6g, \"selection\": \"iid random\", "
      "\"non_finite\": %lld}\n",
      static_cast<long long>(n), reps, median_ms, flops, static_cast<long long>(non_finite));
  return non_finite == 0 ? 0 : 1;
}

}  // namespace
}  // namespace msa::gpu

int main(int argc, char** argv) { return msa::gpu::Main(argc, argv); }
