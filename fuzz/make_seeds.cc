// Writes the seed inputs of the fuzz corpora: small valid inputs files (msa::ProblemToSafetensors of a few
// ProblemSpecs) for corpus/fuzz_safetensors and corpus/fuzz_inputs, and hand-made hostile files for both.
// Usage: fuzz_make_seeds CORPUS_DIR (the fuzz/corpus folder). Deterministic: rerunning rewrites the same bytes.
// Crash reproducers found by fuzzing are added to the corpora by hand (named crash_*), not written here.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/file_contract.h"
#include "oracle/problem.h"

namespace msa {
namespace {

void WriteBytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> ValidInputs(const ProblemSpec& spec) {
  std::vector<uint8_t> bytes;
  const Status status = SerializeSafetensors(ProblemToSafetensors(GenerateProblem(spec)), &bytes);
  if (!status.ok()) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", status.message().c_str());
    std::exit(1);
  }
  return bytes;
}

// A file of the given header text (padded with spaces to 8 bytes) followed by `data`.
std::vector<uint8_t> WithHeader(std::string header, const std::string& data = "") {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> bytes(8);
  const uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<uint8_t> LengthOnly(uint64_t length, const std::string& rest) {
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &length, 8);
  bytes.insert(bytes.end(), rest.begin(), rest.end());
  return bytes;
}

// Inputs with a hand-written msa_config over valid tensors of one sequence (q_len 2, k_len 3, Hq 2, Hkv 1,
// D = Dv = Di = 2, F32).
std::vector<uint8_t> InputsWithConfig(const std::string& config_json) {
  ProblemSpec spec;
  spec.config.num_q_heads = 2;
  spec.config.num_kv_heads = 1;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 2;
  spec.config.block_size = 2;
  spec.config.top_k = 2;
  spec.lengths = {{2, 3}};
  spec.dtype = DType::kF32;
  spec.seed = 7;
  SafetensorsFile file = ProblemToSafetensors(GenerateProblem(spec));
  file.metadata["msa_config"] = config_json;
  std::vector<uint8_t> bytes;
  if (!SerializeSafetensors(file, &bytes).ok()) std::exit(1);
  return bytes;
}

// The valid seeds: every pooling mode and dtype, ragged batches with empty sequences, init blocks, decode,
// explicit scales, ties and large logits.
std::vector<std::pair<std::string, ProblemSpec>> ValidSpecs() {
  std::vector<std::pair<std::string, ProblemSpec>> specs;
  ProblemSpec s;
  s.config.num_q_heads = 2, s.config.num_kv_heads = 1, s.config.head_dim = 4, s.config.value_dim = 3;
  s.config.index_head_dim = 4, s.config.block_size = 2, s.config.top_k = 3, s.config.pooling = Pooling::kMax;
  s.lengths = {{3, 5}}, s.dtype = DType::kF32, s.seed = 1;
  specs.push_back({"valid_prefix_suffix_max_f32", s});

  s.config.num_q_heads = 4, s.config.num_kv_heads = 2, s.config.head_dim = 3, s.config.value_dim = 2;
  s.config.index_head_dim = 3, s.config.block_size = 3, s.config.top_k = 3, s.config.init_blocks = 1;
  s.config.pooling = Pooling::kLse, s.lengths = {{0, 0}, {2, 7}, {1, 1}}, s.dtype = DType::kBF16, s.seed = 2;
  specs.push_back({"valid_ragged_init_lse_bf16", s});

  s = ProblemSpec{};
  s.config.num_q_heads = 3, s.config.num_kv_heads = 1, s.config.head_dim = 2, s.config.value_dim = 2;
  s.config.index_head_dim = 2, s.config.block_size = 2, s.config.top_k = 2, s.config.pooling = Pooling::kMean;
  s.config.softmax_scale = 0.25, s.config.index_scale = 3.0;
  s.lengths = {{4, 4}}, s.dtype = DType::kF16, s.seed = 3;
  specs.push_back({"valid_prefill_mean_scales_f16", s});

  s = ProblemSpec{};
  s.config.num_q_heads = 2, s.config.num_kv_heads = 2, s.config.head_dim = 2, s.config.value_dim = 1;
  s.config.index_head_dim = 2, s.config.block_size = 1, s.config.top_k = 4, s.config.pooling = Pooling::kMax;
  s.lengths = {{1, 9}, {2, 6}}, s.dtype = DType::kF64, s.seed = 4, s.few_valued_index = true;
  specs.push_back({"valid_decode_ties_f64", s});

  s = ProblemSpec{};
  s.config.num_q_heads = 1, s.config.num_kv_heads = 1, s.config.head_dim = 1, s.config.value_dim = 1;
  s.config.index_head_dim = 1, s.config.block_size = 4, s.config.top_k = 2, s.config.pooling = Pooling::kLse;
  s.lengths = {{5, 12}}, s.dtype = DType::kF32, s.seed = 5, s.query_scale = 100;
  specs.push_back({"valid_large_logits_f32", s});
  return specs;
}

}  // namespace
}  // namespace msa

