// The index branch's block maxima on Hopper warpgroup MMA (sm_90a), shared by BlockMaxWgmmaKernel (bf16 / fp16,
// gpu/index/block_max_wgmma.cu) and BlockMaxFp8Kernel (e4m3, gpu/index/block_max_fp8.cu): one CTA's work (BlockMaxCta:
// the grid and row setup, the cp.async ring of key tiles, the query rows in registers, two accumulator sets with the
// reduction of tile i overlapping the wgmma of tile i + 1, the block epilogue, the bad-row report) and the launcher
// (LaunchBlockMax). gpu/index/block_max_wgmma.cu describes the structure and the pipeline; the two kernels differ only
// in their operand policy `Ops`:
//   Element        the stored index element: uint16_t (bf16 / fp16) or uint8_t (e4m3)
//   kStepK         elements of one wgmma k-step (16 or 32: 32 bytes either way)
//   kQStride       elements per query row in shared memory (the padded row of kDiPad elements plus 16 bytes, so
//                  that ldmatrix is conflict-free)
//   kBatchedChunks whether the kernel takes batched chunks (EnterSequence; grid.z = the sequences)
//   Mma(acc, a, b) acc += A B for one k-step: A = a k-step's fragment from registers, B = its key-tile descriptor
//   Fold           the reduction flavor: per-row running maxima `best[2]` (the thread's two accumulator rows) and
//                  whatever the bad-row test needs besides the written block maxima; Start(h, scale) resets row h,
//                  FoldHalf<kHalf, kMasked>(acc, lim, tig) folds half kHalf of a tile (keys past lim[h] skipped
//                  with kMasked; ForEachScoreOfHalf visits the scores), Max(a, b) combines two lanes' maxima,
//                  NonFiniteSeen(h) is the row's extra bad test at the end.
// Shared memory of a kWgs-warpgroup CTA: 4 stages of [kDiPad * sizeof(Element) / 128][128 keys][128 B] (16 or
// 32 KiB each), 64 * kWgs query rows of kQStride elements, with a running top-k (kRunning) each row's list of
// kRunningListStride 64-bit keys, 1 KiB alignment slack (SmemBytes).
// The running top-k (kRunning, topk=running): instead of (or, where bs is not null, besides) storing a row's block
// maximum, the thread that holds it inserts the block's RankKey into the row's list in shared memory when the block is
// one of the row's ranked candidates [init_end, local_begin): the list keeps the row's best `take` keys of the CTA's
// span in descending order (0: empty). At the end the CTA writes each row's list to
// lists[(row * gridDim.y + span) * RunningTopKListLength(top_k) + j], j < that length. MergeRunningTopK merges a
// row's spans into RankTopK's selection: the best `take` keys of the row are among the best `take` of each span.
// The key tiles come in one of two ways (kTma), with the same bytes in the stages wherever a score is read: cp.async
// by every thread (zero fill past the CTA's key end and past di), or, where the vectors fill the padded dims
// (TmaKeyTiles) and the grid's CTAs gain by it (BulkCopiesPay), one bulk tensor copy per column block issued by thread
// 0 and completing on the stage's mbarrier, from a map of index_k's rows [key_begin, key_begin + k_len) as the launcher
// sees them: a plain chunk's sequence, or a batched chunk's whole batch. Keys past the map's end are zero-filled; keys
// between the CTA's key end and the tile's end are other keys of the map (the sequence's own, or the next sequence's),
// and no reduction reads their scores: a half at or past key_end is skipped, key_end is a block end or past the chunk's
// last position, and blocks are whole halves.
#ifndef MSA_GPU_BLOCK_MAX_WGMMA_CUH_
#define MSA_GPU_BLOCK_MAX_WGMMA_CUH_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "gpu/common/chunk.cuh"
#include "gpu/common/dependent_launch.cuh"
#include "gpu/common/device_query.h"
#include "gpu/common/mbarrier.cuh"
#include "gpu/common/mma.cuh"
#include "gpu/common/tensor_map.h"
#include "gpu/common/wgmma.cuh"
#include "gpu/kernels.h"
#include "gpu/topk/rank_row.cuh"

