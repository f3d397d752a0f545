// The SIMD backend's fp32 mode (simd/fp32.h): work lists, tiling and OpenMP around the kernels of
// simd/fp32-inl.h, compiled once per Highway target and dispatched at run time.
#include "simd/fp32.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/fp32.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "msa/forced_blocks.h"
#include "simd/fp32-inl.h"
#include "simd/simd_backend.h"

#ifndef MSA_SIMD_FAST_CC_ONCE_
#define MSA_SIMD_FAST_CC_ONCE_
namespace msa::simd::fp32 {

// Reports progress from thread 0 in steps of about 1% of the total work.
class Progress {
 public:
  Progress(const ProgressFn& fn, int64_t total) : fn_(fn), total_(std::max<int64_t>(total, 1)) {}
  void Add(int64_t amount) {
    if (!fn_) return;
    const int64_t done = done_.fetch_add(amount, std::memory_order_relaxed) + amount;
    if (omp_get_thread_num() != 0) return;
    const int64_t step = done * 100 / total_;
    if (step > reported_) {
      reported_ = step;
      fn_(std::min(1.0, double(done) / double(total_)));
    }
  }
  void Finish() {
    if (fn_) fn_(1.0);
  }

 private:
  const ProgressFn& fn_;
  const int64_t total_;
  std::atomic<int64_t> done_{0};
  int64_t reported_ = 0;  // touched by thread 0 only
};

// Threads worth starting for `flops` of work: at least ~2 MFLOP each, so that small calls (decode steps, tests)
// do not pay thread start-up and barriers for nothing. Results never depend on it.
inline int ThreadsFor(double flops) {
  const double threads = flops / 2e6;
  return threads >= omp_get_max_threads() ? omp_get_max_threads() : std::max(1, int(threads));
}

// fp32 mode narrows f64 inputs: a value beyond the fp32 range is refused, naming the tensor and element.
inline Status CheckFp32Range(const char* name, const TensorView& view) {
  if (view.dtype != DType::kF64) return Status::Ok();  // every other floating dtype fits in fp32
  const double* data = static_cast<const double*>(view.data);
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      const double* values = data + view.Offset(row, head, 0);
      for (int64_t d = 0; d < view.dim; ++d) {
        if (std::abs(values[d]) > double(std::numeric_limits<float>::max())) {
          return InvalidArgument(std::string(name) + "[" + std::to_string(row) + ", " + std::to_string(head) + ", " +
                                 std::to_string(d) + "] = " + std::to_string(values[d]) +
                                 ": beyond the fp32 range, so precision fp32 cannot hold it");
        }
      }
    }
  }
  return Status::Ok();
}

// The first bad row seen by any thread: the smallest row number noted, in the caller's numbering of rows;
// INT64_MAX when none.
class FirstBadRow {
 public:
  void Note(int64_t row) {
    int64_t current = first_.load(std::memory_order_relaxed);
    while (row < current && !first_.compare_exchange_weak(current, row, std::memory_order_relaxed)) {
    }
  }
  int64_t Get() const { return first_.load(); }

 private:
  std::atomic<int64_t> first_{std::numeric_limits<int64_t>::max()};
};

}  // namespace msa::simd::fp32
#endif  // MSA_SIMD_FAST_CC_ONCE_

HWY_BEFORE_NAMESPACE();
namespace msa::simd::HWY_NAMESPACE {

template <typename T>
using Aligned = hwy::AlignedFreeUniquePtr<T[]>;

// =========================================================================================================
// Index branch
// =========================================================================================================

// Keys per chunk of the token pass: a tile's scores for one chunk live in a [rows][~kChunkKeys] buffer.
inline constexpr int64_t kChunkKeys = 256;

// How a key range [0, keys) of a sequence is cut into chunks: with Bk <= kChunkKeys a chunk is a run of whole
// blocks; with larger blocks it is a piece of one block (pieces of a block are merged in ascending order).
// Boundaries are fixed by (Bk, key position) alone, so pooled values never depend on tiling or threads.
struct ChunkGeometry {
  int64_t bk, blocks_per_chunk, pieces_per_block, piece;

