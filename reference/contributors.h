// Who reaches a key: for every key row of a batch, the query rows whose selection holds its block, per group, in
// ascending order. The training functions sum into dk, dv and dki per key over these lists (KV-outer), so no sum is
// split across threads (SPEC section 8).
#ifndef MSA_REFERENCE_CONTRIBUTORS_H_
#define MSA_REFERENCE_CONTRIBUTORS_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "msa/msa.h"
#include "reference/reference.h"

namespace msa::reference {

// For every key row of the batch (total_k), the query rows t whose selection in group r holds its block, ascending:
// the contributors of its sums, read as contributors[r][key block of the key]. A key past a query's position is
// not in that query's set even when its block is: callers skip it (KeyIsVisible).
class Contributors {
 public:
  Contributors(const Config& config, const Batch& batch, const SelectionView& selection,
               const std::vector<QueryPlace>& places)
      : places_(places) {
    const int64_t total_q = batch.total_q(), hkv = config.num_kv_heads, bk = config.block_size;
    for (int64_t b = 0; b < batch.num_sequences(); ++b) {
      first_block_.push_back(num_blocks_);
      num_blocks_ += (batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b] + bk - 1) / bk;
    }
    key_block_.resize(batch.total_k());
    for (int64_t b = 0; b < batch.num_sequences(); ++b) {
      for (int64_t s = batch.cu_seqlens_k[b]; s < batch.cu_seqlens_k[b + 1]; ++s) {
        key_block_[s] = first_block_[b] + (s - batch.cu_seqlens_k[b]) / bk;
      }
    }
    lists_.resize(hkv * num_blocks_);
    for (int64_t t = 0; t < total_q; ++t) {  // ascending t: every list comes out sorted
      for (int64_t r = 0; r < hkv; ++r) {
        const int32_t* row = selection.topk_indices + (r * total_q + t) * config.top_k;
        for (int64_t slot = 0; slot < config.top_k && row[slot] != -1; ++slot) {
          lists_[r * num_blocks_ + first_block_[places[t].sequence] + row[slot]].push_back(t);
        }
      }
    }
  }

  // The query rows whose group-r selection holds the block of key row s, ascending.
  const std::vector<int64_t>& Of(int64_t s, int64_t r) const { return lists_[r * num_blocks_ + key_block_[s]]; }
  // Whether key row s (of query t's sequence) is at or before query t's position.
  bool KeyIsVisible(int64_t s, int64_t t) const { return s - places_[t].key_begin <= places_[t].position; }
  // The (t, r) rows of `groups` groups whose key set holds key row s, ascending t, then ascending r.
  std::vector<std::pair<int64_t, int64_t>> RowsOf(int64_t s, int64_t groups) const {
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (int64_t r = 0; r < groups; ++r) {
      for (int64_t t : Of(s, r)) {
        if (KeyIsVisible(s, t)) rows.push_back({t, r});
      }
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  }

 private:
  const std::vector<QueryPlace>& places_;
  std::vector<int64_t> first_block_, key_block_;
  int64_t num_blocks_ = 0;
  std::vector<std::vector<int64_t>> lists_;  // [Hkv, num_blocks]
};

}  // namespace msa::reference

#endif  // MSA_REFERENCE_CONTRIBUTORS_H_
