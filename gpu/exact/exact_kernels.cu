// Exact mode (SPEC section 4): the canonical FP64 order, bit for bit. Compiled with --fmad=false, so every
// `a * b + c` below is a rounded multiply then a rounded add, as on the host with -ffp-contract=off. The dot
// products, exp and log are the reference's own functions (reference/canonical.h, reference/exp_log.h).
// Parallelism is only ever across independent rows, dots or dims; every sum keeps the reference's order.
#include <cmath>

#include "gpu/common/device_query.h"
#include "gpu/common/fp16_score.cuh"
#include "gpu/exact/canonical_dot.cuh"
#include "gpu/exact/exact_tiling.h"
#include "gpu/kernels.h"
#include "gpu/topk/sorted_selection.cuh"
#include "reference/canonical.h"

namespace msa::gpu {
namespace {

using exact::kMaxPairs;
using exact::kMaxTile;
using exact::kThreads;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline double NegInf() { return -INFINITY; }

__device__ inline bool Finite(double x) { return isfinite(x); }

// CanonicalDot(a, b, n) computed by lanes 0..7 of a warp: lane L sums P[L] over i = L, L+8, ... ascending,
// then the fixed tree ((P0+P1)+(P2+P3)) + ((P4+P5)+(P6+P7)). The result is valid in lane 0. All lanes call.
__device__ double WarpCanonicalDot(const double* a, const double* b, int64_t n, int lane) {
  double p = 0.0;
  if (lane < 8) {
    for (int64_t i = lane; i < n; i += 8) p += a[i] * b[i];
  }
  const double q1 = p + __shfl_down_sync(kFullMask, p, 1);    // lanes 0,2,4,6: P0+P1, P2+P3, P4+P5, P6+P7
  const double q2 = q1 + __shfl_down_sync(kFullMask, q1, 2);  // lanes 0,4
  return q2 + __shfl_down_sync(kFullMask, q2, 4);             // lane 0
}

// ---- index branch ----

// Tile: tm rows x tn keys; the rows' and keys' full index vectors in shared memory (rows padded by one double
// so a warp reading 32 keys' element d hits distinct banks). One thread per (row, key) dot at a time.
__global__ void __launch_bounds__(kThreads)
    TokenScoresKernel(const double* index_q, const double* index_k, ChunkGeometry g, double scale, double* scratch,
                      int64_t ld, int tm, int tn) {
  extern __shared__ double smem[];
  const int di = g.di, stride = di + 1;
  double* as = smem;
  double* bs = smem + int64_t(tm) * stride;
  const int64_t rows = g.nq * g.hidx;
  const int64_t row0 = int64_t(blockIdx.y) * tm, key0 = int64_t(blockIdx.x) * tn;
  const int64_t row_last = (row0 + tm < rows ? row0 + tm : rows) - 1;
  const int64_t max_pos = g.pos0 + row_last / g.hidx;
  if (key0 > max_pos) return;
  for (int64_t e = threadIdx.x; e < int64_t(tm) * di; e += blockDim.x) {
    const int64_t rr = e / di, dd = e % di, row = row0 + rr;
    as[rr * stride + dd] = row < rows ? index_q[(g.t0 * g.hidx + row) * di + dd] : 0.0;
  }
  for (int64_t e = threadIdx.x; e < int64_t(tn) * di; e += blockDim.x) {
    const int64_t kk = e / di, dd = e % di, key = key0 + kk;
    bs[kk * stride + dd] = key <= max_pos ? index_k[(g.key_begin + key) * di + dd] : 0.0;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < tm * tn; p += blockDim.x) {
    const int rr = p / tn, kk = p % tn;
    const int64_t row = row0 + rr, key = key0 + kk;
    if (row < rows && key <= g.pos0 + row / g.hidx) {
      scratch[row * ld + key] = Dot(as + int64_t(rr) * stride, bs + int64_t(kk) * stride, di) * scale;
    }
  }
}

__global__ void FullBlockMeansKernel(const double* index_k, ChunkGeometry g, double* means) {
  const int64_t full = g.k_len / g.bk;
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= full * g.di) return;
  const int64_t blk = i / g.di, d = i % g.di;
  double sum = 0.0;
  for (int64_t s = 0; s < g.bk; ++s) sum += index_k[(g.key_begin + blk * g.bk + s) * g.di + d];
  means[i] = sum / double(g.bk);
}

__global__ void PartialMeansKernel(const double* index_k, ChunkGeometry g, double* pmeans) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= g.nq * g.di) return;
  const int64_t t_local = i / g.di, d = i % g.di;
  const int64_t pos = g.pos0 + t_local, first = (pos / g.bk) * g.bk, count = pos + 1 - first;
  if (count >= g.bk) return;  // a full local block uses the full-block mean
  double sum = 0.0;
  for (int64_t s = 0; s < count; ++s) sum += index_k[(g.key_begin + first + s) * g.di + d];
  pmeans[i] = sum / double(count);
}

