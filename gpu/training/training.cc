// The host side of the gpu backend's training functions (gpu/training/training.h): the contributor lists, the launch
// sequence, the downloads and the KL's final sum.
#include "gpu/training/training.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/common/device_buffer.h"
#include "gpu/common/geometry.h"
#include "gpu/common/kernel_plan.h"
#include "gpu/kernels.h"
#include "gpu/training/training_kernels.h"
#include "reference/reference.h"

namespace msa::gpu {
namespace {

// The contributor lists of training_kernels.h TrainingLists, on the host (the orders of reference/contributors.h).
struct HostLists {
  int64_t num_blocks = 0;
  std::vector<int64_t> position, key_begin;               // [total_q]
  std::vector<int32_t> key_block;                         // [total_k]
  std::vector<int64_t> block_first_key, block_first_pos;  // [num_blocks]
  std::vector<int32_t> block_keys;                        // [num_blocks]
  std::vector<int64_t> group_offsets;                     // [Hkv * num_blocks + 1]
  std::vector<int32_t> group_queries;                     // [group entries]
  std::vector<int64_t> block_offsets;                     // [num_blocks + 1]
  std::vector<int64_t> block_rows;                        // [block entries]
  std::vector<int32_t> block_slots;                       // [block entries]
};

HostLists BuildLists(const Config& config, const Batch& batch, const SelectionView& selection) {
  const int64_t total_q = batch.total_q(), hkv = config.num_kv_heads, bk = config.block_size, top_k = config.top_k;
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(batch);
  HostLists lists;
  std::vector<int64_t> first_block;  // [B]: the sequence's first key block
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    first_block.push_back(lists.num_blocks);
    const int64_t k_len = batch.cu_seqlens_k[b + 1] - batch.cu_seqlens_k[b];
    for (int64_t blk = 0; blk * bk < k_len; ++blk) {
      lists.block_first_key.push_back(batch.cu_seqlens_k[b] + blk * bk);
      lists.block_first_pos.push_back(blk * bk);
      lists.block_keys.push_back(int32_t(std::min(bk, k_len - blk * bk)));
      for (int64_t s = 0; s < std::min(bk, k_len - blk * bk); ++s) lists.key_block.push_back(int32_t(lists.num_blocks));
      ++lists.num_blocks;
    }
  }
  lists.position.resize(total_q);
  lists.key_begin.resize(total_q);
  for (int64_t t = 0; t < total_q; ++t) {
    lists.position[t] = places[t].position;
    lists.key_begin[t] = places[t].key_begin;
  }
  // Every (t, r, slot) names the key block first_block[sequence of t] + id; ascending t, then r, fills every list in
  // its order (a selection row holds each id at most once).
  const auto for_each_entry = [&](auto&& visit) {
    for (int64_t t = 0; t < total_q; ++t) {
      for (int64_t r = 0; r < hkv; ++r) {
        const int32_t* row = selection.topk_indices + (r * total_q + t) * top_k;
        for (int64_t slot = 0; slot < top_k && row[slot] != -1; ++slot) {
          visit(t, r, slot, first_block[places[t].sequence] + row[slot]);
        }
      }
    }
  };
  lists.group_offsets.assign(hkv * lists.num_blocks + 1, 0);
  lists.block_offsets.assign(lists.num_blocks + 1, 0);
  for_each_entry([&](int64_t, int64_t r, int64_t, int64_t block) {
    ++lists.group_offsets[r * lists.num_blocks + block + 1];
    ++lists.block_offsets[block + 1];
  });
  for (size_t i = 1; i < lists.group_offsets.size(); ++i) lists.group_offsets[i] += lists.group_offsets[i - 1];
  for (size_t i = 1; i < lists.block_offsets.size(); ++i) lists.block_offsets[i] += lists.block_offsets[i - 1];
  lists.group_queries.resize(lists.group_offsets.back());
  lists.block_rows.resize(lists.block_offsets.back());
  lists.block_slots.resize(lists.block_offsets.back());
  std::vector<int64_t> group_cursor(lists.group_offsets.begin(), lists.group_offsets.end() - 1);
  std::vector<int64_t> block_cursor(lists.block_offsets.begin(), lists.block_offsets.end() - 1);
  for_each_entry([&](int64_t t, int64_t r, int64_t slot, int64_t block) {
    lists.group_queries[group_cursor[r * lists.num_blocks + block]++] = int32_t(t);
    const int64_t at = block_cursor[block]++;
    lists.block_rows[at] = t * hkv + r;
    lists.block_slots[at] = int32_t(slot);
  });
  return lists;
}

template <typename T>
Status ToDevice(const std::vector<T>& host, const char* name, DeviceBuffer<T>* device) {
  MSA_RETURN_IF_ERROR(device->Allocate(int64_t(host.size()), name));
  if (!host.empty()) {
    MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(device->get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

template <typename T>
Status ToHost(const DeviceBuffer<T>& device, int64_t n, T* host) {
  if (n > 0) MSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(host, device.get(), size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  return Status::Ok();
}

// A device array of n doubles filled with NaN, so that an element no kernel writes cannot pass as a value.
Status AllocatePoisoned(int64_t n, const char* name, DeviceBuffer<double>* buffer) {
  MSA_RETURN_IF_ERROR(buffer->Allocate(n, name));
  if (n > 0) MSA_CUDA_RETURN_IF_ERROR(FillDouble(buffer->get(), n, std::numeric_limits<double>::quiet_NaN()));
  return Status::Ok();
}

// The lists and the selection on the device, and the geometry of the call.
struct DeviceLists {
  DeviceBuffer<int64_t> position, key_begin, block_first_key, block_first_pos, group_offsets, block_offsets, block_rows;
  DeviceBuffer<int32_t> key_block, block_keys, group_queries, block_slots, topk;
  TrainingGeometry geometry;

  TrainingLists view() const {
    return {position.get(),        key_begin.get(),  key_block.get(),     block_first_key.get(),
            block_first_pos.get(), block_keys.get(), group_offsets.get(), group_queries.get(),
            block_offsets.get(),   block_rows.get(), block_slots.get()};
  }
};

Status UploadLists(const Config& config, const Batch& batch, const SelectionView& selection, DeviceLists* device) {
  const HostLists lists = BuildLists(config, batch, selection);
  MSA_RETURN_IF_ERROR(ToDevice(lists.position, "positions", &device->position));
  MSA_RETURN_IF_ERROR(ToDevice(lists.key_begin, "key offsets", &device->key_begin));
  MSA_RETURN_IF_ERROR(ToDevice(lists.key_block, "key blocks", &device->key_block));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_first_key, "block key rows", &device->block_first_key));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_first_pos, "block positions", &device->block_first_pos));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_keys, "block sizes", &device->block_keys));
  MSA_RETURN_IF_ERROR(ToDevice(lists.group_offsets, "contributor offsets", &device->group_offsets));
  MSA_RETURN_IF_ERROR(ToDevice(lists.group_queries, "contributors", &device->group_queries));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_offsets, "index contributor offsets", &device->block_offsets));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_rows, "index contributors", &device->block_rows));
  MSA_RETURN_IF_ERROR(ToDevice(lists.block_slots, "index contributor slots", &device->block_slots));
  const int64_t total_q = batch.total_q(), selection_size = int64_t(config.num_kv_heads) * total_q * config.top_k;
  MSA_RETURN_IF_ERROR(device->topk.Allocate(selection_size, "selection"));
  MSA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(device->topk.get(), selection.topk_indices, size_t(selection_size) * 4, cudaMemcpyHostToDevice));
  TrainingGeometry& g = device->geometry;
  g.total_q = total_q;
  g.total_k = batch.total_k();
  g.num_blocks = lists.num_blocks;
  g.hq = config.num_q_heads;
  g.hkv = config.num_kv_heads;
  g.d = config.head_dim;
  g.dv = config.value_dim;
  g.di = config.index_head_dim;
  g.bk = config.block_size;
  g.top_k = config.top_k;
  g.scale = config.SoftmaxScale();
  g.index_scale = config.IndexScale();
  g.rows_n = double(int64_t(config.num_kv_heads) * std::max<int64_t>(total_q, 1));
  return Status::Ok();
}

