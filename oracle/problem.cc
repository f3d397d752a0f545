#include "oracle/problem.h"

#include <string>

#include "oracle/random.h"

namespace msa {
namespace {

SafetensorsTensor MakeTensor(std::string name, DType dtype, int64_t rows, int64_t heads, int64_t dim) {
  SafetensorsTensor tensor;
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = {rows, heads, dim};
  tensor.bytes.assign(rows * heads * dim * DTypeSize(dtype), 0);
  return tensor;
}

// Standard normal values times `scale`, or (few_valued) values from {-1, 0, 1} times `scale`.
SafetensorsTensor RandomTensor(std::string name, DType dtype, int64_t rows, int64_t heads, int64_t dim, uint64_t seed,
                               uint64_t stream, double scale = 1.0, bool few_valued = false) {
  SafetensorsTensor tensor = MakeTensor(std::move(name), dtype, rows, heads, dim);
  RandomStream random(seed, stream);
  for (int64_t e = 0; e < rows * heads * dim; ++e) {
    const double value = few_valued ? double(random.Below(3) - 1) : random.Normal();
    StoreElement(tensor, e, scale * value);
  }
  return tensor;
}

}  // namespace

Problem GenerateProblem(const ProblemSpec& spec) {
  Problem problem;
  problem.config = spec.config;
  problem.cu_seqlens_q = {0};
  problem.cu_seqlens_k = {0};
  for (const auto& [q_len, k_len] : spec.lengths) {
    problem.cu_seqlens_q.push_back(problem.cu_seqlens_q.back() + q_len);
    problem.cu_seqlens_k.push_back(problem.cu_seqlens_k.back() + k_len);
  }
  const Config& c = spec.config;
  const int64_t total_q = problem.cu_seqlens_q.back(), total_k = problem.cu_seqlens_k.back();
  problem.q = RandomTensor("q", spec.dtype, total_q, c.num_q_heads, c.head_dim, spec.seed, 1, spec.query_scale);
  problem.k = RandomTensor("k", spec.dtype, total_k, c.num_kv_heads, c.head_dim, spec.seed, 2);
  problem.v = RandomTensor("v", spec.dtype, total_k, c.num_kv_heads, c.value_dim, spec.seed, 3);
  problem.index_q = RandomTensor("index_q", spec.dtype, total_q, c.num_kv_heads, c.index_head_dim, spec.seed, 4,
                                 spec.query_scale, spec.few_valued_index);
  problem.index_k =
      RandomTensor("index_k", spec.dtype, total_k, 1, c.index_head_dim, spec.seed, 5, 1.0, spec.few_valued_index);
  if (spec.training) {
    problem.dout = RandomTensor("dout", spec.dtype, total_q, c.num_q_heads, c.value_dim, spec.seed, 6);
    if (spec.with_dlse) {
      problem.dlse = RandomTensor("dlse", spec.dtype, total_q, c.num_q_heads, 1, spec.seed, 7);
      problem.dlse->shape = {total_q, c.num_q_heads};
    }
  }
  return problem;
}

namespace {

// With dout: the backward and the indexer KL of `backend` on the selection it made.
Status RunTraining(const Backend& backend, const Config& config, const Problem& problem, Outputs* outputs) {
  if (!problem.dout) return Status::Ok();
  const SelectionView selection{outputs->topk_indices.data()};
  MSA_RETURN_IF_ERROR(Backward(backend, config, problem.attention_inputs(), selection, problem.gradient_inputs(),
                               outputs->attention_gradients()));
  return IndexerKl(backend, config, problem.index_inputs(), problem.attention_inputs(), selection,
                   outputs->indexer_kl_outputs());
}

}  // namespace

Status RunBackend(const Backend& backend, const Problem& problem, Outputs* outputs, const ProgressFn& select_progress,
                  const ProgressFn& attend_progress) {
  // Validate before allocating: the output sizes come from the (possibly hostile) shapes.
  MSA_RETURN_IF_ERROR(ValidateProblem(problem));
  outputs->Allocate(problem);
  MSA_RETURN_IF_ERROR(
      Select(backend, problem.config, problem.index_inputs(), outputs->selection_outputs(), select_progress));
  const std::string select_plan = backend.last_plan != nullptr ? backend.last_plan() : "";
  MSA_RETURN_IF_ERROR(Attend(backend, problem.config, problem.attention_inputs(),
                             SelectionView{outputs->topk_indices.data()}, outputs->attention_outputs(),
                             attend_progress));
  const std::string attend_plan = backend.last_plan != nullptr ? backend.last_plan() : "";
  outputs->kernel_plan = select_plan + (!select_plan.empty() && !attend_plan.empty() ? "," : "") + attend_plan;
  return RunTraining(backend, problem.config, problem, outputs);
}

Status RunReference(const Problem& problem, Outputs* outputs) {
  MSA_RETURN_IF_ERROR(ValidateProblem(problem));
  Config exact = problem.config;
  exact.precision = Precision::kExact;
  const Backend& reference = *FindBackend("reference");
  outputs->Allocate(problem);
  MSA_RETURN_IF_ERROR(Select(reference, exact, problem.index_inputs(), outputs->selection_outputs()));
  MSA_RETURN_IF_ERROR(Attend(reference, exact, problem.attention_inputs(), SelectionView{outputs->topk_indices.data()},
                             outputs->attention_outputs()));
  return RunTraining(reference, exact, problem, outputs);
}

}  // namespace msa