__device__ void RecordBad(unsigned long long* bad_row, const ChunkGeometry& g, int64_t row) {
  const int64_t t = g.t0 + row / g.hidx, r = row % g.hidx;
  atomicMin(bad_row, static_cast<unsigned long long>(t * g.hidx + r));
}

// One warp per (chunk row, block). Max: the first maximum in ascending key order (std::max_element).
// Lse: that max m, then l = sum exp(x - m) in ascending key order (lane 0 adds the lanes' terms in order),
// m + log(l). Mean: the canonical dot of the index query with the block's mean key.
__global__ void PoolKernel(int pooling, const double* scratch, int64_t ld, const double* index_q, const double* means,
                           const double* pmeans, ChunkGeometry g, double scale, bool check_tokens, int64_t num_blocks,
                           double* bs, unsigned long long* bad_row) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t rows = g.nq * g.hidx;
  if (warp >= rows * num_blocks) return;  // whole warps leave together
  const int64_t row = warp / num_blocks, blk = warp % num_blocks;
  const int64_t t_local = row / g.hidx;
  const int64_t pos = g.pos0 + t_local;
  if (blk > pos / g.bk) return;
  const int64_t first = blk * g.bk;
  const int64_t last = (first + g.bk - 1 < pos ? first + g.bk - 1 : pos);  // inclusive
  double value;
  bool finite = true;
  if (pooling == kPoolMean) {
    const int64_t count = last + 1 - first;
    const double* mean = count == g.bk ? means + blk * g.di : pmeans + t_local * g.di;
    const double* query = index_q + (g.t0 * g.hidx + row) * g.di;
    value = WarpCanonicalDot(query, mean, g.di, lane) * scale;
    value = __shfl_sync(kFullMask, value, 0);
  } else {
    const double* x = scratch + row * ld;
    double best = 0.0;
    int64_t best_at = INT64_MAX;
    for (int64_t s = first + lane; s <= last; s += 32) {
      const double v = x[s];
      if (check_tokens && !Finite(v)) finite = false;
      if (best_at == INT64_MAX || v > best) {  // ascending within a lane: keep the first maximum
        best = v;
        best_at = s;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const double other = __shfl_xor_sync(kFullMask, best, offset);
      const int64_t other_at = __shfl_xor_sync(kFullMask, best_at, offset);
      if (other_at != INT64_MAX && (best_at == INT64_MAX || other > best || (other == best && other_at < best_at))) {
        best = other;
        best_at = other_at;
      }
    }
    value = best;
    if (pooling == kPoolLse) {
      const double m = best;
      double l = 0.0;
      for (int64_t base = first; base <= last; base += 32) {
        const int64_t s = base + lane;
        const double e = s <= last ? CanonicalExp(x[s] - m) : 0.0;
        const int64_t count = last + 1 - base < 32 ? last + 1 - base : 32;
        for (int j = 0; j < 32; ++j) {
          const double term = __shfl_sync(kFullMask, e, j);
          if (j < count) l += term;  // every lane adds the same terms in the same order
        }
      }
      value = m + CanonicalLog(l);
    }
  }
  finite = __all_sync(kFullMask, finite);
  if (lane == 0) {
    if (!finite || !Finite(value)) RecordBad(bad_row, g, row);
    bs[row * g.max_blocks + blk] = value;
  }
}

