// gpu_check: what gpu/device_check.sh runs on the device machine, one mode per call.
//   gpu_check info                         the device
//   gpu_check long  [--q_len N] [--k_len N] [--hq N]   an exact case of >= 128K keys, bit for bit against
//                                          the reference (M3 dims, reduced query heads)
//   gpu_check replay                       two runs of each precision give identical bits
//   gpu_check small                        the canonical cases (exact bits, bf16/fp16 by the oracle): a
//                                          small workload for compute-sanitizer
//   gpu_check time  [--q_len N] [--k_len N] [--hq N]   exact-mode timing of an M3-shaped layer
// Every mode may take --json FILE (one JSON object) and exits 0 only when its checks passed.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_backend.h"
#include "msa/msa.h"
#include "oracle/cases.h"
#include "oracle/compare.h"
#include "oracle/problem.h"
#include "oracle/random.h"

namespace msa {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Args {
  std::string mode, json;
  std::map<std::string, int64_t> values;
  int64_t Get(const std::string& key, int64_t fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
};

// Elements whose bits differ, and the first of them.
template <typename T>
int64_t BitDiffs(const std::vector<T>& a, const std::vector<T>& b, int64_t* first) {
  *first = -1;
  if (a.size() != b.size()) return -1;
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      if (count++ == 0) *first = int64_t(i);
    }
  }
  return count;
}

