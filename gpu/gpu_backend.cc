// The gpu backend's host side: support checks, packing the strided host views, uploads, the chunked launch
// plan of the index branch, the choice of main-branch kernel, downloads. Kernels live in exact_kernels.cu,
// common_kernels.cu, index_kernels.cu, kv_outer_attend.cu and attend_kernels.cu (the bf16/fp16 fast path), and
// lowp_kernels.cu (bf16/fp16 for the shapes the fast path does not take: lse/mean pooling, dims past 128,
// top_k * block_size past shared memory).
#include "gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/device_buffer.h"
#include "gpu/kernels.h"
#include "reference/reference.h"

namespace msa::gpu {
namespace {

thread_local double last_kernel_seconds = 0.0;

// The device-memory budget of the index branch's per-chunk scratch (token scores, block scores, work).
constexpr int64_t kChunkBudgetBytes = int64_t(2) << 30;
constexpr int kExactMaxDim = 512;
constexpr int kMaxTopK = 4096;

struct DeviceInfo {
  bool usable = false;
  std::string description;
};

const DeviceInfo& Info() {
  static const DeviceInfo info = [] {
    DeviceInfo result;
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description = std::string("no usable CUDA device: ") + cudaGetErrorString(error);
      return result;
    }
    if (count == 0) {
      result.description = "no CUDA device";
      return result;
    }
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceProp prop{};
    error = cudaGetDeviceProperties(&prop, device);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description = std::string("cannot read the CUDA device's properties: ") + cudaGetErrorString(error);
      return result;
    }
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", double(prop.totalGlobalMem) / double(1 << 30));
    result.description = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                         ", " + std::to_string(prop.multiProcessorCount) + " SMs, " + memory + ")";
    if (prop.major < 8) {
      result.description += ": the gpu backend needs compute capability 8.0 or newer";
      return result;
    }
    // A context that cannot be created (driver too old for this build, say) makes the device unusable.
    error = cudaFree(nullptr);
    if (error != cudaSuccess) {
      cudaGetLastError();
      result.description += std::string(": cannot create a context: ") + cudaGetErrorString(error);
      return result;
    }
    result.usable = true;
    return result;
  }();
  return info;
}

bool IsAvailable() { return Info().usable; }

Status Supports(const Config& config) {
  const std::string name = std::string(PrecisionName(config.precision));
  if (config.precision == Precision::kFp32) {
    return Unsupported("backend gpu computes precisions exact, bf16 and fp16, not fp32 (not implemented yet)");
  }
  const int limit = config.precision == Precision::kExact ? kExactMaxDim : kLowpMaxDim;
  for (const auto& [field, value] : {std::pair{"head_dim", config.head_dim}, {"value_dim", config.value_dim},
                                     {"index_head_dim", config.index_head_dim}}) {
    if (value > limit) {
      return Unsupported("backend gpu at precision " + name + " takes " + field + " up to " + std::to_string(limit) +
                         ", not " + std::to_string(value));
    }
  }
  if (config.top_k > kMaxTopK) {
    return Unsupported("backend gpu takes top_k up to " + std::to_string(kMaxTopK) + ", not " +
                       std::to_string(config.top_k));
  }
  return Status::Ok();
}

int TypeCode(DType dtype) {
  switch (dtype) {
    case DType::kF64: return kInF64;
    case DType::kF32: return kInF32;
    case DType::kBF16: return kInBF16;
    default: return kInF16;
  }
}

int LowpCode(Precision precision) { return precision == Precision::kBf16 ? kLowpBF16 : kLowpF16; }

// Packs a strided view into [rows, heads, dim] of its own dtype (only the view's elements are read).
std::vector<unsigned char> Pack(const TensorView& view) {
  const int64_t es = DTypeSize(view.dtype);
  std::vector<unsigned char> packed(size_t(view.rows * view.heads * view.dim * es));
  const auto* src = static_cast<const unsigned char*>(view.data);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < view.rows; ++row) {
    for (int64_t head = 0; head < view.heads; ++head) {
      std::memcpy(&packed[size_t(((row * view.heads + head) * view.dim) * es)], src + view.Offset(row, head, 0) * es,
                  size_t(view.dim * es));
    }
  }
  return packed;
}

// A view on the device: exact mode widens it to double, low precision rounds it to 16 bits.
struct DeviceTensor {
  DeviceBuffer<double> wide;
  DeviceBuffer<uint16_t> narrow;
  DeviceBuffer<uint8_t> e4m3;  // with_e4m3: the values as E4M3 bytes too (the fp8 index kernel's inputs)
};

