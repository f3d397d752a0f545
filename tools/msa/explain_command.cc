// `msa explain`: build the tiny case, run the reference, print the trace, write the image atomically.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"
#include "tools/msa/cli.h"
#include "tools/msa/explain.h"
#include "tools/msa/explain_image.h"

namespace msa {

namespace {

struct ExplainOptions {
  int keys = 12;  // k_len of the one sequence; q_len = keys (a prefill)
  int block_size = 4, top_k = 2, init_blocks = 0;
  int q_heads = 2, kv_heads = 1, head_dim = 4;  // D = Dv = Di = head_dim
  std::string pooling = "max";
  int query = -1;  // the traced query (within the sequence); -1: the last one
  uint64_t seed = 1;
  std::string image;  // empty: no image; else a PNG of the selection pattern (queries x blocks, per group)
};

int ExplainCommand(const ExplainOptions& options, const CliStreams& streams) {
  Config config;
  config.num_q_heads = options.q_heads;
  config.num_kv_heads = options.kv_heads;
  config.head_dim = config.value_dim = config.index_head_dim = options.head_dim;
  config.block_size = options.block_size;
  config.top_k = options.top_k;
  config.init_blocks = options.init_blocks;
  if (!ParsePooling(options.pooling, &config.pooling)) {
    return CliFail(streams, "--pooling " + options.pooling + ": must be max, lse or mean");
  }
  if (options.q_heads % options.kv_heads != 0) {
    return CliFail(streams, "--q-heads " + std::to_string(options.q_heads) + ": must be a multiple of --kv-heads " +
                                std::to_string(options.kv_heads));
  }
  if (options.top_k < options.init_blocks + 1) {
    return CliFail(streams, "--top-k " + std::to_string(options.top_k) + ": must be at least --init-blocks + 1 = " +
                                std::to_string(options.init_blocks + 1) + " (the forced blocks)");
  }
  if (options.query >= options.keys) {
    return CliFail(
        streams, "--query " + std::to_string(options.query) + ": must be below --keys " + std::to_string(options.keys));
  }
  if (Status status = ValidateConfig(config); !status.ok()) return CliFail(streams, status.message());
  if (!options.image.empty()) {
    if (Status status = CheckOutputPath("--image", options.image); !status.ok()) {
      return CliFail(streams, status.message());
    }
  }
  const Problem problem = MakeExplainProblem(config, options.keys, options.seed);
  Outputs reference;
  if (Status status = RunReference(problem, &reference); !status.ok()) return CliFail(streams, status.message());
  const int64_t query = options.query < 0 ? options.keys - 1 : options.query;

  streams.out << "msa explain: one sequence of " << options.keys << " keys, a prefill (query i sits at position i); "
              << DescribeConfig(config) << "; seed " << options.seed << "\n"
              << "inputs are standard normal draws rounded to one decimal; block scores, the selected row, out and "
                 "lse are the FP64 reference's outputs, token scores and weights use its own dot and exp\n"
              << ExplainQuery(problem, reference, query);
  if (!options.image.empty()) {
    const RgbImage image = DrawSelection(problem, reference.topk_indices);
    const std::vector<uint8_t> png = EncodePng(image);
    const std::string_view bytes(reinterpret_cast<const char*>(png.data()), png.size());
    if (Status status = WriteFileAtomically(options.image, bytes); !status.ok()) {
      return CliFail(streams, "--image " + status.message());
    }
    streams.out << "wrote " << options.image << " (" << image.width << " x " << image.height
                << " pixels: a row per query, a column per block, one panel per group; blue ranked picks, green "
                   "init, orange local, grey not selected, white not visible)\n";
  }
  return 0;
}

}  // namespace

void AddExplainCommand(CLI::App& app, const CliStreams& streams, CliAction* action) {
  const auto options = std::make_shared<ExplainOptions>();
  CLI::App* command = app.add_subcommand(
      "explain",
      "Step-by-step trace of MSA on a tiny prefill (token scores, block scores, forced blocks, ranking, "
      "selection, softmax, output), computed by the reference; --image draws the selection pattern");
  const struct {
    const char* flag;
    int* field;
    int min, max;
    const char* what;
  } explain_ints[] = {{"--keys", &options->keys, 1, 4096, "keys (and queries: a prefill) of the one sequence"},
                      {"--block-size", &options->block_size, 1, 4096, "Bk"},
                      {"--top-k", &options->top_k, 1, 4096, "selected blocks per (query, group), local included"},
                      {"--init-blocks", &options->init_blocks, 0, 4096, "sink blocks"},
                      {"--q-heads", &options->q_heads, 1, 64, "Hq"},
                      {"--kv-heads", &options->kv_heads, 1, 64, "Hkv = Hidx"},
                      {"--head-dim", &options->head_dim, 1, 64, "D = Dv = Di"},
                      {"--query", &options->query, -1, 4095, "traced query within the sequence (-1: the last)"}};
  for (const auto& option : explain_ints) {
    command->add_option(option.flag, *option.field, option.what)
        ->check(CLI::Range(option.min, option.max))
        ->capture_default_str();
  }
  command->add_option("--pooling", options->pooling, "max | lse | mean")
      ->check(CLI::IsMember({"max", "lse", "mean"}))
      ->capture_default_str();
  command->add_option("--seed", options->seed, "random seed")->capture_default_str();
  command->add_option("--image", options->image, "write a PNG of the selection pattern (queries x blocks)");
  command->callback(
      [options, &streams, action] { *action = [options, &streams] { return ExplainCommand(*options, streams); }; });
}

}  // namespace msa