int main(int argc, char** argv) {
  using namespace msa;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 1;
  }
  const std::filesystem::path corpus = argv[1];
  std::vector<std::pair<std::string, std::vector<uint8_t>>> both;  // seeds for both safetensors targets
  for (const auto& [name, spec] : ValidSpecs()) both.push_back({name, ValidInputs(spec)});

  // Hostile files of the reader.
  const std::string f64_scalar(8, '\0');
  both.push_back({"hostile_empty", {}});
  both.push_back({"hostile_short_length_field", {2, 0, 0}});
  both.push_back({"hostile_header_length_huge", LengthOnly(UINT64_MAX, "{}")});
  both.push_back({"hostile_header_past_end", LengthOnly(64, "{\"a\":")});
  both.push_back({"hostile_empty_header", WithHeader("{}")});
  both.push_back({"hostile_not_json", WithHeader("{\"q\":")});
  both.push_back({"hostile_not_object", WithHeader("[1,2,3]")});
  both.push_back({"hostile_duplicate_name", WithHeader(R"({"x":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                                                       R"("x":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})",
                                                       f64_scalar)});
  both.push_back({"hostile_overlap", WithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                                f64_scalar)});
  both.push_back(
      {"hostile_reversed_offsets", WithHeader(R"({"a":{"dtype":"F64","shape":[],"data_offsets":[8,0]}})", f64_scalar)});
  both.push_back({"hostile_shape_overflow",
                  WithHeader(R"({"a":{"dtype":"F64","shape":[1099511627776,1099511627776,1099511627776],)"
                             R"("data_offsets":[0,8]}})",
                             f64_scalar)});
  both.push_back(
      {"hostile_negative_dim", WithHeader(R"({"a":{"dtype":"F64","shape":[-1],"data_offsets":[0,8]}})", f64_scalar)});
  both.push_back(
      {"hostile_unknown_dtype", WithHeader(R"({"a":{"dtype":"F128","shape":[],"data_offsets":[0,8]}})", f64_scalar)});
  both.push_back({"hostile_metadata_not_string", WithHeader(R"({"__metadata__":{"msa_config":{"top_k":1}}})")});
  both.push_back({"hostile_gap_and_unicode_names",
                  WithHeader(R"({"\u00e9\u0000":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
                             R"("__metadata__":{"k\ud83d\ude00":"v"}})",
                             f64_scalar)});
  for (const auto& [name, bytes] : both) {
    WriteBytes(corpus / "fuzz_safetensors" / name, bytes);
    WriteBytes(corpus / "fuzz_inputs" / name, bytes);
  }

  // Hostile configs and shapes of the file contract, over otherwise valid tensors.
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"config_minimal", R"({"block_size":2,"top_k":2,"pooling":"max"})"},
      {"config_top_k_huge", R"({"block_size":1,"top_k":2147483647,"pooling":"lse"})"},
      {"config_top_k_below_forced", R"({"block_size":2,"top_k":2,"init_blocks":2,"pooling":"max"})"},
      {"config_block_size_zero", R"({"block_size":0,"top_k":2,"pooling":"max"})"},
      {"config_int_overflow", R"({"block_size":18446744073709551615,"top_k":2,"pooling":"max"})"},
      {"config_scale_huge", R"({"block_size":2,"top_k":2,"pooling":"mean","softmax_scale":1e308,"index_scale":1e308})"},
      {"config_scale_negative", R"({"block_size":2,"top_k":2,"pooling":"max","softmax_scale":-1})"},
      {"config_unknown_key", R"({"block_size":2,"top_k":2,"pooling":"max","topk":3})"},
      {"config_precision_bf16", R"({"block_size":2,"top_k":2,"pooling":"max","precision":"bf16"})"},
      {"config_not_object", R"([2,2,"max"])"},
  };
  for (const auto& [name, config] : configs) WriteBytes(corpus / "fuzz_inputs" / name, InputsWithConfig(config));
  std::printf("fuzz_make_seeds: wrote %zu seeds under %s\n", 2 * both.size() + configs.size(), corpus.c_str());
  return 0;
}
