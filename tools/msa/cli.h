// The `msa` command line tool. Exit codes: 0 success, 1 a judged implementation failed (check, golden
// verify), 2 bad input or failure (one line "msa: error: ..." on stderr).
#ifndef MSA_TOOLS_MSA_CLI_H_
#define MSA_TOOLS_MSA_CLI_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "msa/msa.h"

namespace msa {

struct CliStreams {
  std::ostream& out;
  std::ostream& err;
  bool show_progress = false;  // a live progress line on err (set when stderr is a terminal); without it,
                               // `msa recall` prints one line per setup on err instead
};

int RunCli(const std::vector<std::string>& args, const CliStreams& streams);

// Helpers shared by the subcommands.
// Prints "msa: error: <message>" and returns 2.
int CliFail(const CliStreams& streams, const std::string& message);
// The named backend, or an error listing the compiled-in ones.
Status LookupBackend(const std::string& name, const Backend** backend);
// Fails early (before long work) when a file could not be created at `path` later; `flag` names the option.
Status CheckOutputPath(const std::string& flag, const std::string& path);
// Sets the OpenMP thread count when threads > 0.
void SetThreads(int threads);

// `msa run` (tools/msa/run_command.cc).
struct RunOptions {
  std::string inputs;     // empty: the embedded default job
  std::string out;        // empty: no outputs file
  std::string backend;    // empty: the fastest available backend that supports the precision (FastestBackend)
  std::string precision;  // exact | fp32 | bf16 | fp16; empty: the inputs' msa_config.precision (default exact)
  std::string index_format;  // native | e4m3; empty: the inputs' msa_config.index_format (default native)
  std::string score_format;  // native | fp16; empty: the inputs' msa_config.score_format (default native)
  int threads = 0;        // 0: OpenMP's default
  int mass_recall_queries = 256;
};
int RunCommand(const RunOptions& options, const CliStreams& streams);

// `msa check` (tools/msa/check_command.cc): judges an outside implementation's outputs.
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
  std::string json;             // empty: no JSON report
  int threads = 0;
};
int CheckCommand(const CheckOptions& options, const CliStreams& streams);

// `msa golden generate` and `msa golden verify` (tools/msa/golden_command.cc).
struct GoldenGenerateOptions {
  std::string suite = "smoke";  // smoke | full
  std::string dir;
  int threads = 0;
};
int GoldenGenerateCommand(const GoldenGenerateOptions& options, const CliStreams& streams);

struct GoldenVerifyOptions {
  std::string dir;
  std::string backend = "reference";
  std::string precision = "exact";
  int threads = 0;
};
int GoldenVerifyCommand(const GoldenVerifyOptions& options, const CliStreams& streams);

// `msa recall` (tools/msa/recall_command.cc): the recall study of SPEC section 5. List flags are comma-separated.
// Exit 0 when every backend reaches the reference's recall up to counted near ties, 1 when one falls short.
struct RecallOptions {
  std::string contexts = "4096";
  std::string distances = "256,1024,3072";
  std::string strengths = "1,2,4,8";
  std::string top_ks = "8";
  std::string block_sizes = "64";
  std::string poolings = "max,lse,mean";
  std::string backends;            // empty: every compiled, available backend that supports the precision
  std::string precision = "exact";  // what the non-reference backends run; the reference always runs exact
  int queries = 4, sequences = 4, needles = 1, distractors = 0;
  double distractor_strength = 1.0;
  int q_heads = 4, kv_heads = 2, head_dim = 64, init_blocks = 0;  // D = Dv = Di = head_dim
  uint64_t seed = 1;
  std::string out_dir;  // empty: no files
  bool plot = false;    // PNG figures into out_dir (gnuplot)
  int threads = 0;
};
int RecallCommand(const RecallOptions& options, const CliStreams& streams);

// `msa explain` (tools/msa/explain_command.cc): a step-by-step trace of one query on a tiny case.
struct ExplainOptions {
  int keys = 12;         // k_len of the one sequence; q_len = keys (a prefill)
  int block_size = 4, top_k = 2, init_blocks = 0;
  int q_heads = 2, kv_heads = 1, head_dim = 4;  // D = Dv = Di = head_dim
  std::string pooling = "max";
  int query = -1;        // the traced query (within the sequence); -1: the last one
  uint64_t seed = 1;
  std::string image;     // empty: no image; else a PNG of the selection pattern (queries x blocks, per group)
};
int ExplainCommand(const ExplainOptions& options, const CliStreams& streams);

// `msa cost` (tools/msa/cost_command.cc): the cost model of SPEC section 6 (tools/msa/cost_model.h) for any length.
struct CostOptions {
  std::string inputs;                       // empty: `config` (M3 defaults, changed by flags); else its file
  Config config;
  std::string lengths = "8K,32K,128K,1M";   // comma-separated, K = 2^10, M = 2^20, G = 2^30
  std::string mode = "prefill";             // prefill | decode
  std::string batch = "1";                  // independent sequences, like a length ("1K" = 1024)
  std::string dtype = "bf16";               // fp8 | bf16 | fp16 | fp32: bytes per element
  std::string gpu = "H200";
  bool gpu_info = false;                    // print the GPU table with its sources, nothing else
  std::string json;                         // empty: no JSON file
};
int CostCommand(const CostOptions& options, const CliStreams& streams);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_CLI_H_
