// The selection contract and its tie rule, on scores small enough to rank by hand (docs/selection-contract.md).
// One query at position 9 sees keys 0..9, that is blocks 0..4 of Bk = 2 keys; block 4 is its local block.
// The index keys make the block maxima 2, 5, 5, 2 (blocks 0-3): two exact ties. The program prints each
// selection row and exits 1 unless every row equals the one worked by hand.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "msa/msa.h"
#include "oracle/selection_contract.h"

namespace {

// docs:begin select-one-row
// The reference's selection row [top_k] for one query over the index keys `keys` (Di = 1, index_q = 1).
std::vector<int32_t> SelectRow(msa::Config config, const std::vector<double>& keys) {
  config.num_q_heads = config.num_kv_heads = 1;
  config.head_dim = config.value_dim = config.index_head_dim = 1;
  config.block_size = 2;
  config.index_scale = 1.0;  // the token score is then the index key itself
  const double index_q = 1.0;
  const std::vector<int32_t> cu_q = {0, 1}, cu_k = {0, int32_t(keys.size())};
  const msa::IndexInputs inputs{msa::PackedView(&index_q, msa::DType::kF64, 1, 1, 1),
                                msa::PackedView(keys.data(), msa::DType::kF64, int64_t(keys.size()), 1, 1),
                                {cu_q, cu_k}};
  std::vector<int32_t> row(config.top_k);
  const msa::Status status = msa::Select(*msa::FindBackend("reference"), config, inputs, {row.data()});
  if (!status.ok()) std::cerr << status.message() << "\n";
  return row;
}
// docs:end select-one-row

std::string Text(const std::vector<int32_t>& row) {
  std::string text = "[";
  for (size_t i = 0; i < row.size(); ++i) text += (i ? ", " : "") + std::to_string(row[i]);
  return text + "]";
}

}  // namespace

int main() {
  // docs:begin worked-rows
  //                                block 0   block 1   block 2   block 3   block 4 (local)
  const std::vector<double> keys = {2, -1, 0, 5, 5, 1, 2, 2, 9, 0};
  msa::Config config;  // max pooling: block scores M = 2, 5, 5, 2, 9
  struct Case {
    const char* what;
    int top_k, init_blocks, local_blocks;
    std::vector<int32_t> by_hand;
  } cases[] = {
      // Ranked (blocks 0-3): 1 and 2 tie at 5, the lower id first; 0 and 3 tie at 2, likewise.
      // top_k 3 = 2 ranked picks + the local block last.
      {"top_k 3", 3, 0, 1, {1, 2, 4}},
      // Block 0 is an init (sink) block: forced, so not ranked. 1 ranked pick, then init, then local.
      {"top_k 3, init_blocks 1", 3, 1, 1, {1, 0, 4}},
      // top_k beyond the 5 visible blocks: every block, ranked order, local last, then -1 padding.
      {"top_k 8", 8, 0, 1, {1, 2, 0, 3, 4, -1, -1, -1}},
      // local_blocks 2 forces blocks 3 and 4 (the last two visible) and ranks 0-2: 1 and 2 at 5 are picked, then
      // the forced local blocks ascending, the local block last.
      {"top_k 4, local_blocks 2", 4, 0, 2, {1, 2, 3, 4}},
      // init_blocks 1 and local_blocks 2: F = {0, 3, 4}; 1 ranked pick among 1-2 (block 1 by id), then init, then
      // the forced local blocks.
      {"top_k 4, init_blocks 1, local_blocks 2", 4, 1, 2, {1, 0, 3, 4}},
  };
  // docs:end worked-rows
  bool all_match = true;
  for (const Case& c : cases) {
    config.top_k = c.top_k;
    config.init_blocks = c.init_blocks;
    config.local_blocks = c.local_blocks;
    const std::vector<int32_t> row = SelectRow(config, keys);
    const bool match = row == c.by_hand;
    all_match = all_match && match;
    std::cout << c.what << ": " << Text(row) << (match ? "  (as worked by hand)" : "  DIFFERS from " + Text(c.by_hand))
              << "\n";
  }
  // docs:begin broken-rows
  // Rows that break the contract, and the oracle's reason (oracle/selection_contract.h).
  config.top_k = 3;
  config.init_blocks = 0;
  config.local_blocks = 1;
  const std::vector<std::vector<int32_t>> broken = {{4, 1, 2}, {1, 1, 4}, {1, -1, 4}, {1, 2, 5}};
  for (const std::vector<int32_t>& row : broken) {
    const msa::Status status = msa::CheckSelectionRow(config, /*visible=*/5, row.data());
    all_match = all_match && !status.ok();
    std::cout << Text(row) << ": " << (status.ok() ? "accepted (WRONG)" : status.message()) << "\n";
  }
  // [4, 1, 2] holds the right set with the local block first (vLLM's and SGLang's sentinel order): under order any
  // (msa check --order any) it is valid; every other row above stays invalid in either order.
  const msa::RowFault any = msa::ClassifySelectionRow(config, 5, broken[0].data(), msa::SelectionOrder::kAny);
  all_match = all_match && any.kind == msa::RowFault::Kind::kNone;
  std::cout << Text(broken[0])
            << " under order any: " << (any.kind == msa::RowFault::Kind::kNone ? "valid" : any.message) << "\n";
  // docs:end broken-rows
  return all_match ? 0 : 1;
}
