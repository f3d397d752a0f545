// What the tests that drive the device pipeline directly (gpu/common/pipeline.h StepOnDevice, not the backend) share:
// random low-precision inputs made on the device for a config and batch, and one step under a concrete plan with its
// outputs downloaded, in either main-branch output format (gpu/common/geometry.h OutputFormat). Needs MSA_HAVE_CUDA.
#ifndef MSA_TESTS_GPU_DEVICE_STEP_H_
#define MSA_TESTS_GPU_DEVICE_STEP_H_

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/common/device_buffer.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/common/pipeline.h"
#include "gpu/kernels.h"
#include "oracle/random.h"

namespace msa::gpu_test {

// *narrow: a [n] tensor of normal values (times `gain`) in the config's 16-bit storage format on the device.
inline void FillRandomLowp(const Config& config, int64_t n, uint64_t stream, double gain,
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

// A step's device inputs in the plan's low-precision form, and the per-query positions of the batch.
struct StepInputs {
  gpu::DeviceBuffer<uint16_t> index_q, index_k, q, k, v;
  gpu::DeviceBuffer<int64_t> position, key_begin;
  gpu::DeviceBuffer<int32_t> first_block;
};

// Normal random inputs for `batch`; overflow: the last query's group 1 index query at 3e37 scale, so that its dots
// overflow fp32 (a non-finite index score).
inline void MakeInputs(const Config& config, const Batch& batch, bool overflow, StepInputs* inputs) {
  const int64_t total_q = batch.total_q(), total_k = batch.cu_seqlens_k.back();
  const int64_t hkv = config.num_kv_heads, di = config.index_head_dim;
  StepInputs& in = *inputs;
  FillRandomLowp(config, total_q * hkv * di, 1, 1.0, &in.index_q);
  FillRandomLowp(config, total_k * di, 2, 1.0, &in.index_k);
  FillRandomLowp(config, total_q * config.num_q_heads * config.head_dim, 3, 1.0, &in.q);
  FillRandomLowp(config, total_k * hkv * config.head_dim, 4, 1.0, &in.k);
  FillRandomLowp(config, total_k * hkv * config.value_dim, 5, 1.0, &in.v);
  if (overflow) {
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

// A step's downloaded outputs: out and lse in the format the step wrote (kFp64: out, lse; kBf16Fp32: out_bf16,
// lse_fp32), each poisoned with all-ones bytes (NaN in every format) before the step.
struct StepOutputs {
  std::vector<int32_t> topk;
  std::vector<double> out, lse;
  std::vector<uint16_t> out_bf16;
  std::vector<float> lse_fp32;
  unsigned long long bad_row = 0;
};

// The step (StepOnDevice) of `batch` under `plan` (concrete, from PlanKernels) on `in`, its main branch writing
// `format`.
inline Status RunStep(const Config& config, const Batch& batch, const gpu::KernelPlan& plan, const StepInputs& in,
                      gpu::OutputFormat format, StepOutputs* result) {
  const int64_t total_q = batch.total_q(), hkv = config.num_kv_heads, top_k = config.top_k;
  const int64_t out_n = total_q * config.num_q_heads * config.value_dim, lse_n = total_q * config.num_q_heads;
  const bool wide = format == gpu::OutputFormat::kFp64;
  const size_t out_bytes = size_t(out_n) * gpu::OutValueBytes(format);
  const size_t lse_bytes = size_t(lse_n) * gpu::LseValueBytes(format);
  gpu::DeviceBuffer<int32_t> topk;
  gpu::DeviceBuffer<unsigned char> out, lse;
  gpu::DeviceBuffer<unsigned long long> flags;
  MSA_RETURN_IF_ERROR(topk.Allocate(hkv * total_q * top_k, "topk"));
  MSA_RETURN_IF_ERROR(out.Allocate(int64_t(out_bytes), "out"));
  MSA_RETURN_IF_ERROR(lse.Allocate(int64_t(lse_bytes), "lse"));
  MSA_RETURN_IF_ERROR(flags.Allocate(2, "flags"));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(topk.get(), 0x7f, size_t(hkv * total_q * top_k) * 4));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(out.get(), 0xff, out_bytes));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemset(lse.get(), 0xff, lse_bytes));
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
                                        gpu::DeviceAttendOutputs{format, out.get(), lse.get()}, &attend_ws, nullptr));
  MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  result->topk.resize(size_t(hkv * total_q * top_k));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(result->topk.data(), topk.get(), result->topk.size() * 4, cudaMemcpyDeviceToHost));
  void* out_host = nullptr;
  void* lse_host = nullptr;
  if (wide) {
    result->out.resize(size_t(out_n));
    result->lse.resize(size_t(lse_n));
    out_host = result->out.data();
    lse_host = result->lse.data();
  } else {
    result->out_bf16.resize(size_t(out_n));
    result->lse_fp32.resize(size_t(lse_n));
    out_host = result->out_bf16.data();
    lse_host = result->lse_fp32.data();
  }
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(out_host, out.get(), out_bytes, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(lse_host, lse.get(), lse_bytes, cudaMemcpyDeviceToHost));
  MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(&result->bad_row, flags.get(), 8, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

}  // namespace msa::gpu_test

#endif  // MSA_TESTS_GPU_DEVICE_STEP_H_
