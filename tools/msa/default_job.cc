#include "tools/msa/default_job.h"

#include <cmath>

namespace msa {
namespace {

constexpr int32_t kContext = 16384;
constexpr int32_t kDecodeQueries = 4;
constexpr int64_t kNeedleDistance = 12000;
constexpr double kNeedleStrength = 8.0;
constexpr uint64_t kSeed = 20260613;

// Replaces key row `position` (head `head`) of `keys` with query row (t, query_head) scaled so that
// their score dot * dim^-0.5 equals `strength`: noise scores have unit variance (q, k ~ N(0, 1)), so the
// needle stands `strength` standard deviations out. Its norm (about `strength`) stays near the noise keys'
// (about sqrt(dim)), so queries it is not aligned with barely notice it.
void AlignKey(SafetensorsTensor& keys, int64_t position, int64_t head, const SafetensorsTensor& query, int64_t t,
              int64_t query_head, double strength) {
  const TensorView q = ViewOf(query);
  double norm_squared = 0;
  for (int64_t d = 0; d < q.dim; ++d) norm_squared += q.At(t, query_head, d) * q.At(t, query_head, d);
  const double factor = strength * std::sqrt(double(q.dim)) / norm_squared;
  for (int64_t d = 0; d < q.dim; ++d) SetElement(keys, position, head, d, q.At(t, query_head, d) * factor);
}

}  // namespace

DefaultJob MakeDefaultJob() {
  ProblemSpec spec;
  spec.config.num_q_heads = 8;   // M3: 64 (reduced so that the FP64 reference stays quick)
  spec.config.num_kv_heads = 2;  // M3: 4; G = 4 (M3: 16)
  spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 128;
  spec.config.block_size = 128;
  spec.config.top_k = 16;
  spec.config.pooling = Pooling::kMax;
  // A prefill of the whole context, and a multi-token decode step over a context of the same length.
  spec.lengths = {{kContext, kContext}, {kDecodeQueries, kContext}};
  spec.dtype = DType::kBF16;
  spec.seed = kSeed;

  DefaultJob job{GenerateProblem(spec), {}};
  Needle& needle = job.needle;
  needle.query_row = kContext - 1;  // the last query of the prefill sits at position kContext - 1
  needle.group = 0;
  needle.key_position = kContext - 1 - kNeedleDistance;
  needle.distance = kNeedleDistance;
  needle.block = needle.key_position / spec.config.block_size;
  needle.strength = kNeedleStrength;
  AlignKey(job.problem.index_k, needle.key_position, 0, job.problem.index_q, needle.query_row, needle.group,
           needle.strength);
  AlignKey(job.problem.k, needle.key_position, needle.group, job.problem.q, needle.query_row, 0, needle.strength);
  return job;
}

}  // namespace msa
