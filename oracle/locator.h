// Locates flat elements of the judged tensors in the batch (sequence, query, head, dim), for the judge's reports.
#ifndef MSA_ORACLE_LOCATOR_H_
#define MSA_ORACLE_LOCATOR_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "oracle/compare.h"
#include "reference/reference.h"

namespace msa {

struct Locator {
  const Problem& problem;
  std::vector<reference::QueryPlace> places;  // [total_q]

  explicit Locator(const Problem& p) : problem(p), places(reference::PlaceQueries(p.batch())) {}

  // Element `index` of a [total_q, heads, inner] tensor.
  Mismatch QueryMajor(int64_t index, int64_t heads, int64_t inner) const {
    Mismatch m;
    m.row = index / (heads * inner);
    m.head = (index / inner) % heads;
    m.index = inner > 1 ? index % inner : -1;
    Place(&m);
    return m;
  }
  // Element `index` of a [heads, total_q] tensor (index tensors; the row of a selection).
  Mismatch GroupMajor(int64_t index) const {
    Mismatch m;
    const int64_t total_q = problem.batch().total_q();
    m.head = index / total_q;
    m.row = index % total_q;
    Place(&m);
    return m;
  }
  // Element `index` of a [total_k, heads, inner] tensor (training's key-major gradients).
  Mismatch KeyMajor(int64_t index, int64_t heads, int64_t inner) const {
    Mismatch m;
    m.key_row = index / (heads * inner);
    m.head = (index / inner) % heads;
    m.index = inner > 1 ? index % inner : -1;
    const std::vector<int32_t>& cu = problem.cu_seqlens_k;
    m.sequence = std::upper_bound(cu.begin(), cu.end(), int32_t(m.key_row)) - cu.begin() - 1;
    while (cu[m.sequence + 1] == cu[m.sequence]) ++m.sequence;  // skip empty sequences sharing the offset
    m.key = m.key_row - cu[m.sequence];
    return m;
  }
  void Place(Mismatch* m) const {
    m->sequence = places[m->row].sequence;
    m->query = m->row - problem.cu_seqlens_q[m->sequence];
  }
};

}  // namespace msa

#endif  // MSA_ORACLE_LOCATOR_H_