// docs:begin gpu-exact-index-lse One block per chunk row: the selected blocks' token scores x in canonical order
// (threads split the dots), gathered in ascending block id, keys ascending. The terms whose logsumexp is index_lse:
// native, the token scores themselves; score_format fp16, one l_b = fp16(M[b]) + log(sum exp(x - M[b])) per selected
// block (thread i: block i's first maximum M, then, after the threads split the exps, its sum in ascending key order).
// Then the reference's CanonicalLogSumExp of the terms: their first maximum m (thread 0), exp(term - m) (threads
// split), the sum in ascending order and m + log(sum) (thread 0).
__global__ void IndexLseKernel(const double* index_q, const double* index_k, const int32_t* topk, ChunkGeometry g,
                               double scale, int score_format, double* work, double* index_lse) {
  extern __shared__ int64_t ismem[];
  int64_t* prefix = ismem;                                               // [top_k + 1]
  double* block_terms = reinterpret_cast<double*>(ismem + g.top_k + 1);  // [top_k]: fp16: M[b], then l_b
  int32_t* blocks = reinterpret_cast<int32_t*>(block_terms + g.top_k);   // [top_k]
  __shared__ int nb_shared;
  __shared__ double m_shared;
  const int64_t row = blockIdx.x;
  const int64_t t_local = row / g.hidx, r = row % g.hidx, t = g.t0 + t_local;
  const int64_t pos = g.pos0 + t_local;
  const int32_t* sel = topk + (r * g.total_q + t) * int64_t(g.top_k);
  if (threadIdx.x == 0) nb_shared = SortedSelection(sel, g.top_k, g.bk, pos, blocks, prefix);
  __syncthreads();
  const int nb = nb_shared;
  const int64_t n = prefix[nb];
  double* x = work + row * int64_t(g.top_k) * g.bk;  // [n]
  const double* query = index_q + (t * g.hidx + r) * g.di;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int64_t key = GatheredKey(j, blocks, prefix, nb, g.bk);
    x[j] = Dot(query, index_k + (g.key_begin + key) * g.di, g.di) * scale;
  }
  __syncthreads();
  double* terms = x;
  int64_t count = n;
  if (score_format == kScoresFp16) {
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
      double m = x[prefix[i]];
      for (int64_t j = prefix[i] + 1; j < prefix[i + 1]; ++j) m = m < x[j] ? x[j] : m;  // std::max_element
      block_terms[i] = m;
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      x[j] = CanonicalExp(x[j] - block_terms[GatheredBlock(j, prefix, nb)]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
      double l = 0.0;
      for (int64_t j = prefix[i]; j < prefix[i + 1]; ++j) l += x[j];
      block_terms[i] = Fp16Score(block_terms[i]) + CanonicalLog(l);
    }
    __syncthreads();
    terms = block_terms;
    count = nb;
  }
  if (threadIdx.x == 0) {
    double m = terms[0];
    for (int64_t j = 1; j < count; ++j) m = m < terms[j] ? terms[j] : m;  // std::max
    m_shared = m;
  }
  __syncthreads();
  const double m = m_shared;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) terms[j] = CanonicalExp(terms[j] - m);
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0.0;
    for (int64_t j = 0; j < count; ++j) l += terms[j];
    index_lse[r * g.total_q + t] = m + CanonicalLog(l);
  }
}
// docs:end gpu-exact-index-lse

// ---- main branch ----

