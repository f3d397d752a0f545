// Exact-mode training (SPEC section 8) on the device: reference/training.cc's canonical FP64 order, bit for bit.
// Compiled with --fmad=false, so every `a * b + c` below is a rounded multiply then a rounded add, as on the host with
// -ffp-contract=off; the dots, exp and log are the reference's own functions (reference/canonical.h, exp_log.h).
// Threads split only independent work (the dS of different keys, the g of different rows, the sums of different
// dims); every sum runs in one thread in the reference's order, and the per-key sums read the contributor lists
// (TrainingLists) in ascending (t, h) / (t, r) order, as reference/contributors.h orders them.
#include <cstdint>

#include "gpu/exact/canonical_dot.cuh"
#include "gpu/topk/sorted_selection.cuh"
#include "gpu/training/training_kernels.h"
#include "reference/canonical.h"

namespace msa::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kDimsPerThread = 4;  // dims up to 512 (the gpu backend's exact limit) over kThreads
static_assert(kThreads * kDimsPerThread >= 512, "exact training kernels: every dim needs an owning thread");

// reference/training.cc ScoreGradient for the row `row` = t * Hq + h and one key of its set: score = dot(q, k) * scale,
// *p = exp(score - lse), dP = dot(dout, v), dS = p * (dP - Delta) or p * ((dP - Delta) + dlse). query [D], key [D],
// upstream [Dv], value [Dv].
__device__ inline double ScoreGradient(const double* query, const double* key, const double* upstream,
                                       const double* value, const TrainingGeometry& g, double lse, double delta,
                                       const double* dlse, int64_t row, double* p) {
  const double score = Dot(query, key, g.d) * g.scale;
  *p = CanonicalExp(score - lse);
  const double dp = Dot(upstream, value, g.dv);
  const double centered = dp - delta;
  return *p * (dlse == nullptr ? centered : centered + dlse[row]);
}

// The teacher's mean probability of key row s for query t, group r (reference/training.cc `teacher`):
// (sum_h exp(dot(q[t, h], k[s, r]) * scale - lse[t, h]), h ascending) / G.
__device__ inline double Teacher(const double* q, const double* k, const TrainingGeometry& g, const double* lse,
                                 int64_t t, int r, int64_t s) {
  const int group = g.hq / g.hkv;
  double sum = 0.0;
  for (int h = r * group; h < (r + 1) * group; ++h) {
    const double score = Dot(q + (t * g.hq + h) * g.d, k + (s * g.hkv + r) * g.d, g.d) * g.scale;
    sum += CanonicalExp(score - lse[t * g.hq + h]);
  }
  return sum / double(group);
}

// An index token score: dot(index_q[t, r], index_k[s]) * index_scale. index_query [Di], index_key [Di].
__device__ inline double IndexScore(const double* index_query, const double* index_key, const TrainingGeometry& g) {
  return Dot(index_query, index_key, g.di) * g.index_scale;
}

__global__ void DeltaKernel(const double* dout, const double* out, TrainingGeometry g, double* delta) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= g.total_q * g.hq) return;
  delta[row] = Dot(dout + row * g.dv, out + row * g.dv, g.dv);
}

// Dynamic shared memory of the kernels that walk a selection row: `doubles` doubles, then the tile's key rows
// [kThreads], the row's prefix counts [top_k + 1] and sorted blocks [top_k].
size_t RowSmemBytes(int doubles, int top_k) {
  return size_t(doubles) * sizeof(double) + size_t(kThreads + top_k + 1) * sizeof(int64_t) +
         size_t(top_k) * sizeof(int32_t);
}

