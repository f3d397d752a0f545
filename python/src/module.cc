// msa_oracle._core: the C++ libraries for the msa_oracle package (python/msa_oracle), which is its only caller and
// checks the arguments' kinds before they get here.
#include "python/src/module.h"

#include <string>

#include "io/file_contract.h"
#include "python/src/arrays.h"
#include "python/src/gil.h"
#ifdef MSA_HAVE_CUDA
#include "gpu/gpu_backend.h"
#endif

#ifndef MSA_BUILD_TOOL
#define MSA_BUILD_TOOL ""
#endif

namespace msa::python {
namespace {

// Every compiled-in backend: (name, available here).
nb::list Backends() {
  nb::list backends;
  for (const Backend& backend : AllBackends()) {
    backends.append(nb::make_tuple(std::string(backend.name), backend.is_available()));
  }
  return backends;
}

// ValueError unless the msa_config JSON object is valid on its own (heads and dims come from shapes later).
void ValidateConfigJson(const std::string& config_json, const std::string& origin) {
  Config config;
  ThrowIfError(ConfigFromJson(config_json, origin, &config));
}

// The view a float input becomes, as every call sees it: (data address, dtype, shape, strides in elements).
nb::tuple ViewInfo(const Array& array, const std::string& name) {
  const TensorView view = FloatTensor(array, name.c_str(), "[rows, heads, dim]");
  return nb::make_tuple(reinterpret_cast<uintptr_t>(view.data), std::string(DTypeName(view.dtype)),
                        nb::make_tuple(view.rows, view.heads, view.dim),
                        nb::make_tuple(view.row_stride, view.head_stride, 1));
}

}  // namespace
}  // namespace msa::python

NB_MODULE(_core, m) {
  using namespace msa::python;
  m.doc() = "msa_oracle's compiled part: the FP64 reference, the backends and the judge of MSA";
  nb::exception<UnsupportedError>(m, "Unsupported", PyExc_RuntimeError);
  nb::exception<FileError>(m, "FileError", PyExc_OSError);
  m.attr("version") = MSA_VERSION;
  m.attr("build_tool") = MSA_BUILD_TOOL;  // the msa tool of the build that made this module ("" in a wheel)
  m.def("backends", &Backends);
  m.def("validate_config", &ValidateConfigJson, "config_json"_a, "origin"_a);
  m.def("view_info", &ViewInfo, "array"_a, "name"_a);
  m.def("computations_in_flight", [] { return computations_in_flight.load(); });
#ifdef MSA_HAVE_CUDA
  // Input bytes the gpu backend's last call on this thread copied from the host (0: it read device memory only).
  m.def("gpu_last_input_upload_bytes", &msa::gpu::LastInputUploadBytes);
#endif
  AddComputeFunctions(m);
  AddJudgeFunctions(m);
  AddFileFunctions(m);
}
