#include "gpu/common/pipeline.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "gpu/common/device_query.h"
#include "gpu/common/union_tile_plan.h"

namespace msa::gpu {
namespace {

int LowpCode(Precision precision) { return precision == Precision::kBf16 ? kLowpBF16 : kLowpF16; }

// How many queries of a sequence of k_len keys one index-branch chunk takes (its scratch within kChunkBudgetBytes).
int64_t ChunkQueries(const Config& config, const KernelPlan& plan, int64_t q_len, int64_t k_len, int64_t max_blocks) {
  const int64_t hidx = config.num_kv_heads;
  const bool exact = config.precision == Precision::kExact;
  int64_t per_query = hidx * max_blocks * (exact ? 8 : 4);  // block scores
  if (plan.topk == TopKKernel::kRunning) {                  // the lists, at their most spans
    per_query += hidx * kRunningTopKMaxSplits * RunningTopKListLength(int(config.top_k)) * 8;
  }
  if (exact) {
    if (config.pooling != Pooling::kMean) per_query += hidx * k_len * 8;  // token scores
    per_query += hidx * int64_t(config.top_k) * config.block_size * 8;    // index_lse work
    per_query += int64_t(config.index_head_dim) * 8;                      // partial means
  }
  int64_t nq = std::max<int64_t>(1, kChunkBudgetBytes / std::max<int64_t>(per_query, 1));
  nq = std::min<int64_t>(nq, (int64_t(65535) * 32) / hidx);  // grid limits of the token kernel
  return std::min(nq, q_len);
}

// What every index launch function reads.
struct SelectArgs {
  const Config& config;
  const DeviceIndexInputs& in;
  const DeviceSelection& out;
  SelectWorkspace& ws;
  cudaStream_t stream;
  bool keep_scores;  // whoever reads the block scores (on_scores): a running top-k writes them too
  float scale() const { return float(config.IndexScale()); }
  int lowp() const { return LowpCode(config.precision); }
  unsigned long long* bad_row() const { return out.flags; }
};

// ---- index kernels: the block scores of one chunk into the workspace (its visible blocks) ----

cudaError_t ScoreExact(const SelectArgs& a, const ChunkGeometry& g) {
  const double scale = a.config.IndexScale();
  const int64_t ld = g.pos0 + g.nq;
  cudaError_t err = cudaSuccess;
  if (a.config.pooling != Pooling::kMean) {
    err = ExactTokenScores(a.in.index_q_wide, a.in.index_k_wide, g, scale, a.ws.tokens.get(), ld);
  } else {
    err = ExactPartialMeans(a.in.index_k_wide, g, a.ws.pmeans.get());
  }
  if (err != cudaSuccess) return err;
  return ExactPool(int(a.config.pooling), a.ws.tokens.get(), ld, a.in.index_q_wide, a.ws.means.get(), a.ws.pmeans.get(),
                   g, scale, /*check_tokens=*/true, a.ws.bs_double.get(), a.bad_row());
}
cudaError_t ScoreTokens(const SelectArgs& a, const ChunkGeometry& g) {
  return LowpBlockScores(a.lowp(), int(a.config.pooling), a.in.index_q, a.in.index_k, g, a.scale(), a.ws.bs_float.get(),
                         a.bad_row());
}
cudaError_t ScoreMeanKeys(const SelectArgs& a, const ChunkGeometry& g) {
  return LowpMeanScores(a.lowp(), a.in.index_q, a.in.index_k, g, a.scale(), a.ws.bs_float.get(), a.bad_row());
}
cudaError_t ScoreMma(const SelectArgs& a, const ChunkGeometry& g) {
  return BlockMaxScores(a.lowp(), a.in.index_q, a.in.index_k, g, a.scale(), a.ws.bs_float.get(), a.bad_row(), a.stream);
}
cudaError_t ScoreWgmma(const SelectArgs& a, const ChunkGeometry& g) {
  return BlockMaxScoresWgmma(a.lowp(), a.in.index_q, a.in.index_k, g, a.scale(), a.ws.bs_float.get(), a.bad_row(),
                             a.stream);
}
cudaError_t ScoreWgmmaRunning(const SelectArgs& a, const ChunkGeometry& g) {
  return BlockMaxTopKWgmma(a.lowp(), a.in.index_q, a.in.index_k, g, a.scale(),
                           a.keep_scores ? a.ws.bs_float.get() : nullptr, a.ws.running_lists.get(), a.bad_row(),
                           a.stream);
}
cudaError_t ScoreFp8(const SelectArgs& a, const ChunkGeometry& g) {
  return BlockMaxScoresFp8(a.in.index_q_e4m3, a.in.index_k_e4m3, g, a.scale(), a.ws.bs_float.get(), a.bad_row(),
                           a.stream);
}

using ScoreFn = cudaError_t (*)(const SelectArgs&, const ChunkGeometry&);
// The index launch of a plan: its index kernel's, or with topk=running the wgmma kernel that ranks as it scores.
ScoreFn ScoreKernel(const KernelPlan& plan) {
  if (plan.topk == TopKKernel::kRunning) return plan.index == IndexKernel::kWgmma ? ScoreWgmmaRunning : nullptr;
  switch (plan.index) {
    case IndexKernel::kExact:
      return ScoreExact;
    case IndexKernel::kTokenScores:
      return ScoreTokens;
    case IndexKernel::kMeanKeys:
      return ScoreMeanKeys;
    case IndexKernel::kMma:
      return ScoreMma;
    case IndexKernel::kWgmma:
      return ScoreWgmma;
    case IndexKernel::kFp8:
      return ScoreFp8;
    case IndexKernel::kAuto:
      break;
  }
  return nullptr;
}

// ---- top-k kernels: the selection of one chunk's rows from the workspace's block scores ----

cudaError_t RankExact(const SelectArgs& a, const ChunkGeometry& g) {
  return RankDouble(a.ws.bs_double.get(), g, a.out.topk);
}
cudaError_t RankInsertion(const SelectArgs& a, const ChunkGeometry& g) {
  return RankFloat(a.ws.bs_float.get(), g, a.out.topk);
}
cudaError_t RankWarp(const SelectArgs& a, const ChunkGeometry& g) {
  return RankTopK(a.ws.bs_float.get(), g, a.out.topk, a.stream);
}
cudaError_t RankThreshold(const SelectArgs& a, const ChunkGeometry& g) {
  return RankTopKThreshold(a.ws.bs_float.get(), g, a.ws.topk_split_lists.get(), a.ws.topk_split_bytes, a.out.topk,
                           a.stream);
}

cudaError_t RankCta(const SelectArgs& a, const ChunkGeometry& g) {
  return RankTopKCta(a.ws.bs_float.get(), g, a.out.topk, a.stream);
}
cudaError_t RankRunning(const SelectArgs& a, const ChunkGeometry& g) {
  return MergeRunningTopK(a.ws.running_lists.get(), g, a.out.topk, a.stream);
}

using RankFn = cudaError_t (*)(const SelectArgs&, const ChunkGeometry&);
RankFn RankKernel(TopKKernel kernel) {
  switch (kernel) {
    case TopKKernel::kExact:
      return RankExact;
    case TopKKernel::kInsertion:
      return RankInsertion;
    case TopKKernel::kWarp:
      return RankWarp;
    case TopKKernel::kThreshold:
      return RankThreshold;
    case TopKKernel::kCta:
      return RankCta;
    case TopKKernel::kRunning:
      return RankRunning;
    case TopKKernel::kAuto:
      break;
  }
  return nullptr;
}

// index_lse of one sequence's chunk (a batched chunk's sequences one by one), by precision.
cudaError_t IndexLse(const SelectArgs& a, const ChunkGeometry& g) {
  const int score_format = int(a.config.score_format);
  if (a.config.precision == Precision::kExact) {
    return ExactIndexLse(a.in.index_q_wide, a.in.index_k_wide, a.out.topk, g, a.config.IndexScale(), score_format,
                         a.ws.work.get(), a.out.index_lse);
  }
  return LowpIndexLse(a.lowp(), a.in.index_q, a.in.index_k, a.out.topk, g, a.scale(), score_format, a.out.index_lse);
}

// score_format fp16: the chunk's block scores become their binary16 values before they are ranked (SPEC section 2).
cudaError_t RoundScores(const SelectArgs& a, const ChunkGeometry& g, int64_t rows) {
  if (a.config.score_format != ScoreFormat::kFp16) return cudaSuccess;
  unsigned long long* overflow_row = a.out.flags + 1;
  if (a.config.precision == Precision::kExact) {
    return RoundScoresToBinary16(a.ws.bs_double.get(), g, rows, overflow_row, a.stream);
  }
  return RoundScoresToBinary16(a.ws.bs_float.get(), g, rows, overflow_row, a.stream);
}

// ---- main-branch kernels ----

struct AttendArgs {
  const Config& config;
  const DeviceAttendInputs& in;
  const DeviceAttendOutputs& out;
  AttendWorkspace& ws;
  cudaStream_t stream;
  float scale() const { return float(config.SoftmaxScale()); }
  int lowp() const { return LowpCode(config.precision); }
};

cudaError_t AttendExact(const AttendArgs& a) {
  return ExactAttend(a.in.q_wide, a.in.k_wide, a.in.v_wide, a.in.topk, a.in.position, a.in.key_begin, a.ws.geometry,
                     a.config.SoftmaxScale(), static_cast<double*>(a.out.out), static_cast<double*>(a.out.lse));
}
cudaError_t AttendGathered(const AttendArgs& a) {
  return GatheredAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin, a.ws.geometry,
                        a.scale(), a.out, a.stream);
}
cudaError_t AttendQOuter(const AttendArgs& a) {
  return QOuterAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin, a.ws.geometry,
                      a.scale(), a.out, a.stream);
}
cudaError_t AttendKvOuter(const AttendArgs& a) {
  return KvOuterAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin, a.in.first_block,
                       a.ws.geometry, a.scale(), a.ws.kv_outer, a.ws.bytes.get(), a.out, a.stream);
}
cudaError_t AttendKvOuterWgmma(const AttendArgs& a) {
  return KvOuterAttendWgmma(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin,
                            a.in.first_block, a.ws.geometry, a.scale(), a.ws.kv_outer, a.ws.bytes.get(), a.out,
                            a.stream);
}
cudaError_t AttendKvOuterWgmmaP16(const AttendArgs& a) {
  return KvOuterAttendWgmmaP16(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin,
                               a.in.first_block, a.ws.geometry, a.scale(), a.ws.kv_outer, a.ws.bytes.get(), a.out,
                               a.stream);
}
cudaError_t AttendKvOuterWs(const AttendArgs& a) {
  return KvOuterAttendWs(a.lowp(), a.in.q, a.in.k, a.in.v, a.ws.total_k, a.in.topk, a.in.position, a.in.key_begin,
                         a.in.first_block, a.ws.geometry, a.scale(), a.ws.kv_outer, a.ws.bytes.get(), a.out, a.stream);
}
cudaError_t AttendUnionTile(const AttendArgs& a) {
  return UnionTileAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin, a.in.first_block,
                         a.ws.geometry, a.scale(), /*route=*/nullptr, a.out, a.stream);
}
cudaError_t AttendUnionTileWs(const AttendArgs& a) {
  return UnionTileWsAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.ws.total_k, a.in.topk, a.in.position, a.in.key_begin,
                           a.in.first_block, a.ws.geometry, a.scale(), ItemList{}, a.ws.tile_counter.get(), a.out,
                           a.stream);
}
cudaError_t AttendRouted(const AttendArgs& a) {
  return RoutedAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.ws.total_k, a.in.topk, a.in.position, a.in.key_begin,
                      a.in.first_block, a.ws.geometry, a.scale(), a.ws.kv_outer,
                      UnionTileRoutingOf(a.config, kH200Ceilings), a.ws.bytes.get(), a.out, a.stream,
                      a.ws.side.handles());
}
cudaError_t AttendSplitK(const AttendArgs& a) {
  return SplitKAttend(a.lowp(), a.in.q, a.in.k, a.in.v, a.in.topk, a.in.position, a.in.key_begin, a.ws.geometry,
                      a.scale(), a.ws.kv_outer, a.ws.bytes.get(), a.out, a.stream);
}

