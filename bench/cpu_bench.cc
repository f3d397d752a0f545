// CPU benchmarks (Google Benchmark). One run measures, in this order:
//   ceilings   FmaPeak (fp32 FMA rate, register-resident, all threads), CopyBandwidth (bytes read + written)
//              and EigenGemm (Eigen's fp32 GEMM at the dense peer's tile shape: the peer's own ceiling)
//   branches   IndexBranch and MainBranch of the simd backend at precision fp32, in useful FLOP/s of SPEC
//              section 6 (index Hkv*Di*N^2, main 4*Hq*D*sum|S_t|)
//   end to end Run of reference, simd exact and simd fp32, and the Eigen dense GQA peer (fp32)
//   training   Backward (dq, dk, dv; SPEC section 8) of the simd backend at fp32 and exact on the fp32 selection, in
//              useful FLOP/s: 2.5x the forward main branch's (the score recomputation, dP, dq, dk, dv)
// on one GQA group of an M3 layer (Hq 16 = G, Hkv = Hidx 1, D = Dv = Di 128, Bk 128, top_k 16, max pooling),
// a single prefill of N = 8K and 32K tokens with F32 inputs. M3's four groups are independent copies of this
// work, so every FLOP rate and ratio equals the full layer's. bench/cpu_table.py turns the JSON into the table.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/ceilings.h"
#include "bench/eigen_dense_attention.h"
#include "msa/msa.h"
#include "oracle/cases.h"
#include "oracle/problem.h"
#include "reference/reference.h"
#include "tools/msa/recall.h"

