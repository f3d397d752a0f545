#include "oracle/selection_contract.h"

#include <algorithm>
#include <string>

#include "reference/reference.h"

namespace msa {

Status CheckSelectionRow(const Config& config, int64_t visible, const int32_t* row) {
  const int64_t valid = std::min<int64_t>(visible, config.top_k), local = visible - 1;
  std::vector<char> seen(visible, 0);
  for (int64_t slot = 0; slot < config.top_k; ++slot) {
    const int32_t id = row[slot];
    const std::string where = "slot " + std::to_string(slot) + " = " + std::to_string(id);
    if (slot >= valid) {
      if (id != -1) return InvalidArgument(where + ": slots after the " + std::to_string(valid) + " valid ones must be -1");
      continue;
    }
    if (id < 0 || id >= visible) {
      return InvalidArgument(where + ": ids must be in [0, " + std::to_string(visible) + ")");
    }
    if (seen[id]) return InvalidArgument(where + ": block selected twice");
    seen[id] = 1;
  }
  if (row[valid - 1] != local) {
    return InvalidArgument("slot " + std::to_string(valid - 1) + " = " + std::to_string(row[valid - 1]) +
                           ": the last valid slot must hold the local block " + std::to_string(local));
  }
  for (int64_t b = 0; b < std::min<int64_t>(config.init_blocks, local); ++b) {
    if (!seen[b]) return InvalidArgument("init block " + std::to_string(b) + " is missing");
  }
  return Status::Ok();
}

Status CheckSelection(const Problem& problem, const std::vector<int32_t>& topk_indices) {
  const Config& config = problem.config;
  const int64_t total_q = problem.batch().total_q();
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t r = 0; r < config.num_kv_heads; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t visible = places[t].position / config.block_size + 1;
      const Status status = CheckSelectionRow(config, visible, &topk_indices[(r * total_q + t) * config.top_k]);
      if (!status.ok()) {
        return InvalidArgument("topk_indices row (group " + std::to_string(r) + ", query " + std::to_string(t) +
                               "): " + status.message());
      }
    }
  }
  return Status::Ok();
}

}  // namespace msa