// docs:begin gpu-exact-backward-rows One block per row (t, h): its key set in ascending key position, in tiles of
// kThreads keys. Each thread recomputes one key's dS as the reference does; then the thread of dim c adds
// dS_j * k[j, r, c] over the tile's keys in order, so dq[t, h, c] = scale * (sum_j dS_j k[j, r, c]), j ascending.
__global__ void __launch_bounds__(kThreads)
    BackwardRowsKernel(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                       const int32_t* topk, TrainingLists lists, TrainingGeometry g, const double* lse,
                       const double* delta, double* dq) {
  extern __shared__ double rows_smem[];
  double* qs = rows_smem;                                              // [D]
  double* dos = qs + g.d;                                              // [Dv]
  double* ds = dos + g.dv;                                             // [kThreads]
  int64_t* key_rows = reinterpret_cast<int64_t*>(ds + kThreads);       // [kThreads]: s * Hkv + r
  int64_t* prefix = key_rows + kThreads;                               // [top_k + 1]
  int32_t* blocks = reinterpret_cast<int32_t*>(prefix + g.top_k + 1);  // [top_k]
  __shared__ int nb_shared;
  const int64_t row = blockIdx.x, t = row / g.hq;
  const int r = int(row % g.hq) / (g.hq / g.hkv);
  const int64_t kb = lists.key_begin[t];
  if (threadIdx.x == 0) {
    nb_shared = SortedSelection(topk + (int64_t(r) * g.total_q + t) * g.top_k, g.top_k, g.bk, lists.position[t], blocks,
                                prefix);
  }
  for (int c = threadIdx.x; c < g.d; c += kThreads) qs[c] = q[row * g.d + c];
  for (int c = threadIdx.x; c < g.dv; c += kThreads) dos[c] = dout[row * g.dv + c];
  __syncthreads();
  const int nb = nb_shared;
  const int64_t n = prefix[nb];
  const double row_lse = lse[row], row_delta = delta[row];
  double sum[kDimsPerThread] = {};
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int cnt = int(n - j0 < kThreads ? n - j0 : kThreads);
    if (threadIdx.x < cnt) {
      const int64_t key_row = (kb + GatheredKey(j0 + threadIdx.x, blocks, prefix, nb, g.bk)) * g.hkv + r;
      double p;
      ds[threadIdx.x] =
          ScoreGradient(qs, k + key_row * g.d, dos, v + key_row * g.dv, g, row_lse, row_delta, dlse, row, &p);
      key_rows[threadIdx.x] = key_row;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (c < g.d) {
        for (int jj = 0; jj < cnt; ++jj) sum[i] += ds[jj] * k[key_rows[jj] * g.d + c];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < g.d) dq[row * g.d + c] = g.scale * sum[i];
  }
}
// docs:end gpu-exact-backward-rows

