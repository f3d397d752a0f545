// The one list of backends compiled into this binary. Only this file sees MSA_HAVE_SIMD / MSA_HAVE_CUDA.
#include "msa/msa.h"
#include "reference/reference.h"

namespace msa {

std::span<const Backend> AllBackends() {
  static const Backend kBackends[] = {
      reference::ReferenceBackend(),
  };
  return kBackends;
}

const Backend* FindBackend(std::string_view name) {
  for (const Backend& backend : AllBackends()) {
    if (backend.name == name) return &backend;
  }
  return nullptr;
}

}  // namespace msa
