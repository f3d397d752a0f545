// Index branch block maxima on Hopper warpgroup MMA (sm_90a): the same contract and the same bits as
// BlockMaxScores (gpu/index_kernels.cu), only the tile kernel differs. gpu/wgmma_index_first_run.sh checks the two
// against each other on a device (the same bits on the H200, 63% of its bf16 GEMM rate at 128K).
//
// docs:begin gpu-block-max-wgmma
// BlockMaxWgmmaKernel: the index branch as a GEMM of the chunk's rows [rows, Di] (row (t - t0) * Hidx + r is one
// index query) against index_k [keys, Di], reduced to block maxima on the fly, never materializing the scores.
//   CTA        kWgs (2, or 1 for <= 64 rows) warpgroups; warpgroup w owns the CTA's rows 64w..64w+63 (the wgmma M),
//              warp v of the CTA the rows 16v..16v+15. The query rows are loaded once (cp.async into a padded
//              tile, then ldmatrix) into registers: 8 k16 A fragments per thread (dims zero-padded to 128).
//   keys       128-key tiles of index_k stream through a 4-stage cp.async ring shared by the warpgroups, each tile
//              [2][128 keys][128 B] (dims 0-63 | 64-127, K-major, 128-byte swizzle, 1024-byte aligned; 32 KiB).
//   S = Q K^T  per tile and warpgroup 8 x wgmma m64n128k16, A from registers, B = the tile (descriptors), fp32
//              accumulators zeroed first, k16 steps in ascending order: as the mma.sync kernel's c = 0,
//              mma(k = 0), ..., mma(k = 7) (in SASS both first steps take the zero register RZ as C), so the
//              same fp32 dot products, bit for bit: HGMMA and HMMA.16816 round a k16 step alike (measured on
//              the H200 by gpu/wgmma_index_first_run.sh, as for the KV-outer wgmma tiles).
//   overlap    two accumulator sets: the wgmma of tile i + 1 is issued before the reduction of tile i
//              (wgmma.wait_group 1), as FlashAttention-3 overlaps softmax with the next GEMM.
//   reduction  per 64-key half of a tile (block_size is a multiple of 64, so a half never straddles two
//              blocks): each thread folds its 32 scores per row into the row's running max (fmaxf) and running
//              min (min.NaN: sticky NaN); keys past the row's position are skipped, only in halves that reach
//              the warp's first position (fmaxf, where BlockMaxScores keeps s > best ? s : best: the two differ
//              only on a -0 / +0 pair, and an accumulator that starts at +0 never holds -0). When a half ends a
//              block (or the CTA's key range), 4 lanes combine their maxima and one writes max * scale to
//              bs[row * max_blocks + blk], for blk <= the row's local block only. scale > 0 and rounding is
//              monotone, so this is the max of the scaled scores.
//   bad rows   a row is bad iff some visible scaled score is not finite (BlockMaxScores' fmaf(s * scale, 0, c)
//              test): a NaN score makes the running min NaN, a +inf scaled score makes a written block max +inf,
//              a -inf one the running min's scaled value -inf; bad rows go to atomicMin(bad_row, t * Hidx + r).
//   grid       grid.x = 128-row tiles, latest rows first; grid.y splits the key blocks for decode and short
//              chunks (the launcher of BlockMaxScores with 128-row tiles, one CTA per SM); grid.z = the sequences
//              of a batched chunk (EnterSequence: the CTA's sequence, its rows at their offset in bs).
// Pipeline of tile i (all threads; cp.async groups: Q, tiles 0..2 in the prologue, then one per tile):
//   wait tile i + 1 landed (cp.async.wait_group 1); proxy fence; barrier (also: tile i - 1's stage is free)
//   cp.async tile i + 3 -> the stage of tile i - 1
//   zero the free accumulator set; wgmma.fence; issue tile i + 1 (8 wgmma); commit; wgmma.wait_group 1
//   reduce tile i from the other set
// Shared memory: 4 x 32 KiB key stages + 64 * kWgs rows of 272 B (query tile) + 1 KiB alignment slack (163 KiB
// for two warpgroups). ptxas (CUDA 13.0, sm_90a): 228 registers, no spills, no wgmma serialization warning.
// docs:end gpu-block-max-wgmma
#include <cmath>

#include "gpu/chunk.cuh"
#include "gpu/kernels.h"
#include "gpu/mma.cuh"
#include "gpu/wgmma.cuh"

