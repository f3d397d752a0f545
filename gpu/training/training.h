// The gpu backend's training functions (SPEC section 8) over inputs already on the device: the contributor lists
// built on the host from the selection and uploaded, the kernels of gpu/training/training_kernels.h, the outputs
// downloaded into the caller's host arrays. gpu/gpu_backend.cc uploads the views (host views packed and copied,
// device views read where they are) and calls these. Exact mode gives reference/training.cc's bits; bf16 and fp16 are
// judged by the oracle (training_lowp.cu says where they round). Host code (no CUDA types cross here).
#ifndef MSA_GPU_TRAINING_TRAINING_H_
#define MSA_GPU_TRAINING_TRAINING_H_

#include <cstdint>

#include "msa/msa.h"

namespace msa::gpu {

// The main branch's inputs and upstream gradients on the device, packed: [total_q, Hq, D], [total_k, Hkv, D],
// [total_k, Hkv, Dv], dout [total_q, Hq, Dv], dlse [total_q, Hq] (nullptr: none). Exact mode reads the doubles,
// bf16 / fp16 the 16-bit values of that format; the other set may be null.
struct DeviceTrainingInputs {
  const double* q_wide = nullptr;
  const double* k_wide = nullptr;
  const double* v_wide = nullptr;
  const double* dout_wide = nullptr;
  const double* dlse_wide = nullptr;
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const uint16_t* dout = nullptr;
  const uint16_t* dlse = nullptr;
};

// index_q [total_q, Hidx, Di] and index_k [total_k, Di] on the device, packed, as DeviceTrainingInputs holds its own.
struct DeviceIndexTensors {
  const double* index_q_wide = nullptr;
  const double* index_k_wide = nullptr;
  const uint16_t* index_q = nullptr;
  const uint16_t* index_k = nullptr;
};

// Preconditions of both: the front end's validation passed (msa.h Backward / IndexerKl), total_q > 0, a usable device,
// config.precision exact (with gpu/common/kernel_fits.h ExactFits), bf16 or fp16 (dims up to kLowpMaxDim); `outputs`
// are host arrays sized as in msa.h.
// dq, dk, dv. Exact mode runs ExactAttend for the forward's out and lse first (their bits are the reference's). A null
// output is computed but not downloaded; with `kernel_seconds`, the device time of the kernels (the exact forward
// included, the lists' upload and the downloads not) is written there.
Status BackwardOnDevice(const Config& config, const Batch& batch, const SelectionView& selection,
                        const DeviceTrainingInputs& inputs, const AttentionGradients& outputs,
                        double* kernel_seconds = nullptr);
// kl_loss (the rows' sums added on the host in ascending t, then r, one division by N), dqi, dki and, where asked,
// teacher_lse and indexer_lse. Exact mode reads v (ExactAttend's lse); bf16 / fp16 do not.
Status IndexerKlOnDevice(const Config& config, const Batch& batch, const SelectionView& selection,
                         const DeviceTrainingInputs& inputs, const DeviceIndexTensors& index,
                         const IndexerKlOutputs& outputs);

// A batch without queries (total_q == 0), on the host: what the reference writes then. Backward: dk = scale * 0 and
// dv = 0 for every key row; IndexerKl: kl_loss = 0 / N, dki = index_scale * 0. Null pointers are skipped.
void BackwardWithoutQueries(const Config& config, const Batch& batch, const AttentionGradients& outputs);
void IndexerKlWithoutQueries(const Config& config, const Batch& batch, const IndexerKlOutputs& outputs);

}  // namespace msa::gpu

#endif  // MSA_GPU_TRAINING_TRAINING_H_