using AttendFn = cudaError_t (*)(const AttendArgs&);
AttendFn AttendKernelFor(AttendKernel kernel) {
  switch (kernel) {
    case AttendKernel::kExact:
      return AttendExact;
    case AttendKernel::kGathered:
      return AttendGathered;
    case AttendKernel::kQOuter:
      return AttendQOuter;
    case AttendKernel::kKvOuter:
      return AttendKvOuter;
    case AttendKernel::kKvOuterWgmma:
      return AttendKvOuterWgmma;
    case AttendKernel::kKvOuterWgmmaP16:
      return AttendKvOuterWgmmaP16;
    case AttendKernel::kKvOuterWs:
      return AttendKvOuterWs;
    case AttendKernel::kUnionTile:
      return AttendUnionTile;
    case AttendKernel::kUnionTileWs:
      return AttendUnionTileWs;
    case AttendKernel::kRouted:
      return AttendRouted;
    case AttendKernel::kSplitK:
    case AttendKernel::kFusedDecode:  // on a given selection: split-k, the main branch of its step
      return AttendSplitK;
    case AttendKernel::kAuto:
      break;
  }
  return nullptr;
}

Status NotPlanned(const char* stage) {
  return InvalidArgument(std::string("gpu pipeline: the plan's ") + stage + " is not concrete (use PlanKernels)");
}

}  // namespace