  explicit ChunkGeometry(int64_t block_size) : bk(block_size) {
    if (bk <= kChunkKeys) {
      blocks_per_chunk = kChunkKeys / bk;
      pieces_per_block = 1;
      piece = bk;
    } else {
      blocks_per_chunk = 1;
      pieces_per_block = fp32::CeilDiv(bk, kChunkKeys);
      piece = kChunkKeys;
    }
  }
  int64_t Count(int64_t keys) const {
    const int64_t blocks = fp32::CeilDiv(keys, bk);
    if (pieces_per_block == 1) return fp32::CeilDiv(blocks, blocks_per_chunk);
    return (blocks - 1) * pieces_per_block + fp32::CeilDiv(keys - (blocks - 1) * bk, piece);
  }
  void Range(int64_t chunk, int64_t keys, int64_t* begin, int64_t* end) const {
    if (pieces_per_block == 1) {
      *begin = chunk * blocks_per_chunk * bk;
      *end = std::min(*begin + blocks_per_chunk * bk, keys);
    } else {
      const int64_t block = chunk / pieces_per_block, j = chunk % pieces_per_block;
      *begin = block * bk + j * piece;
      *end = std::min({*begin + piece, (block + 1) * bk, keys});
    }
  }
  bool StartsBlock(int64_t chunk) const { return chunk % pieces_per_block == 0; }
};

// A tile: up to kIndexRows consecutive (query, group) rows of one sequence, enumerated query-major
// (local row = i * Hkv + r), so all groups of a query share its tile and its positions stay close.
struct IndexTile {
  int64_t sequence;
  int64_t first_row;  // local row index within the sequence
  int rows;
  int64_t keys;        // position of the tile's last query + 1
  int64_t split = -1;  // slot in the split-tile state, or -1 when one unit does the whole tile
};

// A unit of work: chunks [chunk_begin, chunk_end) of tiles [tile, tile + tiles). Several tiles of one sequence
// go chunk by chunk together, so a chunk's panels are read from the L2 cache once per unit, not per tile;
// a split tile is alone in its units.
inline constexpr int kTilesPerUnit = 8;
struct IndexUnit {
  int64_t tile, tiles, chunk_begin, chunk_end, cost;
};

// Everything a unit needs, read-only after setup.
struct IndexContext {
  const Config* config;
  const IndexInputs* inputs;
  const SelectionOutputs* outputs;
  int64_t total_q, hkv, di, bk, max_blocks, panel_floats;
  float scale;
  bool token_pass, need_sum;
  ChunkGeometry geometry{1};
  std::vector<int64_t> panel_begin;       // [B+1] first panel of each sequence
  std::vector<int64_t> panel_sequence;    // [panels] the sequence of each panel
  std::vector<int64_t> first_block;       // [B+1] first block of each sequence with queries (mean pooling)
  Aligned<float> panels;                  // [panels][Di][W] packed index keys (unless pack_per_chunk)
  bool pack_per_chunk = false;            // few tiles per sequence (decode): each unit packs the chunks it reads
  std::vector<int64_t> mean_panel_begin;  // [B+1] (mean pooling)
  Aligned<float> mean_panels;             // [mean panels][Di][W] packed full-block mean keys
  Aligned<float> prefix;                  // [total_k][Di] running key sums from each block start (mean pooling)
};

// Per-thread scratch.
struct IndexScratch {
  Aligned<float> q;       // [kTilesPerUnit][kIndexRows][Di]
  Aligned<float> scores;  // [kIndexRows][score_stride]
  Aligned<float> panels;  // one chunk's panels (pack_per_chunk)
  int64_t score_stride = 0;
  std::vector<float> block_max, block_sum;  // [kTilesPerUnit][kIndexRows][max_blocks]
  std::vector<float> row_scores, mean;      // [max_blocks], [Di]
  std::vector<uint64_t> keys;
};

struct TileRow {
  int64_t t, r, position, key_begin;
};

inline TileRow RowOf(const IndexContext& ctx, const IndexTile& tile, int i) {
  const Batch& batch = ctx.inputs->batch;
  const int64_t b = tile.sequence, q_begin = batch.cu_seqlens_q[b];
  const int64_t q_len = batch.cu_seqlens_q[b + 1] - q_begin, k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
  const int64_t local = tile.first_row + i, query = local / ctx.hkv;
  return {q_begin + query, local % ctx.hkv, k_len - q_len + query, batch.cu_seqlens_k[b]};
}

void GatherIndexQueries(const IndexContext& ctx, const IndexTile& tile, float* HWY_RESTRICT q) {
  for (int i = 0; i < tile.rows; ++i) {
    const TileRow row = RowOf(ctx, tile, i);
    LoadRow(ctx.inputs->index_q, row.t, row.r, q + i * ctx.di);
  }
}

// Sizes and allocates the packed index keys (serial): panels [Di][W] for every sequence with queries, and for
// mean pooling the running sums and the full-block mean panels.
void PlanIndexPacking(IndexContext& ctx) {
  const DF df;
  const int64_t W = 2 * int64_t(hn::Lanes(df)), di = ctx.di, bk = ctx.bk;
  const Batch& batch = ctx.inputs->batch;
  const int64_t sequences = batch.num_sequences();
  ctx.panel_floats = di * W;
  ctx.panel_begin.assign(sequences + 1, 0);
  ctx.mean_panel_begin.assign(sequences + 1, 0);
  ctx.first_block.assign(sequences + 1, 0);
  for (int64_t b = 0; b < sequences; ++b) {
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    const bool queries = batch.cu_seqlens_q[b + 1] > batch.cu_seqlens_q[b];
    ctx.panel_begin[b + 1] = ctx.panel_begin[b] + (queries && ctx.token_pass ? fp32::CeilDiv(k_len, W) : 0);
    ctx.mean_panel_begin[b + 1] =
        ctx.mean_panel_begin[b] + (queries && ctx.config->pooling == Pooling::kMean ? fp32::CeilDiv(k_len / bk, W) : 0);
    ctx.first_block[b + 1] = ctx.first_block[b] + (queries ? fp32::CeilDiv(k_len, bk) : 0);
  }
  const int64_t panel_floats = ctx.pack_per_chunk ? 1 : std::max<int64_t>(1, ctx.panel_begin.back() * ctx.panel_floats);
  ctx.panels = hwy::AllocateAligned<float>(panel_floats);
  ctx.panel_sequence.resize(ctx.panel_begin.back());
  for (int64_t b = 0; b < sequences; ++b) {
    std::fill(ctx.panel_sequence.begin() + ctx.panel_begin[b], ctx.panel_sequence.begin() + ctx.panel_begin[b + 1], b);
  }
  if (ctx.config->pooling != Pooling::kMean) return;
  ctx.prefix = hwy::AllocateAligned<float>(std::max<int64_t>(1, batch.total_k() * di));
  const int64_t mean_floats = std::max<int64_t>(1, ctx.mean_panel_begin.back() * ctx.panel_floats);
  ctx.mean_panels = hwy::AllocateAligned<float>(mean_floats);
  std::fill(ctx.mean_panels.get(), ctx.mean_panels.get() + mean_floats, 0.0f);
}

// Packs panel p (0-based within sequence b) of index keys into `panel` [Di][W]: key j of the panel at lane j,
// keys past the end zero.
void PackPanel(const IndexContext& ctx, int64_t b, int64_t p, float* HWY_RESTRICT panel, std::vector<float>& row) {
  const int64_t W = 2 * int64_t(hn::Lanes(DF())), di = ctx.di, first = p * W;
  const Batch& batch = ctx.inputs->batch;
  const int64_t key_begin = batch.cu_seqlens_k[b], k_len = batch.cu_seqlens_k[b + 1] - key_begin;
  row.resize(di);
  for (int64_t j = 0; j < W; ++j) {
    if (first + j < k_len) {
      LoadRow(ctx.inputs->index_k, key_begin + first + j, 0, row.data());
    } else {
      std::fill(row.begin(), row.end(), 0.0f);
    }
    for (int64_t d = 0; d < di; ++d) panel[d * W + j] = row[d];
  }
}

// Inside a parallel region (orphaned work-sharing loops, each ending with a barrier): packs every panel of
// index keys (unless each unit packs the chunks it reads: ctx.pack_per_chunk); for mean pooling, prefix[s] =
// the sum of the keys from s's block start to s in ascending order (a partial local block's mean is
// prefix[pos] / count and a full block's prefix[last] / Bk, as in the naive evaluation), and the full blocks'
// means packed like keys.
void PackIndexKeys(const IndexContext& ctx, std::vector<float>& row) {
  const DF df;
  const int64_t W = 2 * int64_t(hn::Lanes(df)), di = ctx.di, bk = ctx.bk;
  const Batch& batch = ctx.inputs->batch;
  row.resize(di);
  if (!ctx.pack_per_chunk) {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < int64_t(ctx.panel_sequence.size()); ++p) {
      const int64_t b = ctx.panel_sequence[p];
      PackPanel(ctx, b, p - ctx.panel_begin[b], ctx.panels.get() + p * ctx.panel_floats, row);
    }
  }
  if (ctx.config->pooling != Pooling::kMean) return;
  float* prefix = ctx.prefix.get();  // disjoint rows per iteration
#pragma omp for schedule(dynamic, 4)
  for (int64_t g = 0; g < ctx.first_block.back(); ++g) {
    const int64_t b = std::upper_bound(ctx.first_block.begin(), ctx.first_block.end(), g) - ctx.first_block.begin() - 1;
    const int64_t blk = g - ctx.first_block[b];
    const int64_t key_begin = batch.cu_seqlens_k[b], k_len = batch.cu_seqlens_k[b + 1] - key_begin;
    const int64_t first = blk * bk, count = std::min(bk, k_len - first);
    const float* sum = nullptr;
    for (int64_t s = 0; s < count; ++s) {
      LoadRow(ctx.inputs->index_k, key_begin + first + s, 0, row.data());
      float* out = prefix + (key_begin + first + s) * di;
      for (int64_t d = 0; d < di; ++d) out[d] = (sum ? sum[d] : 0.0f) + row[d];
      sum = out;
    }
    if (count == bk) {
      float* panel = ctx.mean_panels.get() + (ctx.mean_panel_begin[b] + blk / W) * ctx.panel_floats;
      for (int64_t d = 0; d < di; ++d) panel[d * W + blk % W] = sum[d] / float(bk);
    }
  }
}

// The token pass of chunks [chunk_begin, chunk_end) of `count` tiles (chunk-major, so the chunk's panels stay in
// the L2 cache across the tiles): per row and visible block, the max raw dot and (need_sum) the sum of
// exp(s * x - s * max) over the block's visible keys. q: tile g's rows at q + g * kIndexRows * Di;
// block_max, block_sum: tile g's row i at [(g * kIndexRows + i) * stride].
void TokenPass(const IndexContext& ctx, const IndexTile* tiles, int count, int64_t chunk_begin, int64_t chunk_end,
               const float* HWY_RESTRICT q, IndexScratch& scratch, float* block_max, float* block_sum, int64_t stride) {
  const DF df;
  const int64_t W = 2 * int64_t(hn::Lanes(df)), bk = ctx.bk;
  for (int64_t c = chunk_begin; c < chunk_end; ++c) {
    if (ctx.pack_per_chunk) {  // the unit's tiles are of one sequence; the last one reaches furthest
      int64_t kb, ke;
      ctx.geometry.Range(c, tiles[count - 1].keys, &kb, &ke);
      for (int64_t p = kb / W; p < fp32::CeilDiv(ke, W); ++p) {
        PackPanel(ctx, tiles[0].sequence, p, scratch.panels.get() + (p - kb / W) * ctx.panel_floats, scratch.mean);
      }
    }
    for (int g = 0; g < count; ++g) {
      const IndexTile& tile = tiles[g];
      if (c >= ctx.geometry.Count(tile.keys)) continue;
      int64_t kb, ke;
      ctx.geometry.Range(c, tile.keys, &kb, &ke);
      const int64_t pa = kb / W, pe = fp32::CeilDiv(ke, W), kb_aligned = pa * W;
      const float* panels = ctx.pack_per_chunk
                                ? scratch.panels.get()
                                : ctx.panels.get() + (ctx.panel_begin[tile.sequence] + pa) * ctx.panel_floats;
      ScoreRows(tile.rows, q + g * kIndexRows * ctx.di, ctx.di, panels, pe - pa, scratch.scores.get(),
                scratch.score_stride);
      for (int i = 0; i < tile.rows; ++i) {
        const int64_t end = std::min(ke, RowOf(ctx, tile, i).position + 1);
        if (end <= kb) continue;                                               // this row sees none of the chunk's keys
        const float* x_row = scratch.scores.get() + i * scratch.score_stride;  // key kb_aligned + j at x_row[j]
        float* row_max = block_max + (g * kIndexRows + i) * stride;
        float* row_sum = block_sum + (g * kIndexRows + i) * stride;
        for (int64_t blk = kb / bk; blk * bk < end; ++blk) {
          const int64_t a = std::max(kb, blk * bk), e = std::min(end, (blk + 1) * bk);
          const float* x = x_row + (a - kb_aligned);
          const float m = SegmentMax(x, e - a);
          float& bmax = row_max[blk];
          float& bsum = row_sum[blk];
          const bool first = a == blk * bk;
          if (!ctx.need_sum) {
            bmax = first ? m : std::max(bmax, m);
            continue;
          }
          const float l = SegmentSumExp(x, e - a, ctx.scale, -(ctx.scale * m));
          if (first) {
            bmax = m;
            bsum = l;
          } else {  // a block larger than a chunk: merge the piece (fixed order: pieces ascend)
            const float merged = std::max(bmax, m), top = ctx.scale * merged;
            bsum = bsum * std::exp(ctx.scale * bmax - top) + l * std::exp(ctx.scale * m - top);
            bmax = merged;
          }
        }
      }
    }
  }
}

