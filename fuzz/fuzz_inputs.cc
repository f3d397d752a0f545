// Fuzz target: config and shape validation of an inputs file (SPEC sections 1, 2, 7).
// bytes -> ParseSafetensors -> ProblemFromSafetensors -> ValidateProblem; when all accept and the problem is
// small, RunBackend("reference") must succeed, the selection must satisfy the contract (CheckSelection) and
// every output must be finite. The library must never crash, abort, hang or allocate beyond the input's size
// on any input; refusals are InvalidArgument with a message.
//
// Finite inputs can still overflow a double product (F64 values near 1e308, or huge scales). Such inputs are
// recognised by a bound (ProductsMayOverflow); for them, and only for them, the run may be refused with
// InvalidArgument "... not finite ..." (Select for index scores, Attend for out/lse: RequireFiniteAttention).
// Every run that succeeds has finite outputs.
// MSA_FUZZ_STATS=1 in the environment prints, at exit, how far the inputs got (parsed, valid, run).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "io/file_contract.h"
#include "oracle/problem.h"
#include "oracle/selection_contract.h"

namespace msa::fuzz {
namespace {

// How far the inputs got; printed at exit with MSA_FUZZ_STATS=1.
struct Stats {
  long inputs = 0, parsed = 0, problems = 0, valid = 0, run = 0, run_ok = 0;
} stats;

void PrintStats() {
  std::fprintf(stderr, "fuzz_inputs stats: %ld inputs, %ld parsed, %ld problems, %ld valid, %ld run, %ld run ok\n",
               stats.inputs, stats.parsed, stats.problems, stats.valid, stats.run, stats.run_ok);
}

// Work cap for running the reference: multiply-adds and output elements, so one input runs in milliseconds.
constexpr double kMaxWork = 2e6;
constexpr double kMaxOutputElements = 1e6;
// Products and sums below this bound cannot overflow a double (max ~1.8e308), with room to spare.
constexpr double kSafeMagnitude = 1e300;

double MaxAbs(const SafetensorsTensor& tensor) {
  double max_abs = 0;
  for (int64_t e = 0; e < tensor.num_elements(); ++e) {
    max_abs = std::max(max_abs, std::fabs(LoadAsDouble(tensor.bytes.data(), tensor.dtype, e)));
  }
  return max_abs;
}

// Bounds on |every intermediate| of the index branch and the main branch (canonical dot: each partial sum
// is at most dim * max|a| * max|b|; mean pooling sums at most block_size keys; attention sums at most
// total_k weighted values with weights in [0, 1]).
struct OverflowRisk {
  bool index = false, attention = false;
};

OverflowRisk ProductsMayOverflow(const Problem& problem) {
  const Config& c = problem.config;
  const double max_q = MaxAbs(problem.q), max_k = MaxAbs(problem.k), max_v = MaxAbs(problem.v);
  const double max_iq = MaxAbs(problem.index_q), max_ik = MaxAbs(problem.index_k);
  const double total_k = double(problem.batch().total_k());
  const double index_dot = double(c.index_head_dim) * max_iq * max_ik;  // a block mean is at most max_ik too
  const double main_dot = double(c.head_dim) * max_q * max_k;
  OverflowRisk risk;
  risk.index = !(index_dot <= kSafeMagnitude && index_dot * c.IndexScale() <= kSafeMagnitude &&
                 max_ik * c.block_size <= kSafeMagnitude);
  risk.attention = !(main_dot <= kSafeMagnitude && main_dot * c.SoftmaxScale() <= kSafeMagnitude &&
                     total_k * max_v <= kSafeMagnitude);
  return risk;
}

bool SmallEnough(const Problem& problem) {
  const Config& c = problem.config;
  const Batch batch = problem.batch();
  const double total_q = double(batch.total_q()), total_k = double(batch.total_k());
  const double max_blocks = double(MaxBlocks(c, batch));
  const double work = total_q * total_k *
                      (double(c.num_q_heads) * (c.head_dim + c.value_dim) + double(c.num_kv_heads) * c.index_head_dim);
  const double outputs = double(c.num_kv_heads) * total_q * (max_blocks + c.top_k + 1) +
                         total_q * c.num_q_heads * (double(c.value_dim) + 1);
  return work <= kMaxWork && outputs <= kMaxOutputElements;
}

std::string Where(const char* tensor, size_t index) { return std::string(tensor) + "[" + std::to_string(index) + "]"; }

void CheckOutputs(const Problem& problem, const Outputs& outputs) {
  const Config& c = problem.config;
  const Batch batch = problem.batch();
  const int64_t total_q = batch.total_q(), max_blocks = MaxBlocks(c, batch);
  const std::string config = DescribeConfig(c);

  const Status selection = CheckSelection(problem, outputs.topk_indices);
  MSA_FUZZ_CHECK(selection.ok(), config + ": " + selection.message());

  // block_scores: finite where visible, -inf after; index_lse finite.
  std::vector<int64_t> visible(total_q);
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t i = 0; i < q_len; ++i) visible[q_begin + i] = (k_len - q_len + i) / c.block_size + 1;
  }
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t blk = 0; blk < max_blocks; ++blk) {
        const size_t at = size_t((r * total_q + t) * max_blocks + blk);
        const double score = outputs.block_scores[at];
        MSA_FUZZ_CHECK(blk < visible[t] ? std::isfinite(score) : score == -HUGE_VAL,
                       config + ": " + Where("block_scores", at) + " = " + std::to_string(score));
      }
      const size_t at = size_t(r * total_q + t);
      MSA_FUZZ_CHECK(std::isfinite(outputs.index_lse[at]),
                     config + ": " + Where("index_lse", at) + " = " + std::to_string(outputs.index_lse[at]));
    }
  }
  for (size_t i = 0; i < outputs.out.size(); ++i) {
    MSA_FUZZ_CHECK(std::isfinite(outputs.out[i]),
                   config + ": " + Where("out", i) + " = " + std::to_string(outputs.out[i]));
  }
  for (size_t i = 0; i < outputs.lse.size(); ++i) {
    MSA_FUZZ_CHECK(std::isfinite(outputs.lse[i]),
                   config + ": " + Where("lse", i) + " = " + std::to_string(outputs.lse[i]));
  }
}

