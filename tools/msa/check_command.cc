// `msa check`: judge an outside implementation's outputs against the FP64 reference on the same inputs.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"
#include "io/file_contract.h"
#include "oracle/candidate.h"
#include "oracle/compare.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

// Each empty rule option takes the outputs' __metadata__ key of the same name, else its default (SPEC section 5).
struct CheckOptions {
  std::string inputs;
  std::string outputs;
  std::string precision;        // every float output judged at it; empty: each at its own dtype (F64 exact, ...)
  std::string score_precision;  // the arithmetic of their ranked scores; default exact for an FP64 candidate, else fp32
  std::string order;            // strict | any (default strict)
  std::string topk_layout;      // head_major | query_major (default head_major)
  std::string lse_base;         // e | 2 (default e)
  std::optional<double> tau;
  std::string json;  // empty: no JSON report
  int threads = 0;
};

int CheckCommand(const CheckOptions& options, const CliStreams& streams) {
  SetThreads(options.threads);
  if (!options.json.empty()) {
    if (Status status = CheckOutputPath("--json", options.json); !status.ok())
      return CliFail(streams, status.message());
  }
  Problem problem;
  std::string inputs_sha256;
  if (Status status = LoadProblem(options.inputs, &problem, &inputs_sha256); !status.ok()) {
    return CliFail(streams, status.message());
  }
  SafetensorsFile outputs;
  if (Status status = ReadSafetensors(options.outputs, &outputs); !status.ok()) {
    return CliFail(streams, status.message());
  }
  const CandidateRules rules{.precision = options.precision,
                             .score_precision = options.score_precision,
                             .order = options.order,
                             .topk_layout = options.topk_layout,
                             .lse_base = options.lse_base};
  Verdict verdict;
  if (Status status = CheckCandidate(problem, outputs, options.outputs, rules, options.tau, &verdict); !status.ok()) {
    return CliFail(streams, status.message());
  }

  streams.out << "msa check: " << options.outputs << " against the FP64 reference on " << options.inputs << "\n";
  const auto recorded = outputs.metadata.find("inputs_sha256");
  if (recorded != outputs.metadata.end() && recorded->second != inputs_sha256) {
    streams.out << "  note: the outputs record inputs_sha256 " << recorded->second << ", but " << options.inputs
                << " hashes to " << inputs_sha256 << "\n";
  }
  streams.out << FormatVerdict(verdict);
  if (!options.json.empty()) {
    if (Status status = WriteFileAtomically(options.json, VerdictToJson(verdict)); !status.ok()) {
      return CliFail(streams, status.message());
    }
  }
  return verdict.passed() ? 0 : 1;
}

}  // namespace

void AddCheckCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<CheckOptions>();
  CLI::App* command =
      app.add_subcommand("check",
                         "Judge an implementation's outputs (any subset of topk_indices, out, lse, index_lse) against "
                         "the FP64 reference computed on the same inputs. Exit 0 pass, 1 fail, 2 bad input");
  command->add_option("--inputs", options->inputs, "inputs file (safetensors, file contract v1)")->required();
  command->add_option("--outputs", options->outputs, "their outputs file (safetensors)")->required();
  command->add_option("--precision", options->precision,
                      "exact | fp32 | bf16 | fp16: judge every float output at it (default: each at its own "
                      "dtype, F64 exact, F32 fp32, BF16 bf16, F16 fp16)");
  command->add_option("--score-precision", options->score_precision,
                      "exact | fp32 | bf16 | fp16: the arithmetic of their ranked index scores, which sets tau "
                      "(default: metadata score_precision, else exact for an all-F64 candidate, else fp32: "
                      "kernels accumulate index scores in fp32)");
  command->add_option("--order", options->order,
                      "strict | any: strict wants the local block in the last valid slot, any reads the valid "
                      "prefix as a set (default: metadata order, else strict)");
  command->add_option("--topk-layout", options->topk_layout,
                      "head_major [Hidx, total_q, top_k] | query_major [total_q, Hidx, top_k] (default: "
                      "metadata topk_layout, else head_major)");
  command->add_option("--lse-base", options->lse_base,
                      "e | 2: the base of their lse and index_lse (default: metadata lse_base, else e)");
  command->add_option("--tau", options->tau, "selection tolerance (default: from a naive evaluation)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--json", options->json, "also write the report as JSON to this file");
  AddThreadsOption(command, &options->threads);
  command->callback(
      [options, &streams, action] { *action = [options, &streams] { return CheckCommand(*options, streams); }; });
}

}  // namespace msa