Status AllocateSelectWorkspace(const Config& config, const Batch& batch, const KernelPlan& plan, bool want_lse,
                               SelectWorkspace* ws) {
  const bool exact = config.precision == Precision::kExact;
  const int64_t hidx = config.num_kv_heads, di = config.index_head_dim, bk = config.block_size;
  const int64_t top_k = config.top_k, max_blocks = MaxBlocks(config, batch);
  ChunkGeometry& base = ws->base;
  base = ChunkGeometry{};
  base.total_q = batch.total_q();
  base.hidx = int(hidx);
  base.di = int(di);
  base.bk = int(bk);
  base.top_k = int(top_k);
  base.init_blocks = config.init_blocks;
  base.local_blocks = config.local_blocks;
  base.max_blocks = max_blocks;
  ws->chunks.clear();
  ws->sequence_of_chunk.clear();

  // The per-sequence chunks, and the largest scratch any of them needs.
  int64_t max_rows = 0, max_tokens = 0, max_full_means = 0, max_nq = 0;
  std::vector<SequenceChunk> sequences;
  int64_t longest_q = 0, latest_pos = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t key_begin = batch.cu_seqlens_k[b], k_len = batch.cu_seqlens_k[b + 1] - key_begin;
    if (q_len == 0) continue;
    const int64_t nq_max = ChunkQueries(config, plan, q_len, k_len, max_blocks);
    max_nq = std::max(max_nq, nq_max);
    max_rows = std::max(max_rows, nq_max * hidx);
    max_tokens = std::max(max_tokens, nq_max * hidx * k_len);
    max_full_means = std::max(max_full_means, (k_len / bk) * di);
    sequences.push_back(SequenceChunk{q_begin, q_len, k_len - q_len, key_begin, k_len});
    longest_q = std::max(longest_q, q_len);
    latest_pos = std::max(latest_pos, k_len - 1);
    if (plan.batch == IndexBatch::kBatched) continue;
    for (int64_t c0 = 0; c0 < q_len; c0 += nq_max) {
      ChunkGeometry g = base;
      g.key_begin = key_begin;
      g.k_len = k_len;
      g.t0 = q_begin + c0;
      g.nq = std::min(nq_max, q_len - c0);
      g.pos0 = k_len - q_len + c0;
      ws->chunks.push_back(g);
      ws->sequence_of_chunk.push_back(b);
    }
  }
  if (sequences.empty()) return Status::Ok();
  int64_t bs_rows = max_rows, rank_rows = max_rows;  // block-score buffer rows, top-k split-list rows (a bound)
  if (plan.batch == IndexBatch::kBatched) {
    // One chunk over every sequence with queries: its buffer holds the rows (t - t0) * Hidx + r of the queries
    // [t0, t0 + batch_nq), its split lists the bound num_sequences * nq * Hidx (gpu/common/geometry.h).
    const int64_t batch_nq = sequences.back().t0 + sequences.back().nq - sequences.front().t0;
    MSA_RETURN_IF_ERROR(ws->sequences.Allocate(int64_t(sequences.size()), "sequence chunks"));
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(ws->sequences.get(), sequences.data(), sequences.size() * sizeof(SequenceChunk),
                                        cudaMemcpyHostToDevice));
    ChunkGeometry g = base;
    g.t0 = sequences.front().t0;
    g.nq = longest_q;
    g.pos0 = latest_pos - longest_q + 1;
    g.key_begin = 0;
    g.k_len = batch.cu_seqlens_k[batch.num_sequences()];
    g.sequences = ws->sequences.get();
    g.num_sequences = int64_t(sequences.size());
    ws->chunks.push_back(g);
    ws->sequence_of_chunk.push_back(-1);
    bs_rows = batch_nq * hidx;
    rank_rows = g.num_sequences * longest_q * hidx;
  }
  if (exact) {
    MSA_RETURN_IF_ERROR(ws->bs_double.Allocate(bs_rows * max_blocks, "block scores"));
    if (config.pooling != Pooling::kMean) MSA_RETURN_IF_ERROR(ws->tokens.Allocate(max_tokens, "token scores"));
    if (config.pooling == Pooling::kMean) {
      MSA_RETURN_IF_ERROR(ws->means.Allocate(max_full_means, "block mean keys"));
      MSA_RETURN_IF_ERROR(ws->pmeans.Allocate(max_nq * di, "partial block mean keys"));
    }
    if (want_lse) MSA_RETURN_IF_ERROR(ws->work.Allocate(max_rows * top_k * bk, "index_lse work"));
  } else {
    MSA_RETURN_IF_ERROR(ws->bs_float.Allocate(bs_rows * max_blocks, "block scores"));
  }
  ws->topk_split_bytes =
      plan.topk == TopKKernel::kThreshold ? RankTopKThresholdWorkspaceBytes(rank_rows, int(top_k)) : 0;
  if (plan.topk == TopKKernel::kRunning) {
    int64_t entries = 0;
    for (const ChunkGeometry& g : ws->chunks) {
      entries = std::max(entries, RunningTopKListEntries(CurrentDeviceCaps(), g));
    }
    // At least one entry, so that a launch gets a buffer when top_k 1 leaves the lists empty (the kernel still runs:
    // it reports the bad rows).
    MSA_RETURN_IF_ERROR(ws->running_lists.Allocate(std::max<int64_t>(entries, 1), "running top-k lists"));
  }
  MSA_RETURN_IF_ERROR(ws->topk_split_lists.Allocate(int64_t(ws->topk_split_bytes), "top-k split lists"));
  return Status::Ok();
}