// The rows a selection refuses: a non-finite fp32 score (numbered group * total_q + t), and a score_format fp16
// block score beyond binary16 (numbered t * Hkv + r, the reference's order).
struct RefusedRows {
  fp32::FirstBadRow not_finite, fp16_overflow;
};

// Pools, ranks and writes the tile's rows. q: the tile's index queries; block_max/block_sum: [rows][stride].
void FinalizeTile(const IndexContext& ctx, const IndexTile& tile, const float* HWY_RESTRICT q, IndexScratch& scratch,
                  const float* block_max, const float* block_sum, int64_t stride, RefusedRows& refused) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df)), W = 2 * N, bk = ctx.bk, di = ctx.di;
  const Config& c = *ctx.config;
  const SelectionOutputs& out = *ctx.outputs;
  const float s = ctx.scale;
  const float* mean_scores = nullptr;
  if (c.pooling == Pooling::kMean) {
    // Full blocks before each row's local block, against the packed mean keys.
    const int64_t last_local = RowOf(ctx, tile, tile.rows - 1).position / bk;
    const int64_t mean_panels = fp32::CeilDiv(last_local, W);
    const float* panels = ctx.mean_panels.get() + ctx.mean_panel_begin[tile.sequence] * ctx.panel_floats;
    // score_stride >= RoundUp(max_blocks, W): one call covers every mean panel.
    ScoreRows(tile.rows, q, di, panels, mean_panels, scratch.scores.get(), scratch.score_stride);
    mean_scores = scratch.scores.get();
  }
  for (int i = 0; i < tile.rows; ++i) {
    const TileRow row = RowOf(ctx, tile, i);
    const int64_t visible = row.position / bk + 1, local = visible - 1;
    float* scores = scratch.row_scores.data();
    const float* bmax = block_max + i * stride;
    const float* bsum = block_sum + i * stride;
    switch (c.pooling) {
      case Pooling::kMax: {
        for (int64_t b = 0; b < visible; ++b) scores[b] = s * bmax[b];
        break;
      }
      case Pooling::kLse: {
        int64_t b = 0;
        for (; b + N <= visible; b += N) {
          const VF top = hn::Mul(hn::Set(df, s), hn::LoadU(df, bmax + b));
          hn::StoreU(hn::Add(top, hn::Log(df, hn::LoadU(df, bsum + b))), df, scores + b);
        }
        for (; b < visible; ++b) scores[b] = s * bmax[b] + std::log(bsum[b]);
        break;
      }
      case Pooling::kMean: {
        for (int64_t b = 0; b < local; ++b) scores[b] = s * mean_scores[i * scratch.score_stride + b];
        const int64_t count = row.position - local * bk + 1;
        const float* sum = &ctx.prefix[(row.key_begin + row.position) * di];
        for (int64_t d = 0; d < di; ++d) scratch.mean[d] = sum[d] / float(count);
        scores[local] = s * LaneDot(q + i * di, scratch.mean.data(), di);
        break;
      }
    }
    bool finite = true;
    for (int64_t b = 0; b < visible; ++b) finite = finite && std::isfinite(scores[b]);
    if (!finite) {
      refused.not_finite.Note(row.r * ctx.total_q + row.t);
      continue;
    }
    // score_format fp16: the ranked (and reported) scores are the fp32 block maxima rounded to binary16, nearest
    // even (one rounding of the float's exact value; every binary16 value is a float).
    if (c.score_format == ScoreFormat::kFp16) {
      bool representable = true;
      for (int64_t b = 0; b < visible; ++b) {
        scores[b] = float(RoundToBinary16(scores[b]));
        representable = representable && std::isfinite(scores[b]);
      }
      if (!representable) {
        refused.fp16_overflow.Note(row.t * ctx.hkv + row.r);
        continue;
      }
    }
    const int64_t out_row = row.r * ctx.total_q + row.t;
    int32_t* selection = out.topk_indices + out_row * c.top_k;
    fp32::PlaceRow(c, scores, visible, selection, &scratch.keys);
    if (out.block_scores != nullptr) {
      double* row_scores = out.block_scores + out_row * ctx.max_blocks;
      for (int64_t b = 0; b < visible; ++b) row_scores[b] = double(scores[b]);
      std::fill(row_scores + visible, row_scores + ctx.max_blocks, -std::numeric_limits<double>::infinity());
    }
    if (out.index_lse != nullptr) {
      // logsumexp over the selected blocks of top_b + log(sum_b), sum_b = sum of exp(x - s * max_b) over the
      // block's tokens: top_b = s * max_b (native: the logsumexp of the selected tokens), or fp16(s * max_b),
      // the ranked score (score_format fp16).
      const auto block_top = [&](int32_t b) { return c.score_format == ScoreFormat::kFp16 ? scores[b] : s * bmax[b]; };
      const int64_t valid = std::min<int64_t>(visible, c.top_k);
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < valid; ++j) top = std::max(top, block_top(selection[j]));
      double total = 0.0;
      for (int64_t j = 0; j < valid; ++j) {
        const int32_t b = selection[j];
        total += double(bsum[b]) * std::exp(double(block_top(b)) - double(top));
      }
      out.index_lse[out_row] = double(top) + std::log(total);
    }
  }
}

