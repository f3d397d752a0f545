// Index inputs with structure, so that an indexer's own selections are coherent the way a language model's are
// (consecutive queries attending to the same distant passages), for the benchmarks' "indexer on structured inputs"
// rows (bench/gpu_bench.cc index_inputs=...; i.i.d. inputs give nearly random selections, the worst case).
//
//   lowrank    keys and queries are combinations of 8 shared directions (plus noise); the keys' coefficients drift
//              along the sequence over about 256 tokens, each query group's over about 64, so nearby queries rank
//              nearby keys alike
//   clustered  32 topics; the keys come in runs of `key_run` tokens on one topic, each query group follows one
//              topic for `query_run` queries: a query picks the blocks of its topic's runs
#ifndef MSA_BENCH_STRUCTURED_INDEX_H_
#define MSA_BENCH_STRUCTURED_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

namespace msa::bench {

struct IndexInputShape {
  int64_t total_q = 0, total_k = 0, num_groups = 4, index_dim = 128;
  int64_t key_run = 512, query_run = 64;  // clustered: tokens per key topic run, queries per query topic
};

// The kinds, in the order of the header comment.
inline const char* const kStructuredIndexKinds[] = {"lowrank", "clustered"};

// Fills index_q [total_q, num_groups, index_dim] and index_k [total_k, index_dim] (row-major floats) for `kind`;
// false for an unknown kind.
bool MakeStructuredIndexInputs(const std::string& kind, const IndexInputShape& shape, uint64_t seed,
                               std::vector<float>* index_q, std::vector<float>* index_k);

}  // namespace msa::bench

#endif  // MSA_BENCH_STRUCTURED_INDEX_H_