int LowpOf(Precision precision) { return precision == Precision::kBf16 ? kLowpBF16 : kLowpF16; }

// The forward's out [total_q, Hq, Dv] and lse [total_q, Hq] in exact mode: ExactAttend, the reference's bits.
Status ExactForward(const Config& config, const DeviceTrainingInputs& in, const DeviceLists& lists,
                    DeviceBuffer<double>* out, DeviceBuffer<double>* lse) {
  const TrainingGeometry& g = lists.geometry;
  MSA_RETURN_IF_ERROR(AllocatePoisoned(g.total_q * g.hq * g.dv, "out", out));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(g.total_q * g.hq, "lse", lse));
  MSA_CUDA_RETURN_IF_ERROR(ExactAttend(in.q_wide, in.k_wide, in.v_wide, lists.topk.get(), lists.position.get(),
                                       lists.key_begin.get(), AttendGeometryOf(config, g.total_q), g.scale, out->get(),
                                       lse->get()));
  return Status::Ok();
}

// The device time between Start() and Stop(), written to *seconds when it is not null.
class EventTimer {
 public:
  ~EventTimer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  Status Start() {
    MSA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
    MSA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
    MSA_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_));
    return Status::Ok();
  }
  Status Stop(double* seconds) {
    MSA_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_));
    MSA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    MSA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
    if (seconds != nullptr) *seconds = double(ms) / 1000.0;
    return Status::Ok();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

