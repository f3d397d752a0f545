// gpu_bench (host side; its device helpers are bench/gpu_bench_checks.cu): times the gpu pipeline
// (gpu/common/pipeline.h, the backend's own) on device-resident random inputs at M3 shapes (Hq 64, Hkv = Hidx 4, D = Dv
// = Di 128, Bk 128, top_k 16, max pooling, bf16), with no host packing or transfers, under the kernel plan PlanKernels
// makes of the request (plan keys on the command line, or MSA_GPU_PLAN). Each stage (index kernel, top-k, main branch)
// is timed with CUDA events after a warm-up, the median of the repetitions; a KV-outer main branch is also captured in
// a CUDA graph and its replays timed (one at a time, and kBackToBack in a row), and in decode the whole step too
// (StepOnDevice: index, top-k, main branch, or attend=fused-decode's one launch). Outputs are poisoned before every
// repetition and checked after the last one (every selection row valid, no NaN left in out / lse, the last main-graph
// and step-graph replays' outputs the bits of the last run on the stream, by a positional digest, and the step graph's
// selection that run's; exit status 1 otherwise). The cross-kernel comparisons (wgmma vs mma, threshold
// vs warp, batched vs per-sequence, direct vs general lists, fp8 within its bound) are the plan-parameterised GPU
// test's (tests/gpu_plans_test.cc). Prints one JSON object, "plan" the plan that ran.
//
//   gpu_bench prefill N [reps] [key=value ...]          one causal sequence of N tokens
//   gpu_bench decode L [reps] [batch=B] [q_len=Q] [key=value ...]   B sequences of L keys, Q queries each (1)
//   key=value: index, batch, topk, lists, attend (gpu/common/kernel_plan.h ParseKernelPlan); index=fp8 rounds the
//   index inputs to e4m3 values first (index_format e4m3); selection=NAME times the main branch on a generator's
//   selection (bench/selections.h: random, last, pages, overlap50, overlap90; default indexer: the pipeline's own
//   on the index inputs); index_inputs=lowrank|clustered replaces the i.i.d. index inputs with structured ones
//   (bench/structured_index.h), whose indexer selections are coherent. out=bf16 (the default) has the main branch
//   write bf16 out and fp32 lse, out=fp64 the backend's FP64 out and lse (gpu/common/geometry.h OutputFormat). Every
//   run prints its selection's mean 4- and 8-query union sizes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_exit.h"
#include "bench/gpu_bench_checks.h"
#include "bench/selections.h"
#include "bench/structured_index.h"
#include "gpu/common/device_buffer.h"
#include "gpu/common/device_query.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/common/pipeline.h"