void CheckRefusal(const Status& status, const char* stage) {
  MSA_FUZZ_CHECK(
      status.code() == StatusCode::kInvalidArgument && !status.message().empty(),
      std::string(stage) + " failed with code " + std::to_string(int(status.code())) + ": " + status.message());
}

}  // namespace
}  // namespace msa::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  msa::fuzz::UseOneThread();
  if (std::getenv("MSA_FUZZ_STATS") != nullptr) std::atexit(msa::fuzz::PrintStats);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace msa;
  using namespace msa::fuzz;
  ++stats.inputs;
  SafetensorsFile file;
  if (Status status = ParseSafetensors(std::span<const uint8_t>(data, size), &file, "<fuzz>"); !status.ok()) {
    CheckRefusal(status, "ParseSafetensors");
    return 0;
  }
  ++stats.parsed;
  Problem problem;
  if (Status status = ProblemFromSafetensors(file, "<fuzz>", &problem); !status.ok()) {
    CheckRefusal(status, "ProblemFromSafetensors");
    return 0;
  }
  ++stats.problems;
  if (Status status = ValidateProblem(problem); !status.ok()) {
    CheckRefusal(status, "ValidateProblem");
    return 0;
  }
  ++stats.valid;
  // A valid problem is a valid file: it survives the writer and reads back as the same problem.
  std::vector<uint8_t> image;
  const Status serialized = SerializeSafetensors(ProblemToSafetensors(problem), &image);
  MSA_FUZZ_CHECK(serialized.ok(), "a valid problem does not serialize: " + serialized.message());
  SafetensorsFile reread_file;
  Problem reread;
  MSA_FUZZ_CHECK(ParseSafetensors(image, &reread_file).ok() &&
                     ProblemFromSafetensors(reread_file, "<reread>", &reread).ok() && ValidateProblem(reread).ok(),
                 "a valid problem does not read back");
  MSA_FUZZ_CHECK(ConfigToJson(reread.config) == ConfigToJson(problem.config) &&
                     DescribeConfig(reread.config) == DescribeConfig(problem.config),
                 DescribeConfig(problem.config) + " read back as " + DescribeConfig(reread.config));

  MSA_FUZZ_CHECK(reread.cu_seqlens_q == problem.cu_seqlens_q && reread.cu_seqlens_k == problem.cu_seqlens_k,
                 "cu_seqlens changed on the way back");
  for (const auto member : {&Problem::q, &Problem::k, &Problem::v, &Problem::index_q, &Problem::index_k}) {
    const SafetensorsTensor& before = problem.*member;
    const SafetensorsTensor& after = reread.*member;
    MSA_FUZZ_CHECK(before.dtype == after.dtype && before.shape == after.shape && before.bytes == after.bytes,
                   "tensor " + before.name + " changed on the way back");
  }

  if (!SmallEnough(problem)) return 0;
  const Backend* reference = FindBackend("reference");
  MSA_FUZZ_CHECK(reference != nullptr, "no reference backend");
  if (Status status = reference->supports(problem.config); !status.ok()) {
    MSA_FUZZ_CHECK(status.code() == StatusCode::kUnsupported, status.message());
    return 0;  // e.g. msa_config.precision = "bf16": the reference computes only exact
  }
  const OverflowRisk risk = ProductsMayOverflow(problem);
  Outputs outputs;
  ++stats.run;
  const Status run = RunBackend(*reference, problem, &outputs);
  if (!run.ok()) {
    // The only refusal of valid inputs: a score or an output that overflows a double.
    MSA_FUZZ_CHECK((risk.index || risk.attention) && run.code() == StatusCode::kInvalidArgument &&
                       run.message().find("not finite") != std::string::npos,
                   DescribeConfig(problem.config) + ": RunBackend(reference) failed: " + run.message());
    return 0;
  }
  ++stats.run_ok;
  CheckOutputs(problem, outputs);
  return 0;
}
