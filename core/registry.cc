// The one list of backends compiled into this binary. Only this file sees MSA_HAVE_SIMD / MSA_HAVE_CUDA.
#include <string>

#include "msa/msa.h"
#include "reference/reference.h"
#ifdef MSA_HAVE_SIMD
#include "simd/simd_backend.h"
#endif
#ifdef MSA_HAVE_CUDA
#include "gpu/gpu_backend.h"
#endif

namespace msa {

std::span<const Backend> AllBackends() {
  // Slowest first: FastestBackend walks this list from the end.
  static const Backend kBackends[] = {
      reference::ReferenceBackend(),
#ifdef MSA_HAVE_SIMD
      simd::SimdBackend(),
#endif
#ifdef MSA_HAVE_CUDA
      gpu::GpuBackend(),
#endif
  };
  return kBackends;
}

const Backend* FindBackend(std::string_view name) {
  for (const Backend& backend : AllBackends()) {
    if (backend.name == name) return &backend;
  }
  return nullptr;
}

Status BackendRuns(const Backend& backend, const Config& config, bool training) {
  if (!backend.is_available()) {
    return Unsupported("backend " + std::string(backend.name) + " is not available on this machine");
  }
  MSA_RETURN_IF_ERROR(backend.supports(config));
  if (training && (backend.backward == nullptr || backend.indexer_kl == nullptr)) {
    return Unsupported("backend " + std::string(backend.name) + " has no backward and indexer KL (training)");
  }
  return Status::Ok();
}

const Backend* FastestBackend(const Config& config, bool training) {
  const std::span<const Backend> backends = AllBackends();
  for (auto backend = backends.rbegin(); backend != backends.rend(); ++backend) {
    if (BackendRuns(*backend, config, training).ok()) return &*backend;
  }
  return nullptr;
}

}  // namespace msa