// docs:begin gpu-exact-backward-keys One block per key row (s, r): its contributors (t ascending, the group's heads
// ascending for each) in tiles of kThreads (t, h) pairs. Each thread recomputes one pair's dS and P (a key past the
// query's position is skipped, as the reference skips it); then the thread of dim c adds dS * q[t, h, c] and
// P * dout[t, h, c] over the tile's pairs in order.
__global__ void __launch_bounds__(kThreads)
    BackwardKeysKernel(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                       TrainingLists lists, TrainingGeometry g, const double* lse, const double* delta, double* dk,
                       double* dv) {
  extern __shared__ double keys_smem[];
  double* ks = keys_smem;                                     // [D]
  double* vs = ks + g.d;                                      // [Dv]
  double* ds = vs + g.dv;                                     // [kThreads]
  double* ps = ds + kThreads;                                 // [kThreads]
  int64_t* rows = reinterpret_cast<int64_t*>(ps + kThreads);  // [kThreads]: t * Hq + h, or -1 (key not visible)
  const int64_t key_row = blockIdx.x, s = key_row / g.hkv;
  const int r = int(key_row % g.hkv), group = g.hq / g.hkv;
  const int32_t b = lists.key_block[s];
  const int64_t key_pos = lists.block_first_pos[b] + (s - lists.block_first_key[b]);
  const int64_t first = lists.group_offsets[int64_t(r) * g.num_blocks + b];
  const int64_t pairs = (lists.group_offsets[int64_t(r) * g.num_blocks + b + 1] - first) * group;
  for (int c = threadIdx.x; c < g.d; c += kThreads) ks[c] = k[key_row * g.d + c];
  for (int c = threadIdx.x; c < g.dv; c += kThreads) vs[c] = v[key_row * g.dv + c];
  __syncthreads();
  double dk_sum[kDimsPerThread] = {}, dv_sum[kDimsPerThread] = {};
  for (int64_t i0 = 0; i0 < pairs; i0 += kThreads) {
    const int cnt = int(pairs - i0 < kThreads ? pairs - i0 : kThreads);
    if (threadIdx.x < cnt) {
      const int64_t i = i0 + threadIdx.x, t = lists.group_queries[first + i / group];
      const int64_t row = t * g.hq + r * group + i % group;
      if (key_pos <= lists.position[t]) {
        double p;
        ds[threadIdx.x] =
            ScoreGradient(q + row * g.d, ks, dout + row * g.dv, vs, g, lse[row], delta[row], dlse, row, &p);
        ps[threadIdx.x] = p;
        rows[threadIdx.x] = row;
      } else {
        rows[threadIdx.x] = -1;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int c = threadIdx.x + i * kThreads;
      for (int jj = 0; jj < cnt; ++jj) {
        if (rows[jj] < 0) continue;
        if (c < g.d) dk_sum[i] += ds[jj] * q[rows[jj] * g.d + c];
        if (c < g.dv) dv_sum[i] += ps[jj] * dout[rows[jj] * g.dv + c];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < g.d) dk[key_row * g.d + c] = g.scale * dk_sum[i];
    if (c < g.dv) dv[key_row * g.dv + c] = dv_sum[i];
  }
}
// docs:end gpu-exact-backward-keys

// docs:begin gpu-exact-kl-rows One block per (t, r), three walks over the key set in tiles of kThreads keys (the
// threads compute the tile's values, thread 0 folds them in ascending order): the first maximum m of the index scores
// x, then l = sum exp(x - m) and ilse = m + log(l) (CanonicalLogSumExp); then per key pbar (Teacher), log rho = x -
// ilse, the KL term pbar * (log pbar - log rho) (thread 0 adds it unless pbar = 0) and g = (exp(log rho) - pbar) / N,
// which the thread of dim c multiplies into index_k[j, c] and adds in key order: dqi = index_scale * (sum_j g_j
// index_k[j]).
__global__ void __launch_bounds__(kThreads)
    KlRowsKernel(const double* q, const double* k, const double* index_q, const double* index_k, const int32_t* topk,
                 TrainingLists lists, TrainingGeometry g, const double* lse, double* ilse, double* row_kl,
                 double* dqi) {
  extern __shared__ double kl_rows_smem[];
  double* iqs = kl_rows_smem;                                          // [Di]
  double* xs = iqs + g.di;                                             // [kThreads]: x, then pbar
  double* terms = xs + kThreads;                                       // [kThreads]
  double* gs = terms + kThreads;                                       // [kThreads]
  int64_t* keys = reinterpret_cast<int64_t*>(gs + kThreads);           // [kThreads]: key rows
  int64_t* prefix = keys + kThreads;                                   // [top_k + 1]
  int32_t* blocks = reinterpret_cast<int32_t*>(prefix + g.top_k + 1);  // [top_k]
  __shared__ int nb_shared;
  __shared__ double m_shared, ilse_shared;
  const int64_t work = blockIdx.x, t = work / g.hkv;
  const int r = int(work % g.hkv);
  const int64_t kb = lists.key_begin[t];
  if (threadIdx.x == 0) {
    nb_shared = SortedSelection(topk + (int64_t(r) * g.total_q + t) * g.top_k, g.top_k, g.bk, lists.position[t], blocks,
                                prefix);
  }
  for (int c = threadIdx.x; c < g.di; c += kThreads) iqs[c] = index_q[work * g.di + c];
  __syncthreads();
  const int nb = nb_shared;
  const int64_t n = prefix[nb];
  const auto key_of = [&](int64_t j) { return kb + GatheredKey(j, blocks, prefix, nb, g.bk); };

  double m = 0.0;  // thread 0's: m = x[0], then x[j] > m ? x[j] : m (CanonicalLogSumExp)
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int cnt = int(n - j0 < kThreads ? n - j0 : kThreads);
    if (threadIdx.x < cnt) xs[threadIdx.x] = IndexScore(iqs, index_k + key_of(j0 + threadIdx.x) * g.di, g);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int jj = 0; jj < cnt; ++jj) m = (j0 + jj == 0 || xs[jj] > m) ? xs[jj] : m;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) m_shared = m;
  __syncthreads();
  m = m_shared;
  double l = 0.0;  // thread 0's
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int cnt = int(n - j0 < kThreads ? n - j0 : kThreads);
    if (threadIdx.x < cnt) {
      terms[threadIdx.x] = CanonicalExp(IndexScore(iqs, index_k + key_of(j0 + threadIdx.x) * g.di, g) - m);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int jj = 0; jj < cnt; ++jj) l += terms[jj];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ilse_shared = m + CanonicalLog(l);
  __syncthreads();
  const double row_ilse = ilse_shared;

  double kl = 0.0;  // thread 0's
  double sum[kDimsPerThread] = {};
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int cnt = int(n - j0 < kThreads ? n - j0 : kThreads);
    if (threadIdx.x < cnt) {
      const int64_t s = key_of(j0 + threadIdx.x);
      const double pbar = Teacher(q, k, g, lse, t, r, s);
      const double log_rho = IndexScore(iqs, index_k + s * g.di, g) - row_ilse;
      xs[threadIdx.x] = pbar;
      terms[threadIdx.x] = pbar != 0.0 ? pbar * (CanonicalLog(pbar) - log_rho) : 0.0;
      gs[threadIdx.x] = (CanonicalExp(log_rho) - pbar) / g.rows_n;
      keys[threadIdx.x] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int jj = 0; jj < cnt; ++jj) {
        if (xs[jj] != 0.0) kl += terms[jj];
      }
    }
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (c < g.di) {
        for (int jj = 0; jj < cnt; ++jj) sum[i] += gs[jj] * index_k[keys[jj] * g.di + c];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < g.di) dqi[work * g.di + c] = g.index_scale * sum[i];
  }
  if (threadIdx.x == 0) {
    row_kl[work] = kl;
    ilse[work] = row_ilse;
  }
}
// docs:end gpu-exact-kl-rows

