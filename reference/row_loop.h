// Runs independent rows across OpenMP threads (rows only: a sum is never split) and reports progress.
#ifndef MSA_REFERENCE_ROW_LOOP_H_
#define MSA_REFERENCE_ROW_LOOP_H_

#include <omp.h>

#include <atomic>
#include <cstdint>

#include "msa/msa.h"

namespace msa::reference {

// Calls body(row) for row in [0, num_rows); progress is reported from thread 0 in steps of about 1%.
// body must not throw. Rows are claimed dynamically so ragged work stays balanced.
template <typename Body>
void ForEachRow(int64_t num_rows, const ProgressFn& progress, Body&& body) {
  std::atomic<int64_t> done{0};
  const int64_t step = num_rows / 100 + 1;
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t row = 0; row < num_rows; ++row) {
    body(row);
    const int64_t finished = done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (progress && omp_get_thread_num() == 0 && finished % step == 0) {
      progress(double(finished) / double(num_rows));
    }
  }
  if (progress) progress(1.0);
}

}  // namespace msa::reference

#endif  // MSA_REFERENCE_ROW_LOOP_H_