Status SelectOnDevice(const Config& config, const Batch& batch, const KernelPlan& plan, const DeviceIndexInputs& inputs,
                      const DeviceSelection& selection, SelectWorkspace* workspace, cudaStream_t stream,
                      const ChunkScoresFn& on_scores, const StageHooks& hooks, const ProgressFn& progress) {
  const ScoreFn score = ScoreKernel(plan);
  const RankFn rank = RankKernel(plan.topk);
  if (score == nullptr) return NotPlanned("index kernel");
  if (rank == nullptr) return NotPlanned("top-k kernel");
  const SelectArgs a{config, inputs, selection, *workspace, stream, bool(on_scores)};
  const bool exact = config.precision == Precision::kExact;
  const int64_t hidx = config.num_kv_heads, total_q = batch.total_q();
  // Every index kernel writes each row's visible blocks and every ranking kernel reads no others, so the -inf fill of
  // the rest is only for whoever reads whole rows: on_scores, and the binary16 rounding of score_format fp16.
  const bool fill_rows = on_scores || config.score_format == ScoreFormat::kFp16;
  int64_t done_queries = 0, mean_keys_of = -1;
  for (size_t i = 0; i < workspace->chunks.size(); ++i) {
    const ChunkGeometry& g = workspace->chunks[i];
    const bool batched = g.sequences != nullptr;
    // A batched chunk's buffer rows: every query from its first sequence's to its last's.
    const int64_t rows = batched ? (total_q - g.t0) * hidx : g.nq * hidx;
    if (plan.index == IndexKernel::kExact && config.pooling == Pooling::kMean &&
        workspace->sequence_of_chunk[i] != mean_keys_of) {  // the mean keys of a sequence's full blocks, once
      mean_keys_of = workspace->sequence_of_chunk[i];
      MSA_CUDA_RETURN_IF_ERROR(ExactFullBlockMeans(inputs.index_k_wide, g, workspace->means.get()));
    }
    if (fill_rows && exact) {
      MSA_CUDA_RETURN_IF_ERROR(FillDouble(workspace->bs_double.get(), rows * g.max_blocks, -INFINITY, stream));
    } else if (fill_rows) {
      MSA_CUDA_RETURN_IF_ERROR(FillFloat(workspace->bs_float.get(), rows * g.max_blocks, -INFINITY, stream));
    }
    if (hooks.begin) hooks.begin(Stage::kIndex);
    MSA_CUDA_RETURN_IF_ERROR(score(a, g));
    if (hooks.end) hooks.end(Stage::kIndex);
    MSA_CUDA_RETURN_IF_ERROR(RoundScores(a, g, rows));
    if (hooks.begin) hooks.begin(Stage::kTopK);
    MSA_CUDA_RETURN_IF_ERROR(rank(a, g));
    if (hooks.end) hooks.end(Stage::kTopK);
    if (selection.index_lse != nullptr && !batched) {
      MSA_CUDA_RETURN_IF_ERROR(IndexLse(a, g));
    } else if (selection.index_lse != nullptr) {  // a batched chunk: per sequence (an optional training output)
      for (int64_t b = 0; b < batch.num_sequences(); ++b) {
        ChunkGeometry gs = workspace->base;
        gs.t0 = batch.cu_seqlens_q[b];
        gs.nq = batch.cu_seqlens_q[b + 1] - gs.t0;
        if (gs.nq == 0) continue;
        gs.key_begin = batch.cu_seqlens_k[b];
        gs.k_len = batch.cu_seqlens_k[b + 1] - gs.key_begin;
        gs.pos0 = gs.k_len - gs.nq;
        MSA_CUDA_RETURN_IF_ERROR(IndexLse(a, gs));
      }
    }
    if (on_scores) MSA_RETURN_IF_ERROR(on_scores(*workspace, g, rows));
    done_queries += batched ? total_q : g.nq;
    if (progress) progress(double(done_queries) / double(std::max<int64_t>(total_q, 1)));
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status AllocateAttendWorkspace(const Config& config, const KernelShapes& shapes, const KernelPlan& plan,
                               AttendWorkspace* ws) {
  ws->geometry = AttendGeometryOf(config, shapes.total_q);
  ws->total_k = shapes.total_k;
  ws->kv_outer = KvOuterPlan{};
  if (plan.attend == AttendKernel::kUnionTileWs) MSA_RETURN_IF_ERROR(ws->tile_counter.Allocate(1, "tile counter"));
  if (!TakesKvOuterWorkspace(plan.attend)) return Status::Ok();
  ws->kv_outer = PlanKvOuter(ws->geometry, shapes.num_blocks, kChunkBudgetBytes, plan.lists == KvLists::kDirect);
  if (!ws->kv_outer.ok || (plan.lists == KvLists::kDirect) != ws->kv_outer.direct_lists) {
    return InvalidArgument("gpu pipeline: the KV-outer lists of this plan do not fit this batch (use PlanKernels)");
  }
  MSA_RETURN_IF_ERROR(ws->bytes.Allocate(int64_t(ws->kv_outer.bytes), "KV-outer lists and partial results"));
  if (plan.attend == AttendKernel::kRouted) MSA_RETURN_IF_ERROR(ws->side.Create());
  return Status::Ok();
}

bool SelectRunsOnStream(const KernelPlan& plan) {
  constexpr IndexKernel kStreamIndex[] = {IndexKernel::kMma, IndexKernel::kWgmma, IndexKernel::kFp8};
  constexpr TopKKernel kStreamTopK[] = {TopKKernel::kWarp, TopKKernel::kThreshold, TopKKernel::kCta,
                                        TopKKernel::kRunning};
  return std::find(std::begin(kStreamIndex), std::end(kStreamIndex), plan.index) != std::end(kStreamIndex) &&
         std::find(std::begin(kStreamTopK), std::end(kStreamTopK), plan.topk) != std::end(kStreamTopK);
}

Status AttendOnDevice(const Config& config, const KernelPlan& plan, const DeviceAttendInputs& inputs,
                      const DeviceAttendOutputs& outputs, AttendWorkspace* workspace, cudaStream_t stream) {
  const AttendFn attend = AttendKernelFor(plan.attend);
  if (attend == nullptr) return NotPlanned("main-branch kernel");
  if (plan.attend == AttendKernel::kExact && outputs.format != OutputFormat::kFp64) {
    return InvalidArgument("gpu pipeline: attend=exact writes FP64 out and lse only, not bf16 out with fp32 lse");
  }
  if (workspace->geometry.total_q <= 0) return Status::Ok();
  MSA_CUDA_RETURN_IF_ERROR(attend(AttendArgs{config, inputs, outputs, *workspace, stream}));
  return Status::Ok();
}

bool AttendRunsOnStream(const KernelPlan& plan) {
  return plan.attend != AttendKernel::kExact && plan.attend != AttendKernel::kAuto;
}

Status StepOnDevice(const Config& config, const Batch& batch, const KernelPlan& plan, const DeviceIndexInputs& index,
                    const DeviceSelection& selection, SelectWorkspace* select_workspace,
                    const DeviceAttendInputs& attend_inputs, const DeviceAttendOutputs& outputs,
                    AttendWorkspace* attend_workspace, cudaStream_t stream) {
  if (plan.attend != AttendKernel::kFusedDecode || selection.index_lse != nullptr) {
    MSA_RETURN_IF_ERROR(SelectOnDevice(config, batch, plan, index, selection, select_workspace, stream));
    return AttendOnDevice(config, plan, attend_inputs, outputs, attend_workspace, stream);
  }
  if (attend_inputs.topk != selection.topk) {
    return InvalidArgument("gpu pipeline: the step's main branch must read the selection it writes");
  }
  const AttendWorkspace& ws = *attend_workspace;
  const FusedDecodeIndex fused{index.index_q,
                               index.index_k,
                               int(config.index_head_dim),
                               float(config.IndexScale()),
                               int(config.init_blocks),
                               int(config.local_blocks),
                               selection.topk,
                               selection.flags};
  const int64_t longest_row_blocks = LongestRowBlocks(config, ShapesOf(config, batch));
  MSA_CUDA_RETURN_IF_ERROR(FusedDecodeStep(LowpCode(config.precision), fused, attend_inputs.q, attend_inputs.k,
                                           attend_inputs.v, attend_inputs.position, attend_inputs.key_begin,
                                           ws.geometry, longest_row_blocks, float(config.SoftmaxScale()), ws.kv_outer,
                                           ws.bytes.get(), outputs, stream));
  return Status::Ok();
}

}  // namespace msa::gpu
