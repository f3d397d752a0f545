// The gpu backend's training kernels (SPEC section 8), as plain launchers over device pointers: exact mode
// (training_exact.cu, the canonical FP64 order of reference/training.cc, bit for bit) and bf16 / fp16
// (training_lowp.cu, mma.sync with fp32 accumulation). Every launcher enqueues on the default stream and returns
// cudaGetLastError() after its launches. No kernel uses atomics: rows (t, h) and (t, r) run in parallel for dq and dqi,
// and each key row's dk, dv and dki are summed inside one block over the key's contributor list (TrainingLists) in
// ascending (t, h) / (t, r) order, so every output is the same bits on every run.
//
// Shapes (device arrays, packed): q [total_q, Hq, D], k [total_k, Hkv, D], v [total_k, Hkv, Dv],
// dout [total_q, Hq, Dv], dlse [total_q, Hq] (nullptr: none), index_q [total_q, Hidx, Di], index_k [total_k, Di],
// topk [Hkv, total_q, top_k] (int32, -1 padded), exact inputs as doubles, low-precision ones as bf16 / fp16 bits.
#ifndef MSA_GPU_TRAINING_TRAINING_KERNELS_H_
#define MSA_GPU_TRAINING_TRAINING_KERNELS_H_

#include <cstdint>

#include <cuda_runtime.h>

namespace msa::gpu {

// The sizes and scales of one training call. num_blocks: sum over the sequences of ceil(k_len / block_size) (the
// batch's key blocks, numbered sequence after sequence); rows_n: N = Hidx * max(total_q, 1), the KL's divisor.
struct TrainingGeometry {
  int64_t total_q = 0, total_k = 0, num_blocks = 0;
  int hq = 0, hkv = 0, d = 0, dv = 0, di = 0, bk = 0, top_k = 0;
  double scale = 0.0, index_scale = 0.0, rows_n = 1.0;
};

// Where each query sits and who reaches each key (built on the host by training.cc). A key block
// B is a block of one sequence; its contributors are the (query t, group r) whose selection holds it:
//   by group: group_queries[group_offsets[r * num_blocks + B] ...) = those t, ascending (the (t, h) pairs of dk and dv
//     are these t, each with the group's heads ascending);
//   by block: block_rows[block_offsets[B] ...) = t * Hkv + r over every group, ascending (t, then r: the order of
//     dki), with block_slots the slot of B in that row's selection.
// A key past a query's position is not in that query's key set even when its block is: kernels skip it.
struct TrainingLists {
  const int64_t* position = nullptr;         // [total_q]: the query's key position
  const int64_t* key_begin = nullptr;        // [total_q]: its sequence's first key row
  const int32_t* key_block = nullptr;        // [total_k]: the key block B of each key row
  const int64_t* block_first_key = nullptr;  // [num_blocks]: the first key row of B
  const int64_t* block_first_pos = nullptr;  // [num_blocks]: its key position in the sequence
  const int32_t* block_keys = nullptr;       // [num_blocks]: the keys of B (block_size, or fewer at a sequence's end)
  const int64_t* group_offsets = nullptr;    // [Hkv * num_blocks + 1]
  const int32_t* group_queries = nullptr;    // [group entries]
  const int64_t* block_offsets = nullptr;    // [num_blocks + 1]
  const int64_t* block_rows = nullptr;       // [block entries]
  const int32_t* block_slots = nullptr;      // [block entries]
};

// ---- exact mode (compiled with --fmad=false; lse and out are ExactAttend's, the forward's own bits) ----
// delta[t * Hq + h] = CanonicalDot(dout[t, h], out[t, h], Dv).
cudaError_t ExactTrainingDelta(const double* dout, const double* out, const TrainingGeometry& g, double* delta);
// dq [total_q, Hq, D]: one block per row (t, h), its key set in ascending key position, dS recomputed as
// reference/training.cc's ScoreGradient, dq = scale * (sum_j dS_j k_j).
cudaError_t ExactBackwardRows(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                              const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g,
                              const double* lse, const double* delta, double* dq);
// dk, dv [total_k, Hkv, D|Dv]: one block per key row (s, r) over its contributors (t ascending, then h).
cudaError_t ExactBackwardKeys(const double* q, const double* k, const double* v, const double* dout, const double* dlse,
                              const TrainingLists& lists, const TrainingGeometry& g, const double* lse,
                              const double* delta, double* dk, double* dv);
// One block per (t, r): ilse [total_q * Hidx] (row t * Hidx + r), row_kl [total_q * Hidx] (the row's KL sum over
// its keys ascending, pbar = 0 skipped) and dqi [total_q, Hidx, Di], with lse [total_q, Hq] the forward's.
cudaError_t ExactKlRows(const double* q, const double* k, const double* index_q, const double* index_k,
                        const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g, const double* lse,
                        double* ilse, double* row_kl, double* dqi);
// dki [total_k, Di]: one block per key row over its (t, r) contributors, ascending.
cudaError_t ExactKlKeys(const double* q, const double* k, const double* index_q, const double* index_k,
                        const TrainingLists& lists, const TrainingGeometry& g, const double* lse, const double* ilse,
                        double* dki);

// ---- low precision (bf16 / fp16 inputs, mma.sync m16n8k16 with fp32 accumulation) ----
// Dims up to kLowpMaxDim (gpu/common/geometry.h). The per-row statistics the key pass reuses: m, l (the softmax max
// and sum of exp(s - m), s = dot * scale in fp32) and Delta = sum_j p_j dP_j, each [total_q * Hq].
// dq [total_q, Hq, D]: one warp per (t, r, 16 heads of the group).
cudaError_t LowpBackwardRows(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                             const uint16_t* dlse, const int32_t* topk, const TrainingLists& lists,
                             const TrainingGeometry& g, float* row_m, float* row_l, float* row_delta, double* dq);
// dk, dv [total_k, Hkv, D|Dv]: one warp per (key block, group, 16 keys of the block) over the block's (t, h) rows in
// tiles of 16, ascending.
cudaError_t LowpBackwardKeys(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* dout,
                             const uint16_t* dlse, const TrainingLists& lists, const TrainingGeometry& g,
                             const float* row_m, const float* row_l, const float* row_delta, double* dk, double* dv);
// One warp per (t, r): teacher_lse [total_q, Hq] (nullptr: not written), ilse and row_kl [total_q * Hidx], dqi
// [total_q, Hidx, Di], and diff [Hidx, total_q, top_k, block_size] = round(rho - pbar) to the storage format for every
// selected key of the row (its selection slot, its offset in the block; entries of keys past the query's position are
// not written), which LowpKlKeys reads.
cudaError_t LowpKlRows(int lowp, const uint16_t* q, const uint16_t* k, const uint16_t* index_q, const uint16_t* index_k,
                       const int32_t* topk, const TrainingLists& lists, const TrainingGeometry& g, double* teacher_lse,
                       double* ilse, double* row_kl, uint16_t* diff, double* dqi);
// dki [total_k, Di]: one warp per (key block, 16 keys of the block) over the block's (t, r) rows in tiles of 16.
cudaError_t LowpKlKeys(int lowp, const uint16_t* index_q, const uint16_t* diff, const TrainingLists& lists,
                       const TrainingGeometry& g, double* dki);

}  // namespace msa::gpu

#endif  // MSA_GPU_TRAINING_TRAINING_KERNELS_H_