Status SelectFp32(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df)), W = 2 * N;
  const Batch& batch = inputs.batch;
  IndexContext ctx;
  ctx.config = &config;
  ctx.inputs = &inputs;
  ctx.outputs = &outputs;
  ctx.total_q = batch.total_q();
  ctx.hkv = config.num_kv_heads;
  ctx.di = config.index_head_dim;
  ctx.bk = config.block_size;
  ctx.max_blocks = MaxBlocks(config, batch);
  ctx.scale = float(config.IndexScale());
  ctx.need_sum = config.pooling == Pooling::kLse || outputs.index_lse != nullptr;
  ctx.token_pass = config.pooling != Pooling::kMean || ctx.need_sum;
  ctx.geometry = ChunkGeometry(ctx.bk);
  if (ctx.total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(fp32::CheckFp32Range("index_q", inputs.index_q));
  MSA_RETURN_IF_ERROR(fp32::CheckFp32Range("index_k", inputs.index_k));
  // Packing every key once pays when several tiles read each panel (prefill); with at most two tiles per
  // sequence (decode) each unit packs the chunks it reads into its own scratch instead.
  ctx.pack_per_chunk = true;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t rows = (batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b]) * ctx.hkv;
    ctx.pack_per_chunk = ctx.pack_per_chunk && rows <= 2 * kIndexRows;
  }
  PlanIndexPacking(ctx);

  // Tiles, then units: a tile whose cost exceeds a share of the total is split at block-aligned chunks
  // (decode: few rows over long keys). Splitting changes which thread computes a block, never its value.
  std::vector<IndexTile> tiles;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_len = batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b];
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    const int64_t rows = q_len * ctx.hkv;
    for (int64_t first = 0; first < rows; first += kIndexRows) {
      IndexTile tile{b, first, int(std::min<int64_t>(kIndexRows, rows - first)), 0};
      tile.keys = k_len - q_len + (first + tile.rows - 1) / ctx.hkv + 1;
      tiles.push_back(tile);
    }
  }
  std::vector<int64_t> tile_cost(tiles.size());  // FMAs
  int64_t total_cost = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int64_t keys = ctx.token_pass ? tiles[i].keys : fp32::CeilDiv(tiles[i].keys, ctx.bk);
    tile_cost[i] = int64_t(tiles[i].rows) * keys * ctx.di;
    total_cost += tile_cost[i];
  }
  const int threads = fp32::ThreadsFor(2.0 * double(total_cost));
  const int64_t share = std::max<int64_t>(1, total_cost / (4 * int64_t(threads)));
  std::vector<int64_t> parts(tiles.size(), 1);
  int64_t whole_tiles = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int64_t chunks = ctx.token_pass ? ctx.geometry.Count(tiles[i].keys) : 0;
    if (threads > 1 && ctx.token_pass) {
      parts[i] = std::max<int64_t>(1, std::min(chunks, fp32::CeilDiv(tile_cost[i], share)));
    }
    whole_tiles += parts[i] == 1;
  }
  // Tiles per unit: up to kTilesPerUnit while there are plenty of units for the threads, and while the units'
  // block states stay small.
  const int64_t state_limit = std::max<int64_t>(1, (int64_t(4) << 20) / (kIndexRows * ctx.max_blocks * 8));
  const int64_t group =
      std::clamp<int64_t>(std::min(whole_tiles / (16 * int64_t(threads)), state_limit), 1, kTilesPerUnit);
  std::vector<IndexUnit> units;
  int64_t split_tiles = 0;
  for (size_t i = 0; i < tiles.size();) {
    const int64_t chunks = ctx.token_pass ? ctx.geometry.Count(tiles[i].keys) : 0;
    if (parts[i] == 1) {  // whole tiles: consecutive ones of the same sequence share a unit
      IndexUnit unit{int64_t(i), 0, 0, 0, 0};
      while (i < tiles.size() && unit.tiles < group && parts[i] == 1 &&
             tiles[i].sequence == tiles[unit.tile].sequence) {
        unit.chunk_end = std::max(unit.chunk_end, ctx.token_pass ? ctx.geometry.Count(tiles[i].keys) : 0);
        unit.cost += tile_cost[i];
        ++unit.tiles;
        ++i;
      }
      units.push_back(unit);
      continue;
    }
    tiles[i].split = split_tiles++;
    int64_t begin = 0;
    for (int64_t part = 1; part <= parts[i]; ++part) {
      int64_t end = chunks * part / parts[i];
      while (end < chunks && !ctx.geometry.StartsBlock(end)) ++end;
      if (end > begin) units.push_back({int64_t(i), 1, begin, end, tile_cost[i] * (end - begin) / chunks});
      begin = end;
    }
    ++i;
  }
  std::stable_sort(units.begin(), units.end(), [](const IndexUnit& a, const IndexUnit& b) { return a.cost > b.cost; });

  // State of split tiles: [rows][blocks] max and sum per tile.
  std::vector<std::vector<float>> split_max(split_tiles), split_sum(split_tiles);
  std::vector<int64_t> split_stride(split_tiles), split_tile(split_tiles);
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (tiles[i].split < 0) continue;
    const int64_t blocks = fp32::CeilDiv(tiles[i].keys, ctx.bk);
    split_stride[tiles[i].split] = blocks;
    split_tile[tiles[i].split] = int64_t(i);
    split_max[tiles[i].split].assign(tiles[i].rows * blocks, 0.0f);
    split_sum[tiles[i].split].assign(tiles[i].rows * blocks, 0.0f);
  }

  fp32::Progress report(progress, total_cost);
  RefusedRows refused;
  const auto make_scratch = [&] {
    IndexScratch scratch;
    scratch.q = hwy::AllocateAligned<float>(kTilesPerUnit * kIndexRows * ctx.di);
    const int64_t mean_columns = fp32::RoundUp(ctx.max_blocks, W);
    scratch.score_stride = std::max(kChunkKeys + 2 * W, mean_columns);
    scratch.scores = hwy::AllocateAligned<float>(kIndexRows * scratch.score_stride);
    if (ctx.pack_per_chunk) scratch.panels = hwy::AllocateAligned<float>((kChunkKeys / W + 2) * ctx.panel_floats);
    scratch.block_max.assign(group * kIndexRows * ctx.max_blocks, 0.0f);
    scratch.block_sum.assign(group * kIndexRows * ctx.max_blocks, 0.0f);
    scratch.row_scores.assign(ctx.max_blocks + N, 0.0f);
    scratch.mean.assign(ctx.di, 0.0f);
    return scratch;
  };
#pragma omp parallel num_threads(threads)
  {
    IndexScratch scratch = make_scratch();
    PackIndexKeys(ctx, scratch.mean);  // ends with a barrier: every panel is packed before any unit runs
#pragma omp for schedule(dynamic, 1)
    for (size_t u = 0; u < units.size(); ++u) {
      const IndexUnit& unit = units[u];
      const IndexTile* unit_tiles = &tiles[unit.tile];
      for (int64_t g = 0; g < unit.tiles; ++g) {
        GatherIndexQueries(ctx, unit_tiles[g], scratch.q.get() + g * kIndexRows * ctx.di);
      }
      if (unit_tiles[0].split >= 0) {
        const int64_t k = unit_tiles[0].split;
        TokenPass(ctx, unit_tiles, 1, unit.chunk_begin, unit.chunk_end, scratch.q.get(), scratch, split_max[k].data(),
                  split_sum[k].data(), split_stride[k]);
      } else {
        if (ctx.token_pass) {
          TokenPass(ctx, unit_tiles, int(unit.tiles), unit.chunk_begin, unit.chunk_end, scratch.q.get(), scratch,
                    scratch.block_max.data(), scratch.block_sum.data(), ctx.max_blocks);
        }
        for (int64_t g = 0; g < unit.tiles; ++g) {
          const int64_t state = g * kIndexRows * ctx.max_blocks;
          FinalizeTile(ctx, unit_tiles[g], scratch.q.get() + g * kIndexRows * ctx.di, scratch,
                       scratch.block_max.data() + state, scratch.block_sum.data() + state, ctx.max_blocks, refused);
        }
      }
      report.Add(unit.cost);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < split_tiles; ++k) {
      const IndexTile& tile = tiles[split_tile[k]];
      GatherIndexQueries(ctx, tile, scratch.q.get());
      FinalizeTile(ctx, tile, scratch.q.get(), scratch, split_max[k].data(), split_sum[k].data(), split_stride[k],
                   refused);
    }
  }
  report.Finish();
  if (const int64_t row = refused.not_finite.Get(); row != std::numeric_limits<int64_t>::max()) {
    return InvalidArgument("index score of query " + std::to_string(row % ctx.total_q) + ", group " +
                           std::to_string(row / ctx.total_q) +
                           " is not finite in fp32: index_q and index_k are too large for precision fp32");
  }
  if (const int64_t row = refused.fp16_overflow.Get(); row != std::numeric_limits<int64_t>::max()) {
    return Fp16ScoreOverflow(row / ctx.hkv, row % ctx.hkv);
  }
  return Status::Ok();
}

// =========================================================================================================
// Main branch
// =========================================================================================================

inline constexpr int64_t kKeyChunk = 128;     // keys per online-softmax step
inline constexpr int64_t kSegmentKeys = 512;  // a segment: ceil(512 / Bk) selected blocks