Status BackwardOnDevice(const Config& config, const Batch& batch, const SelectionView& selection,
                        const DeviceTrainingInputs& in, const AttentionGradients& outputs, double* kernel_seconds) {
  DeviceLists lists;
  MSA_RETURN_IF_ERROR(UploadLists(config, batch, selection, &lists));
  const TrainingGeometry& g = lists.geometry;
  const TrainingLists view = lists.view();
  const int64_t dq_size = g.total_q * g.hq * g.d, dk_size = g.total_k * g.hkv * g.d, dv_size = g.total_k * g.hkv * g.dv;
  DeviceBuffer<double> dq, dk, dv;  // [total_q, Hq, D], [total_k, Hkv, D], [total_k, Hkv, Dv]
  MSA_RETURN_IF_ERROR(AllocatePoisoned(dq_size, "dq", &dq));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(dk_size, "dk", &dk));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(dv_size, "dv", &dv));
  EventTimer timer;
  MSA_RETURN_IF_ERROR(timer.Start());
  if (config.precision == Precision::kExact) {
    DeviceBuffer<double> out, lse, delta;  // [total_q, Hq, Dv], [total_q, Hq], [total_q, Hq]
    MSA_RETURN_IF_ERROR(ExactForward(config, in, lists, &out, &lse));
    MSA_RETURN_IF_ERROR(AllocatePoisoned(g.total_q * g.hq, "delta", &delta));
    MSA_CUDA_RETURN_IF_ERROR(ExactTrainingDelta(in.dout_wide, out.get(), g, delta.get()));
    MSA_CUDA_RETURN_IF_ERROR(ExactBackwardRows(in.q_wide, in.k_wide, in.v_wide, in.dout_wide, in.dlse_wide,
                                               lists.topk.get(), view, g, lse.get(), delta.get(), dq.get()));
    MSA_CUDA_RETURN_IF_ERROR(ExactBackwardKeys(in.q_wide, in.k_wide, in.v_wide, in.dout_wide, in.dlse_wide, view, g,
                                               lse.get(), delta.get(), dk.get(), dv.get()));
    MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the forward's buffers are freed on return
  } else {
    DeviceBuffer<float> row_m, row_l, row_delta;  // [total_q, Hq] each
    MSA_RETURN_IF_ERROR(row_m.Allocate(g.total_q * g.hq, "softmax maxima"));
    MSA_RETURN_IF_ERROR(row_l.Allocate(g.total_q * g.hq, "softmax sums"));
    MSA_RETURN_IF_ERROR(row_delta.Allocate(g.total_q * g.hq, "delta"));
    const int lowp = LowpOf(config.precision);
    MSA_CUDA_RETURN_IF_ERROR(LowpBackwardRows(lowp, in.q, in.k, in.v, in.dout, in.dlse, lists.topk.get(), view, g,
                                              row_m.get(), row_l.get(), row_delta.get(), dq.get()));
    MSA_CUDA_RETURN_IF_ERROR(LowpBackwardKeys(lowp, in.q, in.k, in.v, in.dout, in.dlse, view, g, row_m.get(),
                                              row_l.get(), row_delta.get(), dk.get(), dv.get()));
    MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  }
  MSA_RETURN_IF_ERROR(timer.Stop(kernel_seconds));
  for (const auto& [buffer, size, host] :
       {std::tuple{&dq, dq_size, outputs.dq}, {&dk, dk_size, outputs.dk}, {&dv, dv_size, outputs.dv}}) {
    if (host != nullptr) MSA_RETURN_IF_ERROR(ToHost(*buffer, size, host));
  }
  return Status::Ok();
}