Status Upload(const TensorView& view, Precision precision, const char* name, DeviceTensor* tensor,
              bool with_e4m3 = false) {
  const int64_t n = view.rows * view.heads * view.dim;
  if (n == 0) return Status::Ok();
  const std::vector<unsigned char> packed = Pack(view);
  DeviceBuffer<unsigned char> raw;
  MSA_RETURN_IF_ERROR(raw.Allocate(int64_t(packed.size()), name));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(raw.get(), packed.data(), packed.size(), cudaMemcpyHostToDevice));
  if (precision == Precision::kExact) {
    MSA_RETURN_IF_ERROR(tensor->wide.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(WidenToDouble(raw.get(), TypeCode(view.dtype), n, tensor->wide.get()));
  } else {
    MSA_RETURN_IF_ERROR(tensor->narrow.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(RoundToLowp(raw.get(), TypeCode(view.dtype), n, LowpCode(precision), tensor->narrow.get()));
  }
  if (with_e4m3) {
    MSA_RETURN_IF_ERROR(tensor->e4m3.Allocate(n, name));
    MSA_CUDA_RETURN_IF_ERROR(RoundToE4M3(raw.get(), TypeCode(view.dtype), n, tensor->e4m3.get()));
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // `raw` is freed on return
  return Status::Ok();
}

// Times the device work between construction and Stop().
class KernelTimer {
 public:
  KernelTimer() {
    if (cudaEventCreate(&start_) == cudaSuccess && cudaEventCreate(&stop_) == cudaSuccess) {
      ok_ = cudaEventRecord(start_) == cudaSuccess;
    }
    cudaGetLastError();
  }
  ~KernelTimer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  void Stop() {
    float ms = 0.0f;
    if (ok_ && cudaEventRecord(stop_) == cudaSuccess && cudaEventSynchronize(stop_) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) {
      last_kernel_seconds = double(ms) / 1000.0;
    }
    cudaGetLastError();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool ok_ = false;
};

Status CheckDevice() {
  if (!IsAvailable()) return Unsupported("backend gpu is not available: " + Info().description);
  return Status::Ok();
}

// How many queries of a sequence of k_len keys one index-branch chunk takes.
int64_t ChunkQueries(const Config& config, int64_t q_len, int64_t k_len, int64_t max_blocks) {
  const int64_t hidx = config.num_kv_heads;
  const bool exact = config.precision == Precision::kExact;
  int64_t per_query = hidx * max_blocks * (exact ? 8 : 4);  // block scores
  if (exact) {
    if (config.pooling != Pooling::kMean) per_query += hidx * k_len * 8;            // token scores
    per_query += hidx * int64_t(config.top_k) * config.block_size * 8;              // index_lse work
    per_query += int64_t(config.index_head_dim) * 8;                                // partial means
  }
  int64_t nq = std::max<int64_t>(1, kChunkBudgetBytes / std::max<int64_t>(per_query, 1));
  nq = std::min<int64_t>(nq, (int64_t(65535) * 32) / hidx);  // grid limits of the token kernel
  return std::min(nq, q_len);
}

// The value of the environment variable `variable` that forces a kernel choice: "" when it is unset or empty, else
// one of `names`; any other value is refused ("... is \"x\": expected a, b or c (or unset)").
Status ForcedChoice(const char* variable, std::initializer_list<std::string_view> names, std::string* choice) {
  choice->clear();
  const char* forced = std::getenv(variable);
  if (forced == nullptr || *forced == '\0') return Status::Ok();
  const std::string name = forced;
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string expected;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) expected += i + 1 < names.size() ? ", " : " or ";
      expected += names.begin()[i];
    }
    return InvalidArgument(std::string(variable) + " is \"" + name + "\": expected " + expected + " (or unset)");
  }
  *choice = name;
  return Status::Ok();
}

// The max-pooling index kernel where BlockMaxScores fits: on e4m3 index inputs (index_format e4m3) the fp8 one
// (BlockMaxScoresFp8, compute capability 9.0: Hopper's fp8 MMA, within kFp8IndexRelBound of the exact block maxima,
// gpu/fp8_index_first_run.sh), else the Hopper one (BlockMaxScoresWgmma) on compute capability 9.0, the mma.sync one
// (BlockMaxScores) elsewhere; the last two give the same bits (measured on the H200, gpu/wgmma_index_first_run.sh).
// MSA_GPU_INDEX_KERNEL=mma|wgmma|fp8 forces one (each only where it fits, fp8 only on e4m3 inputs; otherwise the
// default); any other value is refused.
enum class IndexKernel { kMma, kWgmma, kFp8 };

Status ChooseIndexKernel(const Config& config, float scale, IndexKernel* kernel) {
  const int di = config.index_head_dim, bk = config.block_size;
  const bool fp8_fits = config.index_format == IndexFormat::kE4M3 && BlockMaxScoresFp8Fits(di, bk, scale);
  const bool wgmma_fits = BlockMaxScoresWgmmaFits(di, bk, scale);
  *kernel = fp8_fits ? IndexKernel::kFp8 : wgmma_fits ? IndexKernel::kWgmma : IndexKernel::kMma;
  std::string forced;
  MSA_RETURN_IF_ERROR(ForcedChoice("MSA_GPU_INDEX_KERNEL", {"wgmma", "mma", "fp8"}, &forced));
  if (forced == "mma") *kernel = IndexKernel::kMma;
  if (forced == "wgmma") *kernel = wgmma_fits ? IndexKernel::kWgmma : IndexKernel::kMma;  // fp8: the default already
  return Status::Ok();
}

