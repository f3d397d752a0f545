#include "oracle/selection_contract.h"

#include <algorithm>
#include <string>

#include "msa/forced_blocks.h"
#include "reference/reference.h"

namespace msa {

std::string_view SelectionOrderName(SelectionOrder order) { return order == SelectionOrder::kAny ? "any" : "strict"; }

bool ParseSelectionOrder(std::string_view name, SelectionOrder* order) {
  return ParseByName(name, {SelectionOrder::kStrict, SelectionOrder::kAny}, SelectionOrderName, order);
}

RowFault ClassifySelectionRow(const Config& config, int64_t visible, const int32_t* row, SelectionOrder order) {
  const auto invalid = [](std::string message) { return RowFault{RowFault::Kind::kInvalid, std::move(message)}; };
  const int64_t valid = std::min<int64_t>(visible, config.top_k);
  const ForcedBlocks forced = ForcedBlocksOf(visible, config.init_blocks, config.local_blocks, config.top_k);
  std::vector<char> seen(visible, 0);
  int64_t local_slot = -1;
  for (int64_t slot = 0; slot < config.top_k; ++slot) {
    const int32_t id = row[slot];
    const std::string where = "slot " + std::to_string(slot) + " = " + std::to_string(id);
    if (slot >= valid) {
      if (id != -1) return invalid(where + ": slots after the " + std::to_string(valid) + " valid ones must be -1");
      continue;
    }
    if (id < 0 || id >= visible) return invalid(where + ": ids must be in [0, " + std::to_string(visible) + ")");
    if (seen[id]) return invalid(where + ": block selected twice");
    seen[id] = 1;
    if (id == forced.local) local_slot = slot;
  }
  for (int64_t b = 0; b < forced.init_end; ++b) {
    if (!seen[b]) return invalid("init block " + std::to_string(b) + " is missing");
  }
  for (int64_t b = forced.local_begin; b < forced.local; ++b) {
    if (!seen[b]) return invalid("forced local block " + std::to_string(b) + " is missing");
  }
  if (local_slot < 0) return invalid("the local block " + std::to_string(forced.local) + " is missing");
  if (order == SelectionOrder::kStrict && local_slot != valid - 1) {
    return RowFault{RowFault::Kind::kOrder,
                    "the local block " + std::to_string(forced.local) + " is in slot " + std::to_string(local_slot) +
                        ", not in the last valid slot " + std::to_string(valid - 1),
                    local_slot};
  }
  return RowFault{};
}

Status CheckSelectionRow(const Config& config, int64_t visible, const int32_t* row) {
  const RowFault fault = ClassifySelectionRow(config, visible, row, SelectionOrder::kStrict);
  return fault.kind == RowFault::Kind::kNone ? Status::Ok() : InvalidArgument(fault.message);
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

bool SameBlockSets(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t top_k) {
  if (a.size() != b.size()) return false;
  if (a == b) return true;
  if (top_k <= 0 || a.size() % size_t(top_k) != 0) return false;  // not rows of top_k slots
  std::vector<int32_t> row_a(top_k), row_b(top_k);
  for (size_t begin = 0; begin < a.size(); begin += size_t(top_k)) {
    if (std::equal(&a[begin], &a[begin] + top_k, &b[begin])) continue;
    row_a.assign(&a[begin], &a[begin] + top_k);
    row_b.assign(&b[begin], &b[begin] + top_k);
    const auto valid_a = std::find_if(row_a.begin(), row_a.end(), [](int32_t id) { return id < 0; });
    const auto valid_b = std::find_if(row_b.begin(), row_b.end(), [](int32_t id) { return id < 0; });
    if (valid_a - row_a.begin() != valid_b - row_b.begin()) return false;
    std::sort(row_a.begin(), valid_a);
    std::sort(row_b.begin(), valid_b);
    std::sort(valid_a, row_a.end());
    std::sort(valid_b, row_b.end());
    if (row_a != row_b) return false;
  }
  return true;
}

}  // namespace msa