// docs:begin gpu-exact-attend One block per (query, group, chunk of hg heads). Pass 1 finds each head's max
// score over the gathered keys (a max is order-free). Pass 2 recomputes the scores tile by tile in ascending
// key position, p = exp(s - m), and each (head, dim) thread adds p * v in that order, exactly as the
// reference's AttendRow; the thread of dim 0 also sums l.
__global__ void __launch_bounds__(kThreads)
    ExactAttendKernel(const double* q, const double* k, const double* v, const int32_t* topk, const int64_t* position,
                      const int64_t* key_begin, AttendGeometry g, double scale, double* out, double* lse, int hg,
                      int tk, int head_chunks) {
  extern __shared__ double smem[];
  const int d = g.d, dv = g.dv, group = g.hq / g.hkv;
  double* qs = smem;                                                   // [hg][d]
  double* ks = qs + int64_t(hg) * d;                                   // [tk][d + 1]
  double* vs = ks + int64_t(tk) * (d + 1);                             // [tk][dv]
  double* ps = vs + int64_t(tk) * dv;                                  // [hg][tk]
  double* ms = ps + int64_t(hg) * tk;                                  // [hg]
  double* ls = ms + hg;                                                // [hg]
  int64_t* keypos = reinterpret_cast<int64_t*>(ls + hg);               // [tk]
  int64_t* prefix = keypos + tk;                                       // [top_k + 1]
  int32_t* blocks = reinterpret_cast<int32_t*>(prefix + g.top_k + 1);  // [top_k]
  __shared__ int nb_shared;

  const int64_t bid = blockIdx.x;
  const int hc = int(bid % head_chunks);
  const int64_t rest = bid / head_chunks;
  const int r = int(rest % g.hkv);
  const int64_t t = rest / g.hkv;
  const int h0 = r * group + hc * hg;
  const int nh = group - hc * hg < hg ? group - hc * hg : hg;
  const int64_t pos = position[t], kb = key_begin[t];
  const int32_t* sel = topk + (int64_t(r) * g.total_q + t) * g.top_k;
  if (threadIdx.x == 0) nb_shared = SortedSelection(sel, g.top_k, g.bk, pos, blocks, prefix);
  for (int64_t e = threadIdx.x; e < int64_t(nh) * d; e += blockDim.x) {
    qs[e] = q[(t * g.hq + h0 + e / d) * d + e % d];
  }
  __syncthreads();
  const int nb = nb_shared;
  const int64_t n = prefix[nb];

  // Pass 1: the max score of each head.
  double best[kMaxPairs];
  for (int c = 0; c < kMaxPairs; ++c) best[c] = NegInf();
  for (int64_t j0 = 0; j0 < n; j0 += tk) {
    const int cnt = int(n - j0 < tk ? n - j0 : tk);
    if (threadIdx.x < cnt) keypos[threadIdx.x] = GatheredKey(j0 + threadIdx.x, blocks, prefix, nb, g.bk);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < int64_t(cnt) * d; e += blockDim.x) {
      const int64_t jj = e / d, dd = e % d;
      ks[jj * (d + 1) + dd] = k[((kb + keypos[jj]) * g.hkv + r) * d + dd];
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kMaxPairs; ++c) {
      const int p = threadIdx.x + c * kThreads;
      if (p < nh * tk && p % tk < cnt) {
        const int hh = p / tk, jj = p % tk;
        const double s = Dot(qs + int64_t(hh) * d, ks + int64_t(jj) * (d + 1), d) * scale;
        if (s > best[c]) best[c] = s;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int c = 0; c < kMaxPairs; ++c) {
    const int p = threadIdx.x + c * kThreads;
    if (p < nh * tk) ps[p] = best[c];
  }
  __syncthreads();
  if (threadIdx.x < nh) {
    double m = NegInf();
    for (int jj = 0; jj < tk; ++jj) m = ps[threadIdx.x * tk + jj] > m ? ps[threadIdx.x * tk + jj] : m;
    ms[threadIdx.x] = m;
  }
  __syncthreads();

  // Pass 2: p = exp(s - m); l and sum p * v in ascending key position.
  double acc[kMaxPairs], lsum[kMaxPairs];
  for (int i = 0; i < kMaxPairs; ++i) acc[i] = lsum[i] = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += tk) {
    const int cnt = int(n - j0 < tk ? n - j0 : tk);
    if (threadIdx.x < cnt) keypos[threadIdx.x] = GatheredKey(j0 + threadIdx.x, blocks, prefix, nb, g.bk);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < int64_t(cnt) * d; e += blockDim.x) {
      const int64_t jj = e / d, dd = e % d;
      ks[jj * (d + 1) + dd] = k[((kb + keypos[jj]) * g.hkv + r) * d + dd];
    }
    for (int64_t e = threadIdx.x; e < int64_t(cnt) * dv; e += blockDim.x) {
      const int64_t jj = e / dv, c = e % dv;
      vs[jj * dv + c] = v[((kb + keypos[jj]) * g.hkv + r) * dv + c];
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kMaxPairs; ++c) {
      const int p = threadIdx.x + c * kThreads;
      if (p < nh * tk && p % tk < cnt) {
        const int hh = p / tk, jj = p % tk;
        const double s = Dot(qs + int64_t(hh) * d, ks + int64_t(jj) * (d + 1), d) * scale;
        ps[p] = CanonicalExp(s - ms[hh]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxPairs; ++i) {
      const int e = threadIdx.x + i * kThreads;
      if (e < nh * dv) {
        const int hh = e / dv, c = e % dv;
        const double* p = ps + int64_t(hh) * tk;
        for (int jj = 0; jj < cnt; ++jj) {
          acc[i] += p[jj] * vs[int64_t(jj) * dv + c];
          if (c == 0) lsum[i] += p[jj];
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kMaxPairs; ++i) {
    const int e = threadIdx.x + i * kThreads;
    if (e < nh * dv && e % dv == 0) {
      const int hh = e / dv;
      ls[hh] = lsum[i];
      lse[t * g.hq + h0 + hh] = ms[hh] + CanonicalLog(lsum[i]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kMaxPairs; ++i) {
    const int e = threadIdx.x + i * kThreads;
    if (e < nh * dv) {
      const int hh = e / dv, c = e % dv;
      out[(t * g.hq + h0 + hh) * dv + c] = acc[i] / ls[hh];
    }
  }
}
// docs:end gpu-exact-attend

}  // namespace

cudaError_t ExactTokenScores(const double* index_q, const double* index_k, const ChunkGeometry& g, double scale,
                             double* scratch, int64_t ld) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  const exact::TokenPlan plan = exact::PlanTokens(g.di, size_t(CurrentDeviceCaps().max_shared_bytes));
  if (plan.tm == 0) return cudaErrorInvalidConfiguration;
  cudaError_t err =
      cudaFuncSetAttribute(TokenScoresKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(unsigned((g.pos0 + g.nq + plan.tn - 1) / plan.tn), unsigned((rows + plan.tm - 1) / plan.tm));
  TokenScoresKernel<<<grid, kThreads, plan.smem>>>(index_q, index_k, g, scale, scratch, ld, plan.tm, plan.tn);
  return cudaGetLastError();
}

cudaError_t ExactFullBlockMeans(const double* index_k, const ChunkGeometry& g, double* means) {
  const int64_t n = (g.k_len / g.bk) * g.di;
  if (n <= 0) return cudaSuccess;
  FullBlockMeansKernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads>>>(index_k, g, means);
  return cudaGetLastError();
}

cudaError_t ExactPartialMeans(const double* index_k, const ChunkGeometry& g, double* pmeans) {
  const int64_t n = g.nq * g.di;
  if (n <= 0) return cudaSuccess;
  PartialMeansKernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads>>>(index_k, g, pmeans);
  return cudaGetLastError();
}

cudaError_t ExactPool(int pooling, const double* scratch, int64_t ld, const double* index_q, const double* means,
                      const double* pmeans, const ChunkGeometry& g, double scale, bool check_tokens, double* bs,
                      unsigned long long* bad_row) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  const int64_t num_blocks = (g.pos0 + g.nq - 1) / g.bk + 1;
  const int64_t threads = rows * num_blocks * 32;
  PoolKernel<<<unsigned((threads + kThreads - 1) / kThreads), kThreads>>>(
      pooling, scratch, ld, index_q, means, pmeans, g, scale, check_tokens, num_blocks, bs, bad_row);
  return cudaGetLastError();
}

cudaError_t ExactIndexLse(const double* index_q, const double* index_k, const int32_t* topk, const ChunkGeometry& g,
                          double scale, int score_format, double* work, double* index_lse) {
  const int64_t rows = g.nq * g.hidx;
  if (rows <= 0) return cudaSuccess;
  const size_t smem =
      size_t(g.top_k + 1) * sizeof(int64_t) + size_t(g.top_k) * sizeof(double) + size_t(g.top_k) * sizeof(int32_t);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(IndexLseKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
  }
  IndexLseKernel<<<unsigned(rows), 128, smem>>>(index_q, index_k, topk, g, scale, score_format, work, index_lse);
  return cudaGetLastError();
}

cudaError_t ExactAttend(const double* q, const double* k, const double* v, const int32_t* topk, const int64_t* position,
                        const int64_t* key_begin, const AttendGeometry& g, double scale, double* out, double* lse) {
  if (g.total_q <= 0) return cudaSuccess;
  const int group = g.hq / g.hkv;
  const exact::AttendPlan plan =
      exact::PlanAttend(g.d, g.dv, group, g.top_k, size_t(CurrentDeviceCaps().max_shared_bytes));
  if (plan.tk == 0) return cudaErrorInvalidConfiguration;
  cudaError_t err =
      cudaFuncSetAttribute(ExactAttendKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem));
  if (err != cudaSuccess) return err;
  const int head_chunks = (group + plan.hg - 1) / plan.hg;
  const int64_t blocks = g.total_q * g.hkv * head_chunks;
  ExactAttendKernel<<<unsigned(blocks), kThreads, plan.smem>>>(q, k, v, topk, position, key_begin, g, scale, out, lse,
                                                               plan.hg, plan.tk, head_chunks);
  return cudaGetLastError();
}

}  // namespace msa::gpu
