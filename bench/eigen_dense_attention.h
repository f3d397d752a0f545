// The peer a user would otherwise write on a CPU: dense causal GQA attention in fp32 with Eigen GEMMs.
// Not part of the library; the benchmark checks it against the FP64 reference before timing it.
#ifndef MSA_BENCH_EIGEN_DENSE_ATTENTION_H_
#define MSA_BENCH_EIGEN_DENSE_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "oracle/problem.h"

namespace msa::bench {

// Dense causal GQA attention of a one-sequence prefill (q_len == k_len = N) with F32 inputs:
// out [N, Hq, Dv] (fp32). Query tiles of all G heads of a group are stacked into one matrix:
// S = Q_tile K[0, end)^T * scale (one GEMM), causal mask, row softmax, O = P V (a second GEMM).
// OpenMP over (group, tile); Eigen itself runs one thread inside.
void EigenDenseCausalGqa(const Problem& problem, std::vector<float>* out);

// The peer's own ceiling: the FLOP/s of Eigen's fp32 GEMM at the peer's tile shape for `config`
// ([tile * G, D] x [D, keys]), every thread multiplying its own matrices `repetitions` times. 0 if the product
// came out wrong.
double EigenGemmRate(const Config& config, int64_t keys, int repetitions);

}  // namespace msa::bench

#endif  // MSA_BENCH_EIGEN_DENSE_ATTENTION_H_
