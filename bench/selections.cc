#include "bench/selections.h"

#include <algorithm>
#include <unordered_set>

#include "msa/forced_blocks.h"
#include "oracle/random.h"

namespace msa::bench {
namespace {

ForcedBlocks ForcedOf(const SelectionShape& shape, int64_t t) {
  const int64_t pos = shape.pos0 + t % shape.q_len;
  return ForcedBlocksOf(pos / shape.block_size + 1, shape.init_blocks, shape.local_blocks, shape.top_k);
}

// Writes one row: `ranked` (take of them, from [init_end, local_begin)), the forced blocks, -1 padding.
void WriteRow(const SelectionShape& shape, const ForcedBlocks& f, const std::vector<int64_t>& ranked, int32_t* row) {
  int64_t slot = 0;
  for (const int64_t block : ranked) row[slot++] = int32_t(block);
  for (int64_t block = 0; block < f.init_end; ++block) row[slot++] = int32_t(block);
  for (int64_t block = f.local_begin; block <= f.local; ++block) row[slot++] = int32_t(block);
  while (slot < shape.top_k) row[slot++] = -1;
}

int32_t* Row(const SelectionShape& shape, std::vector<int32_t>* topk, int64_t group, int64_t t) {
  return topk->data() + (group * shape.total_q() + t) * shape.top_k;
}

// `take` distinct candidates from [f.init_end, f.local_begin) not in `exclude`, uniformly (rejection: take is at
// most top_k, far below the range in every benchmark shape; a dense range falls back to a shuffle).
void DrawCandidates(const ForcedBlocks& f, int64_t take, std::unordered_set<int64_t>* exclude, RandomStream* random,
                    std::vector<int64_t>* out) {
  const int64_t range = f.candidates();
  if (take <= 0) return;
  if (range - int64_t(exclude->size()) <= 4 * take) {
    std::vector<int64_t> free;
    for (int64_t b = f.init_end; b < f.local_begin; ++b) {
      if (!exclude->count(b)) free.push_back(b);
    }
    for (int64_t i = 0; i < take; ++i) {
      std::swap(free[i], free[i + random->Below(int64_t(free.size()) - i)]);
      out->push_back(free[i]);
      exclude->insert(free[i]);
    }
    return;
  }
  while (take > 0) {
    const int64_t block = f.init_end + random->Below(range);
    if (!exclude->insert(block).second) continue;
    out->push_back(block);
    --take;
  }
}

void MakeRandom(const SelectionShape& shape, double, uint64_t seed, std::vector<int32_t>* topk) {
  RandomStream random(seed, 0);
  for (int64_t r = 0; r < shape.num_groups; ++r) {
    for (int64_t t = 0; t < shape.total_q(); ++t) {
      const ForcedBlocks f = ForcedOf(shape, t);
      std::unordered_set<int64_t> taken;
      std::vector<int64_t> ranked;
      DrawCandidates(f, f.take, &taken, &random, &ranked);
      WriteRow(shape, f, ranked, Row(shape, topk, r, t));
    }
  }
}

void MakeLast(const SelectionShape& shape, double, uint64_t, std::vector<int32_t>* topk) {
  for (int64_t r = 0; r < shape.num_groups; ++r) {
    for (int64_t t = 0; t < shape.total_q(); ++t) {
      const ForcedBlocks f = ForcedOf(shape, t);
      std::vector<int64_t> ranked;
      for (int64_t i = 0; i < f.take; ++i) ranked.push_back(f.local_begin - 1 - i);
      WriteRow(shape, f, ranked, Row(shape, topk, r, t));
    }
  }
}

// Evenly spaced candidates over the range of the first query of the page, shared by the page's queries (all of
// which see at least that range) and by every group.
void MakePages(const SelectionShape& shape, double, uint64_t, std::vector<int32_t>* topk) {
  for (int64_t t = 0; t < shape.total_q(); ++t) {
    const int64_t pos = shape.pos0 + t % shape.q_len;
    const int64_t page_first = std::max(shape.pos0, pos - pos % shape.block_size);
    const ForcedBlocks f = ForcedOf(shape, t);
    const ForcedBlocks page =
        ForcedBlocksOf(page_first / shape.block_size + 1, shape.init_blocks, shape.local_blocks, shape.top_k);
    std::vector<int64_t> ranked;
    for (int64_t i = 0; i < page.take; ++i) ranked.push_back(page.init_end + i * page.candidates() / page.take);
    // Same page, same blocks: the page's first query fixes them; later ones have the same forced set.
    for (int64_t r = 0; r < shape.num_groups; ++r) WriteRow(shape, f, ranked, Row(shape, topk, r, t));
  }
}

// Each candidate of the query before (still a candidate here) stays with probability `keep`; the rest is drawn.
void MakeOverlap(const SelectionShape& shape, double keep, uint64_t seed, std::vector<int32_t>* topk) {
  RandomStream random(seed, 0);
  for (int64_t r = 0; r < shape.num_groups; ++r) {
    std::vector<int64_t> previous;
    for (int64_t t = 0; t < shape.total_q(); ++t) {
      if (t % shape.q_len == 0) previous.clear();
      const ForcedBlocks f = ForcedOf(shape, t);
      std::unordered_set<int64_t> taken;
      std::vector<int64_t> ranked;
      for (const int64_t block : previous) {
        if (int64_t(ranked.size()) < f.take && !f.IsForced(block) && random.Uniform() < keep) {
          ranked.push_back(block);
          taken.insert(block);
        }
      }
      // New draws avoid the dropped candidates too (where the range has room), so the overlap is `keep`.
      const int64_t missing = f.take - int64_t(ranked.size());
      if (f.candidates() - int64_t(previous.size()) >= missing) taken.insert(previous.begin(), previous.end());
      DrawCandidates(f, missing, &taken, &random, &ranked);
      WriteRow(shape, f, ranked, Row(shape, topk, r, t));
      previous = ranked;
    }
  }
}

}  // namespace

const std::vector<SelectionGenerator>& SelectionGenerators() {
  static const std::vector<SelectionGenerator> generators = {
      {"random", 0, MakeRandom},       {"last", 0, MakeLast},           {"pages", 0, MakePages},
      {"overlap50", 0.5, MakeOverlap}, {"overlap90", 0.9, MakeOverlap},
  };
  return generators;
}

const SelectionGenerator* FindSelectionGenerator(const std::string& name) {
  for (const SelectionGenerator& generator : SelectionGenerators()) {
    if (name == generator.name) return &generator;
  }
  return nullptr;
}

double MeanUnionSize(const SelectionShape& shape, const std::vector<int32_t>& topk, int64_t tile) {
  double sum = 0;
  int64_t tiles = 0;
  std::vector<int32_t> blocks;
  for (int64_t r = 0; r < shape.num_groups; ++r) {
    for (int64_t s = 0; s < shape.sequences; ++s) {
      for (int64_t first = 0; first < shape.q_len; first += tile) {
        blocks.clear();
        for (int64_t i = first; i < std::min(first + tile, shape.q_len); ++i) {
          const int32_t* row = topk.data() + (r * shape.total_q() + s * shape.q_len + i) * shape.top_k;
          for (int64_t k = 0; k < shape.top_k && row[k] >= 0; ++k) blocks.push_back(row[k]);
        }
        std::sort(blocks.begin(), blocks.end());
        sum += double(std::unique(blocks.begin(), blocks.end()) - blocks.begin());
        ++tiles;
      }
    }
  }
  return tiles == 0 ? 0 : sum / double(tiles);
}

double MeanAdjacentOverlap(const SelectionShape& shape, const std::vector<int32_t>& topk) {
  double sum = 0;
  int64_t rows = 0;
  for (int64_t r = 0; r < shape.num_groups; ++r) {
    for (int64_t t = 0; t < shape.total_q(); ++t) {
      if (t % shape.q_len == 0) continue;
      const ForcedBlocks f = ForcedOf(shape, t);
      if (f.take == 0) continue;
      const int32_t* row = topk.data() + (r * shape.total_q() + t) * shape.top_k;
      const int32_t* before = row - shape.top_k;
      int64_t shared = 0;
      for (int64_t k = 0; k < f.take; ++k)
        shared += std::find(before, before + shape.top_k, row[k]) != before + shape.top_k;
      sum += double(shared) / double(f.take);
      ++rows;
    }
  }
  return rows == 0 ? 0 : sum / double(rows);
}

}  // namespace msa::bench
