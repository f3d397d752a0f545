// Uses msa-oracle through its installed CMake package (msa::oracle and msa::io, or msa::msa alone): generate a
// small problem, write it as an inputs file and read it back (the file contract), run the FP64 reference on it and
// judge the reference against itself with the oracle's comparators. argv[1]: a directory to write into.
#include <cstdio>
#include <string>

#include "io/file_contract.h"
#include "io/sha256.h"
#include "msa/msa.h"
#include "oracle/problem.h"
#ifdef MSA_CONSUMER_JUDGE
#include "oracle/compare.h"
#endif

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DIR\n");
    return 2;
  }
  msa::ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 16;
  spec.config.block_size = 8;
  spec.config.top_k = 3;
  spec.lengths = {{5, 40}, {1, 17}};  // (q_len, k_len) per sequence
  spec.seed = 7;
  const msa::Problem generated = msa::GenerateProblem(spec);

  const std::string path = std::string(argv[1]) + "/inputs.safetensors";
  if (const msa::Status status = msa::WriteSafetensors(path, msa::ProblemToSafetensors(generated)); !status.ok()) {
    std::fprintf(stderr, "consumer: WriteSafetensors: %s\n", status.message().c_str());
    return 1;
  }
  msa::Problem problem;
  std::string inputs_sha256;
  if (const msa::Status status = msa::LoadProblem(path, &problem, &inputs_sha256); !status.ok()) {
    std::fprintf(stderr, "consumer: LoadProblem: %s\n", status.message().c_str());
    return 1;
  }
  std::string file_sha256;
  if (const msa::Status status = msa::Sha256OfFile(path, &file_sha256); !status.ok() || file_sha256 != inputs_sha256) {
    std::fprintf(stderr, "consumer: the inputs file does not hash to what LoadProblem reported\n");
    return 1;
  }

  const msa::Backend* reference = msa::FindBackend("reference");
  if (reference == nullptr) {
    std::fprintf(stderr, "consumer: no reference backend\n");
    return 1;
  }
  msa::Outputs outputs;
  if (const msa::Status status = msa::RunBackend(*reference, problem, &outputs); !status.ok()) {
    std::fprintf(stderr, "consumer: RunBackend: %s\n", status.message().c_str());
    return 1;
  }

#ifdef MSA_CONSUMER_JUDGE
  msa::Candidate candidate;
  candidate.topk_indices = outputs.topk_indices;
  candidate.out = outputs.out;
  candidate.lse = outputs.lse;
  candidate.index_lse = outputs.index_lse;
  msa::Verdict verdict;
  if (const msa::Status status = msa::Judge(problem, outputs, candidate, msa::JudgeOptions{}, &verdict); !status.ok()) {
    std::fprintf(stderr, "consumer: Judge: %s\n", status.message().c_str());
    return 1;
  }
  if (!verdict.passed()) {
    std::fprintf(stderr, "consumer: the reference failed against itself:\n%s\n", msa::FormatVerdict(verdict).c_str());
    return 1;
  }
  std::printf("judged: passed\n");
#endif
  std::printf("consumer ok\n");
  return 0;
}