struct AttendContext {
  const Config* config;
  const AttentionInputs* inputs;
  const SelectionView* selection;
  const AttentionOutputs* outputs;
  int64_t total_q, total_k, hq, hkv, group, dim, value_dim, value_dim_padded, bk, heads_per_chunk, chunks_per_group,
      segment_blocks;
  float scale;
  double scale_f64;
  std::vector<fp32::Place> places;
  Aligned<float> k;                     // [Hkv][total_k][D]
  Aligned<float> v;                     // [Hkv][total_k][Dv_pad], zero padded
  std::vector<int64_t> first_block;     // [B+1] first block of each sequence
  std::vector<int64_t> touched_blocks;  // group * total blocks + block, for the blocks some row reads
  int64_t selected_keys = 0;            // sum over (query, group) rows of their selected keys
  bool convert_per_step = false;        // blocks read about once (decode): convert them in each step instead
};

// Rows with at most this many selected keys are evaluated in double from the inputs as given (a few percent of
// a long prefill's work); longer rows compute scores, p and each softmax step's P V in fp32 and add the steps
// into a double state (l, o). Why: the oracle judges fp32 against twice the error of a naive fp32 evaluation,
// and an fp32 evaluation in another order is as (in)accurate as the naive one, so on small tensors the 2x rule
// would fail now and then by luck; long rows win by their short fp32 sums (one step, not the whole row). The
// choice depends on the row alone, so it never changes bits between runs, threads or tilings.
inline constexpr int64_t kShortRowKeys = 512;

// A softmax state of one head chunk: m [V*N] running max (fp32, heads in lanes), l [V*N] and o [heads][Dv_pad]
// running sums in double.
struct SoftmaxState {
  Aligned<float> m;
  Aligned<double> l, o;
  void Allocate(int64_t lanes, int64_t o_values) {
    m = hwy::AllocateAligned<float>(lanes);
    l = hwy::AllocateAligned<double>(lanes);
    o = hwy::AllocateAligned<double>(o_values);
  }
};

struct AttendScratch {
  // [D][V*N] queries, [kKeyChunk][V*N] scores then probabilities, [V*N] alpha, ones and one step's sum of p,
  // [heads][Dv_pad] one step's fp32 P V, [max(D, Dv)] a converted row.
  Aligned<float> qt, sp, alpha, ones, step_sum, step_o, row;
  Aligned<float> step_k, step_v;  // [kKeyChunk][D], [kKeyChunk][Dv_pad]: a step's keys and values (convert_per_step)
  Aligned<double> qt_f64, sp_f64, alpha_f64, step_sum_f64;  // the same in double, for short rows
  std::vector<double> k_f64, v_f64, row_f64;  // a short row's gathered keys [n][D], values [n][Dv_pad]; a row
  SoftmaxState total, segment;
  std::vector<int32_t> blocks;
};

struct AttendItem {
  int64_t t, r, chunk;  // query row, group, head chunk
};

// The selected blocks of (t, r), ascending; returns how many keys they hold for the query.
int64_t SortedBlocks(const AttendContext& ctx, int64_t t, int64_t r, std::vector<int32_t>* blocks) {
  const int32_t* row = ctx.selection->topk_indices + (r * ctx.total_q + t) * ctx.config->top_k;
  blocks->clear();
  int64_t keys = 0;
  for (int64_t slot = 0; slot < ctx.config->top_k && row[slot] >= 0; ++slot) {
    blocks->push_back(row[slot]);
    keys += std::min<int64_t>(ctx.bk, ctx.places[t].position + 1 - int64_t(row[slot]) * ctx.bk);
  }
  std::sort(blocks->begin(), blocks->end());
  return keys;
}

// qt [D][V*N]: the chunk's queries, heads in lanes (padding lanes zero); also in double for short rows.
int64_t GatherQueries(const AttendContext& ctx, const AttendItem& item, bool short_row, AttendScratch& scratch) {
  const int64_t N = int64_t(hn::Lanes(DF()));
  const int64_t h0 = item.chunk * ctx.heads_per_chunk, heads = std::min(ctx.heads_per_chunk, ctx.group - h0);
  const int64_t lanes = fp32::RoundUp(ctx.heads_per_chunk, N);  // V * N, the same for every chunk
  if (short_row) {
    double* qt = scratch.qt_f64.get();
    std::fill(qt, qt + ctx.dim * lanes, 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      LoadRowF64(ctx.inputs->q, item.t, item.r * ctx.group + h0 + h, scratch.row_f64.data());
      for (int64_t d = 0; d < ctx.dim; ++d) qt[d * lanes + h] = scratch.row_f64[d];
    }
    return heads;
  }
  float* qt = scratch.qt.get();
  std::fill(qt, qt + ctx.dim * lanes, 0.0f);
  for (int64_t h = 0; h < heads; ++h) {
    LoadRow(ctx.inputs->q, item.t, item.r * ctx.group + h0 + h, scratch.row.get());
    for (int64_t d = 0; d < ctx.dim; ++d) qt[d * lanes + h] = scratch.row[d];
  }
  return heads;
}

void ResetState(int64_t lanes, int64_t o_values, SoftmaxState& state) {
  std::fill(state.m.get(), state.m.get() + lanes, kMinusInf);
  std::fill(state.l.get(), state.l.get() + lanes, 0.0);
  std::fill(state.o.get(), state.o.get() + o_values, 0.0);
}

// One segment (selected blocks [first, last) of the sorted list) of a long row, from a fresh state into
// `state`: scores, p and each step's P V in fp32 (P V from zero), then o = o * alpha + step and
// l = l * alpha + sum of p in double.
// A softmax step takes up to kKeyChunk keys in ascending order, from one or several blocks (as pieces of
// consecutive keys), so small blocks share a step: fewer rescalings, fewer roundings. Step boundaries depend
// only on the selected keys, never on threads.
template <int V>
void AttendSegmentFp32(const AttendContext& ctx, const AttendItem& item, int64_t heads,
                       const std::vector<int32_t>& blocks, int64_t first, int64_t last, AttendScratch& scratch,
                       SoftmaxState& state) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;
  const int64_t N = int64_t(hn::Lanes(DF())), ND = int64_t(hn::Lanes(dd)), lanes = V * N, dvp = ctx.value_dim_padded;
  const fp32::Place& place = ctx.places[item.t];
  ResetState(lanes, heads * dvp, state);
  const float* k_group = ctx.k.get() + (item.r * ctx.total_k + place.key_begin) * ctx.dim;
  const float* v_group = ctx.v.get() + (item.r * ctx.total_k + place.key_begin) * dvp;
  // Keys and values of piece i: converted once per call (ctx.k, ctx.v), or now into the step's scratch.
  const auto piece_keys = [&](int64_t begin, int64_t offset) {
    return ctx.convert_per_step ? scratch.step_k.get() + offset * ctx.dim : k_group + begin * ctx.dim;
  };
  const auto piece_values = [&](int64_t begin, int64_t offset) {
    return ctx.convert_per_step ? scratch.step_v.get() + offset * dvp : v_group + begin * dvp;
  };
  struct Piece {
    int64_t begin, count, offset;  // keys [begin, begin + count) at rows offset.. of the step
  };
  Piece pieces[kKeyChunk];
  int64_t num_pieces = 0, filled = 0;
  const auto step = [&] {
    float* sp = scratch.sp.get();
    const float* alpha = scratch.alpha.get();
    if (ctx.convert_per_step) {
      for (int64_t i = 0; i < num_pieces; ++i) {
        for (int64_t j = 0; j < pieces[i].count; ++j) {
          const int64_t key = place.key_begin + pieces[i].begin + j, row = pieces[i].offset + j;
          LoadRow(ctx.inputs->k, key, item.r, scratch.step_k.get() + row * ctx.dim);
          float* v = scratch.step_v.get() + row * dvp;
          LoadRow(ctx.inputs->v, key, item.r, v);
          std::fill(v + ctx.value_dim, v + dvp, 0.0f);
        }
      }
    }
    for (int64_t i = 0; i < num_pieces; ++i) {
      ScoreKeyRange<float, V>(scratch.qt.get(), ctx.dim, piece_keys(pieces[i].begin, pieces[i].offset), ctx.dim,
                              pieces[i].count, sp + pieces[i].offset * lanes);
    }
    SoftmaxChunk<float, V>(sp, filled, ctx.scale, state.m.get(), scratch.alpha.get(), scratch.step_sum.get());
    float* step_o = scratch.step_o.get();
    for (int64_t i = 0; i < num_pieces; ++i) {
      const float* p = sp + pieces[i].offset * lanes;
      const float* v = piece_values(pieces[i].begin, pieces[i].offset);
      if (i == 0) {
        AccumulateAllHeads<float, true>(p, lanes, heads, v, dvp, pieces[i].count, alpha, step_o, dvp, dvp);
      } else {
        AccumulateAllHeads<float, false>(p, lanes, heads, v, dvp, pieces[i].count, scratch.ones.get(), step_o, dvp,
                                         dvp);
      }
    }
    for (int64_t i = 0; i < lanes; i += ND) {
      hn::Store(hn::MulAdd(hn::Load(dd, state.l.get() + i), hn::PromoteTo(dd, hn::LoadU(dfh, alpha + i)),
                           hn::PromoteTo(dd, hn::LoadU(dfh, scratch.step_sum.get() + i))),
                dd, state.l.get() + i);
    }
    for (int64_t h = 0; h < heads; ++h) {
      const auto a = hn::Set(dd, double(alpha[h]));
      double* o = state.o.get() + h * dvp;
      const float* so = step_o + h * dvp;
      for (int64_t x = 0; x < dvp; x += ND) {
        hn::Store(hn::MulAdd(hn::Load(dd, o + x), a, hn::PromoteTo(dd, hn::LoadU(dfh, so + x))), dd, o + x);
      }
    }
    num_pieces = filled = 0;
  };
  for (int64_t j = first; j < last; ++j) {
    const int64_t kb = int64_t(blocks[j]) * ctx.bk, ke = std::min(kb + ctx.bk, place.position + 1);
    for (int64_t cs = kb; cs < ke;) {
      const int64_t take = std::min(ke - cs, kKeyChunk - filled);
      if (num_pieces > 0 && pieces[num_pieces - 1].begin + pieces[num_pieces - 1].count == cs) {
        pieces[num_pieces - 1].count += take;
      } else {
        pieces[num_pieces++] = {cs, take, filled};
      }
      filled += take;
      cs += take;
      if (filled == kKeyChunk) step();
    }
  }
  if (filled > 0) step();
}