// The top-k kernel of the bf16/fp16 index branch where RankTopKFits: RankTopK ("warp") or RankTopKThreshold
// ("fast": the same selection bit for bit, a threshold filter, and rows split over several warps in decode;
// measured on the H200 by gpu/topk_first_run.sh), chosen per chunk by RankTopKThresholdPaysOff unless
// MSA_GPU_TOPK_KERNEL=fast|warp forces one; any other value is refused.
enum class TopKKernel { kByShape, kWarp, kThreshold };

Status ChooseTopKKernel(TopKKernel* kernel) {
  *kernel = TopKKernel::kByShape;
  std::string forced;
  MSA_RETURN_IF_ERROR(ForcedChoice("MSA_GPU_TOPK_KERNEL", {"fast", "warp"}, &forced));
  if (forced == "fast") *kernel = TopKKernel::kThreshold;
  if (forced == "warp") *kernel = TopKKernel::kWarp;
  return Status::Ok();
}

// How the bf16/fp16 max-pooling index branch is launched: per sequence (one chunk per sequence, several for a long
// prefill: one block-max launch and one top-k each), or, on a decode batch (gpu/kernels.h IsDecodeBatch), as one
// batched chunk (ChunkGeometry::sequences): one block-max launch and one top-k for every sequence's rows, the same
// bits (tests/gpu_backend_test.cc, gpu/batched_decode_first_run.sh). Batched applies where the chunk's kernels take
// it: low precision, max pooling on BlockMaxScores(Wgmma), the RankTopK family, and the batch's block scores within
// the chunk budget; there it is the default. MSA_GPU_INDEX_BATCH=batched|per-sequence forces one (batched only where
// it applies, so it only names the default); any other value is refused, in every precision and before any device
// work. allow_batched: false when per-sequence is forced.
Status ChooseIndexBatch(bool* allow_batched) {
  *allow_batched = true;
  std::string forced;
  MSA_RETURN_IF_ERROR(ForcedChoice("MSA_GPU_INDEX_BATCH", {"batched", "per-sequence"}, &forced));
  if (forced == "per-sequence") *allow_batched = false;
  return Status::Ok();
}

