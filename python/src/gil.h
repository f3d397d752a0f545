// Long work runs without the GIL, so other Python threads go on (two checks in two threads run at once).
#ifndef MSA_PYTHON_GIL_H_
#define MSA_PYTHON_GIL_H_

#include <atomic>

#include <nanobind/nanobind.h>

namespace msa::python {

// How many computations are inside a WithoutGil scope now: what a test reads from another thread to see that the
// GIL was released (it could not run while a computation held it).
inline std::atomic<int> computations_in_flight{0};

// Releases the GIL for its lifetime and counts itself in computations_in_flight meanwhile. Precondition: nothing
// in the scope touches Python objects.
class WithoutGil {
 public:
  WithoutGil() { computations_in_flight.fetch_add(1); }
  ~WithoutGil() { computations_in_flight.fetch_sub(1); }
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  nanobind::gil_scoped_release release_;
};

}  // namespace msa::python

#endif  // MSA_PYTHON_GIL_H_
