// Index branch block maxima on e4m3 (fp8) inputs with Hopper warpgroup MMA (sm_90a): BlockMaxScoresWgmma's
// contract (gpu/block_max_wgmma.cu: entries written, causal clamp, bad rows, grid plan) on index_q / index_k stored
// as OCP E4M3FN bytes, at twice the bf16 tensor-core rate. Not the same bits as the bf16 kernels: Hopper's fp8 MMA
// adds with less than fp32 precision (kFp8IndexRelBound in gpu/kernels.h states the bound). UNTESTED on a GPU so
// far: gpu/fp8_index_first_run.sh checks it against BlockMaxScores on the same e4m3 values.
//
// docs:begin gpu-block-max-fp8
// BlockMaxFp8Kernel: the structure of BlockMaxWgmmaKernel with 8-bit operands.
//   CTA        kWgs (2, or 1 for <= 64 rows) warpgroups; warpgroup w owns the CTA's rows 64w..64w+63, warp v the
//              rows 16v..16v+15. The query rows are loaded once (cp.async into a padded tile of 144-byte rows, then
//              ldmatrix .b16: the 8-bit k32 A fragment is the 16-bit k16 one byte for byte) into registers: 4 k32 A
//              fragments per thread (dims zero-padded to 128).
//   keys       128-key tiles of index_k through a 4-stage cp.async ring, each tile [128 keys][128 B]: one key is one
//              128-byte swizzle row (K-major, as fp8 wgmma requires; 1024-byte aligned; 16 KiB per stage).
//   S = Q K^T  per tile and warpgroup 4 x wgmma m64n128k32 .e4m3, A from registers, B = the tile, fp32 accumulators
//              zeroed first; two accumulator sets, the wgmma of tile i + 1 issued before the reduction of tile i.
//   reduction  per 64-key half of a tile (block_size is a multiple of 64): each thread folds its 32 scores per row
//              into the row's running max with max.NaN (NaN sticky); keys past the row's position are skipped in
//              halves that reach the warp's first position. When a half ends a block (or the CTA's key range),
//              4 lanes combine their maxima and one writes max * scale to bs[row * max_blocks + blk], for
//              blk <= the row's local block only. scale > 0 and rounding is monotone: the max of the scaled scores.
//   bad rows   a row is bad iff some visible scaled score is not finite. e4m3 has no infinities and
//              BlockMaxScoresFp8Fits bounds scale so that no dot can overflow (|dot| <= Di * 448^2, times scale,
//              with a factor 2 to spare, below FLT_MAX): only a NaN input makes a score non-finite, and the
//              NaN-sticky max carries it into a written block max. This replaces BlockMaxWgmmaKernel's second
//              (running min) chain: one max.NaN per score. The entries of a bad row are unspecified.
// Pipeline and barriers: BlockMaxWgmmaKernel's (cp.async groups Q, tiles 0..2, then one per tile; wait tile i + 1,
// proxy fence, barrier, load tile i + 3 into the stage of tile i - 1, issue tile i + 1, wait for tile i, reduce it).
// Shared memory: 4 x 16 KiB key stages + 64 * kWgs query rows of 144 B + 1 KiB alignment slack (83 KiB for two
// warpgroups).
// docs:end gpu-block-max-fp8
#include <cfloat>
#include <cmath>

#include "gpu/kernels.h"
#include "gpu/mma.cuh"
#include "gpu/wgmma.cuh"

