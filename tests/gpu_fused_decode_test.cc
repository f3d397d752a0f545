// attend=fused-decode's step (gpu/attend/fused_decode.cu: block scores, top-k and split-k in one launch per (query,
// group) cluster) against the same plan's stages run apart (index mma or wgmma, topk=cta, split-k) through the device
// pipeline (gpu/common/pipeline.h StepOnDevice): the selection, out, lse and the non-finite-score flag bit for bit, on
// decode batches built for its edges. Without a usable sm_90a device the step test skips saying why; the check of the
// cases themselves runs anyway.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/kernel_fits.h"
#include "gpu/common/kernel_plan.h"
#include "msa/forced_blocks.h"
#include "oracle/random.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)
#include "gpu/common/device_buffer.h"
#include "gpu/common/device_query.h"
#include "gpu/common/pipeline.h"
#endif

namespace msa::gpu_test {
namespace {

struct FusedCase {
  std::string name;
  Config config;
  std::vector<int32_t> q_lens, k_lens;  // per sequence
  bool overflow = false;                // one (query, group)'s index query scaled until its dots overflow
};

Config M3(Precision precision = Precision::kBf16) {
  Config c;
  c.precision = precision;
  return c;
}

std::vector<FusedCase> FusedCases() {
  std::vector<FusedCase> cases;
  cases.push_back({"m3_4k", M3(), {1}, {4096}});
  // Rows of 1 key, part of a block, one block and a key, 16 blocks, and 64 blocks (4 for each of the 16 CTAs).
  cases.push_back({"m3_rows", M3(), {1, 1, 1, 1, 1}, {1, 100, 129, 2048, 8192}});
  cases.push_back({"m3_multi_token", M3(), {3, 2}, {300, 5000}});
  Config small = M3(Precision::kFp16);
  small.num_q_heads = 32;  // groups of 8 heads
  small.top_k = 8;         // clusters of 8, 4 blocks for each CTA at 4K
  cases.push_back({"fp16_top8_group8", small, {1, 1}, {4096, 1000}});
  Config forced = M3();
  forced.init_blocks = 1;
  forced.local_blocks = 2;
  cases.push_back({"forced_init1_local2", forced, {1, 1, 1}, {3000, 256, 129}});
  Config bk64 = M3();
  bk64.block_size = 64;
  cases.push_back({"block64", bk64, {1, 1}, {4096, 2000}});
  cases.push_back({"overflow", M3(), {1, 1}, {4096, 700}, true});
  return cases;
}

// Runs without a device: every case is a valid decode batch that FusedDecodeShapeFits takes, and together they reach
// the kernel's edges: rows with fewer visible blocks than top_k (-1 slots), rows whose CTAs score 4 blocks each,
// partial local blocks, more than one query in a sequence, forced init and local blocks, blocks of 64 keys.
TEST(GpuFusedDecode, CasesReachTheKernelsEdges) {
  bool short_row = false, full_row = false, partial_local = false, multi_query = false, forced = false, bk64 = false;
  for (const FusedCase& c : FusedCases()) {
    ASSERT_TRUE(ValidateConfig(c.config).ok()) << c.name;
    ASSERT_EQ(c.q_lens.size(), c.k_lens.size()) << c.name;
    const int64_t bk = c.config.block_size, top_k = c.config.top_k;
    for (size_t b = 0; b < c.q_lens.size(); ++b) {
      ASSERT_LE(c.q_lens[b], c.k_lens[b]) << c.name;
      const int64_t visible = (c.k_lens[b] - 1) / bk + 1;
      ASSERT_TRUE(gpu::FusedDecodeShapeFits(gpu::AttendGeometryOf(c.config, 1), c.config.index_head_dim, visible))
          << c.name;
      short_row = short_row || visible < top_k;
      full_row = full_row || visible == top_k * gpu::kFusedDecodeMaxBlocksPerCta;
      partial_local = partial_local || c.k_lens[b] % bk != 0;
      multi_query = multi_query || c.q_lens[b] > 1;
    }
    forced = forced || c.config.init_blocks > 0 || c.config.local_blocks > 1;
    bk64 = bk64 || bk == 64;
  }
  EXPECT_TRUE(short_row && full_row && partial_local && multi_query && forced && bk64);
}

#if defined(MSA_HAVE_CUDA)
// *narrow: a [n] tensor of normal values (times `gain`) in the config's 16-bit storage format on the device.
void FillRandomLowp(const Config& config, int64_t n, uint64_t stream, double gain,
                    gpu::DeviceBuffer<uint16_t>* narrow) {
  RandomStream random(20261206, stream);
  std::vector<double> host(static_cast<size_t>(n));
  for (double& x : host) x = random.Normal() * gain;
  gpu::DeviceBuffer<double> wide;
  EXPECT_TRUE(wide.Allocate(n, "wide").ok());
  EXPECT_TRUE(narrow->Allocate(n, "narrow").ok());
  EXPECT_EQ(cudaMemcpy(wide.get(), host.data(), size_t(n) * 8, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(gpu::RoundToLowp(wide.get(), gpu::kInF64, n,
                             config.precision == Precision::kBf16 ? gpu::kLowpBF16 : gpu::kLowpF16, narrow->get()),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

struct StepOutputs {
  std::vector<int32_t> topk;
  std::vector<double> out, lse;
  unsigned long long bad_row = 0;
};

// The case's step under `requested` (planned for this batch and device) on the given device inputs.
struct StepInputs {
  gpu::DeviceBuffer<uint16_t> index_q, index_k, q, k, v;
  gpu::DeviceBuffer<int64_t> position, key_begin;
  gpu::DeviceBuffer<int32_t> first_block;
};

void MakeInputs(const FusedCase& c, const Batch& batch, StepInputs* inputs) {
  const Config& config = c.config;
  const int64_t total_q = batch.total_q(), total_k = batch.cu_seqlens_k.back();
  const int64_t hkv = config.num_kv_heads, di = config.index_head_dim;
  StepInputs& in = *inputs;
  FillRandomLowp(config, total_q * hkv * di, 1, 1.0, &in.index_q);
  FillRandomLowp(config, total_k * di, 2, 1.0, &in.index_k);
  FillRandomLowp(config, total_q * config.num_q_heads * config.head_dim, 3, 1.0, &in.q);
  FillRandomLowp(config, total_k * hkv * config.head_dim, 4, 1.0, &in.k);
  FillRandomLowp(config, total_k * hkv * config.value_dim, 5, 1.0, &in.v);
  if (c.overflow) {  // the last query's group 1: dots of 3e37-scale values overflow fp32
    gpu::DeviceBuffer<uint16_t> huge;
    FillRandomLowp(config, di, 6, 3e37, &huge);
    EXPECT_EQ(cudaMemcpy(in.index_q.get() + ((total_q - 1) * hkv + 1) * di, huge.get(), size_t(di) * 2,
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
  }
  std::vector<int64_t> position, key_begin;
  std::vector<int32_t> first_block;
  int64_t blocks_before = 0;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    const int64_t q_len = batch.cu_seqlens_q[b + 1] - batch.cu_seqlens_q[b];
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t i = 0; i < q_len; ++i) {
      position.push_back(k_len - q_len + i);
      key_begin.push_back(batch.cu_seqlens_k[b]);
      first_block.push_back(int32_t(blocks_before));
    }
    blocks_before += (k_len + config.block_size - 1) / config.block_size;
  }
  EXPECT_TRUE(in.position.Allocate(total_q, "position").ok());
  EXPECT_TRUE(in.key_begin.Allocate(total_q, "key_begin").ok());
  EXPECT_TRUE(in.first_block.Allocate(total_q, "first_block").ok());
  EXPECT_EQ(cudaMemcpy(in.position.get(), position.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(in.key_begin.get(), key_begin.data(), size_t(total_q) * 8, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(in.first_block.get(), first_block.data(), size_t(total_q) * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
}

Status RunStep(const Config& config, const Batch& batch, const gpu::KernelPlan& plan, const StepInputs& in,
               StepOutputs* result) {
  const int64_t total_q = batch.total_q(), hkv = config.num_kv_heads, top_k = config.top_k;
  const int64_t out_n = total_q * config.num_q_heads * config.value_dim, lse_n = total_q * config.num_q_heads;
  gpu::DeviceBuffer<int32_t> topk;
  gpu::DeviceBuffer<double> out, lse;
  gpu::DeviceBuffer<unsigned long long> flags;
  MSA_RETURN_IF_ERROR(topk.Allocate(hkv * total_q * top_k, "topk"));
  MSA_RETURN_IF_ERROR(out.Allocate(out_n, "out"));
  MSA_RETURN_IF_ERROR(lse.Allocate(lse_n, "lse"));
  MSA_RETURN_IF_ERROR(flags.Allocate(2, "flags"));
  // Poisoned outputs: a slot or value the step leaves unwritten differs from the other plan's.
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(topk.get(), 0x7f, size_t(hkv * total_q * top_k) * 4));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(out.get(), 0xff, size_t(out_n) * 8));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(lse.get(), 0xff, size_t(lse_n) * 8));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(flags.get(), 0xff, 2 * 8));
  gpu::SelectWorkspace select_ws;
  gpu::AttendWorkspace attend_ws;
  MSA_RETURN_IF_ERROR(gpu::AllocateSelectWorkspace(config, batch, plan, /*want_lse=*/false, &select_ws));
  MSA_RETURN_IF_ERROR(gpu::AllocateAttendWorkspace(config, gpu::ShapesOf(config, batch), plan, &attend_ws));
  const gpu::DeviceIndexInputs index{nullptr, nullptr, in.index_q.get(), in.index_k.get(), nullptr, nullptr};
  const gpu::DeviceSelection selection{topk.get(), nullptr, flags.get()};
  const gpu::DeviceAttendInputs attend{
      nullptr,    nullptr,    nullptr,           in.q.get(),         in.k.get(),
      in.v.get(), topk.get(), in.position.get(), in.key_begin.get(), in.first_block.get()};
  MSA_RETURN_IF_ERROR(gpu::StepOnDevice(config, batch, plan, index, selection, &select_ws, attend,
                                        {out.get(), lse.get()}, &attend_ws, nullptr));
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  result->topk.resize(size_t(hkv * total_q * top_k));
  result->out.resize(size_t(out_n));
  result->lse.resize(size_t(lse_n));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(result->topk.data(), topk.get(), result->topk.size() * 4, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(result->out.data(), out.get(), size_t(out_n) * 8, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(result->lse.data(), lse.get(), size_t(lse_n) * 8, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(&result->bad_row, flags.get(), 8, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

// Every case at index mma and wgmma: the fused step's selection, out, lse and first bad (query, group) are the
// separate stages' bits. The separate selection is also checked against SPEC section 2's shape (the local block last,
// -1 padding) and the outputs for NaN (a poisoned value left unwritten), so that two equal wrong answers fail too.
TEST(GpuFusedDecode, OneLaunchGivesTheSeparateStagesBits) {
  MSA_REQUIRE_GPU();
  int64_t compared = 0;
  for (const FusedCase& c : FusedCases()) {
    std::vector<int32_t> cu_q{0}, cu_k{0};
    for (size_t b = 0; b < c.q_lens.size(); ++b) {
      cu_q.push_back(cu_q.back() + c.q_lens[b]);
      cu_k.push_back(cu_k.back() + c.k_lens[b]);
    }
    const Batch batch{cu_q, cu_k};
    StepInputs inputs;
    MakeInputs(c, batch, &inputs);
    for (const char* index : {"mma", "wgmma"}) {
      const std::string apart = std::string("index=") + index + ",topk=cta,attend=split-k";
      gpu::KernelPlan requested, separate, fused;
      ASSERT_TRUE(gpu::ParseKernelPlan(apart, &requested).ok());
      const gpu::KernelShapes shapes = gpu::ShapesOf(c.config, batch);
      if (!gpu::PlanKernels(c.config, shapes, gpu::CurrentDeviceCaps(), requested, &separate).ok()) continue;
      requested.attend = gpu::AttendKernel::kFusedDecode;
      const Status planned = gpu::PlanKernels(c.config, shapes, gpu::CurrentDeviceCaps(), requested, &fused);
      ASSERT_TRUE(planned.ok()) << c.name << ": " << planned.message();  // split-k runs, so fused-decode must
      StepOutputs expected, got;
      ASSERT_TRUE(RunStep(c.config, batch, separate, inputs, &expected).ok()) << c.name;
      ASSERT_TRUE(RunStep(c.config, batch, fused, inputs, &got).ok()) << c.name;
      const std::string what = c.name + " at index=" + index;
      EXPECT_EQ(BitDiffs(expected.topk, got.topk), 0) << what << ": topk";
      EXPECT_EQ(BitDiffs(expected.out, got.out), 0) << what << ": out";
      EXPECT_EQ(BitDiffs(expected.lse, got.lse), 0) << what << ": lse";
      EXPECT_EQ(expected.bad_row, got.bad_row) << what << ": the first non-finite (query, group)";
      const int64_t top_k = c.config.top_k, total_q = batch.total_q();
      const int64_t last_row = (total_q - 1) * c.config.num_kv_heads + 1;
      EXPECT_EQ(expected.bad_row, c.overflow ? uint64_t(last_row) : ~0ull) << what;
      if (c.overflow) continue;  // scores past fp32: the selection and outputs carry no meaning, only their bits
      for (int64_t row = 0; row < c.config.num_kv_heads * total_q; ++row) {
        const int64_t t = row % total_q;
        int64_t b = 0;
        while (cu_q[b + 1] <= t) ++b;
        const int64_t pos = c.k_lens[b] - c.q_lens[b] + (t - cu_q[b]);
        const int64_t visible = pos / c.config.block_size + 1, valid = std::min(visible, top_k);
        const int32_t* slots = &expected.topk[size_t(row * top_k)];
        EXPECT_EQ(slots[valid - 1], int32_t(visible - 1)) << what << ": row " << row << " ends with its local block";
        for (int64_t s = valid; s < top_k; ++s) EXPECT_EQ(slots[s], -1) << what << ": row " << row;
      }
      for (double x : expected.out) ASSERT_FALSE(std::isnan(x)) << what << ": out left unwritten";
      for (double x : expected.lse) ASSERT_FALSE(std::isnan(x)) << what << ": lse left unwritten";
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "attend=split-k does not run on this device (needs sm_90a clusters)";
  std::printf("fused-decode = separate stages on %lld runs\n", static_cast<long long>(compared));
}
#endif

}  // namespace
}  // namespace msa::gpu_test