Status SelectImpl(const Config& config, const IndexInputs& inputs, const SelectionOutputs& outputs,
                  const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  bool allow_batched = true;
  MSA_RETURN_IF_ERROR(ChooseIndexBatch(&allow_batched));  // a misspelt value is refused even without a device
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q();
  if (total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(CheckDevice());
  const bool exact = config.precision == Precision::kExact;
  const int64_t hidx = config.num_kv_heads, di = config.index_head_dim, bk = config.block_size;
  const int64_t top_k = config.top_k, max_blocks = MaxBlocks(config, batch);
  if (exact && !ExactFits(config.head_dim, config.value_dim, int(di), config.group_size())) {
    return Unsupported("backend gpu: the exact kernels cannot tile these head dims in this device's shared memory");
  }

  const double scale = config.IndexScale();
  IndexKernel index_kernel = IndexKernel::kMma;
  if (!exact) MSA_RETURN_IF_ERROR(ChooseIndexKernel(config, float(scale), &index_kernel));
  const bool fp8 = !exact && config.pooling == Pooling::kMax && index_kernel == IndexKernel::kFp8 &&
                   BlockMaxScoresFits(int(di), int(bk), float(scale));
  DeviceTensor index_q, index_k;  // with fp8: the values are E4M3 numbers already (msa::Select rounded them)
  MSA_RETURN_IF_ERROR(Upload(inputs.index_q, config.precision, "index_q", &index_q, fp8));
  MSA_RETURN_IF_ERROR(Upload(inputs.index_k, config.precision, "index_k", &index_k, fp8));

  // The chunk plan and the largest scratch any chunk needs; the sequences with queries as the chunks of one batched
  // chunk (ChooseIndexBatch): its block-score buffer holds the rows (t - t0) * Hidx + r of the queries
  // [t0, t0 + batch_nq), its top-k workspace is sized for the bound num_sequences * nq * Hidx (gpu/kernels.h).
  int64_t max_rows = 0, max_tokens = 0, max_full_means = 0, max_nq = 0;
  std::vector<SequenceChunk> sequence_chunks;
  int64_t longest_q = 0, latest_pos = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t key_begin = batch.cu_seqlens_k[b], k_len = batch.cu_seqlens_k[b + 1] - key_begin;
    if (q_len == 0) continue;
    const int64_t nq = ChunkQueries(config, q_len, k_len, max_blocks);
    max_nq = std::max(max_nq, nq);
    max_rows = std::max(max_rows, nq * hidx);
    max_tokens = std::max(max_tokens, nq * hidx * k_len);
    max_full_means = std::max(max_full_means, (k_len / bk) * di);
    sequence_chunks.push_back(SequenceChunk{q_begin, q_len, k_len - q_len, key_begin, k_len});
    longest_q = std::max(longest_q, q_len);
    latest_pos = std::max(latest_pos, k_len - 1);
  }
  const int64_t num_chunks = int64_t(sequence_chunks.size());
  const int64_t batch_nq =
      sequence_chunks.back().t0 + sequence_chunks.back().nq - sequence_chunks.front().t0;  // total_q > 0
  const bool batched = allow_batched && !exact && !fp8 && config.pooling == Pooling::kMax &&
                       BlockMaxScoresFits(int(di), int(bk), float(scale)) && RankTopKFits(int(top_k)) &&
                       IsDecodeBatch(longest_q, num_chunks) &&
                       batch_nq * hidx * max_blocks * int64_t(sizeof(float)) <= kChunkBudgetBytes;
  const int64_t bs_rows = batched ? batch_nq * hidx : max_rows;                 // block-score buffer rows
  const int64_t rank_rows = batched ? num_chunks * longest_q * hidx : max_rows;  // top-k workspace rows (bound)
  const bool want_lse = outputs.index_lse != nullptr;
  DeviceBuffer<int32_t> topk;
  DeviceBuffer<double> index_lse, bs_double, tokens, means, pmeans, work;
  DeviceBuffer<float> bs_float;
  // flags[0]: the first (query, group) t * Hidx + r whose index scores are not finite; flags[1]: the first whose
  // fp16 block scores overflow binary16 (score_format fp16). All ones: none.
  DeviceBuffer<unsigned long long> flags;
  MSA_RETURN_IF_ERROR(topk.Allocate(hidx * total_q * top_k, "topk_indices"));
  if (want_lse) MSA_RETURN_IF_ERROR(index_lse.Allocate(hidx * total_q, "index_lse"));
  MSA_RETURN_IF_ERROR(flags.Allocate(2, "flags"));
  unsigned long long* const bad_row = flags.get();
  unsigned long long* const overflow_row = flags.get() + 1;
  if (exact) {
    MSA_RETURN_IF_ERROR(bs_double.Allocate(max_rows * max_blocks, "block scores"));
    if (config.pooling != Pooling::kMean) MSA_RETURN_IF_ERROR(tokens.Allocate(max_tokens, "token scores"));
    if (config.pooling == Pooling::kMean) {
      MSA_RETURN_IF_ERROR(means.Allocate(max_full_means, "block mean keys"));
      MSA_RETURN_IF_ERROR(pmeans.Allocate(max_nq * di, "partial block mean keys"));
    }
    if (want_lse) MSA_RETURN_IF_ERROR(work.Allocate(max_rows * top_k * bk, "index_lse work"));
  } else {
    MSA_RETURN_IF_ERROR(bs_float.Allocate(bs_rows * max_blocks, "block scores"));
  }
  const unsigned long long no_bad = std::numeric_limits<unsigned long long>::max();
  const unsigned long long no_flags[2] = {no_bad, no_bad};
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(flags.get(), no_flags, sizeof no_flags, cudaMemcpyHostToDevice));

  const int pooling = int(config.pooling);
  TopKKernel topk_kernel = TopKKernel::kWarp;
  if (!exact) MSA_RETURN_IF_ERROR(ChooseTopKKernel(&topk_kernel));
  // RankTopKThreshold's split lists (decode shapes), sized for the largest chunk.
  DeviceBuffer<unsigned char> topk_workspace;
  const bool may_threshold = topk_kernel != TopKKernel::kWarp && RankTopKFits(int(top_k));
  const size_t topk_workspace_bytes = may_threshold ? RankTopKThresholdWorkspaceBytes(rank_rows, int(top_k)) : 0;
  MSA_RETURN_IF_ERROR(topk_workspace.Allocate(int64_t(topk_workspace_bytes), "top-k split lists"));
  DeviceBuffer<SequenceChunk> d_sequence_chunks;
  if (batched) {
    MSA_RETURN_IF_ERROR(d_sequence_chunks.Allocate(num_chunks, "sequence chunks"));
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_sequence_chunks.get(), sequence_chunks.data(),
                                        size_t(num_chunks) * sizeof(SequenceChunk), cudaMemcpyHostToDevice));
  }
  std::vector<double> host_bs_double;
  std::vector<float> host_bs_float;
  // The fields every chunk of the batch shares.
  ChunkGeometry base;
  base.total_q = total_q;
  base.hidx = int(hidx);
  base.di = int(di);
  base.bk = int(bk);
  base.top_k = int(top_k);
  base.init_blocks = config.init_blocks;
  base.local_blocks = config.local_blocks;
  base.max_blocks = max_blocks;
  const int lowp = LowpCode(config.precision);
  const int score_format = int(config.score_format);
  // score_format fp16: the block scores of a (batched) chunk's first `rows` buffer rows become their binary16 values
  // before they are ranked or downloaded (SPEC section 2).
  const auto round_scores = [&](const ChunkGeometry& g, int64_t rows) {
    if (config.score_format != ScoreFormat::kFp16) return cudaSuccess;
    return exact ? RoundScoresToBinary16(bs_double.get(), g, rows, overflow_row)
                 : RoundScoresToBinary16(bs_float.get(), g, rows, overflow_row);
  };
  // Block maxima of a (batched) chunk into bs_float (the default stream).
  const auto block_max = [&](const ChunkGeometry& g) {
    if (fp8) {
      return BlockMaxScoresFp8(index_q.e4m3.get(), index_k.e4m3.get(), g, float(scale), bs_float.get(), bad_row);
    }
    return (index_kernel == IndexKernel::kWgmma ? BlockMaxScoresWgmma : BlockMaxScores)(
        lowp, index_q.narrow.get(), index_k.narrow.get(), g, float(scale), bs_float.get(), bad_row, nullptr);
  };
  // The selection of a (batched) chunk's rows from bs_float by the RankTopK family, or RankFloat past it.
  const auto rank_lowp = [&](const ChunkGeometry& g) -> Status {
    if (may_threshold && (topk_kernel == TopKKernel::kThreshold || RankTopKThresholdPaysOff(g))) {
      MSA_CUDA_RETURN_IF_ERROR(
          RankTopKThreshold(bs_float.get(), g, topk_workspace.get(), topk_workspace_bytes, topk.get()));
    } else if (RankTopKFits(int(top_k))) {
      MSA_CUDA_RETURN_IF_ERROR(RankTopK(bs_float.get(), g, topk.get()));
    } else {
      MSA_CUDA_RETURN_IF_ERROR(RankFloat(bs_float.get(), g, topk.get()));
    }
    return Status::Ok();
  };
  // Copies the buffer's `rows` rows (t - t0) * Hidx + r into outputs.block_scores [Hidx, total_q, max_blocks].
  const auto download_block_scores = [&](int64_t t0, int64_t rows) -> Status {
    const size_t n = size_t(rows * max_blocks);
    if (exact) {
      host_bs_double.resize(n);
      MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(host_bs_double.data(), bs_double.get(), n * 8, cudaMemcpyDeviceToHost));
    } else {
      host_bs_float.resize(n);
      MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(host_bs_float.data(), bs_float.get(), n * 4, cudaMemcpyDeviceToHost));
    }
    for (int64_t row = 0; row < rows; ++row) {
      double* dst = outputs.block_scores + ((row % hidx) * total_q + t0 + row / hidx) * max_blocks;
      for (int64_t blk = 0; blk < max_blocks; ++blk) {
        dst[blk] = exact ? host_bs_double[row * max_blocks + blk] : double(host_bs_float[row * max_blocks + blk]);
      }
    }
    return Status::Ok();
  };
  KernelTimer timer;
  if (batched) {  // one block-max launch and one top-k for every sequence (gpu/kernels.h ChunkGeometry::sequences)
    ChunkGeometry g = base;
    g.t0 = sequence_chunks.front().t0;
    g.nq = longest_q;
    g.pos0 = latest_pos - longest_q + 1;
    g.sequences = d_sequence_chunks.get();
    g.num_sequences = num_chunks;
    MSA_CUDA_RETURN_IF_ERROR(FillFloat(bs_float.get(), batch_nq * hidx * max_blocks, -INFINITY));
    MSA_CUDA_RETURN_IF_ERROR(block_max(g));
    MSA_CUDA_RETURN_IF_ERROR(round_scores(g, batch_nq * hidx));
    MSA_RETURN_IF_ERROR(rank_lowp(g));
    for (const SequenceChunk& chunk : sequence_chunks) {  // index_lse per sequence (an optional training output)
      if (!want_lse) continue;
      ChunkGeometry gs = base;
      gs.t0 = chunk.t0;
      gs.nq = chunk.nq;
      gs.pos0 = chunk.pos0;
      gs.key_begin = chunk.key_begin;
      gs.k_len = chunk.k_len;
      MSA_CUDA_RETURN_IF_ERROR(LowpIndexLse(lowp, index_q.narrow.get(), index_k.narrow.get(), topk.get(), gs,
                                            float(scale), score_format, index_lse.get()));
    }
    if (outputs.block_scores != nullptr) MSA_RETURN_IF_ERROR(download_block_scores(g.t0, batch_nq * hidx));
    if (progress) progress(1.0);
  }
  int64_t done_rows = 0;
  for (int64_t b = 0; !batched && b < batch.num_sequences(); ++b) {  // per sequence, unless batched above
    const int64_t q_begin = batch.cu_seqlens_q[b], q_len = batch.cu_seqlens_q[b + 1] - q_begin;
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    if (q_len == 0) continue;
    const int64_t nq_max = ChunkQueries(config, q_len, k_len, max_blocks);
    ChunkGeometry g = base;
    g.key_begin = batch.cu_seqlens_k[b];
    g.k_len = k_len;
    if (exact && config.pooling == Pooling::kMean) {
      MSA_CUDA_RETURN_IF_ERROR(ExactFullBlockMeans(index_k.wide.get(), g, means.get()));
    }
    for (int64_t c0 = 0; c0 < q_len; c0 += nq_max) {
      g.t0 = q_begin + c0;
      g.nq = std::min(nq_max, q_len - c0);
      g.pos0 = k_len - q_len + c0;
      const int64_t rows = g.nq * hidx;
      if (exact) {
        const int64_t ld = g.pos0 + g.nq;
        MSA_CUDA_RETURN_IF_ERROR(FillDouble(bs_double.get(), rows * max_blocks, -INFINITY));
        if (config.pooling != Pooling::kMean) {
          MSA_CUDA_RETURN_IF_ERROR(ExactTokenScores(index_q.wide.get(), index_k.wide.get(), g, scale, tokens.get(), ld));
        } else {
          MSA_CUDA_RETURN_IF_ERROR(ExactPartialMeans(index_k.wide.get(), g, pmeans.get()));
        }
        MSA_CUDA_RETURN_IF_ERROR(ExactPool(pooling, tokens.get(), ld, index_q.wide.get(), means.get(), pmeans.get(), g,
                                           scale, /*check_tokens=*/true, bs_double.get(), bad_row));
        MSA_CUDA_RETURN_IF_ERROR(round_scores(g, rows));
        MSA_CUDA_RETURN_IF_ERROR(RankDouble(bs_double.get(), g, topk.get()));
        if (want_lse) {
          MSA_CUDA_RETURN_IF_ERROR(ExactIndexLse(index_q.wide.get(), index_k.wide.get(), topk.get(), g, scale,
                                                 score_format, work.get(), index_lse.get()));
        }
      } else {
        MSA_CUDA_RETURN_IF_ERROR(FillFloat(bs_float.get(), rows * max_blocks, -INFINITY));
        if (config.pooling == Pooling::kMean) {
          MSA_CUDA_RETURN_IF_ERROR(LowpMeanScores(lowp, index_q.narrow.get(), index_k.narrow.get(), g, float(scale),
                                                  bs_float.get(), bad_row));
        } else if (config.pooling == Pooling::kMax && BlockMaxScoresFits(int(di), int(bk), float(scale))) {
          MSA_CUDA_RETURN_IF_ERROR(block_max(g));
        } else {
          MSA_CUDA_RETURN_IF_ERROR(LowpBlockScores(lowp, pooling, index_q.narrow.get(), index_k.narrow.get(), g,
                                                   float(scale), bs_float.get(), bad_row));
        }
        MSA_CUDA_RETURN_IF_ERROR(round_scores(g, rows));
        MSA_RETURN_IF_ERROR(rank_lowp(g));
        if (want_lse) {
          MSA_CUDA_RETURN_IF_ERROR(LowpIndexLse(lowp, index_q.narrow.get(), index_k.narrow.get(), topk.get(), g,
                                                float(scale), score_format, index_lse.get()));
        }
      }
      if (outputs.block_scores != nullptr) MSA_RETURN_IF_ERROR(download_block_scores(g.t0, rows));
      done_rows += g.nq;
      if (progress) progress(double(done_rows) / double(total_q));
    }
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  timer.Stop();

  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.topk_indices, topk.get(), size_t(hidx * total_q * top_k) * 4,
                                      cudaMemcpyDeviceToHost));
  if (want_lse) {
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.index_lse, index_lse.get(), size_t(hidx * total_q) * 8,
                                        cudaMemcpyDeviceToHost));
  }
  unsigned long long first[2] = {no_bad, no_bad};  // flags: a non-finite score first, as the reference reports
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(first, flags.get(), sizeof first, cudaMemcpyDeviceToHost));
  if (const unsigned long long bad = first[0]; bad != no_bad) {
    return InvalidArgument("index score of query " + std::to_string(bad / hidx) + ", group " +
                           std::to_string(bad % hidx) + " is not finite: index_q and index_k are too large for " +
                           (exact ? std::string("a double dot product") :
                                    std::string(PrecisionName(config.precision)) + " inputs with fp32 accumulation"));
  }
  if (const unsigned long long overflow = first[1]; overflow != no_bad) {
    return Fp16ScoreOverflow(int64_t(overflow / hidx), int64_t(overflow % hidx));
  }
  return Status::Ok();
}

