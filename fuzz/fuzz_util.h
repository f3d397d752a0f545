// Shared by the fuzz targets: how a finding is reported, and the one-thread setup.
#ifndef MSA_FUZZ_FUZZ_UTIL_H_
#define MSA_FUZZ_FUZZ_UTIL_H_

#include <omp.h>

#include <cstdio>
#include <string>

// A finding: prints what broke (and `detail`, a std::string) to stderr, then traps, which libFuzzer and the
// replay test both report as a crash on the current input.
#define MSA_FUZZ_CHECK(condition, detail)                                                        \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n%s\n", __FILE__, __LINE__, #condition, \
                   std::string(detail).c_str());                                                 \
      std::fflush(stderr);                                                                       \
      __builtin_trap();                                                                          \
    }                                                                                            \
  } while (false)

namespace msa::fuzz {

// One OpenMP thread: a fuzzer is one process per core, and the canonical order makes results independent
// of the thread count anyway (SPEC section 4; the reproducibility test checks that).
inline void UseOneThread() { omp_set_num_threads(1); }

}  // namespace msa::fuzz

#endif  // MSA_FUZZ_FUZZ_UTIL_H_