namespace msa::gpu {
namespace {

constexpr int kDiPad = 128;              // index dims (bytes) are zero-padded to this
constexpr int kQStride = kDiPad + 16;    // bytes per query row in shared memory: 144, ldmatrix conflict-free
constexpr int kTileKeys = 128;           // keys per pipeline stage: the wgmma N
constexpr int kHalfKeys = 64;            // block_size granularity
constexpr int kStages = 4;
constexpr uint32_t kRowBytes = 128;                        // one key: 128 e4m3 bytes, one swizzled row
constexpr uint32_t kStageBytes = kTileKeys * kRowBytes;    // 16 KiB
constexpr float kE4M3Max = 448.0f;

constexpr size_t SmemBytes(int wgs) {
  return 1024 /* alignment slack */ + size_t(kStages) * kStageBytes + size_t(wgs) * 64 * kQStride;
}

static_assert(kTileKeys == 2 * kHalfKeys, "a tile is two 64-key halves");

#if defined(MSA_WGMMA_ENABLED)
constexpr int kKSteps = kDiPad / 32;          // k32 wgmma steps
constexpr uint32_t kAtomBytes = 8 * kRowBytes;  // 128-byte swizzle atom: 8 rows (the descriptors' SBO)

// max with NaN propagation (PTX max.NaN, sm_80+): a NaN argument gives NaN.
__device__ inline float MaxNaN(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// Per-thread state of the reduction: this thread's two accumulator rows 16v + lane/4 (+8) of the CTA.
struct RowState {
  int pos[2];     // key position of the row's query, -1 past the chunk
  int local[2];   // pos / bk: the last block the row sees
  int row[2];     // chunk row
  float best[2];  // max of the raw dots over the current block's visible keys (this thread's columns), NaN sticky
  bool bad[2];    // a written block max scaled to a non-finite value
};

// Folds the 32 scores of half `kHalf` of a tile (accumulator chunks 8 kHalf .. 8 kHalf + 7) into the rows' running
// maxima; with kMasked, keys past lim[h] (the row's position minus the half's first key) are skipped.
template <int kHalf, bool kMasked>
__device__ __forceinline__ void FoldHalf(const float (&acc)[64], RowState& st, const int (&lim)[2], int tig) {
  float mx[2][4];  // four partial chains per row, combined at the end (max is order-free)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h][0] = st.best[h];
    mx[h][1] = mx[h][2] = mx[h][3] = -INFINITY;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const float s = acc[4 * (8 * kHalf + j) + e];
      const bool visible = !kMasked || j * 8 + tig * 2 + (e & 1) <= lim[h];
      mx[h][j & 3] = MaxNaN(mx[h][j & 3], visible ? s : -INFINITY);  // a select, not a branch
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) st.best[h] = MaxNaN(MaxNaN(mx[h][0], mx[h][1]), MaxNaN(mx[h][2], mx[h][3]));
}
#endif  // MSA_WGMMA_ENABLED

template <int kWgs>
__global__ void __launch_bounds__(kWgs * 128, 1)
    BlockMaxFp8Kernel(const uint8_t* index_q, const uint8_t* index_k, ChunkGeometry g, float scale,
                      int64_t blocks_per_cta, float* bs, unsigned long long* bad_row) {
#if defined(MSA_WGMMA_ENABLED)
  constexpr int kThreads = kWgs * 128;
  constexpr int kCtaRows = kWgs * 64;
  constexpr int kKeysPerPass = kThreads / 8;  // key rows one pass of a tile load covers (8 chunks per key)
  extern __shared__ __align__(16) unsigned char block_max_fp8_smem[];  // 1024-byte alignment made below
  const uint32_t raw = wgmma::SharedAddress(block_max_fp8_smem);
  const uint32_t pad = (1024u - raw % 1024u) % 1024u;
  const uint32_t k_smem = raw + pad;                                    // [kStages][128 keys][128 B], swizzled
  unsigned char* qs = block_max_fp8_smem + pad + kStages * kStageBytes;  // [kCtaRows][kQStride] bytes

  // CTA-wide geometry in 32-bit integers (the launcher checks that it fits; see BlockMaxWgmmaKernel for why).
  const int hidx = g.hidx, bk = g.bk;
  const int rows = int(g.nq) * hidx;
  const int tiles_x = (rows + kCtaRows - 1) / kCtaRows;
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
  const int chunks_per_row = g.di / 16;  // 16-byte pieces of one index vector
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;

  // Query rows -> padded shared tile (zero beyond di and past the chunk): commit group "Q".
  for (int e = tid; e < kCtaRows * (kDiPad / 16); e += kThreads) {
    const int rr = e / (kDiPad / 16), piece = e % (kDiPad / 16);
    const int row = row0 + rr;
    const bool valid = row < rows && piece < chunks_per_row;
    wgmma::CopyAsync16(wgmma::SharedAddress(qs + rr * kQStride + piece * 16),
                       index_q + (g.t0 * hidx + (valid ? row : 0)) * g.di + (valid ? piece * 16 : 0), valid);
  }
  wgmma::CopyAsyncCommit();

  // Key tile `tile` -> stage tile % kStages, swizzled; keys past key_end and dims past di zero-filled. Thread tid
  // copies chunk tid % 8 of keys tid / 8 + kKeysPerPass * j, so its swizzle row (key % 8) is fixed.
  const int load_chunk = tid % 8, load_key = tid / 8;
  const uint32_t load_dst0 = wgmma::SwizzledOffset(uint32_t(load_key), uint32_t(load_chunk));
  const bool load_dims = load_chunk < chunks_per_row;
  const auto load_tile = [&](int tile) {
    const uint32_t dst = k_smem + uint32_t(tile % kStages) * kStageBytes + load_dst0;
    const int key0 = key_first + tile * kTileKeys + load_key;
#pragma unroll
    for (int j = 0; j < kTileKeys / kKeysPerPass; ++j) {
      const int key = key0 + j * kKeysPerPass;
      const bool valid = load_dims && key < key_end;
      const uint8_t* src = index_k + (valid ? (g.key_begin + key) * g.di + load_chunk * 16 : 0);
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
    st.bad[h] = false;
  }
  const int warp_first_row = row0 + warp * 16 < rows ? row0 + warp * 16 : rows - 1;
  const int warp_min_pos = pos0 + warp_first_row / hidx;

  wgmma::CopyAsyncWait<kStages - 1>();  // the query group
  __syncthreads();
  uint32_t a[kKSteps][4];  // k32 A fragments of the warp's 16 rows
#pragma unroll
  for (int k = 0; k < kKSteps; ++k) {
    mma::LoadMatrixX4(a[k], qs + (warp * 16 + lane % 16) * kQStride + k * 32 + (lane / 16) * 16);
  }

  // S(tile) into `acc`: k-step kk covers dims 32kk..32kk+31, 32 bytes along each swizzled key row.
  const auto issue = [&](float (&acc)[64], int tile) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const uint64_t desc = wgmma::MakeDescriptor(k_smem + uint32_t(tile % kStages) * kStageBytes, 16, kAtomBytes);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) wgmma::MmaRSE4M3(acc, a[kk], wgmma::AdvanceDescriptor(desc, kk * 32), 1);
    wgmma::CommitGroup();
  };