// The same for a short row, in double from the inputs as given (f64 inputs keep every bit): the segment's
// keys and values are gathered once, then steps of up to kKeyChunk keys; l = l * alpha, then += p_j in key
// order, the operations P V applies to a value of 1.
template <int V>
void AttendSegmentFp64(const AttendContext& ctx, const AttendItem& item, int64_t heads,
                       const std::vector<int32_t>& blocks, int64_t first, int64_t last, AttendScratch& scratch,
                       SoftmaxState& state) {
  const hn::ScalableTag<double> dd;
  constexpr int kVD = V * int(hn::MaxLanes(DF()) / hn::MaxLanes(hn::ScalableTag<double>()));  // V in doubles
  const int64_t N = int64_t(hn::Lanes(DF())), ND = int64_t(hn::Lanes(dd)), lanes = V * N, dvp = ctx.value_dim_padded;
  const fp32::Place& place = ctx.places[item.t];
  ResetState(lanes, heads * dvp, state);
  int64_t n = 0;
  for (int64_t j = first; j < last; ++j) {
    const int64_t kb = int64_t(blocks[j]) * ctx.bk;
    n += std::min(kb + ctx.bk, place.position + 1) - kb;
  }
  scratch.k_f64.resize(n * ctx.dim);
  scratch.v_f64.resize(n * dvp);
  int64_t row = 0;
  for (int64_t j = first; j < last; ++j) {
    const int64_t kb = int64_t(blocks[j]) * ctx.bk, ke = std::min(kb + ctx.bk, place.position + 1);
    for (int64_t s = kb; s < ke; ++s, ++row) {
      LoadRowF64(ctx.inputs->k, place.key_begin + s, item.r, &scratch.k_f64[row * ctx.dim]);
      double* v = &scratch.v_f64[row * dvp];
      LoadRowF64(ctx.inputs->v, place.key_begin + s, item.r, v);
      std::fill(v + ctx.value_dim, v + dvp, 0.0);
    }
  }
  double* sp = scratch.sp_f64.get();
  const double* alpha = scratch.alpha_f64.get();
  for (int64_t cs = 0; cs < n; cs += kKeyChunk) {
    const int64_t count = std::min(kKeyChunk, n - cs);
    ScoreKeyRange<double, kVD>(scratch.qt_f64.get(), ctx.dim, &scratch.k_f64[cs * ctx.dim], ctx.dim, count, sp);
    SoftmaxChunk<double, kVD>(sp, count, ctx.scale_f64, state.m.get(), scratch.alpha_f64.get(),
                              scratch.step_sum_f64.get());
    for (int64_t i = 0; i < lanes; i += ND) {
      auto l = hn::Mul(hn::Load(dd, state.l.get() + i), hn::Load(dd, alpha + i));
      for (int64_t j = 0; j < count; ++j) l = hn::Add(l, hn::Load(dd, sp + j * lanes + i));
      hn::Store(l, dd, state.l.get() + i);
    }
    AccumulateAllHeads<double, false>(sp, lanes, heads, &scratch.v_f64[cs * dvp], dvp, count, alpha, state.o.get(), dvp,
                                      dvp);
  }
}

template <int V>
void AttendSegment(const AttendContext& ctx, const AttendItem& item, int64_t heads, const std::vector<int32_t>& blocks,
                   int64_t first, int64_t last, bool short_row, AttendScratch& scratch, SoftmaxState& state) {
  if (short_row) {
    AttendSegmentFp64<V>(ctx, item, heads, blocks, first, last, scratch, state);
  } else {
    AttendSegmentFp32<V>(ctx, item, heads, blocks, first, last, scratch, state);
  }
}

// total = merge(total, segment), fixed operation order: x = x_total * a1 + x_segment * a2 for l and o alike.
void MergeState(int64_t heads, int64_t lanes, int64_t dvp, const SoftmaxState& segment, SoftmaxState& total,
                float* HWY_RESTRICT a1, float* HWY_RESTRICT a2) {
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df));
  for (int64_t i = 0; i < lanes; i += N) {
    const VF mt = hn::Load(df, total.m.get() + i), ms = hn::Load(df, segment.m.get() + i);
    const VF m = hn::Max(mt, ms);
    hn::Store(CephesExp(df, hn::Sub(mt, m)), df, a1 + i);
    hn::Store(CephesExp(df, hn::Sub(ms, m)), df, a2 + i);
    hn::Store(m, df, total.m.get() + i);
  }
  const hn::ScalableTag<double> dd;
  const int64_t ND = int64_t(hn::Lanes(dd));
  const hn::Rebind<float, decltype(dd)> dfh;
  for (int64_t i = 0; i < lanes; i += ND) {
    const auto e1 = hn::PromoteTo(dd, hn::LoadU(dfh, a1 + i)), e2 = hn::PromoteTo(dd, hn::LoadU(dfh, a2 + i));
    hn::Store(hn::MulAdd(hn::Load(dd, segment.l.get() + i), e2, hn::Mul(hn::Load(dd, total.l.get() + i), e1)), dd,
              total.l.get() + i);
  }
  for (int64_t h = 0; h < heads; ++h) {
    const auto e1 = hn::Set(dd, double(a1[h])), e2 = hn::Set(dd, double(a2[h]));
    double* o = total.o.get() + h * dvp;
    const double* os = segment.o.get() + h * dvp;
    for (int64_t x = 0; x < dvp; x += ND) {
      hn::Store(hn::MulAdd(hn::Load(dd, os + x), e2, hn::Mul(hn::Load(dd, o + x), e1)), dd, o + x);
    }
  }
}

void CopyState(int64_t heads, int64_t lanes, int64_t dvp, const SoftmaxState& from, SoftmaxState& to) {
  std::copy(from.m.get(), from.m.get() + lanes, to.m.get());
  std::copy(from.l.get(), from.l.get() + lanes, to.l.get());
  std::copy(from.o.get(), from.o.get() + heads * dvp, to.o.get());
}

