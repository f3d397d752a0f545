// `msa run`: read (or build) a problem, compute every output with one backend, report, write atomically.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "io/file_contract.h"
#include "io/sha256.h"
#include "tools/msa/cli.h"
#include "tools/msa/default_job.h"
#include "tools/msa/recall.h"

namespace msa {
namespace {

struct RunOptions {
  std::string inputs;        // empty: the embedded default job
  std::string out;           // empty: no outputs file
  std::string backend;       // empty: the fastest available backend that supports the precision (FastestBackend)
  std::string precision;     // exact | fp32 | bf16 | fp16; empty: the inputs' msa_config.precision (default exact)
  std::string index_format;  // native | e4m3; empty: the inputs' msa_config.index_format (default native)
  std::string score_format;  // native | fp16; empty: the inputs' msa_config.score_format (default native)
  int threads = 0;           // 0: OpenMP's default
  int mass_recall_queries = 256;
};

class Stopwatch {
 public:
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now();
};

// A live "  select  42%" line on stderr when it is a terminal; nothing otherwise.
ProgressFn StageProgress(const CliStreams& streams, const char* stage) {
  if (!streams.show_progress) return {};
  return [&streams, stage, last = -1](double fraction) mutable {
    const int percent = int(fraction * 100);
    if (percent == last) return;
    last = percent;
    streams.err << "\r  " << stage << "  " << percent << "%   " << (percent == 100 ? "\r" : "") << std::flush;
  };
}

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

void PrintBatch(std::ostream& out, const Problem& problem) {
  const Batch batch = problem.batch();
  out << "  batch      " << batch.num_sequences() << " sequence(s):";
  for (int64_t b = 0; b < batch.num_sequences() && b < 8; ++b) {
    out << " (q " << batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b] << ", k "
        << batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b] << ")";
  }
  if (batch.num_sequences() > 8) out << " ...";
  out << "; total_q " << batch.total_q() << ", total_k " << batch.total_k() << ", input dtype "
      << DTypeName(problem.q.dtype) << "\n";
}

void PrintNeedle(std::ostream& out, const Problem& problem, const Outputs& outputs, const Needle& needle) {
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(problem.config, problem.batch());
  const double* scores = &outputs.block_scores[(needle.group * total_q + needle.query_row) * max_blocks];
  double best_other = -HUGE_VAL;
  const int64_t local = (problem.batch().cu_seqlens_k[1] - 1) / problem.config.block_size;
  for (int64_t b = 0; b < local; ++b) {
    if (b != needle.block) best_other = std::max(best_other, scores[b]);
  }
  const bool recalled = SelectionHolds(problem, outputs.topk_indices, needle.query_row, needle.group, needle.block);
  out << "  needle     block " << needle.block << " at distance " << needle.distance << " from query "
      << needle.query_row << " (strength a = " << Fixed(needle.strength, 1)
      << "): " << (recalled ? "recalled" : "NOT recalled") << " by group " << needle.group << " (block score "
      << Fixed(scores[needle.block], 3) << ", best other history block " << Fixed(best_other, 3) << ")\n";
}

// The backend that runs `config` (and, with `training`, its backward and indexer KL): the named one, else the fastest
// that runs it (BackendRuns). Errors name the backend and the precision.
Status ChooseBackend(const Backend* named, const Config& config, bool precision_given, bool training,
                     const Backend** chosen) {
  const std::string precision =
      (precision_given ? "--precision " : "precision ") + std::string(PrecisionName(config.precision));
  if (named != nullptr) {
    const std::string what = "--backend " + std::string(named->name) + ", " + precision + ": ";
    if (Status status = BackendRuns(*named, config, training); !status.ok()) {
      return Status(status.code(), what + status.message());
    }
    *chosen = named;
    return Status::Ok();
  }
  *chosen = FastestBackend(config, training);
  if (*chosen != nullptr) return Status::Ok();
  std::string reasons;
  for (const Backend& backend : AllBackends()) {
    reasons += (reasons.empty() ? "" : "; ") + BackendRuns(backend, config, training).message();
  }
  return Unsupported(precision + ": no available backend supports it (" + reasons + ")");
}

