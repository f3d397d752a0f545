// The device benchmarks' exits: a failed CUDA call or Status ends the run with exit status 1 and one line on stderr
// naming the program (the `kBenchProgram` string in the scope of the call), the call, where it is and the reason.
// Benchmarks are tools, not the library, so they may exit.
#ifndef MSA_BENCH_BENCH_EXIT_H_
#define MSA_BENCH_BENCH_EXIT_H_

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "msa/status.h"

#define BENCH_CHECK(expr)                                                                            \
  do {                                                                                               \
    const cudaError_t bench_error_ = (expr);                                                         \
    if (bench_error_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s: %s failed at %s:%d: %s\n", kBenchProgram, #expr, __FILE__, __LINE__, \
                   cudaGetErrorString(bench_error_));                                                \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (false)

#define BENCH_OK(expr)                                                                  \
  do {                                                                                  \
    const ::msa::Status bench_status_ = (expr);                                         \
    if (!bench_status_.ok()) {                                                          \
      std::fprintf(stderr, "%s: %s\n", kBenchProgram, bench_status_.message().c_str()); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (false)

#endif  // MSA_BENCH_BENCH_EXIT_H_