namespace msa::gpu::block_max {

constexpr int kDiPad = 128;     // index dims are zero-padded to this
constexpr int kTileKeys = 128;  // keys per pipeline stage: the wgmma N
constexpr int kHalfKeys = 64;   // block_size granularity (block_size % 64 == 0 in both kernels' Fits)
constexpr int kStages = 4;
constexpr uint32_t kRowBytes = 128;                         // one swizzled row of a key-tile column block
constexpr uint32_t kColBlockBytes = kTileKeys * kRowBytes;  // one column block of a key tile: 16 KiB
constexpr uint32_t kAtomBytes = 8 * kRowBytes;              // 128-byte swizzle atom: 8 rows (the descriptors' SBO)
constexpr int kChunkBytes = 16;                             // one cp.async / one ldmatrix row

static_assert(kTileKeys == 2 * kHalfKeys, "a tile is two 64-key halves");

// The layout that follows from an operand policy.
template <class Ops>
struct Layout {
  using Element = typename Ops::Element;
  static constexpr int kChunkElems = kChunkBytes / int(sizeof(Element));  // elements per 16-byte chunk: 8 | 16
  static constexpr int kPaddedChunks = kDiPad / kChunkElems;              // chunks of a padded index vector: 16 | 8
  static constexpr int kColBlocks = kPaddedChunks / 8;                    // 128-byte column blocks of a key: 2 | 1
  static constexpr uint32_t kStageBytes = kColBlocks * kColBlockBytes;    // one key tile: 32 | 16 KiB
  static constexpr int kKSteps = kDiPad / Ops::kStepK;                    // wgmma k-steps over the padded dims
  static constexpr uint32_t kStepBytes = Ops::kStepK * sizeof(Element);   // along a swizzled row: 32
  static constexpr int kStepsPerColBlock = int(kRowBytes / kStepBytes);
  static_assert(kStepBytes == 32 && kColBlocks * 8 == kPaddedChunks, "a k-step is 32 bytes of a 128-byte row");
  static_assert(Ops::kQStride * sizeof(Element) % kChunkBytes == 0 && Ops::kQStride >= kDiPad,
                "query rows hold a padded vector and start on 16-byte boundaries");
};

// Dynamic shared memory of a CTA of `wgs` warpgroups, with or without the rows' running top-k lists.
template <class Ops>
constexpr size_t SmemBytes(int wgs, bool running = false) {
  return 1024 /* alignment slack */ + size_t(kStages) * Layout<Ops>::kStageBytes +
         size_t(wgs) * 64 * Ops::kQStride * sizeof(typename Ops::Element) +
         (running ? size_t(wgs) * 64 * kRunningListStride * sizeof(unsigned long long) : 0);
}

// Inserts `key` into list[0, len) (descending, 0 = empty) when it beats list[len - 1]; keys are distinct.
__device__ __forceinline__ void InsertRanked(unsigned long long* list, int len, unsigned long long key) {
  if (len <= 0 || key <= list[len - 1]) return;
  int i = len - 1;
  for (; i > 0 && list[i - 1] < key; --i) list[i] = list[i - 1];
  list[i] = key;
}

#if defined(MSA_WGMMA_ENABLED)
// For the folds: max with NaN propagation (PTX max.NaN, sm_80+): a NaN argument gives NaN.
__device__ inline float MaxNaN(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// For the folds: visit(h, j, s, visible) for each of this thread's 32 scores of half kHalf of a tile (accumulator
// chunks 8 kHalf + j, j < 8: row h = the thread's row 16v + lane/4 + 8h, key 8j + 2 tig (+1) of the half); with
// kMasked, visible = the key is <= lim[h] (the row's position minus the half's first key), else always true.
template <int kHalf, bool kMasked, class Visit>
__device__ __forceinline__ void ForEachScoreOfHalf(const float (&acc)[64], const int (&lim)[2], int tig,
                                                   Visit&& visit) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      visit(h, j, acc[4 * (8 * kHalf + j) + e], !kMasked || j * 8 + tig * 2 + (e & 1) <= lim[h]);
    }
  }
}
#endif  // MSA_WGMMA_ENABLED

// Per-thread state of the reduction: this thread's two accumulator rows 16v + lane/4 (+8) of the CTA.
template <class Fold>
struct RowState {
  int pos[2];        // key position of the row's query, -1 past the chunk
  int local[2];      // pos / bk: the last block the row sees
  int row[2];        // chunk row
  float* bs_row[2];  // the row's block maxima: bs + row * max_blocks (bs for a row past the chunk; null without bs)
  Fold fold;         // the running maxima (and the flavor's bad-row state)
  bool bad[2];       // a written block max scaled to a non-finite value
};