int RunCommand(const RunOptions& options, const CliStreams& streams) {
  std::ostream& out = streams.out;
  const Backend* named = nullptr;
  if (!options.backend.empty()) {
    if (Status status = LookupBackend(options.backend, &named); !status.ok()) return CliFail(streams, status.message());
  }
  Precision precision = Precision::kExact;
  if (!options.precision.empty() && !ParsePrecision(options.precision, &precision)) {
    return CliFail(streams, "--precision " + options.precision + ": must be exact, fp32, bf16 or fp16");
  }
  IndexFormat index_format = IndexFormat::kNative;
  if (!options.index_format.empty() && !ParseIndexFormat(options.index_format, &index_format)) {
    return CliFail(streams, "--index-format " + options.index_format + ": must be native or e4m3");
  }
  ScoreFormat score_format = ScoreFormat::kNative;
  if (!options.score_format.empty() && !ParseScoreFormat(options.score_format, &score_format)) {
    return CliFail(streams, "--score-format " + options.score_format + ": must be native or fp16");
  }
  if (!options.out.empty()) {
    if (Status status = CheckOutputPath("--out", options.out); !status.ok()) return CliFail(streams, status.message());
  }
  SetThreads(options.threads);

  Stopwatch load_clock;
  Problem problem;
  std::string inputs_sha256;
  std::optional<Needle> needle;
  if (options.inputs.empty()) {
    DefaultJob job = MakeDefaultJob();
    problem = std::move(job.problem);
    needle = job.needle;
    std::vector<uint8_t> image;  // the inputs as the file contract would store them
    if (Status status = SerializeSafetensors(ProblemToSafetensors(problem), &image); !status.ok()) {
      return CliFail(streams, status.message());
    }
    inputs_sha256 = Sha256Hex(image.data(), image.size());
  } else if (Status status = LoadProblem(options.inputs, &problem, &inputs_sha256); !status.ok()) {
    return CliFail(streams, status.message());
  }
  const double load_seconds = load_clock.Seconds();
  if (!options.precision.empty()) problem.config.precision = precision;           // else the inputs' (default exact)
  if (!options.index_format.empty()) problem.config.index_format = index_format;  // else the inputs' (native)
  if (!options.score_format.empty()) problem.config.score_format = score_format;  // else the inputs' (native)
  const Backend* backend = nullptr;
  if (Status status =
          ChooseBackend(named, problem.config, !options.precision.empty(), problem.dout.has_value(), &backend);
      !status.ok()) {
    return CliFail(streams, status.message());
  }

  out << "msa run: "
      << (options.inputs.empty() ? "default job (M3-like layer, 8 of M3's 64 query heads in 2 of its 4 groups)"
                                 : options.inputs)
      << ", backend " << backend->name << (named == nullptr ? " (the fastest available)" : "") << ", precision "
      << PrecisionName(problem.config.precision) << ", " << omp_get_max_threads() << " threads\n";
  out << "  config     " << DescribeConfig(problem.config) << "\n";
  PrintBatch(out, problem);

  Outputs outputs;
  Stopwatch select_clock;
  double select_seconds = 0;
  const ProgressFn attend_progress = StageProgress(streams, "attend");
  const ProgressFn select_progress = [&, inner = StageProgress(streams, "select")](double f) {
    if (inner) inner(f);
    if (f >= 1.0) select_seconds = select_clock.Seconds();
  };
  try {
    if (Status status = RunBackend(*backend, problem, &outputs, select_progress, attend_progress); !status.ok()) {
      return CliFail(streams, status.message());
    }
  } catch (const std::bad_alloc&) {  // valid, but the outputs (or the backend's scratch) do not fit in memory
    const Config& c = problem.config;
    return CliFail(streams, "out of memory computing the outputs (topk_indices [" + std::to_string(c.num_kv_heads) +
                                ", " + std::to_string(problem.batch().total_q()) + ", " + std::to_string(c.top_k) +
                                "], out [" + std::to_string(problem.batch().total_q()) + ", " +
                                std::to_string(c.num_q_heads) + ", " + std::to_string(c.value_dim) + "])");
  }
  const double attend_seconds = select_clock.Seconds() - select_seconds;

  Stopwatch recall_clock;
  const MassRecall mass = SampledMassRecall(problem, outputs.topk_indices, options.mass_recall_queries);
  const double recall_seconds = recall_clock.Seconds();

  Stopwatch write_clock;
  if (!options.out.empty()) {
    const SafetensorsFile file = OutputsToSafetensors(problem, outputs, backend->name, inputs_sha256);
    if (Status status = WriteSafetensors(options.out, file); !status.ok()) return CliFail(streams, status.message());
  }
  const double write_seconds = write_clock.Seconds();

  out << "  time       " << (options.inputs.empty() ? "generate " : "read ") << Fixed(load_seconds, 2) << " s | select "
      << Fixed(select_seconds, 2) << " s | attend " << Fixed(attend_seconds, 2) << " s | mass recall "
      << Fixed(recall_seconds, 2) << " s | write " << Fixed(write_seconds, 2) << " s\n";
  out << "  sparsity   the selection keeps " << Fixed(100 * KeptKeyFraction(problem, outputs.topk_indices), 2)
      << "% of the dense causal (query, key) pairs (at most top_k * Bk = "
      << int64_t(problem.config.top_k) * problem.config.block_size << " keys per query)\n";
  if (mass.rows > 0) {
    out << "  recall     attention-mass recall vs dense attention over " << mass.rows << " (query, head) rows: mean "
        << Fixed(mass.mean, 4) << ", min " << Fixed(mass.min, 4) << "\n";
  }
  if (needle) PrintNeedle(out, problem, outputs, *needle);
  if (!outputs.kernel_plan.empty()) out << "  kernels    " << outputs.kernel_plan << "\n";
  if (outputs.has_training()) {
    out << "  training   backward (dq, dk, dv) and indexer KL (dqi, dki) on the selection: kl_loss "
        << Fixed(outputs.kl_loss[0], 9) << "\n";
  }
  out << "  sha256     outputs " << OutputsSha256(outputs) << "\n";
  out << "             inputs  " << inputs_sha256 << "\n";
  if (!options.out.empty()) out << "  wrote      " << options.out << "\n";
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand(
      "run", "Compute every output of SPEC section 7; with no --inputs, run the embedded default job");
  command->add_option("--inputs", options->inputs, "inputs file (safetensors, file contract v1)");
  command->add_option("--out", options->out, "outputs file to write (safetensors)");
  command->add_option("--backend", options->backend,
                      "backend name (default: the fastest available one that supports the precision)");
  command->add_option("--precision", options->precision,
                      "exact | fp32 | bf16 | fp16 (default: the inputs' msa_config.precision, else exact)");
  command->add_option("--index-format", options->index_format,
                      "native | e4m3: index_q, index_k rounded to fp8 E4M3 first (default: the inputs' "
                      "msa_config.index_format, else native)");
  command->add_option("--score-format", options->score_format,
                      "native | fp16: rank binary16-rounded block maxima, max pooling only (the official "
                      "use_fp16_score; default: the inputs' msa_config.score_format, else native)");
  AddThreadsOption(command, &options->threads);
  command
      ->add_option("--mass-recall-queries", options->mass_recall_queries, "queries sampled for attention-mass recall")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  command->callback(
      [options, &streams, action] { *action = [options, &streams] { return RunCommand(*options, streams); }; });
}

}  // namespace msa
