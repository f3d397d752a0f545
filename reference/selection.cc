// Index branch (SPEC section 2) in the canonical FP64 order (section 4).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "msa/forced_blocks.h"
#include "reference/canonical.h"
#include "reference/reference.h"
#include "reference/row_loop.h"

namespace msa::reference {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// Per-sequence mean index keys of the FULL blocks: [num_full_blocks, Di]. A partial local block's mean
// is computed per query, over its visible keys only, by the same routine.
void BlockMeanKey(const double* index_k, int64_t first_key, int64_t count, int64_t di, double* mean) {
  for (int64_t d = 0; d < di; ++d) {
    double sum = 0.0;
    for (int64_t s = 0; s < count; ++s) sum += index_k[(first_key + s) * di + d];
    mean[d] = sum / double(count);
  }
}

// The blocks of the valid prefix of `row` in ascending id, whatever their slot order.
std::vector<int32_t> SelectedBlocksAscending(const Config& config, const int32_t* row) {
  std::vector<int32_t> selected;
  for (int64_t slot = 0; slot < config.top_k && row[slot] != -1; ++slot) selected.push_back(row[slot]);
  std::sort(selected.begin(), selected.end());
  return selected;
}

// index_lse of one row (SPEC sections 2 and 4) from its token scores [num_keys], over the blocks of the valid
// prefix of `row` visited in ascending id, keys ascending within each block.
//   native: logsumexp of the token scores of the selected blocks' visible keys;
//   fp16:   l_b = fp16(M[b]) + log(sum_s exp(x[s] - M[b])) per selected block, then logsumexp of the l_b.
// docs:begin selected-lse
double SelectedLogSumExp(const Config& config, const double* token_scores, int64_t num_keys, const int32_t* row) {
  std::vector<double> gathered;  // native: the token scores; fp16: one l_b per block
  for (int32_t blk : SelectedBlocksAscending(config, row)) {
    const int64_t first = int64_t(blk) * config.block_size;
    const int64_t count = std::min<int64_t>(config.block_size, num_keys - first);
    const double* x = &token_scores[first];
    if (config.score_format == ScoreFormat::kNative) {
      gathered.insert(gathered.end(), x, x + count);
      continue;
    }
    const double block_max = *std::max_element(x, x + count);
    double sum = 0.0;
    for (int64_t s = 0; s < count; ++s) sum += CanonicalExp(x[s] - block_max);
    gathered.push_back(RoundToBinary16(block_max) + CanonicalLog(sum));
  }
  return CanonicalLogSumExp(gathered.data(), int64_t(gathered.size()));
}
// docs:end selected-lse

// Token scores x[s] = dot(index_q[t, r], index_k[s]) * index_scale for s in 0..num_keys-1 of one sequence.
// docs:begin token-scores
void TokenScores(const double* query, const double* index_k, int64_t key_begin, int64_t num_keys, int64_t di,
                 double index_scale, double* scores) {
  for (int64_t s = 0; s < num_keys; ++s)
    scores[s] = CanonicalDot(query, &index_k[(key_begin + s) * di], di) * index_scale;
}
// docs:end token-scores

}  // namespace

// docs:begin place-selection
void PlaceSelection(const Config& config, const double* scores, int64_t visible, int32_t* row) {
  const ForcedBlocks forced = ForcedBlocksOf(visible, config.init_blocks, config.local_blocks, config.top_k);
  // Ranked candidates: visible blocks that are not forced, by score descending, then id ascending.
  std::vector<int32_t> candidates;
  for (int64_t b = forced.init_end; b < forced.local_begin; ++b) candidates.push_back(int32_t(b));
  std::partial_sort(candidates.begin(), candidates.begin() + forced.take, candidates.end(),
                    [scores](int32_t a, int32_t b) {
                      if (scores[a] != scores[b]) return scores[a] > scores[b];
                      return a < b;
                    });
  int64_t slot = 0;
  for (int64_t j = 0; j < forced.take; ++j) row[slot++] = candidates[j];
  for (int64_t b = 0; b < forced.init_end; ++b) row[slot++] = int32_t(b);
  // The trailing forced blocks ascending: the local block is always last among the valid slots.
  for (int64_t b = forced.local_begin; b <= forced.local; ++b) row[slot++] = int32_t(b);
  while (slot < config.top_k) row[slot++] = -1;
}
// docs:end place-selection