// One CTA of the kernel (the kernels' whole body): block maxima of its rows over its key blocks into bs (kRunning:
// into its rows' lists, and into bs where it is not null), its bad rows into bad_row. Launched by LaunchBlockMax (grid
// of PlanBlockMaxGrid with 64 * kWgs-row tiles; kRunning: of PlanRunningTopKGrid). With kTma the key tiles come from
// key_map (the map of the chunk's keys that LaunchBlockMax encodes), else from index_k.
template <class Ops, int kWgs, bool kTma, bool kRunning>
__device__ __forceinline__ void BlockMaxCta(const typename Ops::Element* index_q, const typename Ops::Element* index_k,
                                            const CUtensorMap* key_map, ChunkGeometry g, float scale,
                                            int64_t blocks_per_cta, float* bs, unsigned long long* lists,
                                            unsigned long long* bad_row) {
#if defined(MSA_WGMMA_ENABLED)
  AllowDependents();  // the top-k may launch now; it waits for this grid's end
  using Element = typename Ops::Element;
  using L = Layout<Ops>;
  constexpr int kQStride = Ops::kQStride;
  constexpr int kThreads = kWgs * 128;
  constexpr int kCtaRows = kWgs * 64;
  constexpr int kKeysPerPass = kThreads / L::kPaddedChunks;        // key rows one pass of a tile load covers
  extern __shared__ __align__(16) unsigned char block_max_smem[];  // 1024-byte alignment made below
  const uint32_t raw = wgmma::SharedAddress(block_max_smem);
  const uint32_t pad = (1024u - raw % 1024u) % 1024u;
  const uint32_t k_smem = raw + pad;  // [kStages][kColBlocks][128 keys][128 B], swizzled
  // [kCtaRows][kQStride] elements, after the stages
  Element* qs = reinterpret_cast<Element*>(block_max_smem + pad + kStages * L::kStageBytes);
  // kRunning: [kCtaRows][kRunningListStride] keys, after the query rows
  unsigned long long* row_lists = reinterpret_cast<unsigned long long*>(qs + kCtaRows * kQStride);

  // CTA-wide geometry in 32-bit integers (the launcher checks that it fits): ptxas proves values computed with
  // 64-bit division (a called routine) no longer warp-uniform, and a loop bound it cannot prove uniform serializes
  // the wgmmas that stay in flight across the loop's back edge (C7518).
  const int64_t map_first_key = g.key_begin;  // kTma: the key at the tensor map's row 0
  if constexpr (Ops::kBatchedChunks) {
    const int64_t first_row = EnterSequence(g, blockIdx.z);
    if (!kRunning || bs != nullptr) bs += first_row * g.max_blocks;
    if constexpr (kRunning) lists += first_row * int64_t(gridDim.y) * RunningTopKListLength(g.top_k);
  }
  const int hidx = g.hidx, bk = g.bk;
  const int rows = int(g.nq) * hidx;
  const int tiles_x = (rows + kCtaRows - 1) / kCtaRows;
  if constexpr (Ops::kBatchedChunks) {
    if (int(blockIdx.x) >= tiles_x) return;  // past a shorter sequence's rows; uniform
  }
  const int row0 = (tiles_x - 1 - int(blockIdx.x)) * kCtaRows;  // the longest rows (latest queries) first
  const int row_last = (row0 + kCtaRows < rows ? row0 + kCtaRows : rows) - 1;
  const int pos0 = int(g.pos0);
  const int max_pos = pos0 + row_last / hidx;
  const int blk_begin = int(blockIdx.y) * int(blocks_per_cta);
  int blk_end = blk_begin + int(blocks_per_cta);
  if (blk_end > max_pos / bk + 1) blk_end = max_pos / bk + 1;
  if (blk_begin >= blk_end) return;  // uniform over the CTA, before any barrier
  const int key_first = blk_begin * bk;
  int key_end = blk_end * bk;
  if (key_end > max_pos + 1) key_end = max_pos + 1;
  const int num_tiles = (key_end - key_first + kTileKeys - 1) / kTileKeys;
  const int chunks_per_row = g.di / L::kChunkElems;  // 16-byte pieces of one index vector
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;

  // Query rows -> padded shared tile (zero beyond di and past the chunk): commit group "Q".
  for (int e = tid; e < kCtaRows * L::kPaddedChunks; e += kThreads) {
    const int rr = e / L::kPaddedChunks, piece = e % L::kPaddedChunks;
    const int row = row0 + rr;
    const bool valid = row < rows && piece < chunks_per_row;
    wgmma::CopyAsync16(wgmma::SharedAddress(qs + rr * kQStride + piece * L::kChunkElems),
                       index_q + (g.t0 * hidx + (valid ? row : 0)) * g.di + (valid ? piece * L::kChunkElems : 0),
                       valid);
  }
  wgmma::CopyAsyncCommit();
  if constexpr (kRunning) {
    for (int e = tid; e < kCtaRows * kRunningListStride; e += kThreads) row_lists[e] = 0;  // published below
  }

  // kTma: the stages' mbarriers, one phase per tile (tile i completes phase i / kStages of stage i % kStages).
  __shared__ alignas(8) uint64_t key_full[kStages];
  if constexpr (kTma) {
    if (tid == 0) {
      for (int s = 0; s < kStages; ++s) mbarrier::Init(wgmma::SharedAddress(&key_full[s]), 1);
      mbarrier::FenceInit();
    }
    __syncthreads();
  }
  const auto tile_landed = [&](int tile) {  // kTma: wait for tile `tile`'s bytes
    mbarrier::Wait(wgmma::SharedAddress(&key_full[tile % kStages]), uint32_t(tile / kStages) & 1u);
  };

  // Key tile `tile` -> stage tile % kStages, swizzled; keys past key_end and dims past di zero-filled. Thread tid
  // copies chunk tid % kPaddedChunks of keys tid / kPaddedChunks + kKeysPerPass * j (chunk c in column block
  // c / 8), so its swizzle row (key % 8) is fixed.
  const int load_chunk = tid % L::kPaddedChunks, load_key = tid / L::kPaddedChunks;
  const uint32_t load_dst0 =
      (load_chunk / 8) * kColBlockBytes + wgmma::SwizzledOffset(uint32_t(load_key), uint32_t(load_chunk % 8));
  const bool load_dims = load_chunk < chunks_per_row;
  // The source of this thread's first copy: key key_first + load_key, its chunk; a tile adds kTileKeys keys, a pass
  // kKeysPerPass keys. A tile wholly before key_end (every tile but a CTA's last) copies without per-copy tests.
  const Element* load_src0 = index_k + (g.key_begin + key_first + load_key) * g.di + load_chunk * L::kChunkElems;
  const int64_t pass_elems = int64_t(kKeysPerPass) * g.di;
  const int map_key_first = int(g.key_begin - map_first_key) + key_first;  // kTma: the CTA's first key in the map
  const auto load_tile = [&](int tile) {
    if constexpr (kTma) {
      if (tid == 0) {
        const uint32_t stage = k_smem + uint32_t(tile % kStages) * L::kStageBytes;
        const uint32_t bar = wgmma::SharedAddress(&key_full[tile % kStages]);
        mbarrier::ArriveExpectTx(bar, L::kStageBytes);
#pragma unroll
        for (int c = 0; c < L::kColBlocks; ++c) {
          mbarrier::TensorLoad3d(stage + uint32_t(c) * kColBlockBytes, key_map, c * int(kRowBytes / sizeof(Element)), 0,
                                 map_key_first + tile * kTileKeys, bar);
        }
      }
      return;
    }
    const uint32_t dst = k_smem + uint32_t(tile % kStages) * L::kStageBytes + load_dst0;
    const int key0 = key_first + tile * kTileKeys + load_key;
    if (load_dims && key_first + (tile + 1) * kTileKeys <= key_end) {
      const Element* src = load_src0 + int64_t(tile) * kTileKeys * g.di;
#pragma unroll
      for (int j = 0; j < kTileKeys / kKeysPerPass; ++j) {
        wgmma::CopyAsync16(dst + uint32_t(j * kKeysPerPass) * kRowBytes, src + j * pass_elems, true);
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < kTileKeys / kKeysPerPass; ++j) {
      const int key = key0 + j * kKeysPerPass;
      const bool valid = load_dims && key < key_end;
      const Element* src = index_k + (valid ? (g.key_begin + key) * g.di + load_chunk * L::kChunkElems : 0);
      wgmma::CopyAsync16(dst + uint32_t(j * kKeysPerPass) * kRowBytes, src, valid);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_tile(s);
    if constexpr (!kTma) wgmma::CopyAsyncCommit();
  }

  // This thread's rows, and the first position of its warp's rows (halves before it need no causal mask).
  RowState<typename Ops::Fold> st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.row[h] = row0 + warp * 16 + gid + 8 * h;
    st.pos[h] = st.row[h] < rows ? pos0 + st.row[h] / hidx : -1;
    st.local[h] = st.pos[h] >= 0 ? st.pos[h] / bk : -1;
    st.bs_row[h] = !kRunning || bs != nullptr ? bs + (st.pos[h] >= 0 ? int64_t(st.row[h]) * g.max_blocks : 0) : nullptr;
    st.fold.Start(h, scale);
    st.bad[h] = false;
  }
  const int warp_first_row = row0 + warp * 16 < rows ? row0 + warp * 16 : rows - 1;
  const int warp_min_pos = pos0 + warp_first_row / hidx;

  if constexpr (kTma) {
    wgmma::CopyAsyncWait<0>();  // the query group, the only one
  } else {
    wgmma::CopyAsyncWait<kStages - 1>();  // the query group
  }
  __syncthreads();
  uint32_t a[L::kKSteps][4];  // A fragments of the warp's 16 rows (the wgmma register-A layout = mma.sync's)
#pragma unroll
  for (int k = 0; k < L::kKSteps; ++k) {
    mma::LoadMatrixX4(a[k], qs + (warp * 16 + lane % 16) * kQStride + k * Ops::kStepK + (lane / 16) * L::kChunkElems);
  }

  // S(tile) into `acc`: k-step kk covers dims kStepK kk .. kStepK (kk + 1) - 1: column block kk / 4, 32 bytes per
  // step inside it.
  const auto issue = [&](float(&acc)[64], int tile) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const uint64_t desc = wgmma::MakeDescriptor(k_smem + uint32_t(tile % kStages) * L::kStageBytes, 16, kAtomBytes);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < L::kKSteps; ++kk) {
      Ops::Mma(acc, a[kk],
               wgmma::AdvanceDescriptor(
                   desc, (kk / L::kStepsPerColBlock) * kColBlockBytes + (kk % L::kStepsPerColBlock) * L::kStepBytes));
    }
    wgmma::CommitGroup();
  };

  // The current block of the reduction and its end key.
  int blk = blk_begin, blk_end_key = (blk_begin + 1) * bk;
  const auto finish_block = [&] {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = st.fold.best[h];
      v = Ops::Fold::Max(v, __shfl_xor_sync(mma::kFullMask, v, 1));
      v = Ops::Fold::Max(v, __shfl_xor_sync(mma::kFullMask, v, 2));
      if (tig == 0 && st.pos[h] >= 0 && blk <= st.local[h]) {
        const float value = v * scale;
        if (!kRunning || st.bs_row[h] != nullptr) st.bs_row[h][blk] = value;
        if constexpr (kRunning) {  // the row's forced blocks worked out here: no registers held across the loop
          const ForcedBlocks f = ForcedBlocksOf(st.local[h] + 1, g.init_blocks, g.local_blocks, g.top_k);
          if (!f.IsForced(blk)) {
            InsertRanked(row_lists + (warp * 16 + gid + 8 * h) * kRunningListStride, int(f.take), RankKey(value, blk));
          }
        }
        if (!isfinite(value)) st.bad[h] = true;
      }
      st.fold.best[h] = -INFINITY;
    }
    ++blk;
    blk_end_key += bk;
  };
  const auto reduce = [&](const float(&acc)[64], int tile) {
    const int key0 = key_first + tile * kTileKeys;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int kh = key0 + half * kHalfKeys;
      if (kh >= key_end) break;  // uniform: past the CTA's key range (zero-filled keys)
      if (kh + kHalfKeys - 1 <= warp_min_pos) {
        const int lim[2] = {kHalfKeys, kHalfKeys};
        if (half == 0)
          st.fold.template FoldHalf<0, false>(acc, lim, tig);
        else
          st.fold.template FoldHalf<1, false>(acc, lim, tig);
      } else {
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int d = st.pos[h] - kh;  // pos >= -1 and kh >= 0: no overflow
          lim[h] = d < -1 ? -1 : (d > kHalfKeys ? kHalfKeys : d);
        }
        if (half == 0)
          st.fold.template FoldHalf<0, true>(acc, lim, tig);
        else
          st.fold.template FoldHalf<1, true>(acc, lim, tig);
      }
      if (kh + kHalfKeys >= blk_end_key || kh + kHalfKeys >= key_end) finish_block();
    }
  };
  // Before S(tile + 1) is issued: its keys have landed and are published, and tile + 3 is loaded into the stage
  // of tile - 1 (every warpgroup is past tile - 1's wgmma: it waited for it before this barrier).
  const auto advance = [&](int tile) {
    if constexpr (kTma) {
      tile_landed(tile + 1);
    } else {
      wgmma::CopyAsyncWait<kStages - 3>();  // tile + 1 has landed (tiles up to tile + kStages - 2 were committed)
      wgmma::FenceProxyAsyncShared();
    }
    __syncthreads();
    if (tile + kStages - 1 < num_tiles) load_tile(tile + kStages - 1);
    if constexpr (!kTma) wgmma::CopyAsyncCommit();
  };

  float acc0[64], acc1[64];
  if constexpr (kTma) {
    tile_landed(0);
  } else {
    wgmma::CopyAsyncWait<kStages - 2>();  // tile 0
    wgmma::FenceProxyAsyncShared();
    __syncthreads();
  }
  issue(acc0, 0);
  // Two tiles per trip so that each accumulator set keeps its registers, and no wgmma issue or wait under a
  // condition inside the loop: ptxas serializes the wgmmas (C7514) when an accumulator set in flight meets a
  // phi of a conditional path. S(tile) is in flight in acc0 at the top of each trip.
  int tile = 0;
  for (; tile + 2 < num_tiles; tile += 2) {
    advance(tile);
    issue(acc1, tile + 1);
    wgmma::WaitGroup<1>();
    wgmma::FenceOperands(acc0);
    reduce(acc0, tile);
    advance(tile + 1);
    issue(acc0, tile + 2);
    wgmma::WaitGroup<1>();
    wgmma::FenceOperands(acc1);
    reduce(acc1, tile + 1);
  }
  if (tile + 1 < num_tiles) {  // the last two tiles
    advance(tile);
    issue(acc1, tile + 1);
    wgmma::WaitGroup<1>();
    wgmma::FenceOperands(acc0);
    reduce(acc0, tile);
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(acc1);
    reduce(acc1, tile + 1);
  } else {  // the last tile
    wgmma::WaitGroup<0>();
    wgmma::FenceOperands(acc0);
    reduce(acc0, tile);
  }
  wgmma::CopyAsyncWait<0>();
  if constexpr (kRunning) {
    __syncthreads();  // every row's list complete
    const int len = int(RunningTopKListLength(g.top_k));
    for (int e = tid; e < kCtaRows * len; e += kThreads) {
      const int rr = e / len, j = e % len;
      if (row0 + rr < rows) {
        lists[(int64_t(row0 + rr) * gridDim.y + blockIdx.y) * len + j] = row_lists[rr * kRunningListStride + j];
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (st.pos[h] >= 0 && (st.bad[h] || st.fold.NonFiniteSeen(h))) {
      atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + st.row[h] / hidx) * hidx + st.row[h] % hidx));
    }
  }