namespace msa::gpu {
namespace {

constexpr int kDiPad = 128;              // index dims are zero-padded to this
constexpr int kQStride = kDiPad + 8;     // halves per query row in shared memory: 272 bytes, ldmatrix conflict-free
constexpr int kTileKeys = 128;           // keys per pipeline stage: the wgmma N
constexpr int kHalfKeys = 64;            // block_size granularity (BlockMaxScoresFits: bk % 64 == 0)
constexpr int kStages = 4;
constexpr uint32_t kRowBytes = 128;                           // one swizzled row: 64 16-bit elements
constexpr uint32_t kColBlockBytes = kTileKeys * kRowBytes;    // dims 0-63 (or 64-127) of a key tile: 16 KiB
constexpr uint32_t kStageBytes = 2 * kColBlockBytes;          // 32 KiB

constexpr size_t SmemBytes(int wgs) {
  return 1024 /* alignment slack */ + size_t(kStages) * kStageBytes + size_t(wgs) * 64 * kQStride * 2;
}

static_assert(kTileKeys == 2 * kHalfKeys, "a tile is two 64-key halves");

#if defined(MSA_WGMMA_ENABLED)
constexpr uint32_t kAtomBytes = 8 * kRowBytes;  // 128-byte swizzle atom: 8 rows (the descriptors' SBO)

// min with NaN propagation (PTX min.NaN, sm_80+): a NaN argument gives NaN.
__device__ inline float MinNaN(float a, float b) {
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// Per-thread state of the reduction: this thread's two accumulator rows 16v + lane/4 (+8) of the CTA.
struct RowState {
  int pos[2];    // key position of the row's query, -1 past the chunk
  int local[2];  // pos / bk: the last block the row sees
  int row[2];    // chunk row
  float best[2];     // max of the raw dots over the current block's visible keys (this thread's columns)
  float lo[2];       // min of the raw dots over every visible key so far, NaN sticky (starts at 0)
  bool bad[2];       // a written block max scaled to a non-finite value
};

// Folds the 32 scores of half `kHalf` of a tile (accumulator chunks 8 kHalf .. 8 kHalf + 7) into the rows'
// running max / min; with kMasked, keys past lim[h] (the row's position minus the half's first key) are skipped.
template <int kHalf, bool kMasked>
__device__ __forceinline__ void FoldHalf(const float (&acc)[64], RowState& st, const int (&lim)[2], int tig) {
  float mx[2][2], mn[2][2];  // two partial chains per row, combined at the end (max / min are order-free)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h][0] = mx[h][1] = st.best[h];
    mn[h][0] = mn[h][1] = st.lo[h];
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const float s = acc[4 * (8 * kHalf + j) + e];
      const bool visible = !kMasked || j * 8 + tig * 2 + (e & 1) <= lim[h];
      // Selects, not branches: an invisible key adds -inf to the max and 0 to the min (which starts at 0).
      mx[h][j & 1] = fmaxf(mx[h][j & 1], visible ? s : -INFINITY);
      mn[h][j & 1] = MinNaN(mn[h][j & 1], visible ? s : 0.0f);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.best[h] = fmaxf(mx[h][0], mx[h][1]);
    st.lo[h] = MinNaN(mn[h][0], mn[h][1]);
  }
}

#endif  // MSA_WGMMA_ENABLED

template <int kLowp, int kWgs>
__global__ void __launch_bounds__(kWgs * 128, 1)
    BlockMaxWgmmaKernel(const uint16_t* index_q, const uint16_t* index_k, ChunkGeometry g, float scale,
                        int64_t blocks_per_cta, float* bs, unsigned long long* bad_row) {
#if defined(MSA_WGMMA_ENABLED)
  constexpr int kThreads = kWgs * 128;
  constexpr int kCtaRows = kWgs * 64;
  constexpr int kKeysPerPass = kThreads / 16;  // key rows one pass of a tile load covers (16 chunks per key)
  extern __shared__ __align__(16) unsigned char block_max_wgmma_smem[];  // 1024-byte alignment made below
  const uint32_t raw = wgmma::SharedAddress(block_max_wgmma_smem);
  const uint32_t pad = (1024u - raw % 1024u) % 1024u;
  const uint32_t k_smem = raw + pad;  // [kStages][2][128 keys][128 B], swizzled
  // [kCtaRows][kQStride] halves, after the stages
  uint16_t* qs = reinterpret_cast<uint16_t*>(block_max_wgmma_smem + pad + kStages * kStageBytes);

  // CTA-wide geometry in 32-bit integers (the launcher checks that it fits): ptxas proves values computed with
  // 64-bit division (a called routine) no longer warp-uniform, and a loop bound it cannot prove uniform serializes
  // the wgmmas that stay in flight across the loop's back edge (C7518).
  bs += EnterSequence(g, blockIdx.z) * g.max_blocks;
  const int hidx = g.hidx, bk = g.bk;
  const int rows = int(g.nq) * hidx;
  const int tiles_x = (rows + kCtaRows - 1) / kCtaRows;
  if (int(blockIdx.x) >= tiles_x) return;  // past a shorter sequence's rows (batched chunks); uniform
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
  const int chunks_per_row = g.di / 8;  // 16-byte pieces of one index vector
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;

  // Query rows -> padded shared tile (zero beyond di and past the chunk): commit group "Q".
  for (int e = tid; e < kCtaRows * (kDiPad / 8); e += kThreads) {
    const int rr = e / (kDiPad / 8), piece = e % (kDiPad / 8);
    const int row = row0 + rr;
    const bool valid = row < rows && piece < chunks_per_row;
    wgmma::CopyAsync16(wgmma::SharedAddress(qs + rr * kQStride + piece * 8),
                       index_q + (g.t0 * hidx + (valid ? row : 0)) * g.di + (valid ? piece * 8 : 0), valid);
  }
  wgmma::CopyAsyncCommit();

  // Key tile `tile` -> stage tile % kStages, swizzled; keys past key_end and dims past di zero-filled. Thread tid
  // copies chunk tid % 16 of keys tid / 16 + kKeysPerPass * j, so its swizzle row (key % 8) is fixed.
  const int load_chunk = tid % 16, load_key = tid / 16;
  const uint32_t load_dst0 =
      (load_chunk / 8) * kColBlockBytes + wgmma::SwizzledOffset(uint32_t(load_key), uint32_t(load_chunk % 8));
  const bool load_dims = load_chunk < chunks_per_row;
  const auto load_tile = [&](int tile) {
    const uint32_t dst = k_smem + uint32_t(tile % kStages) * kStageBytes + load_dst0;
    const int key0 = key_first + tile * kTileKeys + load_key;
#pragma unroll
    for (int j = 0; j < kTileKeys / kKeysPerPass; ++j) {
      const int key = key0 + j * kKeysPerPass;
      const bool valid = load_dims && key < key_end;
      const uint16_t* src = index_k + (valid ? (g.key_begin + key) * g.di + load_chunk * 8 : 0);
      wgmma::CopyAsync16(dst + uint32_t(j * kKeysPerPass) * kRowBytes, src, valid);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_tile(s);
    wgmma::CopyAsyncCommit();
  }

  // This thread's rows, and the first position of its warp's rows (halves before it need no causal mask).
  RowState st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.row[h] = row0 + warp * 16 + gid + 8 * h;
    st.pos[h] = st.row[h] < rows ? pos0 + st.row[h] / hidx : -1;
    st.local[h] = st.pos[h] >= 0 ? st.pos[h] / bk : -1;
    st.best[h] = -INFINITY;
    st.lo[h] = 0.0f;
    st.bad[h] = false;
  }
  const int warp_first_row = row0 + warp * 16 < rows ? row0 + warp * 16 : rows - 1;
  const int warp_min_pos = pos0 + warp_first_row / hidx;

  wgmma::CopyAsyncWait<kStages - 1>();  // the query group
  __syncthreads();
  uint32_t a[kDiPad / 16][4];  // A fragments of the warp's 16 rows (the wgmma register-A layout = mma.sync's)
#pragma unroll
  for (int k = 0; k < kDiPad / 16; ++k) {
    mma::LoadMatrixX4(a[k], qs + (warp * 16 + lane % 16) * kQStride + k * 16 + (lane / 16) * 8);
  }

  // S(tile) into `acc`: k-step kk covers dims 16kk..16kk+15: column block kk / 4, 32 bytes per step inside it.
  const auto issue = [&](float (&acc)[64], int tile) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const uint64_t desc = wgmma::MakeDescriptor(k_smem + uint32_t(tile % kStages) * kStageBytes, 16, kAtomBytes);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kDiPad / 16; ++kk) {
      wgmma::MmaRS<kLowp, 0>(acc, a[kk], wgmma::AdvanceDescriptor(desc, (kk / 4) * kColBlockBytes + (kk % 4) * 32), 1);
    }
    wgmma::CommitGroup();
  };