Status IndexerKlOnDevice(const Config& config, const Batch& batch, const SelectionView& selection,
                         const DeviceTrainingInputs& in, const DeviceIndexTensors& index,
                         const IndexerKlOutputs& outputs) {
  DeviceLists lists;
  MSA_RETURN_IF_ERROR(UploadLists(config, batch, selection, &lists));
  const TrainingGeometry& g = lists.geometry;
  const TrainingLists view = lists.view();
  const int64_t rows = g.total_q * g.hkv, dqi_size = rows * g.di, dki_size = g.total_k * g.di;
  DeviceBuffer<double> dqi, dki;           // [total_q, Hidx, Di], [total_k, Di]
  DeviceBuffer<double> ilse, row_kl, lse;  // [total_q * Hidx] (row t * Hidx + r) twice, [total_q, Hq]
  MSA_RETURN_IF_ERROR(AllocatePoisoned(dqi_size, "dqi", &dqi));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(dki_size, "dki", &dki));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(rows, "indexer lse", &ilse));
  MSA_RETURN_IF_ERROR(AllocatePoisoned(rows, "kl rows", &row_kl));
  if (config.precision == Precision::kExact) {
    DeviceBuffer<double> out;  // [total_q, Hq, Dv], unused: ExactAttend writes it with lse
    MSA_RETURN_IF_ERROR(ExactForward(config, in, lists, &out, &lse));
    MSA_CUDA_RETURN_IF_ERROR(ExactKlRows(in.q_wide, in.k_wide, index.index_q_wide, index.index_k_wide, lists.topk.get(),
                                         view, g, lse.get(), ilse.get(), row_kl.get(), dqi.get()));
    MSA_CUDA_RETURN_IF_ERROR(ExactKlKeys(in.q_wide, in.k_wide, index.index_q_wide, index.index_k_wide, view, g,
                                         lse.get(), ilse.get(), dki.get()));
    MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  } else {
    MSA_RETURN_IF_ERROR(AllocatePoisoned(g.total_q * g.hq, "lse", &lse));
    DeviceBuffer<uint16_t> diff;  // [Hidx, total_q, top_k, block_size]
    MSA_RETURN_IF_ERROR(diff.Allocate(rows * g.top_k * g.bk, "rounded rho - pbar"));
    const int lowp = LowpOf(config.precision);
    MSA_CUDA_RETURN_IF_ERROR(LowpKlRows(lowp, in.q, in.k, index.index_q, index.index_k, lists.topk.get(), view, g,
                                        lse.get(), ilse.get(), row_kl.get(), diff.get(), dqi.get()));
    MSA_CUDA_RETURN_IF_ERROR(LowpKlKeys(lowp, index.index_q, diff.get(), view, g, dki.get()));
    MSA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  }
  std::vector<double> row_sums(rows), row_ilse(rows);  // row t * Hidx + r
  MSA_RETURN_IF_ERROR(ToHost(row_kl, rows, row_sums.data()));
  double total = 0.0;
  for (double kl : row_sums) total += kl;  // ascending t, then r
  *outputs.kl_loss = total / g.rows_n;
  MSA_RETURN_IF_ERROR(ToHost(dqi, dqi_size, outputs.dqi));
  MSA_RETURN_IF_ERROR(ToHost(dki, dki_size, outputs.dki));
  if (outputs.teacher_lse != nullptr) MSA_RETURN_IF_ERROR(ToHost(lse, g.total_q * g.hq, outputs.teacher_lse));
  if (outputs.indexer_lse != nullptr) {
    MSA_RETURN_IF_ERROR(ToHost(ilse, rows, row_ilse.data()));
    for (int64_t t = 0; t < g.total_q; ++t) {
      for (int64_t r = 0; r < g.hkv; ++r) outputs.indexer_lse[r * g.total_q + t] = row_ilse[t * g.hkv + r];
    }
  }
  return Status::Ok();
}

void BackwardWithoutQueries(const Config& config, const Batch& batch, const AttentionGradients& outputs) {
  const int64_t key_rows = batch.total_k() * config.num_kv_heads;
  const double scale = config.SoftmaxScale();
  if (outputs.dk != nullptr) std::fill_n(outputs.dk, key_rows * config.head_dim, scale * 0.0);
  if (outputs.dv != nullptr) std::fill_n(outputs.dv, key_rows * config.value_dim, 0.0);
}

void IndexerKlWithoutQueries(const Config& config, const Batch& batch, const IndexerKlOutputs& outputs) {
  *outputs.kl_loss = 0.0 / double(config.num_kv_heads);
  const double index_scale = config.IndexScale();
  if (outputs.dki != nullptr) std::fill_n(outputs.dki, batch.total_k() * config.index_head_dim, index_scale * 0.0);
}

}  // namespace msa::gpu