// out = o / l and lse = m + log(l) for the chunk's heads; a non-finite result (inputs too large for fp32) is
// noted as query row * Hq + head.
void WriteOutputs(const AttendContext& ctx, const AttendItem& item, int64_t heads, const SoftmaxState& state,
                  fp32::FirstBadRow& bad) {
  const int64_t h0 = item.r * ctx.group + item.chunk * ctx.heads_per_chunk, dvp = ctx.value_dim_padded;
  for (int64_t h = 0; h < heads; ++h) {
    const double l = state.l[h];
    const double* o = state.o.get() + h * dvp;
    double* out = ctx.outputs->out + (item.t * ctx.hq + h0 + h) * ctx.value_dim;
    bool finite = std::isfinite(state.m[h]) && std::isfinite(l) && l > 0;
    for (int64_t x = 0; x < ctx.value_dim; ++x) {
      out[x] = o[x] / l;
      finite = finite && std::isfinite(out[x]);
    }
    ctx.outputs->lse[item.t * ctx.hq + h0 + h] = double(state.m[h]) + std::log(l);
    if (!finite) bad.Note(item.t * ctx.hq + h0 + h);
  }
}

int64_t SegmentCount(const AttendContext& ctx, int64_t valid) { return fp32::CeilDiv(valid, ctx.segment_blocks); }

template <int V>
void AttendWholeItem(const AttendContext& ctx, const AttendItem& item, AttendScratch& scratch, fp32::FirstBadRow& bad) {
  const bool short_row = SortedBlocks(ctx, item.t, item.r, &scratch.blocks) <= kShortRowKeys;
  const int64_t heads = GatherQueries(ctx, item, short_row, scratch);
  const int64_t lanes = V * int64_t(hn::Lanes(DF())), dvp = ctx.value_dim_padded;
  const int64_t valid = int64_t(scratch.blocks.size()), segments = SegmentCount(ctx, valid);
  for (int64_t sgm = 0; sgm < segments; ++sgm) {
    const int64_t first = sgm * ctx.segment_blocks, last = std::min(valid, first + ctx.segment_blocks);
    AttendSegment<V>(ctx, item, heads, scratch.blocks, first, last, short_row, scratch,
                     sgm == 0 ? scratch.total : scratch.segment);
    if (sgm > 0) MergeState(heads, lanes, dvp, scratch.segment, scratch.total, scratch.alpha.get(), scratch.sp.get());
  }
  WriteOutputs(ctx, item, heads, scratch.total, bad);
}

template <int V>
void AttendOneSegment(const AttendContext& ctx, const AttendItem& item, int64_t sgm, AttendScratch& scratch,
                      SoftmaxState& state) {
  const bool short_row = SortedBlocks(ctx, item.t, item.r, &scratch.blocks) <= kShortRowKeys;
  const int64_t heads = GatherQueries(ctx, item, short_row, scratch);
  const int64_t valid = int64_t(scratch.blocks.size());
  const int64_t first = sgm * ctx.segment_blocks, last = std::min(valid, first + ctx.segment_blocks);
  AttendSegment<V>(ctx, item, heads, scratch.blocks, first, last, short_row, scratch, state);
}

// Converts to fp32 the key and value blocks that some selection row reads, into [Hkv][total_k][D] and
// [Hkv][total_k][Dv_pad] (zero padded). Prefill reads nearly every block; decode reads a few blocks of a long
// context, so converting only those keeps decode cost proportional to the selection.
void PlanKeyValueConversion(AttendContext& ctx) {
  const Batch& batch = ctx.inputs->batch;
  const int64_t total_k = ctx.total_k, dvp = ctx.value_dim_padded, bk = ctx.bk, top_k = ctx.config->top_k;
  const int64_t sequences = batch.num_sequences();
  ctx.first_block.assign(sequences + 1, 0);
  for (int64_t b = 0; b < sequences; ++b) {
    ctx.first_block[b + 1] = ctx.first_block[b] + fp32::CeilDiv(batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b], bk);
  }
  const int64_t total_blocks = ctx.first_block.back();
  std::vector<uint8_t> touched(ctx.hkv * total_blocks, 0);  // [Hkv][total blocks]
  for (int64_t r = 0; r < ctx.hkv; ++r) {
    for (int64_t t = 0; t < ctx.total_q; ++t) {
      const int32_t* row = ctx.selection->topk_indices + (r * ctx.total_q + t) * top_k;
      uint8_t* blocks = &touched[r * total_blocks + ctx.first_block[ctx.places[t].sequence]];
      for (int64_t slot = 0; slot < top_k && row[slot] >= 0; ++slot) {
        blocks[row[slot]] = 1;
        ctx.selected_keys += std::min<int64_t>(bk, ctx.places[t].position + 1 - int64_t(row[slot]) * bk);
      }
    }
  }
  ctx.touched_blocks.clear();
  for (int64_t i = 0; i < int64_t(touched.size()); ++i) {
    if (touched[i]) ctx.touched_blocks.push_back(i);
  }
  // Converting a block once (into fresh memory) pays when many rows read it (prefill); when rows read their
  // blocks a few times at most (decode), each step converts its own keys and values into cached scratch.
  ctx.convert_per_step = ctx.selected_keys < 4 * int64_t(ctx.touched_blocks.size()) * bk;
  if (ctx.convert_per_step) ctx.touched_blocks.clear();
  const int64_t k_floats = ctx.convert_per_step ? 1 : std::max<int64_t>(1, ctx.hkv * total_k * ctx.dim);
  const int64_t v_floats = ctx.convert_per_step ? 1 : std::max<int64_t>(1, ctx.hkv * total_k * dvp);
  ctx.k = hwy::AllocateAligned<float>(k_floats);
  ctx.v = hwy::AllocateAligned<float>(v_floats);
}

// Inside a parallel region (orphaned work-sharing loop, ending with a barrier).
void ConvertKeysValues(const AttendContext& ctx) {
  const Batch& batch = ctx.inputs->batch;
  const int64_t total_k = ctx.total_k, dvp = ctx.value_dim_padded, bk = ctx.bk;
  const int64_t total_blocks = ctx.first_block.back();
#pragma omp for schedule(dynamic, 4)
  for (size_t w = 0; w < ctx.touched_blocks.size(); ++w) {
    const int64_t r = ctx.touched_blocks[w] / total_blocks, g = ctx.touched_blocks[w] % total_blocks;
    const int64_t b = std::upper_bound(ctx.first_block.begin(), ctx.first_block.end(), g) - ctx.first_block.begin() - 1;
    const int64_t key_begin = batch.cu_seqlens_k[b], k_len = batch.cu_seqlens_k[b + 1] - key_begin;
    const int64_t first = (g - ctx.first_block[b]) * bk, last = std::min(first + bk, k_len);
    for (int64_t s = key_begin + first; s < key_begin + last; ++s) {
      const int64_t row = r * total_k + s;
      LoadRow(ctx.inputs->k, s, r, ctx.k.get() + row * ctx.dim);
      float* v = ctx.v.get() + row * dvp;
      LoadRow(ctx.inputs->v, s, r, v);
      std::fill(v + ctx.value_dim, v + dvp, 0.0f);
    }
  }
}