// docs:begin gpu-exact-kl-keys One block per key row s: its (t, r) contributors ascending, in tiles of kThreads. Each
// thread recomputes one row's g = (exp(x - ilse) - pbar) / N; the thread of dim c adds g * index_q[t, r, c] in order:
// dki = index_scale * (sum g index_q).
__global__ void __launch_bounds__(kThreads)
    KlKeysKernel(const double* q, const double* k, const double* index_q, const double* index_k, TrainingLists lists,
                 TrainingGeometry g, const double* lse, const double* ilse, double* dki) {
  extern __shared__ double kl_keys_smem[];
  double* iks = kl_keys_smem;                                 // [Di]
  double* gs = iks + g.di;                                    // [kThreads]
  int64_t* rows = reinterpret_cast<int64_t*>(gs + kThreads);  // [kThreads]: t * Hidx + r, or -1 (key not visible)
  const int64_t s = blockIdx.x;
  const int32_t b = lists.key_block[s];
  const int64_t key_pos = lists.block_first_pos[b] + (s - lists.block_first_key[b]);
  const int64_t first = lists.block_offsets[b], count = lists.block_offsets[b + 1] - first;
  for (int c = threadIdx.x; c < g.di; c += kThreads) iks[c] = index_k[s * g.di + c];
  __syncthreads();
  double sum[kDimsPerThread] = {};
  for (int64_t i0 = 0; i0 < count; i0 += kThreads) {
    const int cnt = int(count - i0 < kThreads ? count - i0 : kThreads);
    if (threadIdx.x < cnt) {
      const int64_t row = lists.block_rows[first + i0 + threadIdx.x], t = row / g.hkv;
      if (key_pos <= lists.position[t]) {
        const double x = IndexScore(index_q + row * g.di, iks, g);
        gs[threadIdx.x] = (CanonicalExp(x - ilse[row]) - Teacher(q, k, g, lse, t, int(row % g.hkv), s)) / g.rows_n;
        rows[threadIdx.x] = row;
      } else {
        rows[threadIdx.x] = -1;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (c < g.di) {
        for (int jj = 0; jj < cnt; ++jj) {
          if (rows[jj] >= 0) sum[i] += gs[jj] * index_q[rows[jj] * g.di + c];
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < g.di) dki[s * g.di + c] = g.index_scale * sum[i];
  }
}
// docs:end gpu-exact-kl-keys

// Launches `kernel` on `blocks` blocks of kThreads with `smem` bytes of dynamic shared memory (opted in past 48 KiB).
template <typename Kernel, typename... Args>
cudaError_t Launch(Kernel kernel, int64_t blocks, size_t smem, Args... args) {
  if (blocks <= 0) return cudaSuccess;
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
  }
  kernel<<<unsigned(blocks), kThreads, smem>>>(args...);
  return cudaGetLastError();
}

}  // namespace

cudaError_t ExactTrainingDelta(const double* dout, const double* out, const TrainingGeometry& g, double* delta) {
  const int64_t rows = g.total_q * g.hq;
  if (rows <= 0) return cudaSuccess;
  DeltaKernel<<<unsigned((rows + kThreads - 1) / kThreads), kThreads>>>(dout, out, g, delta);
  return cudaGetLastError();
}

cudaError_t ExactBackwardRows(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                              const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g,
                              const double* lse, const double* delta, double* dq) {
  return Launch(BackwardRowsKernel, g.total_q * g.hq, RowSmemBytes(g.d + g.dv + kThreads, g.top_k), q, k, v, dout, dlse,
                topk, lists, g, lse, delta, dq);
}

cudaError_t ExactBackwardKeys(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                              const TrainingLists& lists, const TrainingGeometry& g, const double* lse,
                              const double* delta, double* dk, double* dv) {
  const size_t smem = size_t(g.d + g.dv + 2 * kThreads) * sizeof(double) + kThreads * sizeof(int64_t);
  return Launch(BackwardKeysKernel, g.total_k * g.hkv, smem, q, k, v, dout, dlse, lists, g, lse, delta, dk, dv);
}

cudaError_t ExactKlRows(const double* q, const double* k, const double* index_q, const double* index_k,
                        const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g, const double* lse,
                        double* ilse, double* row_kl, double* dqi) {
  return Launch(KlRowsKernel, g.total_q * g.hkv, RowSmemBytes(g.di + 3 * kThreads, g.top_k), q, k, index_q, index_k,
                topk, lists, g, lse, ilse, row_kl, dqi);
}

cudaError_t ExactKlKeys(const double* q, const double* k, const double* index_q, const double* index_k,
                        const TrainingLists& lists, const TrainingGeometry& g, const double* lse, const double* ilse,
                        double* dki) {
  const size_t smem = size_t(g.di + kThreads) * sizeof(double) + kThreads * sizeof(int64_t);
  return Launch(KlKeysKernel, g.total_k, smem, q, k, index_q, index_k, lists, g, lse, ilse, dki);
}

}  // namespace msa::gpu