  // The current block of the reduction and its end key.
  int blk = blk_begin, blk_end_key = (blk_begin + 1) * bk;
  const auto finish_block = [&] {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = st.best[h];
      v = MaxNaN(v, __shfl_xor_sync(mma::kFullMask, v, 1));
      v = MaxNaN(v, __shfl_xor_sync(mma::kFullMask, v, 2));
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
  // Two tiles per trip, no wgmma issue or wait under a condition inside the loop (BlockMaxWgmmaKernel says why).
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
    if (st.pos[h] >= 0 && st.bad[h]) {
      atomicMin(bad_row, static_cast<unsigned long long>((g.t0 + st.row[h] / hidx) * hidx + st.row[h] % hidx));
    }
  }
#elif defined(__CUDA_ARCH__)
  (void)index_q, (void)index_k, (void)g, (void)scale, (void)blocks_per_cta, (void)bs, (void)bad_row;
  __trap();  // built for another target: the launcher runs this kernel on sm_90 devices only
#endif
}

template <int kWgs>
cudaError_t LaunchBlockMaxFp8(const uint8_t* index_q, const uint8_t* index_k, const ChunkGeometry& g, float scale,
                              float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  const size_t smem = SmemBytes(kWgs);
  const auto kernel = BlockMaxFp8Kernel<kWgs>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const BlockMaxGrid plan = PlanBlockMaxGrid(g, kWgs * 64);
  kernel<<<plan.grid, kWgs * 128, smem, stream>>>(index_q, index_k, g, scale, plan.blocks_per_cta, bs, bad_row);
  return cudaGetLastError();
}

}  // namespace

bool BlockMaxScoresFp8Fits(int di, int bk, float scale) {
  // No dot of e4m3 values overflows once scaled (twice the largest |dot| still below FLT_MAX): the bad-row test
  // above needs only the NaN-sticky max.
  const bool no_overflow = double(scale) * 2.0 * di * double(kE4M3Max) * kE4M3Max <= double(FLT_MAX);
  return di > 0 && di % 16 == 0 && di <= kDiPad && bk > 0 && bk % kHalfKeys == 0 && scale > 0.0f && no_overflow &&
         SmemBytes(2) <= size_t(MaxSharedBytes()) && DeviceIsSm90();
}

cudaError_t BlockMaxScoresFp8(const uint8_t* index_q, const uint8_t* index_k, const ChunkGeometry& g, float scale,
                              float* bs, unsigned long long* bad_row, cudaStream_t stream) {
  if (g.nq * g.hidx <= 0) return cudaSuccess;
  if (!BlockMaxScoresFp8Fits(g.di, g.bk, scale) || g.sequences != nullptr) return cudaErrorNotSupported;
  // The kernel's 32-bit geometry (rows, key positions, block ends); no other kernel takes e4m3 inputs.
  constexpr int64_t kInt32Max = 2147483647;
  if (g.nq * g.hidx > kInt32Max - 256 || g.pos0 + g.nq + g.bk > kInt32Max) return cudaErrorNotSupported;
  if (g.nq * g.hidx <= 64) return LaunchBlockMaxFp8<1>(index_q, index_k, g, scale, bs, bad_row, stream);
  return LaunchBlockMaxFp8<2>(index_q, index_k, g, scale, bs, bad_row, stream);
}

}  // namespace msa::gpu