// The main-branch kernel of a shape (gpu/kernels.h). KV-outer pays off when blocks are shared: on average at
// least 2 queries per (sequence, block, group), or too few queries for the Q-outer grid to fill the device
// (decode). KV-outer runs its tiles on Hopper wgmma (KvOuterAttendWgmma) on compute capability 9.0 and on
// mma.sync (KvOuterAttend) elsewhere; the two give the same bits (measured on the H200, gpu/wgmma_first_run.sh).
// MSA_GPU_ATTEND_KERNEL=kv-outer-wgmma|kv-outer|q-outer|part1 forces one where it fits (tests, benchmarks;
// kv-outer means the mma.sync tiles); a forced kernel that does not fit the shape (or the device) leaves the
// choice to the rule, and any other value is refused.
enum class AttendKernel { kExact, kKvOuter, kKvOuterWgmma, kQOuter, kPart1 };

Status ChooseAttendKernel(const AttendGeometry& g, int64_t num_blocks, AttendKernel* kernel) {
  const bool kv_outer_fits = KvOuterAttendFits(g) && PlanKvOuter(g, num_blocks, kChunkBudgetBytes).ok;
  const bool q_outer_fits = QOuterAttendFits(g);
  std::string forced;
  MSA_RETURN_IF_ERROR(
      ForcedChoice("MSA_GPU_ATTEND_KERNEL", {"kv-outer", "kv-outer-wgmma", "q-outer", "part1"}, &forced));
  const bool forced_fits = forced == "part1" || (forced == "q-outer" && q_outer_fits) ||
                           (forced == "kv-outer" && kv_outer_fits) ||
                           (forced == "kv-outer-wgmma" && kv_outer_fits && KvOuterWgmmaFits(g));
  if (forced_fits) {
    *kernel = forced == "kv-outer"         ? AttendKernel::kKvOuter
              : forced == "kv-outer-wgmma" ? AttendKernel::kKvOuterWgmma
              : forced == "q-outer"        ? AttendKernel::kQOuter
                                           : AttendKernel::kPart1;
    return Status::Ok();
  }
  const double queries_per_block = double(g.total_q) * g.top_k / double(std::max<int64_t>(num_blocks, 1));
  constexpr int64_t kFewQueryCtas = 512;  // ~4 CTAs per SM of an H100 / H200
  if (kv_outer_fits && (queries_per_block >= 2.0 || g.total_q * g.hkv < kFewQueryCtas)) {
    *kernel = KvOuterWgmmaFits(g) ? AttendKernel::kKvOuterWgmma : AttendKernel::kKvOuter;
  } else {
    *kernel = q_outer_fits ? AttendKernel::kQOuter : AttendKernel::kPart1;
  }
  return Status::Ok();
}

