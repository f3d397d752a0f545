// The reference as a backend table entry, plus the small shared helpers of reference.h.
#include <string>

#include "reference/reference.h"

namespace msa::reference {

std::vector<QueryPlace> PlaceQueries(const Batch& batch) {
  std::vector<QueryPlace> places(batch.total_q());
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t i = 0; i < q_len; ++i) places[q_begin + i] = {b, k_len - q_len + i, batch.cu_seqlens_k[b]};
  }
  return places;
}

std::vector<double> Widen(const TensorView& view) {
  const int64_t size = view.rows * view.heads * view.dim;
  if (view.dtype == DType::kF64 && view.head_stride == view.dim && view.row_stride == view.heads * view.dim) {
    const double* data = static_cast<const double*>(view.data);  // already packed doubles: a plain copy
    return std::vector<double>(data, data + size);
  }
  std::vector<double> packed(size);
  // Exact element copies (no arithmetic): any split over threads gives the same vector.
#pragma omp parallel for schedule(static) if (size >= 65536)
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      for (int64_t d = 0; d < view.dim; ++d) packed[(row * view.heads + head) * view.dim + d] = view.At(row, head, d);
    }
  }
  return packed;
}

namespace {

bool IsAvailable() { return true; }

Status Supports(const Config& config) {
  if (config.precision != Precision::kExact) {
    return Unsupported("backend reference computes only precision exact (FP64 canonical), not " +
                       std::string(PrecisionName(config.precision)));
  }
  return Status::Ok();
}

}  // namespace

Backend ReferenceBackend() {
  return Backend{.name = "reference",
                 .is_available = IsAvailable,
                 .supports = Supports,
                 .select = SelectBlocks,
                 .attend = AttendSelected,
                 .backward = Backward,
                 .indexer_kl = IndexerKl};
}

}  // namespace msa::reference