  // The current block of the reduction and its end key.
  int blk = blk_begin, blk_end_key = (blk_begin + 1) * bk;
  const auto finish_block = [&] {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = st.best[h];
      v = fmaxf(v, __shfl_xor_sync(mma::kFullMask, v, 1));
      v = fmaxf(v, __shfl_xor_sync(mma::kFullMask, v, 2));
      if (tig == 0 && st.pos[h] >= 0 && blk <= st.local[h]) {
        const float value = v * scale;
        bs[int64_t(st.row[h]) * g.max_blocks + blk] = value;
        if (!isfinite(value)) st.bad[h] = true;
      }
      st.best[h] = -INFINITY;
    }
    ++blk;
    blk_end_key += bk;
  };
  const auto reduce = [&](const float (&acc)[64], int tile) {
    const int key0 = key_first + tile * kTileKeys;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int kh = key0 + half * kHalfKeys;
      if (kh >= key_end) break;  // uniform: past the CTA's key range (zero-filled keys)
      if (kh + kHalfKeys - 1 <= warp_min_pos) {
        const int lim[2] = {kHalfKeys, kHalfKeys};
        if (half == 0) FoldHalf<0, false>(acc, st, lim, tig);
        else FoldHalf<1, false>(acc, st, lim, tig);
      } else {
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int d = st.pos[h] - kh;  // pos >= -1 and kh >= 0: no overflow
          lim[h] = d < -1 ? -1 : (d > kHalfKeys ? kHalfKeys : d);
        }
        if (half == 0) FoldHalf<0, true>(acc, st, lim, tig);
        else FoldHalf<1, true>(acc, st, lim, tig);
      }
      if (kh + kHalfKeys >= blk_end_key || kh + kHalfKeys >= key_end) finish_block();
    }
  };
  // Before S(tile + 1) is issued: its keys have landed and are published, and tile + 3 is loaded into the stage
  // of tile - 1 (every warpgroup is past tile - 1's wgmma: it waited for it before this barrier).
  const auto advance = [&](int tile) {
    wgmma::CopyAsyncWait<kStages - 3>();  // tile + 1 has landed (tiles up to tile + kStages - 2 were committed)
    wgmma::FenceProxyAsyncShared();
    __syncthreads();
    if (tile + kStages - 1 < num_tiles) load_tile(tile + kStages - 1);
    wgmma::CopyAsyncCommit();
  };

  float acc0[64], acc1[64];
  wgmma::CopyAsyncWait<kStages - 2>();  // tile 0
  wgmma::FenceProxyAsyncShared();
  __syncthreads();
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

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (st.pos[h] >= 0 && (st.bad[h] || !isfinite(st.lo[h] * scale))) {
      atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + st.row[h] / hidx) * hidx + st.row[h] % hidx));
    }
  }
