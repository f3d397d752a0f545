// The plain data the gpu backend's kernels, its planner and its pipeline share: input codes, the geometry of an
// index-branch chunk and of a main-branch launch. No CUDA types: the planner (gpu/common/kernel_plan.h) builds
// and is tested without nvcc.
//
// Shapes (device arrays are packed and widened or converted by WidenToDouble / RoundToLowp first):
//   index_q [total_q, Hidx, Di]   index_k [total_k, Di]   q [total_q, Hq, D]   k, v [total_k, Hkv, D|Dv]
//   topk [Hidx, total_q, top_k] (int32, -1 padded)         position / key_begin [total_q] (int64)
// A "chunk" is a run of queries [t0, t0 + nq) of ONE sequence; its rows are (t - t0) * Hidx + r, and the
// query of row `row` sits at key position pos0 + row / Hidx. A "batched chunk" (ChunkGeometry::sequences set:
// decode batches, IsDecodeBatch) is several sequences' chunks in one launch, each CTA inside one sequence.
#ifndef MSA_GPU_COMMON_GEOMETRY_H_
#define MSA_GPU_COMMON_GEOMETRY_H_

#include <cstdint>

namespace msa::gpu {

// Input dtype codes, as msa::DType orders its floating types.
enum InputType : int { kInF64 = 0, kInF32 = 1, kInBF16 = 2, kInF16 = 3 };
// Low-precision storage formats.
enum LowpType : int { kLowpBF16 = 0, kLowpF16 = 1 };
// Block pooling codes, as msa::Pooling.
enum PoolCode : int { kPoolMax = 0, kPoolLse = 1, kPoolMean = 2 };
// Block score formats, as msa::ScoreFormat (kScoresFp16: max pooling only, SPEC section 2).
enum ScoreCode : int { kScoresNative = 0, kScoresFp16 = 1 };

// Largest head dim the low-precision kernels take.
inline constexpr int kLowpMaxDim = 256;

// One sequence's chunk inside a batched chunk (the per-sequence fields of ChunkGeometry).
struct SequenceChunk {
  int64_t t0 = 0, nq = 0, pos0 = 0, key_begin = 0, k_len = 0;
};

struct ChunkGeometry {
  int64_t t0 = 0;         // first global query row of the chunk
  int64_t nq = 0;         // queries in the chunk
  int64_t pos0 = 0;       // key position of the chunk's first query
  int64_t key_begin = 0;  // first key row of the sequence
  int64_t k_len = 0;      // keys of the sequence
  int64_t total_q = 0;
  int hidx = 0, di = 0, bk = 0, top_k = 0, init_blocks = 0;
  int local_blocks = 1;    // the forced trailing blocks of a row (Config::local_blocks; gpu/topk/rank_row.cuh)
  int64_t max_blocks = 0;  // row stride of the chunk's block-score buffer
  // A batched chunk (taken by BlockMaxScores, BlockMaxScoresWgmma, RankTopK and RankTopKThreshold only):
  // `sequences` (device memory, [num_sequences], ascending t0, each nq >= 1) holds the sequences' own chunks, and
  // the fields above bound them: t0 = sequences[0].t0, whose rows start the block-score buffer (sequence s's rows
  // are (t - t0) * Hidx + r too, so the buffer holds the batch's queries in order), nq = the most queries of one
  // sequence, pos0 = (the latest position of any query) - nq + 1 (>= 0), so that (pos0 + nq - 1) / bk + 1 is the
  // most blocks of any row; key_begin = 0 and k_len = the batch's keys (the extent of index_k, which the wgmma
  // kernel's bulk tensor copies map). The buffer has at most num_sequences * nq * Hidx rows.
  // Each CTA takes its sequence from a grid dimension (at most 65535 sequences) and then runs the one-chunk code
  // on that sequence's chunk: the same bits as launching per sequence. nullptr: a plain chunk.
  const SequenceChunk* sequences = nullptr;
  int64_t num_sequences = 1;
};

// Whether a batch's index branch may run as one batched chunk: a decode batch, where every sequence has at most
// kDecodeBatchMaxQueries queries (decode and multi-token decode), with at most 65535 sequences holding queries (the
// grid dimension of a batched chunk).
inline constexpr int64_t kDecodeBatchMaxQueries = 16;
inline bool IsDecodeBatch(int64_t longest_q_len, int64_t sequences_with_queries) {
  return longest_q_len >= 1 && longest_q_len <= kDecodeBatchMaxQueries && sequences_with_queries >= 1 &&
         sequences_with_queries <= 65535;
}

// Main branch over the selection, every query of the batch in one launch.
struct AttendGeometry {
  int64_t total_q = 0;
  int hq = 0, hkv = 0, d = 0, dv = 0, bk = 0, top_k = 0;
};

// The main branch's outputs on the device: out [total_q, Hq, Dv] and lse [total_q, Hq], in one of two formats. A
// low-precision main branch computes both in fp32 (out = O / l, lse = m + log l): kFp64 widens each value exactly (the
// backend's outputs; exact mode's only format, its values FP64 throughout), kBf16Fp32 rounds out to bf16 (to nearest,
// ties to even) and stores lse as it is, a quarter and half of kFp64's bytes (the benchmarks' format, as the official
// kernels write out and lse).
enum class OutputFormat { kFp64, kBf16Fp32 };
struct DeviceAttendOutputs {
  OutputFormat format = OutputFormat::kFp64;
  void* out = nullptr;  // kFp64: double; kBf16Fp32: bf16 bits (uint16_t)
  void* lse = nullptr;  // kFp64: double; kBf16Fp32: float
};
// Bytes of one out and one lse value in `format`.
inline int OutValueBytes(OutputFormat format) { return format == OutputFormat::kFp64 ? 8 : 2; }
inline int LseValueBytes(OutputFormat format) { return format == OutputFormat::kFp64 ? 8 : 4; }
inline DeviceAttendOutputs Fp64Outputs(double* out, double* lse) { return {OutputFormat::kFp64, out, lse}; }
inline DeviceAttendOutputs Bf16Fp32Outputs(uint16_t* out, float* lse) { return {OutputFormat::kBf16Fp32, out, lse}; }

// The bound of BlockMaxScoresFp8: |fp8 - exact| <= kFp8IndexRelBound * scale * max over the block's visible keys of
// sum_i |q_i k_i|. Hopper's fp8 MMA keeps about 13-14 significant bits when it adds a k32 step to its accumulator
// (DeepSeek-V3, section 3.3.2: "around 14 bits"; SageAttention2: a 22-bit accumulator with 13 mantissa bits). Di <= 128
// is at most 4 steps, each losing less than 2^-13 of a partial sum bounded by sum_i |q_i k_i|: 2^-11; doubled for the
// alignment of the products inside a step and the fp32 rounding of the reference (about Di * 2^-24). A block max
// moves by at most the largest error of the scores it is the max of.
inline constexpr float kFp8IndexRelBound = 1.0f / 1024.0f;

}  // namespace msa::gpu

#endif  // MSA_GPU_COMMON_GEOMETRY_H_
