// mo.reference, mo.select, mo.attend: the library's entry points on the caller's arrays, viewed in place, with FP64
// outputs in new numpy arrays (the Python layer hands them back as the inputs' kind).
#include <algorithm>
#include <climits>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "io/file_contract.h"
#include "python/src/arrays.h"
#include "python/src/gil.h"
#include "python/src/module.h"

namespace msa::python {
namespace {

// The backend a call names ("auto": the fastest available one that supports the config), or ValueError.
const Backend& ChooseBackend(const std::string& name, const Config& config) {
  if (name == "auto") {
    const Backend* fastest = FastestBackend(config);
    if (fastest == nullptr) throw UnsupportedError("no backend available here supports " + DescribeConfig(config));
    return *fastest;
  }
  const Backend* backend = FindBackend(name);
  if (backend == nullptr) {
    std::string known;
    for (const Backend& b : AllBackends()) known += (known.empty() ? "" : ", ") + std::string(b.name);
    throw nb::value_error(("backend=\"" + name + "\": not compiled in (compiled in: " + known + ", or auto)").c_str());
  }
  return *backend;
}

// The config of a call: the msa_config fields, heads and dims from the shapes.
Config ConfigOf(const std::string& config_json, int hq, int hkv, int d, int dv, int di) {
  Config config;
  ThrowIfError(ConfigFromJson(config_json, "config", &config));
  config.num_q_heads = hq;
  config.num_kv_heads = hkv;
  config.head_dim = d;
  config.value_dim = dv;
  config.index_head_dim = di;
  return config;
}

struct IndexArgs {
  IndexInputs inputs;
  explicit IndexArgs(const Array& index_q, const Array& index_k, const Array& cu_q, const Array& cu_k) {
    inputs.index_q = FloatTensor(index_q, "index_q", "[total_q, Hidx, Di]");
    inputs.index_k = FloatTensor(index_k, "index_k", "[total_k, 1, Di]");
    inputs.batch = {Int32Vector(cu_q, "cu_seqlens_q"), Int32Vector(cu_k, "cu_seqlens_k")};
  }
};

struct AttentionArgs {
  AttentionInputs inputs;
  AttentionArgs(const Array& q, const Array& k, const Array& v, const Array& cu_q, const Array& cu_k) {
    inputs.q = FloatTensor(q, "q", "[total_q, Hq, D]");
    inputs.k = FloatTensor(k, "k", "[total_k, Hkv, D]");
    inputs.v = FloatTensor(v, "v", "[total_k, Hkv, Dv]");
    inputs.batch = {Int32Vector(cu_q, "cu_seqlens_q"), Int32Vector(cu_k, "cu_seqlens_k")};
  }
};

int Int(int64_t value) { return int(std::min<int64_t>(value, INT32_MAX)); }

// What Select writes, owned until it becomes numpy arrays.
struct SelectionResult {
  std::vector<int32_t> topk_indices;  // [Hidx, total_q, top_k]
  std::vector<double> block_scores;   // [Hidx, total_q, max_blocks]
  std::vector<double> index_lse;      // [Hidx, total_q]
  size_t hidx = 0, total_q = 0, top_k = 0, max_blocks = 0;

  void Allocate(const Config& config, const Batch& batch) {
    hidx = size_t(config.num_kv_heads);
    total_q = size_t(batch.total_q());
    top_k = size_t(config.top_k);
    max_blocks = size_t(MaxBlocks(config, batch));
    topk_indices.assign(hidx * total_q * top_k, INT32_MIN);  // poison: an unwritten slot can never pass as an id
    block_scores.assign(hidx * total_q * max_blocks, std::numeric_limits<double>::quiet_NaN());
    index_lse.assign(hidx * total_q, std::numeric_limits<double>::quiet_NaN());
  }
  void Into(nb::dict& result) {
    result["topk_indices"] = NumpyArray(std::move(topk_indices), {hidx, total_q, top_k});
    result["block_scores"] = NumpyArray(std::move(block_scores), {hidx, total_q, max_blocks});
    result["index_lse"] = NumpyArray(std::move(index_lse), {hidx, total_q});
  }
};

struct AttentionResult {
  std::vector<double> out;  // [total_q, Hq, Dv]
  std::vector<double> lse;  // [total_q, Hq]
  size_t total_q = 0, hq = 0, dv = 0;