// Compares every output bit for bit; appends "name: N differ (first at i)" lines to `report`.
bool SameBits(const Outputs& x, const Outputs& y, std::string* report) {
  bool same = true;
  const auto one = [&](const char* name, int64_t diffs, int64_t first) {
    if (diffs != 0) {
      same = false;
      *report += std::string(name) + ": " + std::to_string(diffs) + " elements differ (first at " +
                 std::to_string(first) + "); ";
    }
  };
  int64_t first = 0;
  one("topk_indices", BitDiffs(x.topk_indices, y.topk_indices, &first), first);
  one("block_scores", BitDiffs(x.block_scores, y.block_scores, &first), first);
  one("index_lse", BitDiffs(x.index_lse, y.index_lse, &first), first);
  one("out", BitDiffs(x.out, y.out, &first), first);
  one("lse", BitDiffs(x.lse, y.lse, &first), first);
  return same;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

void WriteJson(const Args& args, const std::string& body) {
  std::printf("%s\n", body.c_str());
  if (args.json.empty()) return;
  std::ofstream(args.json) << body << "\n";
}

const Backend& Gpu() { return *FindBackend("gpu"); }
const Backend& Reference() { return *FindBackend("reference"); }

int Info(const Args& args) {
  WriteJson(args, "{\"device\": " + Quote(gpu::DeviceDescription()) +
                      ", \"available\": " + (Gpu().is_available() ? "true" : "false") + "}");
  return Gpu().is_available() ? 0 : 1;
}

ProblemSpec M3Spec(int hq, int32_t q_len, int32_t k_len, DType dtype, uint64_t seed) {
  ProblemSpec spec;  // Config's defaults are M3's: Hkv 4, D = Dv = Di = 128, Bk 128, top_k 16, max pooling
  spec.config.num_q_heads = hq;
  spec.lengths = {{q_len, k_len}};
  spec.dtype = dtype;
  spec.seed = seed;
  return spec;
}

// The >= 128K-token exact case: the CPU reference (all cores) and the gpu, every output bit for bit.
int Long(const Args& args) {
  const int32_t q_len = int32_t(args.Get("q_len", 256)), k_len = int32_t(args.Get("k_len", 131072));
  const int hq = int(args.Get("hq", 8));
  const ProblemSpec spec = M3Spec(hq, q_len, k_len, DType::kBF16, 2026);
  double t0 = Now();
  const Problem problem = GenerateProblem(spec);
  const double generate_s = Now() - t0;
  Outputs reference, gpu_out;
  t0 = Now();
  Status status = RunBackend(Reference(), problem, &reference);
  const double reference_s = Now() - t0;
  if (!status.ok()) {
    std::fprintf(stderr, "reference: %s\n", status.message().c_str());
    return 2;
  }
  t0 = Now();
  status = RunBackend(Gpu(), problem, &gpu_out);
  const double gpu_wall_s = Now() - t0;
  const double attend_kernel_s = gpu::LastKernelSeconds();
  if (!status.ok()) {
    std::fprintf(stderr, "gpu: %s\n", status.message().c_str());
    return 2;
  }
  std::string report;
  const bool same = SameBits(reference, gpu_out, &report);
  std::ostringstream json;
  json << "{\"mode\": \"long\", \"case\": " << Quote(CaseName("long", spec)) << ", \"q_len\": " << q_len
       << ", \"k_len\": " << k_len << ", \"hq\": " << hq << ", \"threads\": " << omp_get_max_threads()
       << ", \"bit_identical\": " << (same ? "true" : "false") << ", \"report\": " << Quote(report)
       << ", \"generate_s\": " << generate_s << ", \"reference_s\": " << reference_s
       << ", \"gpu_wall_s\": " << gpu_wall_s << ", \"gpu_attend_kernel_s\": " << attend_kernel_s
       << ", \"elements\": " << (reference.out.size() + reference.block_scores.size()) << "}";
  WriteJson(args, json.str());
  return same ? 0 : 1;
}

// Two runs of the gpu on the same inputs give the same bits, at every precision it supports.
int Replay(const Args& args) {
  std::vector<TestCase> cases = LargeCases();
  cases.resize(4);  // M3 dims prefill, lse/mean pooling, chunked, full-head decode
  bool all_same = true;
  std::ostringstream rows;
  for (const TestCase& test_case : cases) {
    for (Precision precision : {Precision::kExact, Precision::kBf16, Precision::kFp16}) {
      ProblemSpec spec = test_case.spec;
      spec.config.precision = precision;
      const Problem problem = GenerateProblem(spec);
      Outputs first, second;
      const Status a = RunBackend(Gpu(), problem, &first), b = RunBackend(Gpu(), problem, &second);
      std::string report;
      const bool same = a.ok() && b.ok() && SameBits(first, second, &report);
      if (!a.ok()) report = a.message();
      all_same = all_same && same;
      rows << (rows.tellp() > 0 ? ", " : "") << "{\"case\": " << Quote(test_case.name) << ", \"precision\": \""
           << PrecisionName(precision) << "\", \"identical\": " << (same ? "true" : "false")
           << ", \"report\": " << Quote(report) << "}";
    }
  }
  WriteJson(args, "{\"mode\": \"replay\", \"identical\": " + std::string(all_same ? "true" : "false") +
                      ", \"runs\": [" + rows.str() + "]}");
  return all_same ? 0 : 1;
}

// The canonical cases: exact bits against the reference, bf16/fp16 by the oracle.
int Small(const Args& args) {
  bool passed = true;
  std::ostringstream rows;
  for (const TestCase& test_case : CanonicalCases()) {
    const Problem base = GenerateProblem(test_case.spec);
    Outputs reference;
    if (!RunBackend(Reference(), base, &reference).ok()) return 2;
    for (Precision precision : {Precision::kExact, Precision::kBf16}) {
      Problem problem = base;
      problem.config.precision = precision;
      Outputs outputs;
      const Status status = RunBackend(Gpu(), problem, &outputs);
      bool ok = status.ok();
      std::string report = status.message();
      if (ok && precision == Precision::kExact) ok = SameBits(reference, outputs, &report);
      if (ok && precision != Precision::kExact) {
        JudgeOptions options;
        options.precision = precision;
        Verdict verdict;
        ok = Judge(problem, reference, Candidate{outputs.topk_indices, outputs.out, outputs.lse, outputs.index_lse},
                   options, &verdict)
                 .ok() &&
             verdict.passed();
        if (!ok) report = FormatVerdict(verdict);
      }
      passed = passed && ok;
      rows << (rows.tellp() > 0 ? ", " : "") << "{\"case\": " << Quote(test_case.name) << ", \"precision\": \""
           << PrecisionName(precision) << "\", \"passed\": " << (ok ? "true" : "false")
           << ", \"report\": " << Quote(report) << "}";
    }
  }
  WriteJson(args, "{\"mode\": \"small\", \"passed\": " + std::string(passed ? "true" : "false") + ", \"cases\": [" +
                      rows.str() + "]}");
  return passed ? 0 : 1;
}

// Exact-mode timing of an M3-shaped layer: random bf16 inputs from a parallel counter-based generator
// (values in [-2, 2)), one sequence of q_len queries over k_len keys.
int Time(const Args& args) {
  const int64_t k_len = args.Get("k_len", 131072), q_len = args.Get("q_len", k_len);
  Config config;
  config.num_q_heads = int(args.Get("hq", 64));
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, d = config.head_dim;
  const auto fill = [](std::vector<uint16_t>& values, int64_t n, uint64_t stream) {
    values.resize(size_t(n));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t bits = SplitMix64((stream << 48) ^ uint64_t(i));
      values[size_t(i)] = DoubleToBF16(double(bits >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    }
  };
  double t0 = Now();
  std::vector<uint16_t> q, k, v, iq, ik;
  fill(q, q_len * hq * d, 1);
  fill(k, k_len * hkv * d, 2);
  fill(v, k_len * hkv * d, 3);
  fill(iq, q_len * hkv * d, 4);
  fill(ik, k_len * d, 5);
  const double generate_s = Now() - t0;
  const std::vector<int32_t> cu_q = {0, int32_t(q_len)}, cu_k = {0, int32_t(k_len)};
  const Batch batch{cu_q, cu_k};
  const IndexInputs index_inputs{PackedView(iq.data(), DType::kBF16, q_len, hkv, d),
                                 PackedView(ik.data(), DType::kBF16, k_len, 1, d), batch};
  const AttentionInputs attention_inputs{PackedView(q.data(), DType::kBF16, q_len, hq, d),
                                         PackedView(k.data(), DType::kBF16, k_len, hkv, d),
                                         PackedView(v.data(), DType::kBF16, k_len, hkv, d), batch};
  std::vector<int32_t> topk(size_t(hkv * q_len * config.top_k));
  std::vector<double> index_lse(size_t(hkv * q_len)), out(size_t(q_len * hq * d)), lse(size_t(q_len * hq));
  t0 = Now();
  Status status = Select(Gpu(), config, index_inputs, SelectionOutputs{topk.data(), nullptr, index_lse.data()});
  const double select_wall = Now() - t0, select_kernel = gpu::LastKernelSeconds();
  if (!status.ok()) {
    std::fprintf(stderr, "select: %s\n", status.message().c_str());
    return 2;
  }
  t0 = Now();
  status =
      Attend(Gpu(), config, attention_inputs, SelectionView{topk.data()}, AttentionOutputs{out.data(), lse.data()});
  const double attend_wall = Now() - t0, attend_kernel = gpu::LastKernelSeconds();
  if (!status.ok()) {
    std::fprintf(stderr, "attend: %s\n", status.message().c_str());
    return 2;
  }
  bool finite = true;
  for (double x : lse) finite = finite && std::isfinite(x);
  std::ostringstream json;
  json << "{\"mode\": \"time\", \"precision\": \"exact\", \"q_len\": " << q_len << ", \"k_len\": " << k_len
       << ", \"hq\": " << hq << ", \"hkv\": " << hkv << ", \"d\": " << d << ", \"block_size\": " << config.block_size
       << ", \"top_k\": " << config.top_k << ", \"generate_s\": " << generate_s
       << ", \"select_kernel_s\": " << select_kernel << ", \"select_wall_s\": " << select_wall
       << ", \"attend_kernel_s\": " << attend_kernel << ", \"attend_wall_s\": " << attend_wall
       << ", \"layer_kernel_s\": " << select_kernel + attend_kernel << ", \"finite\": " << (finite ? "true" : "false")
       << "}";
  WriteJson(args, json.str());
  return finite ? 0 : 1;
}

}  // namespace
}  // namespace msa

int main(int argc, char** argv) {
  msa::Args args;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: gpu_check info|long|replay|small|time [--json FILE] [--q_len N] [--k_len N] [--hq N]\n");
    return 2;
  }
  args.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--json")
      args.json = argv[i + 1];
    else if (key.rfind("--", 0) == 0)
      args.values[key.substr(2)] = std::stoll(argv[i + 1]);
  }
  const msa::Backend* gpu = msa::FindBackend("gpu");
  if (gpu == nullptr) {
    std::fprintf(stderr, "gpu_check: this build has no gpu backend\n");
    return 2;
  }
  if (args.mode == "info") return msa::Info(args);
  if (!gpu->is_available()) {
    std::fprintf(stderr, "gpu_check: no usable CUDA device: %s\n", msa::gpu::DeviceDescription().c_str());
    return 2;
  }
  if (args.mode == "long") return msa::Long(args);
  if (args.mode == "replay") return msa::Replay(args);
  if (args.mode == "small") return msa::Small(args);
  if (args.mode == "time") return msa::Time(args);
  std::fprintf(stderr, "gpu_check: unknown mode %s\n", args.mode.c_str());
  return 2;
}