#elif defined(__CUDA_ARCH__)
  (void)index_q, (void)index_k, (void)key_map, (void)g, (void)scale, (void)blocks_per_cta, (void)bs, (void)lists;
  (void)bad_row;
  __trap();  // built for another target: the launchers run these kernels on sm_90 devices only
#endif
}

// The kernels' signature: (index_q, index_k, key_map, g, scale, blocks_per_cta, bs, lists, bad_row); key_map is a
// __grid_constant__ parameter, read by the kTma kernels only; lists by the kRunning kernels only.
template <class Element>
using BlockMaxKernel = void (*)(const Element*, const Element*, const CUtensorMap, ChunkGeometry, float, int64_t,
                                float*, unsigned long long*, unsigned long long*);

// Whether a chunk's key tiles can come by bulk tensor copy: index_k's rows [key_begin, key_begin + k_len) (a plain
// chunk's sequence, or a batched chunk's whole batch) in a kernel that takes the chunk, with vectors that fill the
// padded dims (so that no copy crosses di), a 16-byte aligned first key and 32-bit key coordinates.
template <class Ops>
bool TmaKeyTiles(const typename Ops::Element* index_k, const ChunkGeometry& g) {
  return (g.sequences == nullptr || Ops::kBatchedChunks) && g.di == kDiPad && g.k_len >= 1 && g.k_len <= 2147483647 &&
         reinterpret_cast<uintptr_t>(index_k + g.key_begin * g.di) % 16 == 0;
}