namespace msa::bench {
namespace {

constexpr int64_t kSmall = 8192, kLarge = 32768;

Config GroupOfM3(Precision precision) {
  Config config;  // M3 defaults (include/msa/config.h) with one group
  config.num_q_heads = 16;
  config.num_kv_heads = 1;
  config.precision = precision;
  return config;
}

// The layer's inputs at length n (the case list's kTagBench cases), made once per n.
const Problem& Layer(int64_t n) {
  static std::map<int64_t, std::unique_ptr<Problem>> layers;
  std::unique_ptr<Problem>& layer = layers[n];
  if (!layer) {
    const TestCase layer_case = CaseNamed(kTagBench, "bench_m3_group_" + std::to_string(n / 1024) + "k");
    if (layer_case.name.empty()) {
      std::fprintf(stderr, "cpu_bench: the case list has no bench case of %lld tokens\n", static_cast<long long>(n));
      std::exit(1);
    }
    layer = std::make_unique<Problem>(GenerateProblem(layer_case.spec));
  }
  return *layer;
}

// The fp32 selection of Layer(n), made once per n (the input of MainBranch).
const std::vector<int32_t>& LayerSelection(int64_t n) {
  static std::map<int64_t, std::vector<int32_t>> selections;
  std::vector<int32_t>& selection = selections[n];
  if (selection.empty()) {
    Outputs outputs;
    outputs.Allocate(Layer(n));
    const Status status =
        Select(*FindBackend("simd"), Layer(n).config, Layer(n).index_inputs(), outputs.selection_outputs());
    if (!status.ok()) std::fprintf(stderr, "cpu_bench: simd fp32 Select failed: %s\n", status.message().c_str());
    selection = outputs.topk_indices;
  }
  return selection;
}

// Layer(n) with its upstream gradient dout (standard normal, F32), made once per n: the backward's input.
const Problem& TrainingLayer(int64_t n) {
  static std::map<int64_t, std::unique_ptr<Problem>> layers;
  std::unique_ptr<Problem>& layer = layers[n];
  if (!layer) {
    ProblemSpec spec = CaseNamed(kTagBench, "bench_m3_group_" + std::to_string(n / 1024) + "k").spec;
    spec.training = true;
    layer = std::make_unique<Problem>(GenerateProblem(spec));
  }
  return *layer;
}

// SPEC section 6 (Eq. 12) for a causal prefill of length n.
double IndexFlops(const Config& c, int64_t n) { return double(c.num_kv_heads) * c.index_head_dim * double(n) * n; }
double DenseFlops(const Config& c, int64_t n) { return 2.0 * c.num_q_heads * c.head_dim * double(n) * n; }
// 4 * Hq * D * sum_t |S_t| with the keys the selection really holds (the partial local block counted as it is).
double MainFlops(const Problem& problem, const std::vector<int32_t>& selection) {
  const Config& c = problem.config;
  const double n = problem.cu_seqlens_q.back();
  const double kept_keys_per_group = KeptKeyFraction(problem, selection) * n * (n + 1) / 2;
  return 4.0 * c.num_q_heads * c.head_dim * kept_keys_per_group;
}

void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

void FailOnError(benchmark::State& state, const Status& status) {
  if (!status.ok()) state.SkipWithError(status.message().c_str());
}

// ---- ceilings -----------------------------------------------------------------------------------------------

void BM_FmaPeak(benchmark::State& state) {
  constexpr int64_t kIterations = 20'000'000;
  double flops = 0;
  float sink = 0;
  for (auto _ : state) {
    flops = 0;
#pragma omp parallel reduction(+ : flops)
    {
      float thread_sink = 0;
      flops += FmaLoop(kIterations, &thread_sink);
      if (thread_sink == 12345.0f) sink = thread_sink;  // keeps the result alive
    }
  }
  benchmark::DoNotOptimize(sink);
  SetRate(state, "FLOP/s", flops);
  state.SetLabel(std::string(FmaTargetName()) + ", " + std::to_string(omp_get_max_threads()) + " threads");
}

void BM_CopyBandwidth(benchmark::State& state) {
  const int64_t count = int64_t(1) << 27;  // 512 MiB of floats per array: far beyond every cache
  std::unique_ptr<float[]> from(new float[count]), to(new float[count]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) from[i] = float(i % 1000), to[i] = 0.0f;  // first touch by the copying thread
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) to[i] = from[i];
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(to[count - 1]);
  SetRate(state, "bytes/s", 2.0 * count * sizeof(float));  // read + written
}

// The Eigen dense peer's ceiling: its GEMM alone at the peer's tile shape, every thread busy.
void BM_EigenGemm(benchmark::State& state) {
  double rate = 0;
  for (auto _ : state) {
    rate = EigenGemmRate(GroupOfM3(Precision::kFp32), state.range(0), 20);
    if (rate == 0) state.SkipWithError("Eigen GEMM gave a wrong product");
  }
  state.counters["FLOP/s"] = rate;
}

// ---- the branches at precision fp32 ----------------------------------------------------------------------

void BM_IndexBranch(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Problem& layer = Layer(n);
  Outputs outputs;
  outputs.Allocate(layer);
  for (auto _ : state) {
    FailOnError(state, Select(*FindBackend("simd"), layer.config, layer.index_inputs(), outputs.selection_outputs()));
  }
  SetRate(state, "FLOP/s", IndexFlops(layer.config, n));
}

void BM_MainBranch(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Problem& layer = Layer(n);
  const std::vector<int32_t>& selection = LayerSelection(n);
  Outputs outputs;
  outputs.Allocate(layer);
  for (auto _ : state) {
    FailOnError(state, Attend(*FindBackend("simd"), layer.config, layer.attention_inputs(),
                              SelectionView{selection.data()}, outputs.attention_outputs()));
  }
  SetRate(state, "FLOP/s", MainFlops(layer, selection));
}

// ---- training -----------------------------------------------------------------------------------------------

// range(0) = n, range(1) = 0 simd fp32, 1 simd exact. FLOP/s counts 2.5x the forward main branch's FLOPs.
void BM_Backward(benchmark::State& state) {
  const int64_t n = state.range(0);
  Problem layer = TrainingLayer(n);  // a copy: the precision is this benchmark's
  layer.config.precision = state.range(1) == 0 ? Precision::kFp32 : Precision::kExact;
  const std::vector<int32_t>& selection = LayerSelection(n);
  Outputs outputs;
  outputs.Allocate(layer);
  for (auto _ : state) {
    FailOnError(state,
                Backward(*FindBackend("simd"), layer.config, layer.attention_inputs(), SelectionView{selection.data()},
                         layer.gradient_inputs(), outputs.attention_gradients()));
  }
  SetRate(state, "FLOP/s", 2.5 * MainFlops(layer, selection));
  state.SetLabel("simd " + std::string(PrecisionName(layer.config.precision)));
}

// ---- end to end ---------------------------------------------------------------------------------------------

// range(0) = n, range(1) = 0 reference exact, 1 simd exact, 2 simd fp32. FLOP/s counts Eq. 12's MSA FLOPs.
void BM_Run(benchmark::State& state) {
  const int64_t n = state.range(0);
  static const char* const kBackends[] = {"reference", "simd", "simd"};
  const Backend& backend = *FindBackend(kBackends[state.range(1)]);
  Problem layer = Layer(n);  // a copy: the precision is this benchmark's
  layer.config.precision = state.range(1) == 2 ? Precision::kFp32 : Precision::kExact;
  Outputs outputs;
  for (auto _ : state) FailOnError(state, RunBackend(backend, layer, &outputs));
  SetRate(state, "FLOP/s", IndexFlops(layer.config, n) + MainFlops(layer, outputs.topk_indices));
  state.SetLabel(std::string(backend.name) + " " + std::string(PrecisionName(layer.config.precision)));
}

void BM_EigenDense(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Problem& layer = Layer(n);
  std::vector<float> out;
  for (auto _ : state) {
    EigenDenseCausalGqa(layer, &out);
    benchmark::DoNotOptimize(out.data());
  }
  SetRate(state, "FLOP/s", DenseFlops(layer.config, n));
}

BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(1.0);
BENCHMARK(BM_CopyBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(1.0);
BENCHMARK(BM_EigenGemm)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_IndexBranch)
    ->Arg(kSmall)
    ->Arg(kLarge)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_MainBranch)
    ->Arg(kSmall)
    ->Arg(kLarge)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_Run)
    ->ArgsProduct({{kSmall, kLarge}, {2, 1, 0}})
    ->ArgNames({"n", "mode"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_Backward)
    ->ArgsProduct({{kSmall, kLarge}, {0, 1}})
    ->ArgNames({"n", "mode"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_EigenDense)
    ->Arg(kSmall)
    ->Arg(kLarge)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// The peer must compute dense causal attention before its speed means anything: on a small F32 problem its
// output is compared with the FP64 reference's DenseCausalAttention.
bool EigenPeerAgreesWithReference() {
  ProblemSpec spec;
  spec.config = GroupOfM3(Precision::kExact);
  spec.config.num_q_heads = 4;
  spec.config.head_dim = spec.config.value_dim = 32;
  spec.lengths = {{77, 77}};
  spec.dtype = DType::kF32;
  spec.seed = 5;
  const Problem problem = GenerateProblem(spec);
  Outputs expected;
  expected.Allocate(problem);
  if (!reference::DenseCausalAttention(problem.config, problem.attention_inputs(), expected.attention_outputs(), {})
           .ok()) {
    return false;
  }
  std::vector<float> got;
  EigenDenseCausalGqa(problem, &got);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - expected.out[i]));
  std::fprintf(stderr, "cpu_bench: Eigen dense peer vs FP64 reference (N 77, Hq 4, D 32): max |error| %.3g\n", worst);
  return worst < 1e-5;
}

}  // namespace
}  // namespace msa::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!msa::bench::EigenPeerAgreesWithReference()) {
    std::fprintf(stderr, "cpu_bench: the Eigen dense peer disagrees with the reference; nothing timed\n");
    return 1;
  }
  benchmark::AddCustomContext("fma_target", msa::bench::FmaTargetName());
  benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("layer", "one M3 GQA group: Hq 16, Hkv 1, D Dv Di 128, Bk 128, top_k 16, max, F32");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
