// Selections for the main-branch benchmarks, from the worst case to the best: how much a tile of consecutive queries
// shares decides what a union-tile kernel saves, so every table says which generator made its selection and prints
// its mean union size. Each generator writes valid rows (oracle/selection_contract.h, strict order: the ranked
// candidates, then the forced blocks of msa/forced_blocks.h with the local block last, then -1).
//
//   random      i.i.d. uniform candidates per (group, query): the lower bound (FlashInfer's benchmarks)
//   last        the most recent candidates (MiniMax's "last 16 blocks" benchmark)
//   pages       evenly spaced blocks, one row shared by every query of a key page and every group (MiniMax's page
//               benchmark: the upper bound)
//   overlap50, overlap90   each query keeps each candidate of the query before it with probability 0.5 / 0.9 and
//               draws the rest anew (a tunable adjacent overlap)
// Selections made by an indexer on structured index inputs are the pipeline's own (bench/gpu_bench.cc, index=...).
#ifndef MSA_BENCH_SELECTIONS_H_
#define MSA_BENCH_SELECTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "msa/msa.h"

namespace msa::bench {

// The queries of one benchmark: sequences of q_len queries at positions [pos0, pos0 + q_len), any number of them.
struct SelectionShape {
  int64_t num_groups = 4;  // Hidx
  int64_t top_k = 16, block_size = 128, init_blocks = 0, local_blocks = 1;
  int64_t sequences = 1, q_len = 0, pos0 = 0;

  int64_t total_q() const { return sequences * q_len; }
};

struct SelectionGenerator {
  const char* name;
  double keep;  // overlap generators: the probability that a candidate carries over from the query before
  // Writes [num_groups, total_q, top_k] (head-major) from the seed.
  void (*make)(const SelectionShape& shape, double keep, uint64_t seed, std::vector<int32_t>* topk);
};

// The generators, in the order of the header comment.
const std::vector<SelectionGenerator>& SelectionGenerators();
// The generator named `name`, or null.
const SelectionGenerator* FindSelectionGenerator(const std::string& name);

// Mean over (group, tile) of the number of distinct blocks the rows of a tile of `tile` consecutive queries of one
// sequence hold (tiles do not cross sequences; the last one of a sequence may be shorter).
double MeanUnionSize(const SelectionShape& shape, const std::vector<int32_t>& topk, int64_t tile);

// Mean over (group, query after the first of its sequence) of the share of its ranked candidates that the query
// before it also holds.
double MeanAdjacentOverlap(const SelectionShape& shape, const std::vector<int32_t>& topk);

}  // namespace msa::bench

#endif  // MSA_BENCH_SELECTIONS_H_
