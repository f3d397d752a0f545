// MSA_ASSERT: internal invariants only (never user input, which gets a Status). On failure it prints the
// file, line and condition and aborts: a broken invariant is a bug in this project.
#ifndef MSA_ASSERT_H_
#define MSA_ASSERT_H_

#include <cstdio>
#include <cstdlib>

#define MSA_ASSERT(condition)                                                                         \
  do {                                                                                                \
    if (!(condition)) {                                                                               \
      std::fprintf(stderr, "%s:%d: internal invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (false)

#endif  // MSA_ASSERT_H_