  void Allocate(const Config& config, const Batch& batch) {
    total_q = size_t(batch.total_q());
    hq = size_t(config.num_q_heads);
    dv = size_t(config.value_dim);
    out.assign(total_q * hq * dv, std::numeric_limits<double>::quiet_NaN());
    lse.assign(total_q * hq, std::numeric_limits<double>::quiet_NaN());
  }
  void Into(nb::dict& result) {
    result["out"] = NumpyArray(std::move(out), {total_q, hq, dv});
    result["lse"] = NumpyArray(std::move(lse), {total_q, hq});
  }
};

std::string PlanOf(const Backend& backend) { return backend.last_plan != nullptr ? backend.last_plan() : ""; }

nb::dict SelectBinding(const std::string& config_json, const Array& index_q, const Array& index_k, const Array& cu_q,
                       const Array& cu_k, const std::string& backend_name) {
  IndexArgs args(index_q, index_k, cu_q, cu_k);
  const TensorView& iq = args.inputs.index_q;
  const Config config = ConfigOf(config_json, Int(iq.heads), Int(iq.heads), Int(iq.dim), Int(iq.dim), Int(iq.dim));
  const Backend& backend = ChooseBackend(backend_name, config);
  SelectionResult selection;
  std::string plan;
  {
    WithoutGil unlocked;
    ThrowIfError(ValidateIndexInputs(config, args.inputs));  // before the outputs are sized from the batch
    selection.Allocate(config, args.inputs.batch);
    ThrowIfError(Select(backend, config, args.inputs,
                        {selection.topk_indices.data(), selection.block_scores.data(), selection.index_lse.data()}));
    plan = PlanOf(backend);
  }
  nb::dict result;
  selection.Into(result);
  result["backend"] = std::string(backend.name);
  result["kernel_plan"] = plan;
  return result;
}

nb::dict AttendBinding(const std::string& config_json, const Array& q, const Array& k, const Array& v,
                       const Array& topk_indices, const Array& cu_q, const Array& cu_k,
                       const std::string& backend_name) {
  AttentionArgs args(q, k, v, cu_q, cu_k);
  const AttentionInputs& in = args.inputs;
  const Config config =
      ConfigOf(config_json, Int(in.q.heads), Int(in.k.heads), Int(in.q.dim), Int(in.v.dim), Int(in.q.dim));
  const int32_t* ids = Int32Selection(topk_indices, "topk_indices",
                                      {int64_t(config.num_kv_heads), in.batch.total_q(), int64_t(config.top_k)});
  const Backend& backend = ChooseBackend(backend_name, config);
  AttentionResult attention;
  std::string plan;
  {
    WithoutGil unlocked;
    ThrowIfError(ValidateAttentionInputs(config, in));
    attention.Allocate(config, in.batch);
    ThrowIfError(Attend(backend, config, in, SelectionView{ids}, {attention.out.data(), attention.lse.data()}));
    plan = PlanOf(backend);
  }
  nb::dict result;
  attention.Into(result);
  result["backend"] = std::string(backend.name);
  result["kernel_plan"] = plan;
  return result;
}

nb::dict ReferenceBinding(const std::string& config_json, const Array& q, const Array& k, const Array& v,
                          const Array& index_q, const Array& index_k, const Array& cu_q, const Array& cu_k,
                          const std::string& backend_name) {
  AttentionArgs attention_args(q, k, v, cu_q, cu_k);
  IndexArgs index_args(index_q, index_k, cu_q, cu_k);
  const AttentionInputs& in = attention_args.inputs;
  const Config config = ConfigOf(config_json, Int(in.q.heads), Int(in.k.heads), Int(in.q.dim), Int(in.v.dim),
                                 Int(index_args.inputs.index_q.dim));
  const Backend& backend = ChooseBackend(backend_name, config);
  SelectionResult selection;
  AttentionResult attention;
  std::string plan;
  {
    WithoutGil unlocked;
    ThrowIfError(ValidateIndexInputs(config, index_args.inputs));
    ThrowIfError(ValidateAttentionInputs(config, in));
    selection.Allocate(config, in.batch);
    attention.Allocate(config, in.batch);
    ThrowIfError(Run(backend, config, index_args.inputs, in,
                     {selection.topk_indices.data(), selection.block_scores.data(), selection.index_lse.data()},
                     {attention.out.data(), attention.lse.data()}));
    plan = PlanOf(backend);
  }
  nb::dict result;
  selection.Into(result);
  attention.Into(result);
  result["backend"] = std::string(backend.name);
  result["kernel_plan"] = plan;
  return result;
}

// Training (SPEC section 8) on a given selection: dq, dk, dv, kl_loss, dqi, dki and the two LSEs. dlse: [total_q, Hq,
// 1] (the Python layer adds the axis) or None.
nb::dict TrainingBinding(const std::string& config_json, const Array& q, const Array& k, const Array& v,
                         const Array& index_q, const Array& index_k, const Array& topk_indices, const Array& cu_q,
                         const Array& cu_k, const Array& dout, std::optional<Array> dlse,
                         const std::string& backend_name) {
  AttentionArgs attention_args(q, k, v, cu_q, cu_k);
  IndexArgs index_args(index_q, index_k, cu_q, cu_k);
  const AttentionInputs& in = attention_args.inputs;
  const Config config = ConfigOf(config_json, Int(in.q.heads), Int(in.k.heads), Int(in.q.dim), Int(in.v.dim),
                                 Int(index_args.inputs.index_q.dim));
  const int32_t* ids = Int32Selection(topk_indices, "topk_indices",
                                      {int64_t(config.num_kv_heads), in.batch.total_q(), int64_t(config.top_k)});
  GradientInputs gradients{FloatTensor(dout, "dout", "[total_q, Hq, Dv]"), {}};
  if (dlse) gradients.dlse = FloatTensor(*dlse, "dlse", "[total_q, Hq, 1] (dlse [total_q, Hq] with an axis added)");
  const Backend& backend = ChooseBackend(backend_name, config);
  const int64_t total_q = in.batch.total_q(), total_k = in.batch.total_k();
  std::vector<double> dq(total_q * config.num_q_heads * config.head_dim),
      dk(total_k * config.num_kv_heads * config.head_dim), dv(total_k * config.num_kv_heads * config.value_dim),
      dqi(total_q * config.num_kv_heads * config.index_head_dim), dki(total_k * config.index_head_dim),
      teacher_lse(total_q * config.num_q_heads), indexer_lse(config.num_kv_heads * total_q), kl_loss(1);
  {
    WithoutGil unlocked;
    ThrowIfError(Backward(backend, config, in, SelectionView{ids}, gradients, {dq.data(), dk.data(), dv.data()}));
    ThrowIfError(IndexerKl(backend, config, index_args.inputs, in, SelectionView{ids},
                           {kl_loss.data(), dqi.data(), dki.data(), teacher_lse.data(), indexer_lse.data()}));
  }
  const auto size = [](int64_t n) { return size_t(n); };
  nb::dict result;
  result["dq"] = NumpyArray(std::move(dq), {size(total_q), size(config.num_q_heads), size(config.head_dim)});
  result["dk"] = NumpyArray(std::move(dk), {size(total_k), size(config.num_kv_heads), size(config.head_dim)});
  result["dv"] = NumpyArray(std::move(dv), {size(total_k), size(config.num_kv_heads), size(config.value_dim)});
  result["dqi"] = NumpyArray(std::move(dqi), {size(total_q), size(config.num_kv_heads), size(config.index_head_dim)});
  result["dki"] = NumpyArray(std::move(dki), {size(total_k), 1, size(config.index_head_dim)});
  result["kl_loss"] = NumpyArray(std::move(kl_loss), {});
  result["teacher_lse"] = NumpyArray(std::move(teacher_lse), {size(total_q), size(config.num_q_heads)});
  result["indexer_lse"] = NumpyArray(std::move(indexer_lse), {size(config.num_kv_heads), size(total_q)});
  result["backend"] = std::string(backend.name);
  return result;
}

}  // namespace

void AddComputeFunctions(nb::module_& m) {
  m.def("training", &TrainingBinding, "config_json"_a, "q"_a, "k"_a, "v"_a, "index_q"_a, "index_k"_a, "topk_indices"_a,
        "cu_seqlens_q"_a, "cu_seqlens_k"_a, "dout"_a, "dlse"_a.none(), "backend"_a);
  m.def("select", &SelectBinding, "config_json"_a, "index_q"_a, "index_k"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a,
        "backend"_a);
  m.def("attend", &AttendBinding, "config_json"_a, "q"_a, "k"_a, "v"_a, "topk_indices"_a, "cu_seqlens_q"_a,
        "cu_seqlens_k"_a, "backend"_a);
  m.def("reference", &ReferenceBinding, "config_json"_a, "q"_a, "k"_a, "v"_a, "index_q"_a, "index_k"_a,
        "cu_seqlens_q"_a, "cu_seqlens_k"_a, "backend"_a);
}

}  // namespace msa::python