Status AttendFp32(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress) {
  RecordDispatchedTarget(HWY_TARGET);
  const DF df;
  const int64_t N = int64_t(hn::Lanes(df));
  AttendContext ctx;
  ctx.config = &config;
  ctx.inputs = &inputs;
  ctx.selection = &selection;
  ctx.outputs = &outputs;
  ctx.total_q = inputs.batch.total_q();
  ctx.total_k = inputs.batch.total_k();
  ctx.hq = config.num_q_heads;
  ctx.hkv = config.num_kv_heads;
  ctx.group = config.group_size();
  ctx.dim = config.head_dim;
  ctx.value_dim = config.value_dim;
  ctx.value_dim_padded = fp32::RoundUp(ctx.value_dim, N);
  ctx.bk = config.block_size;
  ctx.heads_per_chunk = std::min<int64_t>(ctx.group, kMaxHeadVectors * N);
  ctx.chunks_per_group = fp32::CeilDiv(ctx.group, ctx.heads_per_chunk);
  ctx.segment_blocks = std::max<int64_t>(1, kSegmentKeys / ctx.bk);
  ctx.scale = float(config.SoftmaxScale());
  ctx.scale_f64 = config.SoftmaxScale();
  if (ctx.total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(fp32::CheckFp32Range("q", inputs.q));
  MSA_RETURN_IF_ERROR(fp32::CheckFp32Range("k", inputs.k));
  MSA_RETURN_IF_ERROR(fp32::CheckFp32Range("v", inputs.v));
  ctx.places = fp32::PlaceQueries(inputs.batch);
  PlanKeyValueConversion(ctx);

  const int64_t V = fp32::CeilDiv(ctx.heads_per_chunk, N), lanes = V * N;
  // Items in (group, head chunk, query) order: neighbouring queries of a group share most of their blocks.
  std::vector<AttendItem> items;
  items.reserve(ctx.total_q * ctx.hkv * ctx.chunks_per_group);
  for (int64_t r = 0; r < ctx.hkv; ++r) {
    for (int64_t c = 0; c < ctx.chunks_per_group; ++c) {
      for (int64_t t = 0; t < ctx.total_q; ++t) items.push_back({t, r, c});
    }
  }
  const int threads =
      fp32::ThreadsFor(2.0 * double(ctx.group) * double(ctx.dim + ctx.value_dim) * double(ctx.selected_keys));
  const bool split = threads > 1 && int64_t(items.size()) < 4 * int64_t(threads);

  // Split mode (few rows, e.g. decode): one unit per segment, partial states merged in order afterwards.
  std::vector<int64_t> first_unit(items.size() + 1, 0);
  if (split) {
    std::vector<int32_t> blocks;
    for (size_t i = 0; i < items.size(); ++i) {
      SortedBlocks(ctx, items[i].t, items[i].r, &blocks);
      first_unit[i + 1] = first_unit[i] + SegmentCount(ctx, int64_t(blocks.size()));
    }
  } else {
    std::iota(first_unit.begin(), first_unit.end(), 0);
  }
  const int64_t units = first_unit.back();
  std::vector<SoftmaxState> partial(split ? units : 0);
  for (SoftmaxState& state : partial) state.Allocate(lanes, ctx.heads_per_chunk * ctx.value_dim_padded);

  fp32::Progress report(progress, units);
  fp32::FirstBadRow bad;
#pragma omp parallel num_threads(threads)
  {
    AttendScratch scratch;
    scratch.qt = hwy::AllocateAligned<float>(ctx.dim * lanes);
    scratch.sp = hwy::AllocateAligned<float>(std::max<int64_t>(kKeyChunk, 1) * lanes);
    scratch.alpha = hwy::AllocateAligned<float>(lanes);
    scratch.ones = hwy::AllocateAligned<float>(lanes);
    std::fill(scratch.ones.get(), scratch.ones.get() + lanes, 1.0f);
    scratch.step_sum = hwy::AllocateAligned<float>(lanes);
    scratch.qt_f64 = hwy::AllocateAligned<double>(ctx.dim * lanes);
    scratch.sp_f64 = hwy::AllocateAligned<double>(kKeyChunk * lanes);
    scratch.alpha_f64 = hwy::AllocateAligned<double>(lanes);
    scratch.step_sum_f64 = hwy::AllocateAligned<double>(lanes);
    scratch.row_f64.resize(ctx.dim);
    scratch.step_o = hwy::AllocateAligned<float>(ctx.heads_per_chunk * ctx.value_dim_padded);
    if (ctx.convert_per_step) {
      scratch.step_k = hwy::AllocateAligned<float>(kKeyChunk * ctx.dim);
      scratch.step_v = hwy::AllocateAligned<float>(kKeyChunk * ctx.value_dim_padded);
    }
    scratch.row = hwy::AllocateAligned<float>(std::max(ctx.dim, ctx.value_dim_padded));
    scratch.total.Allocate(lanes, ctx.heads_per_chunk * ctx.value_dim_padded);
    scratch.segment.Allocate(lanes, ctx.heads_per_chunk * ctx.value_dim_padded);
    ConvertKeysValues(ctx);  // ends with a barrier
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      if (!split) {
        switch (V) {
          case 1:
            AttendWholeItem<1>(ctx, items[u], scratch, bad);
            break;
          case 2:
            AttendWholeItem<2>(ctx, items[u], scratch, bad);
            break;
          case 3:
            AttendWholeItem<3>(ctx, items[u], scratch, bad);
            break;
          default:
            AttendWholeItem<4>(ctx, items[u], scratch, bad);
            break;
        }
      } else {
        const int64_t i = std::upper_bound(first_unit.begin(), first_unit.end(), u) - first_unit.begin() - 1;
        const int64_t sgm = u - first_unit[i];
        switch (V) {
          case 1:
            AttendOneSegment<1>(ctx, items[i], sgm, scratch, partial[u]);
            break;
          case 2:
            AttendOneSegment<2>(ctx, items[i], sgm, scratch, partial[u]);
            break;
          case 3:
            AttendOneSegment<3>(ctx, items[i], sgm, scratch, partial[u]);
            break;
          default:
            AttendOneSegment<4>(ctx, items[i], sgm, scratch, partial[u]);
            break;
        }
      }
      report.Add(1);
    }
    if (split) {
#pragma omp for schedule(dynamic, 1)
      for (size_t i = 0; i < items.size(); ++i) {
        const int64_t h0 = items[i].chunk * ctx.heads_per_chunk, heads = std::min(ctx.heads_per_chunk, ctx.group - h0);
        CopyState(heads, lanes, ctx.value_dim_padded, partial[first_unit[i]], scratch.total);
        for (int64_t u = first_unit[i] + 1; u < first_unit[i + 1]; ++u) {
          MergeState(heads, lanes, ctx.value_dim_padded, partial[u], scratch.total, scratch.alpha.get(),
                     scratch.sp.get());
        }
        WriteOutputs(ctx, items[i], heads, scratch.total, bad);
      }
    }
  }
  report.Finish();
  if (const int64_t row = bad.Get(); row != std::numeric_limits<int64_t>::max()) {
    return InvalidArgument("attention of query " + std::to_string(row / ctx.hq) + ", head " +
                           std::to_string(row % ctx.hq) +
                           " is not finite in fp32: q, k or v are too large for precision fp32");
  }
  return Status::Ok();
}

}  // namespace msa::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace msa::simd {

HWY_EXPORT(SelectFp32);
HWY_EXPORT(AttendFp32);

Status Fp32Select(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(SelectFp32)(config, inputs, outputs, progress);
}

Status Fp32Attend(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress) {
  return HWY_DYNAMIC_DISPATCH(AttendFp32)(config, inputs, selection, outputs, progress);
}

namespace fp32 {

std::vector<Place> PlaceQueries(const Batch& batch) {
  std::vector<Place> places(batch.total_q());
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t i = 0; i < q_len; ++i) places[q_begin + i] = {b, k_len - q_len + i, batch.cu_seqlens_k[b]};
  }
  return places;
}

// docs:begin place-row
void PlaceRow(const Config& config, const float* scores, int64_t visible, int32_t* row, std::vector<uint64_t>* keys) {
  const ForcedBlocks forced = ForcedBlocksOf(visible, config.init_blocks, config.local_blocks, config.top_k);
  const int64_t candidates = forced.candidates(), take = forced.take;
  keys->resize(candidates);
  for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
    (*keys)[b - forced.init_end] = RankKey(scores[b], int32_t(b));
  }
  if (take < candidates) std::nth_element(keys->begin(), keys->begin() + take, keys->end());
  std::sort(keys->begin(), keys->begin() + take);
  int64_t slot = 0;
  for (int64_t j = 0; j < take; ++j) row[slot++] = int32_t(uint32_t((*keys)[j]));
  for (int64_t b = 0; b < forced.init_end; ++b) row[slot++] = int32_t(b);
  for (int64_t b = forced.local_begin; b <= forced.local; ++b) row[slot++] = int32_t(b);  // the local block last
  while (slot < config.top_k) row[slot++] = -1;
}
// docs:end place-row

}  // namespace fp32
}  // namespace msa::simd
#endif  // HWY_ONCE
