// The parts of msa_oracle._core, each adding its functions to the module (module.cc calls them).
#ifndef MSA_PYTHON_MODULE_H_
#define MSA_PYTHON_MODULE_H_

#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/src/errors.h"

namespace msa::python {

namespace nb = nanobind;
using namespace nb::literals;

void AddComputeFunctions(nb::module_& m);  // compute.cc: select, attend, reference
void AddJudgeFunctions(nb::module_& m);    // judge.cc: check
void AddFileFunctions(nb::module_& m);     // files.cc: safetensors, golden suites

}  // namespace msa::python

#endif  // MSA_PYTHON_MODULE_H_