// Whether a CTA of the grid takes its key tiles by bulk tensor copy where TmaKeyTiles allows it: always on two
// warpgroups (prefill); on one warpgroup (at most 64 rows: decode, where the kernel moves far more key bytes than it
// computes on) only for CTAs of at most 32 key blocks. Measured on decode steps (H200 and H100,
// bench/results/index_tma_batched_2026-12-05.md): shorter with CTAs of 16 to 32 blocks, 3-4% longer on the H200 with
// 63 or 128, where the index kernel runs near the copy ceiling.
inline bool BulkCopiesPay(int wgs, int64_t blocks_per_cta) {
  constexpr int64_t kMostBlocksOfOneWarpgroup = 32;
  return wgs > 1 || blocks_per_cta <= kMostBlocksOfOneWarpgroup;
}

// Launches the kernel of pick(wgs, tma): one warpgroup for chunks of <= 64 rows, two otherwise; on the grid of
// PlanBlockMaxGrid; tma where TmaKeyTiles and BulkCopiesPay hold, with the map of the chunk's keys. With lists (the
// running top-k: pick gives kRunning kernels) two warpgroups and the grid of PlanRunningTopKGrid. A batched chunk to
// a kernel that takes none: cudaErrorNotSupported, nothing enqueued.
template <class Ops, class Pick>
cudaError_t LaunchBlockMax(Pick pick, const typename Ops::Element* index_q, const typename Ops::Element* index_k,
                           const ChunkGeometry& g, float scale, float* bs, unsigned long long* lists,
                           unsigned long long* bad_row, cudaStream_t stream) {
  using Element = typename Ops::Element;
  if (g.sequences != nullptr && !Ops::kBatchedChunks) return cudaErrorNotSupported;
  const bool running = lists != nullptr;
  if (running && sizeof(Element) != 2) return cudaErrorNotSupported;  // PlanRunningTopKGrid's 16-bit keys
  const int wgs = running || g.nq * g.hidx > 64 ? 2 : 1;
  const size_t smem = SmemBytes<Ops>(wgs, running);
  const int64_t key_bytes = int64_t(g.di) * int64_t(sizeof(Element));
  // The grid from the cp.async kernel's occupancy: both kernels of a wgs take the same threads and shared memory,
  // which is what limits them to one CTA per multiprocessor.
  int ctas_per_sm = 0;
  cudaError_t err = cudaFuncSetAttribute(pick(wgs, false), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, pick(wgs, false), wgs * 128, smem);
  if (err != cudaSuccess) return err;
  const BlockMaxGrid plan = running ? PlanRunningTopKGrid(CurrentDeviceCaps(), g)
                                    : PlanBlockMaxGrid(CurrentDeviceCaps(), g, wgs * 64, ctas_per_sm, key_bytes);
  const bool tma = TmaKeyTiles<Ops>(index_k, g) && BulkCopiesPay(wgs, plan.blocks_per_cta);
  CUtensorMap key_map{};
  if (tma) {
    err = EncodeBoxMap(index_k + g.key_begin * g.di, int(sizeof(Element)), g.k_len, 1, g.di, kTileKeys, 1, &key_map);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(pick(wgs, true), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
  }
  const BlockMaxKernel<Element> kernel = pick(wgs, tma);
  kernel<<<GridOf(plan), wgs * 128, smem, stream>>>(index_q, index_k, key_map, g, scale, plan.blocks_per_cta, bs, lists,
                                                    bad_row);
  return cudaGetLastError();
}

}  // namespace msa::gpu::block_max

#endif  // MSA_GPU_BLOCK_MAX_WGMMA_CUH_