// The KV-outer list builder (gpu/kernels.h KvOuterPlan): the direct lists (one kernel per chunk instead of
// seven launches) where every sequence of the batch has at most one query (decode), the general lists
// elsewhere; both give the same bits (tests/gpu_backend_test.cc, gpu/decode_lists_first_run.sh).
// MSA_GPU_KV_LISTS=direct|general forces one (tests, benchmarks); direct where it does not apply leaves the
// general lists, and any other value is refused.
Status ChooseKvLists(bool one_query_per_sequence, bool* direct) {
  *direct = one_query_per_sequence;
  std::string forced;
  MSA_RETURN_IF_ERROR(ForcedChoice("MSA_GPU_KV_LISTS", {"direct", "general"}, &forced));
  if (forced == "general") *direct = false;
  return Status::Ok();
}

Status AttendImpl(const Config& config, const AttentionInputs& inputs, const SelectionView& selection,
                  const AttentionOutputs& outputs, const ProgressFn& progress) {
  last_kernel_seconds = 0.0;
  const Batch& batch = inputs.batch;
  const int64_t total_q = batch.total_q();
  if (total_q == 0) return Status::Ok();
  MSA_RETURN_IF_ERROR(CheckDevice());
  const bool exact = config.precision == Precision::kExact;
  if (exact && !ExactFits(config.head_dim, config.value_dim, config.index_head_dim, config.group_size())) {
    return Unsupported("backend gpu: the exact kernels cannot tile these head dims in this device's shared memory");
  }
  const int64_t hq = config.num_q_heads, hkv = config.num_kv_heads, dv = config.value_dim, top_k = config.top_k;

  DeviceTensor q, k, v;
  MSA_RETURN_IF_ERROR(Upload(inputs.q, config.precision, "q", &q));
  MSA_RETURN_IF_ERROR(Upload(inputs.k, config.precision, "k", &k));
  MSA_RETURN_IF_ERROR(Upload(inputs.v, config.precision, "v", &v));

  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  std::vector<int64_t> position(total_q), key_begin(total_q);
  for (int64_t t = 0; t < total_q; ++t) {
    position[t] = places[t].position;
    key_begin[t] = places[t].key_begin;
  }
  DeviceBuffer<int32_t> topk;
  DeviceBuffer<int64_t> d_position, d_key_begin;
  DeviceBuffer<double> out, lse;
  MSA_RETURN_IF_ERROR(topk.Allocate(hkv * total_q * top_k, "selection"));
  MSA_RETURN_IF_ERROR(d_position.Allocate(total_q, "positions"));
  MSA_RETURN_IF_ERROR(d_key_begin.Allocate(total_q, "key offsets"));
  MSA_RETURN_IF_ERROR(out.Allocate(total_q * hq * dv, "out"));
  MSA_RETURN_IF_ERROR(lse.Allocate(total_q * hq, "lse"));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(topk.get(), selection.topk_indices, size_t(hkv * total_q * top_k) * 4,
                                      cudaMemcpyHostToDevice));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_position.get(), position.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_key_begin.get(), key_begin.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice));

  AttendGeometry g;
  g.total_q = total_q;
  g.hq = int(hq);
  g.hkv = int(hkv);
  g.d = config.head_dim;
  g.dv = int(dv);
  g.bk = config.block_size;
  g.top_k = int(top_k);
  int64_t num_blocks = 0;  // blocks of all sequences; first_block[t]: those before the query's sequence
  std::vector<int32_t> first_block(total_q);
  bool one_query_per_sequence = true;  // decode: no two queries share a KV-outer list
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    one_query_per_sequence = one_query_per_sequence && batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b] <= 1;
    for (int64_t t = batch.cu_seqlens_q[b]; t < batch.cu_seqlens_q[b + 1]; ++t) first_block[t] = int32_t(num_blocks);
    num_blocks += (batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b] + g.bk - 1) / g.bk;
  }
  AttendKernel kernel = AttendKernel::kExact;
  bool direct_lists = false;
  if (!exact) {
    MSA_RETURN_IF_ERROR(ChooseAttendKernel(g, num_blocks, &kernel));
    MSA_RETURN_IF_ERROR(ChooseKvLists(one_query_per_sequence, &direct_lists));
  }
  KvOuterPlan plan;
  DeviceBuffer<int32_t> d_first_block;
  DeviceBuffer<unsigned char> workspace;
  if (kernel == AttendKernel::kKvOuter || kernel == AttendKernel::kKvOuterWgmma) {
    plan = PlanKvOuter(g, num_blocks, kChunkBudgetBytes, direct_lists);
    MSA_RETURN_IF_ERROR(d_first_block.Allocate(total_q, "block offsets"));
    MSA_RETURN_IF_ERROR(workspace.Allocate(int64_t(plan.bytes), "KV-outer lists and partial results"));
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_first_block.get(), first_block.data(), size_t(total_q) * 4,
                                        cudaMemcpyHostToDevice));
  }
  KernelTimer timer;
  if (kernel == AttendKernel::kExact) {
    MSA_CUDA_RETURN_IF_ERROR(ExactAttend(q.wide.get(), k.wide.get(), v.wide.get(), topk.get(), d_position.get(),
                                         d_key_begin.get(), g, config.SoftmaxScale(), out.get(), lse.get()));
  } else if (kernel == AttendKernel::kKvOuter) {
    MSA_CUDA_RETURN_IF_ERROR(KvOuterAttend(LowpCode(config.precision), q.narrow.get(), k.narrow.get(), v.narrow.get(),
                                           topk.get(), d_position.get(), d_key_begin.get(), d_first_block.get(), g,
                                           float(config.SoftmaxScale()), plan, workspace.get(), out.get(), lse.get()));
  } else if (kernel == AttendKernel::kKvOuterWgmma) {
    MSA_CUDA_RETURN_IF_ERROR(KvOuterAttendWgmma(LowpCode(config.precision), q.narrow.get(), k.narrow.get(),
                                                v.narrow.get(), topk.get(), d_position.get(), d_key_begin.get(),
                                                d_first_block.get(), g, float(config.SoftmaxScale()), plan,
                                                workspace.get(), out.get(), lse.get()));
  } else if (kernel == AttendKernel::kQOuter) {
    MSA_CUDA_RETURN_IF_ERROR(QOuterAttend(LowpCode(config.precision), q.narrow.get(), k.narrow.get(), v.narrow.get(),
                                          topk.get(), d_position.get(), d_key_begin.get(), g,
                                          float(config.SoftmaxScale()), out.get(), lse.get()));
  } else {
    MSA_CUDA_RETURN_IF_ERROR(LowpAttend(LowpCode(config.precision), q.narrow.get(), k.narrow.get(), v.narrow.get(),
                                        topk.get(), d_position.get(), d_key_begin.get(), g,
                                        float(config.SoftmaxScale()), out.get(), lse.get()));
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  timer.Stop();
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.out, out.get(), size_t(total_q * hq * dv) * 8, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(outputs.lse, lse.get(), size_t(total_q * hq) * 8, cudaMemcpyDeviceToHost));
  if (progress) progress(1.0);
  return Status::Ok();
}

}  // namespace

Backend GpuBackend() { return Backend{"gpu", IsAvailable, Supports, SelectImpl, AttendImpl}; }

std::string DeviceDescription() { return Info().description; }

double LastKernelSeconds() { return last_kernel_seconds; }

}  // namespace msa::gpu