namespace msa::gpu {
namespace {

using bench::AddBitsDigest;
using bench::CountBadSelections;
using bench::CountNonFinite;
using bench::FillUniformBf16;

constexpr int kHq = 64, kHkv = 4, kDim = 128, kBk = 128, kTopK = 16;

constexpr char kBenchProgram[] = "gpu_bench";

template <typename T>
DeviceBuffer<T> Allocate(int64_t count, const char* name) {
  DeviceBuffer<T> buffer;
  BENCH_OK(buffer.Allocate(count, name));
  return buffer;
}

DeviceBuffer<uint16_t> RandomBf16(int64_t n, uint64_t seed, const char* name) {
  DeviceBuffer<uint16_t> buffer = Allocate<uint16_t>(n, name);
  BENCH_CHECK(FillUniformBf16(buffer.get(), n, seed));
  return buffer;
}

// Nearest-even bf16 of a finite float.
uint16_t ToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// Index inputs of a structured kind (bench/structured_index.h), made on the host, rounded to bf16 and uploaded.
void UploadStructuredIndex(const std::string& kind, int64_t total_q, int64_t total_k, uint16_t* index_q,
                           uint16_t* index_k) {
  ::msa::bench::IndexInputShape shape;
  shape.total_q = total_q;
  shape.total_k = total_k;
  shape.num_groups = kHkv;
  shape.index_dim = kDim;
  std::vector<float> q, k;
  ::msa::bench::MakeStructuredIndexInputs(kind, shape, 12, &q, &k);
  for (const auto& [values, device] : {std::pair{&q, index_q}, std::pair{&k, index_k}}) {
    std::vector<uint16_t> bf16(values->size());
    for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = ToBf16((*values)[i]);
    BENCH_CHECK(cudaMemcpy(device, bf16.data(), bf16.size() * 2, cudaMemcpyHostToDevice));
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Sums the device time of the launches between Begin() and End() over one repetition.
class PhaseTimer {
 public:
  PhaseTimer() {
    BENCH_CHECK(cudaEventCreate(&start_));
    BENCH_CHECK(cudaEventCreate(&stop_));
  }
  ~PhaseTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void Begin(cudaStream_t stream) { BENCH_CHECK(cudaEventRecord(start_, stream)); }
  void End(cudaStream_t stream) {
    BENCH_CHECK(cudaEventRecord(stop_, stream));
    BENCH_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    sum_ms_ += ms;
  }
  double TakeMs() { return std::exchange(sum_ms_, 0.0); }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  double sum_ms_ = 0;
};

// Replay times of one captured graph: `single`, the median of reps replays each launched on an idle device (launch
// latency included); `cold`, the same after the L2 cache is flushed before each (every input read from memory, as in
// a model's decode step, where the other layers' reads evict this layer's); `back_to_back`, the mean over kBackToBack
// replays enqueued at once (the host ahead of the device, as in a decode loop: the device's time per replay). Short
// decode steps fit L2, so `single` and `back_to_back` replays read their inputs from L2.
struct GraphTimes {
  double single_ms = 0, cold_ms = 0, back_to_back_ms = 0;
};
constexpr int kBackToBack = 20;

// Evicts the L2 cache: writes a buffer of twice its size (allocated once).
void FlushL2(cudaStream_t stream) {
  static const int64_t bytes = [] {
    int device = 0, l2 = 0;
    BENCH_CHECK(cudaGetDevice(&device));
    BENCH_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return 2 * int64_t(l2);
  }();
  static DeviceBuffer<uint8_t> scratch = Allocate<uint8_t>(bytes, "l2_flush");
  BENCH_CHECK(cudaMemsetAsync(scratch.get(), 0x5a, size_t(bytes), stream));
}

// The work `enqueue()` puts on `stream`, captured once as a CUDA graph and replayed: reps + 1 single replays (the
// first untimed), `prepare()` (poisoning outputs) and a device synchronization before each, reps more with the L2
// flushed after `prepare()`, then `prepare()` once and kBackToBack replays in a row.
template <class Enqueue, class Prepare>
GraphTimes GraphReplayMs(cudaStream_t stream, int reps, PhaseTimer& timer, Enqueue&& enqueue, Prepare&& prepare) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> graph_ms, cold_ms;
  for (int rep = -1; rep < 2 * reps; ++rep) {
    prepare();
    if (rep >= reps) FlushL2(stream);
    BENCH_CHECK(cudaDeviceSynchronize());
    timer.Begin(stream);
    BENCH_CHECK(cudaGraphLaunch(exec, stream));
    timer.End(stream);
    const double ms = timer.TakeMs();
    if (rep >= 0) (rep < reps ? graph_ms : cold_ms).push_back(ms);
  }
  GraphTimes times;
  times.single_ms = Median(graph_ms);
  times.cold_ms = Median(cold_ms);
  prepare();
  BENCH_CHECK(cudaDeviceSynchronize());
  timer.Begin(stream);
  for (int i = 0; i < kBackToBack; ++i) BENCH_CHECK(cudaGraphLaunch(exec, stream));
  timer.End(stream);
  times.back_to_back_ms = timer.TakeMs() / kBackToBack;
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  return times;
}

struct Shape {
  bool decode = false;
  int64_t q_len = 0, k_len = 0, batch = 1;
  OutputFormat out_format = OutputFormat::kBf16Fp32;
};

struct Result {
  std::string plan;
  double union4 = 0, union8 = 0;  // mean distinct blocks of 4 / 8 consecutive queries' rows (bench/selections.h)
  double index_ms = 0, topk_ms = 0, main_ms = 0, main_graph_ms = 0, step_graph_ms = 0;
  double main_stream_ms = 0, step_stream_ms = 0;  // back-to-back replays of the same graphs (GraphTimes)
  double main_cold_ms = 0, step_cold_ms = 0;      // single replays after an L2 flush (GraphTimes)
  uint64_t bad_rows = 0, nonfinite = 0;
  // A replayed graph's outputs differ from the stream run's: the main graph's out and lse, or the step graph's
  // selection, out and lse (attend=fused-decode: its one launch against the separate stages).
  bool graph_bits_differ = false;
  uint64_t outputs_digest = 0;  // out and lse of the last timed run (AddBitsDigest): equal bits, equal digests
};

// `given`: the main branch runs on that generator's selection (uploaded once, the index branch not run); null: on
// the pipeline's own selection of the random index inputs.
// `index_kind`: "random" (i.i.d. device-generated), or a kind of bench/structured_index.h generated on the host.
Result Run(const Shape& shape, const KernelPlan& requested, int reps, const ::msa::bench::SelectionGenerator* given,
           const std::string& index_kind) {
  const int64_t q_len = shape.q_len, k_len = shape.k_len, total_q = shape.batch * q_len;
  const int64_t total_k = shape.batch * k_len, pos0 = k_len - q_len, max_blocks = (k_len + kBk - 1) / kBk;
  Config config;
  config.num_q_heads = kHq;
  config.num_kv_heads = kHkv;
  config.head_dim = config.value_dim = config.index_head_dim = kDim;
  config.block_size = kBk;
  config.top_k = kTopK;
  config.pooling = Pooling::kMax;
  config.precision = Precision::kBf16;
  if (requested.index == IndexKernel::kFp8) config.index_format = IndexFormat::kE4M3;
  std::vector<int32_t> cu_q(shape.batch + 1), cu_k(shape.batch + 1);
  for (int64_t b = 0; b <= shape.batch; ++b) {
    cu_q[b] = int32_t(b * q_len);
    cu_k[b] = int32_t(b * k_len);
  }
  const Batch batch{cu_q, cu_k};
  const KernelShapes shapes = ShapesOf(config, batch);
  KernelPlan plan;
  BENCH_OK(PlanKernels(config, shapes, CurrentDeviceCaps(), requested, &plan));

  DeviceBuffer<uint16_t> index_q = RandomBf16(total_q * kHkv * kDim, 1, "index_q");  // [total_q, Hidx, Di]
  DeviceBuffer<uint16_t> index_k = RandomBf16(total_k * kDim, 2, "index_k");         // [total_k, Di]
  if (index_kind != "random") UploadStructuredIndex(index_kind, total_q, total_k, index_q.get(), index_k.get());
  DeviceBuffer<uint16_t> q = RandomBf16(total_q * kHq * kDim, 3, "q");   // [total_q, Hq, D]
  DeviceBuffer<uint16_t> k = RandomBf16(total_k * kHkv * kDim, 4, "k");  // [total_k, Hkv, D]
  DeviceBuffer<uint16_t> v = RandomBf16(total_k * kHkv * kDim, 5, "v");  // [total_k, Hkv, Dv]
  DeviceBuffer<uint8_t> index_q8, index_k8;  // index=fp8: the e4m3 values; the bf16 copies hold the same numbers
  if (plan.index == IndexKernel::kFp8) {
    BENCH_OK(index_q8.Allocate(total_q * kHkv * kDim, "index_q e4m3"));
    BENCH_OK(index_k8.Allocate(total_k * kDim, "index_k e4m3"));
    BENCH_CHECK(RoundToE4M3(index_q.get(), kInBF16, total_q * kHkv * kDim, index_q8.get()));
    BENCH_CHECK(RoundToE4M3(index_k.get(), kInBF16, total_k * kDim, index_k8.get()));
    BENCH_CHECK(E4M3ToLowp(index_q8.get(), total_q * kHkv * kDim, kLowpBF16, index_q.get()));
    BENCH_CHECK(E4M3ToLowp(index_k8.get(), total_k * kDim, kLowpBF16, index_k.get()));
  }
  DeviceBuffer<int32_t> topk = Allocate<int32_t>(kHkv * total_q * kTopK, "topk");  // [Hidx, total_q, top_k]
  const bool wide_out = shape.out_format == OutputFormat::kFp64;
  const int out_type = wide_out ? kInF64 : kInBF16, lse_type = wide_out ? kInF64 : kInF32;
  const int64_t out_n = total_q * kHq * kDim, lse_n = total_q * kHq;
  const size_t out_bytes = size_t(out_n) * OutValueBytes(shape.out_format);
  const size_t lse_bytes = size_t(lse_n) * LseValueBytes(shape.out_format);
  DeviceBuffer<unsigned char> out = Allocate<unsigned char>(int64_t(out_bytes), "out");  // [total_q, Hq, Dv]
  DeviceBuffer<unsigned char> lse = Allocate<unsigned char>(int64_t(lse_bytes), "lse");  // [total_q, Hq]
  // 2 index flags, 2 counts, the output digests of the main branch on the stream and as a replayed graph, the output
  // digest of the last timed run, the output digest of the step graph's last replay
  DeviceBuffer<unsigned long long> flags = Allocate<unsigned long long>(8, "flags");
  std::vector<int64_t> position(total_q), key_begin(total_q);
  std::vector<int32_t> first_block(total_q);
  for (int64_t t = 0; t < total_q; ++t) {
    position[t] = pos0 + t % q_len;
    key_begin[t] = (t / q_len) * k_len;
    first_block[t] = int32_t((t / q_len) * max_blocks);
  }
  DeviceBuffer<int64_t> d_position = Allocate<int64_t>(total_q, "positions");
  DeviceBuffer<int64_t> d_key_begin = Allocate<int64_t>(total_q, "key offsets");
  DeviceBuffer<int32_t> d_first_block = Allocate<int32_t>(total_q, "block offsets");
  BENCH_CHECK(cudaMemcpy(d_position.get(), position.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_key_begin.get(), key_begin.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_first_block.get(), first_block.data(), size_t(total_q) * 4, cudaMemcpyHostToDevice));

  SelectWorkspace select_ws;
  BENCH_OK(AllocateSelectWorkspace(config, batch, plan, /*want_lse=*/false, &select_ws));
  AttendWorkspace attend_ws;
  BENCH_OK(AllocateAttendWorkspace(config, shapes, plan, &attend_ws));
  const DeviceIndexInputs index_inputs{nullptr, nullptr, index_q.get(), index_k.get(), index_q8.get(), index_k8.get()};
  const DeviceSelection selection{topk.get(), nullptr, flags.get()};
  const DeviceAttendInputs attend_inputs{nullptr, nullptr,    nullptr,          q.get(),           k.get(),
                                         v.get(), topk.get(), d_position.get(), d_key_begin.get(), d_first_block.get()};
  const DeviceAttendOutputs attend_outputs{shape.out_format, out.get(), lse.get()};
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CHECK(cudaDeviceSynchronize());

  PhaseTimer index_timer, topk_timer, main_timer;
  StageHooks hooks;
  hooks.begin = [&](Stage s) { (s == Stage::kIndex ? index_timer : topk_timer).Begin(stream); };
  hooks.end = [&](Stage s) { (s == Stage::kIndex ? index_timer : topk_timer).End(stream); };
  const auto poison_outputs = [&] {
    BENCH_CHECK(cudaMemset(out.get(), 0xff, out_bytes));  // NaN in every format
    BENCH_CHECK(cudaMemset(lse.get(), 0xff, lse_bytes));
  };
  const auto poison_selection = [&] {
    BENCH_CHECK(cudaMemset(topk.get(), 0x7f, size_t(kHkv * total_q * kTopK) * 4));
    BENCH_CHECK(cudaMemset(flags.get(), 0xff, 2 * 8));  // no bad row, no overflow: all ones
  };
  const ::msa::bench::SelectionShape selection_shape{kHkv, kTopK, kBk, 0, 1, shape.batch, q_len, pos0};
  std::vector<int32_t> host_topk(size_t(kHkv * total_q * kTopK));
  if (given != nullptr) {
    given->make(selection_shape, given->keep, 11, &host_topk);
    BENCH_CHECK(cudaMemcpy(topk.get(), host_topk.data(), host_topk.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<double> index_ms, topk_ms, main_ms;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
    if (given == nullptr) poison_selection();
    poison_outputs();
    BENCH_CHECK(cudaDeviceSynchronize());
    if (given == nullptr) {
      BENCH_OK(SelectOnDevice(config, batch, plan, index_inputs, selection, &select_ws, stream, {}, hooks));
    }
    main_timer.Begin(stream);
    BENCH_OK(AttendOnDevice(config, plan, attend_inputs, attend_outputs, &attend_ws, stream));
    main_timer.End(stream);
    const double i_ms = index_timer.TakeMs(), t_ms = topk_timer.TakeMs(), m_ms = main_timer.TakeMs();
    if (rep >= 0) {
      index_ms.push_back(i_ms);
      topk_ms.push_back(t_ms);
      main_ms.push_back(m_ms);
    }
  }
  Result result;
  result.plan = FormatKernelPlan(plan);
  result.index_ms = Median(index_ms);
  result.topk_ms = Median(topk_ms);
  result.main_ms = Median(main_ms);
  const bool main_on_stream = AttendRunsOnStream(plan);  // graph-capturable main branch
  const auto digest_outputs = [&](unsigned long long* digest) {
    BENCH_CHECK(cudaMemset(digest, 0, 8));
    BENCH_CHECK(AddBitsDigest(out.get(), out_type, out_n, digest));
    BENCH_CHECK(AddBitsDigest(lse.get(), lse_type, lse_n, digest));
  };
  digest_outputs(flags.get() + 6);
  if (main_on_stream) {  // the main branch as one graph: capture once, replay (outputs poisoned before each)
    digest_outputs(flags.get() + 4);
    const GraphTimes times = GraphReplayMs(
        stream, reps, main_timer,
        [&] { BENCH_OK(AttendOnDevice(config, plan, attend_inputs, attend_outputs, &attend_ws, stream)); },
        poison_outputs);
    result.main_graph_ms = times.single_ms;
    result.main_cold_ms = times.cold_ms;
    result.main_stream_ms = times.back_to_back_ms;
    digest_outputs(flags.get() + 5);
  }
  const bool step_on_stream = main_on_stream && SelectRunsOnStream(plan);
  const bool step_graph = step_on_stream && shape.decode && given == nullptr;
  std::vector<int32_t> stream_topk;  // the stream run's selection, against the step graph's
  if (step_graph) {                  // the whole decode step as a graph
    stream_topk.resize(host_topk.size());
    BENCH_CHECK(cudaMemcpy(stream_topk.data(), topk.get(), stream_topk.size() * 4, cudaMemcpyDeviceToHost));
    const GraphTimes times = GraphReplayMs(
        stream, reps, main_timer,
        [&] {
          BENCH_OK(StepOnDevice(config, batch, plan, index_inputs, selection, &select_ws, attend_inputs, attend_outputs,
                                &attend_ws, stream));
        },
        [&] {
          poison_selection();
          poison_outputs();
        });
    result.step_graph_ms = times.single_ms;
    result.step_cold_ms = times.cold_ms;
    result.step_stream_ms = times.back_to_back_ms;
    digest_outputs(flags.get() + 7);
  }
  BENCH_CHECK(cudaMemset(flags.get() + 2, 0, 2 * 8));
  BENCH_CHECK(CountBadSelections(topk.get(), total_q, q_len, kHkv, kTopK, pos0, kBk, flags.get() + 2));
  BENCH_CHECK(CountNonFinite(out.get(), out_type, out_n, flags.get() + 3));
  BENCH_CHECK(CountNonFinite(lse.get(), lse_type, lse_n, flags.get() + 3));
  unsigned long long host_flags[8];
  BENCH_CHECK(cudaMemcpy(host_flags, flags.get(), sizeof host_flags, cudaMemcpyDeviceToHost));
  result.bad_rows = host_flags[2] + (given == nullptr && host_flags[0] != ~0ull);  // a non-finite index score: one
  if (given == nullptr) {
    BENCH_CHECK(cudaMemcpy(host_topk.data(), topk.get(), host_topk.size() * 4, cudaMemcpyDeviceToHost));
  }
  result.union4 = ::msa::bench::MeanUnionSize(selection_shape, host_topk, 4);
  result.union8 = ::msa::bench::MeanUnionSize(selection_shape, host_topk, 8);
  result.nonfinite = host_flags[3];
  result.graph_bits_differ = (main_on_stream && host_flags[4] != host_flags[5]) ||
                             (step_graph && (host_flags[6] != host_flags[7] || stream_topk != host_topk));
  result.outputs_digest = host_flags[6];
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
                 "usage: gpu_bench prefill N [reps] [index=...] [batch=...] [topk=...] [lists=...] [attend=...]\n"
                 "       gpu_bench decode L [reps] [batch=B] [q_len=Q] [plan keys as above]\n"
                 "       either mode: [selection=NAME] [index_inputs=KIND] [out=bf16|fp64]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t n = std::atoll(argv[2]);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  Shape shape;
  shape.decode = mode == "decode";
  shape.q_len = shape.decode ? 1 : n;
  shape.k_len = n;
  std::string plan_text;  // the plan keys, as MSA_GPU_PLAN spells them
  std::string selection_name = "indexer";
  std::string index_kind = "random";
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (shape.decode && arg.rfind("batch=", 0) == 0 && arg != "batch=batched" && arg != "batch=per-sequence" &&
        arg != "batch=auto") {
      shape.batch = std::atoll(arg.c_str() + 6);
    } else if (arg.rfind("q_len=", 0) == 0) {
      shape.q_len = std::atoll(arg.c_str() + 6);
    } else if (arg.rfind("index_inputs=", 0) == 0) {
      index_kind = arg.substr(13);
    } else if (arg.rfind("selection=", 0) == 0) {
      selection_name = arg.substr(10);
    } else if (arg.rfind("out=", 0) == 0) {
      if (arg != "out=bf16" && arg != "out=fp64") {
        std::fprintf(stderr, "gpu_bench: %s: the output format is out=bf16 or out=fp64\n", arg.c_str());
        return 2;
      }
      shape.out_format = arg == "out=fp64" ? OutputFormat::kFp64 : OutputFormat::kBf16Fp32;
    } else {
      plan_text += (plan_text.empty() ? "" : ",") + arg;
    }
  }
  if (mode != "prefill" && mode != "decode") {
    std::fprintf(stderr, "gpu_bench: the mode is prefill or decode, not %s\n", mode.c_str());
    return 2;
  }
  if (shape.batch < 1 || shape.q_len < 1 || shape.q_len > shape.k_len) {
    std::fprintf(stderr, "gpu_bench: need batch >= 1 and 1 <= q_len <= N\n");
    return 2;
  }
  KernelPlan requested;
  if (!plan_text.empty()) {
    const msa::Status status = ParseKernelPlan(plan_text, &requested);
    if (!status.ok()) {
      std::fprintf(stderr, "gpu_bench: %s\n", status.message().c_str());
      return 2;
    }
  } else {
    const msa::Status status = RequestedKernelPlan(&requested);  // MSA_GPU_PLAN
    if (!status.ok()) {
      std::fprintf(stderr, "gpu_bench: %s\n", status.message().c_str());
      return 2;
    }
  }
  const ::msa::bench::SelectionGenerator* given = nullptr;
  if (selection_name != "indexer") {
    given = ::msa::bench::FindSelectionGenerator(selection_name);
    if (given == nullptr) {
      std::fprintf(stderr, "gpu_bench: selection=%s: not a generator of bench/selections.h (or indexer)\n",
                   selection_name.c_str());
      return 2;
    }
  }
  std::vector<float> no_q, no_k;
  if (index_kind != "random" && !::msa::bench::MakeStructuredIndexInputs(index_kind, {}, 0, &no_q, &no_k)) {
    std::fprintf(stderr, "gpu_bench: index_inputs=%s: not random or a kind of bench/structured_index.h\n",
                 index_kind.c_str());
    return 2;
  }
  const Result r = Run(shape, requested, reps, given, index_kind);
  const bool prefill = !shape.decode;
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
  std::printf(
      "{\"mode\": \"%s\", \"plan\": \"%s\", \"out_format\": \"%s\", \"index_inputs\": \"%s\", \"selection\": \"%s\", "
      "\"union4\": %.3f, "
      "\"union8\": %.3f, \"batch\": "
      "%lld, \"q_len\": %lld, \"k_len\": %lld, \"reps\": %d, "
      "\"index_ms\": %.4f, \"topk_ms\": %.4f, \"main_ms\": %.4f, \"main_graph_ms\": %.4f, \"step_graph_ms\": %.4f, "
      "\"main_stream_ms\": %.4f, \"step_stream_ms\": %.4f, \"main_cold_ms\": %.4f, \"step_cold_ms\": %.4f, "
      "\"total_ms\": %.4f, \"index_flops\": %.6e, \"main_flops\": %.6e, \"decode_bytes\": %.6e, "
      "\"bad_selection_rows\": %llu, \"nonfinite_outputs\": %llu, \"graph_bits_differ\": %d, "
      "\"outputs_digest\": \"%016llx\"}\n",
      mode.c_str(), r.plan.c_str(), shape.out_format == OutputFormat::kFp64 ? "fp64" : "bf16", index_kind.c_str(),
      selection_name.c_str(), r.union4, r.union8, (long long)shape.batch, (long long)shape.q_len,
      (long long)shape.k_len, reps, r.index_ms, r.topk_ms, r.main_ms, r.main_graph_ms, r.step_graph_ms,
      r.main_stream_ms, r.step_stream_ms, r.main_cold_ms, r.step_cold_ms, r.index_ms + r.topk_ms + r.main_ms,
      index_flops, main_flops, decode_bytes, (unsigned long long)r.bad_rows, (unsigned long long)r.nonfinite,
      int(r.graph_bits_differ), (unsigned long long)r.outputs_digest);
  return r.bad_rows == 0 && r.nonfinite == 0 && !r.graph_bits_differ ? 0 : 1;
}