Status SelectBlocks(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                    const ProgressFn& progress) {
  const int64_t total_q = inputs.batch.total_q();
  const int64_t hidx = config.num_kv_heads, di = config.index_head_dim, bk = config.block_size;
  const int64_t max_blocks = MaxBlocks(config, inputs.batch);
  const double index_scale = config.IndexScale();
  const std::vector<double> index_q = Widen(inputs.index_q);  // [total_q, Hidx, Di]
  const std::vector<double> index_k = Widen(inputs.index_k);  // [total_k, Di]
  const std::vector<QueryPlace> places = PlaceQueries(inputs.batch);

  // Mean pooling: the mean key of every full block, per sequence: [total_k / Bk (rounded per seq), Di].
  std::vector<double> full_block_means;
  std::vector<int64_t> first_full_block(inputs.batch.num_sequences() + 1, 0);
  if (config.pooling == Pooling::kMean) {
    for (int64_t b = 0; b < inputs.batch.num_sequences(); ++b) {
      const int64_t k_len = inputs.batch.cu_seqlens_k[b + 1] - inputs.batch.cu_seqlens_k[b];
      first_full_block[b + 1] = first_full_block[b] + k_len / bk;
    }
    full_block_means.resize(first_full_block.back() * di);
    for (int64_t b = 0; b < inputs.batch.num_sequences(); ++b) {
      const int64_t key_begin = inputs.batch.cu_seqlens_k[b];
      for (int64_t blk = 0; blk < first_full_block[b + 1] - first_full_block[b]; ++blk) {
        BlockMeanKey(index_k.data(), key_begin + blk * bk, bk, di, &full_block_means[(first_full_block[b] + blk) * di]);
      }
    }
  }

  // The first (query, group) row whose scores overflowed a double, and the first whose fp16 block scores
  // overflowed binary16, per thread: [threads] each.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> bad_rows(omp_get_max_threads(), kNone), fp16_overflow_rows(omp_get_max_threads(), kNone);
  ForEachRow(total_q * hidx, progress, [&](int64_t work) {
    const auto reject_row = [&](std::vector<int64_t>& first_bad) {
      const int thread = omp_get_thread_num();
      first_bad[thread] = std::min(first_bad[thread], work);
    };
    const int64_t t = work / hidx, r = work % hidx;
    const QueryPlace& place = places[t];
    const double* query = &index_q[(t * hidx + r) * di];
    const int64_t visible = place.position / bk + 1;
    const int64_t num_keys = place.position + 1;

    // Token scores x[s] = dot(index_q[t, r], index_k[s]) * index_scale for s in 0..position.
    // (mean pooling needs them only for index_lse.)
    std::vector<double> token_scores;
    const bool need_tokens = config.pooling != Pooling::kMean || outputs.index_lse != nullptr;
    if (need_tokens) {
      token_scores.resize(num_keys);
      TokenScores(query, index_k.data(), place.key_begin, num_keys, di, index_scale, token_scores.data());
      for (double score : token_scores) {
        if (!std::isfinite(score)) return reject_row(bad_rows);
      }
    }

    // docs:begin block-scores
    std::vector<double> scores(visible);
    std::vector<double> mean(config.pooling == Pooling::kMean ? di : 0);
    for (int64_t blk = 0; blk < visible; ++blk) {
      const int64_t first = blk * bk, count = std::min(bk, num_keys - first);
      switch (config.pooling) {
        case Pooling::kMax:
          scores[blk] = *std::max_element(&token_scores[first], &token_scores[first] + count);
          break;
        case Pooling::kLse:
          scores[blk] = CanonicalLogSumExp(&token_scores[first], count);
          break;
        case Pooling::kMean: {
          const double* block_mean = mean.data();
          if (count < bk) {  // the partial local block: mean over its visible keys only
            BlockMeanKey(index_k.data(), place.key_begin + first, count, di, mean.data());
          } else {  // (a sequence with no full block has no entry in full_block_means)
            block_mean = full_block_means.data() + (first_full_block[place.sequence] + blk) * di;
          }
          scores[blk] = CanonicalDot(query, block_mean, di) * index_scale;
          break;
        }
      }
    }
    // docs:end block-scores
    for (int64_t blk = 0; blk < visible; ++blk) {
      if (!std::isfinite(scores[blk])) return reject_row(bad_rows);
    }
    // score_format fp16: the ranked (and reported) block scores are the binary16 roundings of the exact ones.
    if (config.score_format == ScoreFormat::kFp16) {
      for (int64_t blk = 0; blk < visible; ++blk) {
        scores[blk] = RoundToBinary16(scores[blk]);
        if (!std::isfinite(scores[blk])) return reject_row(fp16_overflow_rows);
      }
    }

    int32_t* row = outputs.topk_indices + (r * total_q + t) * config.top_k;
    PlaceSelection(config, scores.data(), visible, row);

    if (outputs.block_scores != nullptr) {
      double* out_scores = outputs.block_scores + (r * total_q + t) * max_blocks;
      std::copy(scores.begin(), scores.end(), out_scores);
      std::fill(out_scores + visible, out_scores + max_blocks, kMinusInf);
    }
    if (outputs.index_lse != nullptr) {
      outputs.index_lse[r * total_q + t] = SelectedLogSumExp(config, token_scores.data(), num_keys, row);
    }
  });

  const int64_t bad = *std::min_element(bad_rows.begin(), bad_rows.end());
  if (bad != kNone) {
    return InvalidArgument("index score of query " + std::to_string(bad / hidx) + ", group " +
                           std::to_string(bad % hidx) +
                           " is not finite: index_q and index_k are too large for a double dot product");
  }
  const int64_t overflow = *std::min_element(fp16_overflow_rows.begin(), fp16_overflow_rows.end());
  if (overflow != kNone) return Fp16ScoreOverflow(overflow / hidx, overflow % hidx);
  return Status::Ok();
}

Status IndexLseForSelection(const Config& config, const IndexInputs& inputs, const SelectionView& selection,
                            double* index_lse) {
  const int64_t total_q = inputs.batch.total_q(), hidx = config.num_kv_heads, di = config.index_head_dim;
  const std::vector<double> index_q = Widen(inputs.index_q);  // [total_q, Hidx, Di]
  const std::vector<double> index_k = Widen(inputs.index_k);  // [total_k, Di]
  const std::vector<QueryPlace> places = PlaceQueries(inputs.batch);
  ForEachRow(total_q * hidx, {}, [&](int64_t work) {
    const int64_t t = work / hidx, r = work % hidx, num_keys = places[t].position + 1;
    std::vector<double> token_scores(num_keys);
    TokenScores(&index_q[(t * hidx + r) * di], index_k.data(), places[t].key_begin, num_keys, di, config.IndexScale(),
                token_scores.data());
    index_lse[r * total_q + t] = SelectedLogSumExp(config, token_scores.data(), num_keys,
                                                   selection.topk_indices + (r * total_q + t) * config.top_k);
  });
  return Status::Ok();
}

}  // namespace msa::reference