#elif defined(__CUDA_ARCH__)
  (void)index_q, (void)index_k, (void)g, (void)scale, (void)blocks_per_cta, (void)bs, (void)bad_row;
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

template <int kLowp, int kWgs>
cudaError_t LaunchBlockMaxWgmma(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                                float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  constexpr int kCtaRows = kWgs * 64;
  const size_t smem = SmemBytes(kWgs);
  const auto kernel = BlockMaxWgmmaKernel<kLowp, kWgs>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const BlockMaxGrid plan = PlanBlockMaxGrid(g, kCtaRows);
  kernel<<<plan.grid, kWgs * 128, smem, stream>>>(index_q, index_k, g, scale, plan.blocks_per_cta, bs, bad_row);
  return cudaGetLastError();
}

template <int kLowp>
cudaError_t BlockMaxWgmmaFor(const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g, float scale,
                             float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 64) return LaunchBlockMaxWgmma<kLowp, 1>(index_q, index_k, g, scale, bs, bad_row, stream);
  return LaunchBlockMaxWgmma<kLowp, 2>(index_q, index_k, g, scale, bs, bad_row, stream);
}

}  // namespace

bool BlockMaxScoresWgmmaFits(int di, int bk, float scale) {
  return BlockMaxScoresFits(di, bk, scale) && SmemBytes(2) <= size_t(MaxSharedBytes()) && DeviceIsSm90();
}

cudaError_t BlockMaxScoresWgmma(int lowp, const uint16_t* index_q, const uint16_t* index_k, const ChunkGeometry& g,
                                float scale, float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (!BlockMaxScoresWgmmaFits(g.di, g.bk, scale)) return cudaErrorNotSupported;
  // The kernel's 32-bit geometry (rows, key positions, block ends): past it (a 2^31-key sequence), the mma.sync
  // kernel, which computes the same bits.
  constexpr int64_t kInt32Max = 2147483647;
  if (g.nq * g.hidx > kInt32Max - 256 || g.pos0 + g.nq + g.bk > kInt32Max) {
    return BlockMaxScores(lowp, index_q, index_k, g, scale, bs, bad_row, stream);
  }
  if (lowp == kLowpBF16) return BlockMaxWgmmaFor<kLowpBF16>(index_q, index_k, g, scale, bs, bad_row, stream);
  return BlockMaxWgmmaFor<kLowpF16>(index_q, index_k, g, scale, bs, bad_row, stream);
}

}  // namespace msa::gpu
