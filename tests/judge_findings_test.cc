// The judge on real implementations' outputs, through `msa check` as a user runs it. Each
// candidate is written by an emulation in this file, from the convention it models (SPEC sections 5 and 9), not
// by the code under test: fp32 loops for the official FP32 references, the selection orders of vLLM and the
// official decode-attention layout, planted swaps against the FP64 block scores.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/file_contract.h"
#include "msa/forced_blocks.h"
#include "oracle/cases.h"
#include "reference/reference.h"
#include "tests/run_cli.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

const TestCase& CaseNamed(const std::vector<TestCase>& cases, const std::string& prefix) {
  for (const TestCase& c : cases) {
    if (c.name.rfind(prefix, 0) == 0) return c;
  }
  ADD_FAILURE() << "no case " << prefix;
  return cases.front();
}

SafetensorsTensor Tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                         const std::vector<double>& values) {
  SafetensorsTensor tensor{name, dtype, std::move(shape), {}};
  tensor.bytes.resize(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* at = tensor.bytes.data() + i * DTypeSize(dtype);
    switch (dtype) {
      case DType::kF64:
        std::memcpy(at, &values[i], 8);
        break;
      case DType::kF32: {
        const float f = float(values[i]);
        std::memcpy(at, &f, 4);
        break;
      }
      case DType::kBF16: {
        const uint16_t b = DoubleToBF16(values[i]);
        std::memcpy(at, &b, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t b = DoubleToF16(values[i]);
        std::memcpy(at, &b, 2);
        break;
      }
      default:
        ADD_FAILURE() << "not a float dtype";
    }
  }
  return tensor;
}

SafetensorsTensor Ids(std::vector<int64_t> shape, const std::vector<int32_t>& ids) {
  SafetensorsTensor tensor{"topk_indices", DType::kI32, std::move(shape), {}};
  tensor.bytes.resize(ids.size() * 4);
  std::memcpy(tensor.bytes.data(), ids.data(), tensor.bytes.size());
  return tensor;
}

// One golden-like case on disk: its inputs and the FP64 reference's outputs, and candidates judged against them.
class JudgeFindings : public testing::Test {
 public:  // the emulations below read the case through these
  void Load(const TestCase& test_case) {
    name_ = test_case.name;
    problem_ = GenerateProblem(test_case.spec);
    dir_ = fs::temp_directory_path() / ("msa_judge_findings_" + std::to_string(getpid()) + "_" + name_);
    fs::create_directories(dir_);
    ASSERT_TRUE(WriteSafetensors(Path("inputs.safetensors"), ProblemToSafetensors(problem_)).ok());
    ASSERT_TRUE(RunReference(problem_, &reference_).ok());
    total_q_ = problem_.batch().total_q();
    places_ = reference::PlaceQueries(problem_.batch());
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& file) const { return (dir_ / file).string(); }

  // Writes a candidate with `tensors` and `metadata`, runs msa check with `flags`; the JSON report in *report.
  CliResult Check(const std::vector<SafetensorsTensor>& tensors, const std::map<std::string, std::string>& metadata,
                  const std::vector<std::string>& flags, nlohmann::json* report = nullptr) {
    SafetensorsFile file;
    file.tensors = tensors;
    for (const auto& [key, value] : metadata) file.metadata[key] = value;
    EXPECT_TRUE(WriteSafetensors(Path("theirs.safetensors"), file).ok());
    std::vector<std::string> args = {
        "check",  "--inputs",         Path("inputs.safetensors"), "--outputs", Path("theirs.safetensors"),
        "--json", Path("report.json")};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult result = RunMsa(args);
    if (report != nullptr && result.code != 2) *report = nlohmann::json::parse(std::ifstream(Path("report.json")));
    return result;
  }

  CliResult CheckFp32Indexer(nlohmann::json* report);  // below Fp32Indexer

  const Config& config() const { return problem_.config; }
  std::vector<int64_t> HeadMajorShape() const { return {config().num_kv_heads, total_q_, config().top_k}; }
  int64_t Visible(int64_t t) const { return places_[t].position / config().block_size + 1; }
  const double* ExactScores(int64_t r, int64_t t) const {
    return &reference_.block_scores[(r * total_q_ + t) * MaxBlocks(config(), problem_.batch())];
  }

  std::string name_;
  fs::path dir_;
  Problem problem_;
  Outputs reference_;
  int64_t total_q_ = 0;
  std::vector<reference::QueryPlace> places_;
};

// ---- fp32 emulations (float arithmetic, the way the official FP32 references compute) ----------------------

std::vector<float> AsFloats(const SafetensorsTensor& tensor) {
  const TensorView view = ViewOf(tensor);
  std::vector<float> values(view.rows * view.heads * view.dim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(LoadAsDouble(view.data, view.dtype, int64_t(i)));
  return values;
}

float DotF(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// An fp32 indexer: token scores dot * scale in fp32, block max, ranked by (score desc, id asc) with the forced
// blocks of SPEC section 2 in canonical slots, index_lse in fp32 over the selected keys. With fp16 scores (the
// official use_fp16_score) the block maxima are stored as binary16 and ranked so, and index_lse is the logsumexp
// over the selected blocks of fp16(max) + log(sum exp(x - max)).
struct IndexerOutputs {
  std::vector<int32_t> topk;      // [Hidx, total_q, top_k]
  std::vector<double> index_lse;  // [Hidx, total_q]
};

IndexerOutputs Fp32Indexer(const Problem& problem) {
  const Config& c = problem.config;
  const std::vector<float> iq = AsFloats(problem.index_q), ik = AsFloats(problem.index_k);
  const auto places = reference::PlaceQueries(problem.batch());
  const int64_t total_q = problem.batch().total_q(), di = c.index_head_dim, bk = c.block_size;
  const bool fp16 = c.score_format == ScoreFormat::kFp16;
  IndexerOutputs outputs{std::vector<int32_t>(c.num_kv_heads * total_q * c.top_k, -1),
                         std::vector<double>(c.num_kv_heads * total_q)};
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t r = 0; r < c.num_kv_heads; ++r) {
      const int64_t n = places[t].position + 1, visible = places[t].position / bk + 1;
      std::vector<float> x(n), block_max(visible, -INFINITY), ranked(visible);
      for (int64_t s = 0; s < n; ++s) {
        x[s] =
            DotF(&iq[(t * c.num_kv_heads + r) * di], &ik[(places[t].key_begin + s) * di], di) * float(c.IndexScale());
        block_max[s / bk] = std::max(block_max[s / bk], x[s]);
      }
      for (int64_t b = 0; b < visible; ++b) ranked[b] = fp16 ? float(RoundToBinary16(block_max[b])) : block_max[b];
      const ForcedBlocks f = ForcedBlocksOf(visible, c.init_blocks, c.local_blocks, c.top_k);
      std::vector<int32_t> candidates(f.candidates());
      std::iota(candidates.begin(), candidates.end(), int32_t(f.init_end));
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int32_t a, int32_t b) { return ranked[a] > ranked[b]; });
      int32_t* row = &outputs.topk[(r * total_q + t) * c.top_k];
      int64_t slot = 0;
      for (int64_t j = 0; j < f.take; ++j) row[slot++] = candidates[j];
      for (int64_t b = 0; b < f.init_end; ++b) row[slot++] = int32_t(b);
      for (int64_t b = f.local_begin; b <= f.local; ++b) row[slot++] = int32_t(b);
      std::vector<int32_t> chosen(row, row + slot);
      std::sort(chosen.begin(), chosen.end());
      std::vector<float> terms;  // native: the selected token scores; fp16: one term per selected block
      for (int32_t b : chosen) {
        const int64_t first = b * bk, last = std::min(first + bk, n);
        if (!fp16) {
          terms.insert(terms.end(), &x[first], &x[last]);
          continue;
        }
        float sum = 0;
        for (int64_t s = first; s < last; ++s) sum += std::exp(x[s] - block_max[b]);
        terms.push_back(ranked[b] + std::log(sum));
      }
      const float m = *std::max_element(terms.begin(), terms.end());
      float sum = 0;
      for (float term : terms) sum += std::exp(term - m);
      outputs.index_lse[r * total_q + t] = m + std::log(sum);
    }
  }
  return outputs;
}

// msa check on what Fp32Indexer writes for the loaded case: its ids and an F32 index_lse.
CliResult JudgeFindings::CheckFp32Indexer(nlohmann::json* report) {
  const IndexerOutputs indexer = Fp32Indexer(problem_);
  return Check({Ids(HeadMajorShape(), indexer.topk),
                Tensor("index_lse", DType::kF32, {config().num_kv_heads, total_q_}, indexer.index_lse)},
               {}, {}, report);
}

// FP32 attention on a selection as the official FP32 reference and FlashAttention-style kernels compute it: q
// pre-scaled in fp32 (q * scale before the dot), scores, softmax with its running max, out and lse in fp32.
struct AttentionOutputs32 {
  std::vector<double> out, lse;
};

AttentionOutputs32 Fp32PrescaledAttention(const Problem& problem, const std::vector<int32_t>& topk) {
  const Config& c = problem.config;
  const std::vector<float> q = AsFloats(problem.q), k = AsFloats(problem.k), v = AsFloats(problem.v);
  const auto places = reference::PlaceQueries(problem.batch());
  const int64_t total_q = problem.batch().total_q(), d = c.head_dim, dv = c.value_dim, hkv = c.num_kv_heads;
  AttentionOutputs32 outputs{std::vector<double>(total_q * c.num_q_heads * dv),
                             std::vector<double>(total_q * c.num_q_heads)};
  for (int64_t t = 0; t < total_q; ++t) {
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      const int64_t r = h / c.group_size();
      std::vector<float> query(d);
      for (int64_t i = 0; i < d; ++i) query[i] = q[(t * c.num_q_heads + h) * d + i] * float(c.SoftmaxScale());
      std::vector<int64_t> keys;
      for (int64_t slot = 0; slot < c.top_k && topk[(r * total_q + t) * c.top_k + slot] >= 0; ++slot) {
        const int64_t b = topk[(r * total_q + t) * c.top_k + slot];
        for (int64_t s = b * c.block_size; s < std::min<int64_t>((b + 1) * c.block_size, places[t].position + 1); ++s) {
          keys.push_back(s);
        }
      }
      std::vector<float> scores;
      for (int64_t s : keys) scores.push_back(DotF(query.data(), &k[((places[t].key_begin + s) * hkv + r) * d], d));
      const float m = *std::max_element(scores.begin(), scores.end());
      float l = 0;
      std::vector<float> acc(dv, 0.0f);
      for (size_t j = 0; j < keys.size(); ++j) {
        const float p = std::exp(scores[j] - m);
        l += p;
        for (int64_t e = 0; e < dv; ++e) acc[e] += p * v[((places[t].key_begin + keys[j]) * hkv + r) * dv + e];
      }
      for (int64_t e = 0; e < dv; ++e) outputs.out[(t * c.num_q_heads + h) * dv + e] = acc[e] / l;
      outputs.lse[t * c.num_q_heads + h] = m + std::log(l);
    }
  }
  return outputs;
}

// ---- finding: a wrong selection passed because tau came from bf16 scores -------------------------------------

// The reference selection with, in every row where one exists, the lowest-ranked history block swapped for an
// unselected block scoring 0.005 to 0.008 below it (FP64 scores): wrong by more than the official validator's
// 5e-3, yet inside the tau of bf16 scores (about 0.008 on this case), which the judge once took from out's dtype.
std::vector<int32_t> SwapWorstHistoryBlock(const JudgeFindings& f, const Outputs& reference, int64_t* swapped) {
  const Config& c = f.config();
  std::vector<int32_t> topk = reference.topk_indices;
  *swapped = 0;
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < f.total_q_; ++t) {
      const ForcedBlocks forced = ForcedBlocksOf(f.Visible(t), c.init_blocks, c.local_blocks, c.top_k);
      if (forced.take == 0) continue;
      int32_t* row = &topk[(r * f.total_q_ + t) * c.top_k];
      const double* scores = f.ExactScores(r, t);
      const double worst = scores[row[forced.take - 1]];
      for (int64_t b = forced.init_end; b < forced.local_begin; ++b) {
        const bool selected = std::find(row, row + forced.take, b) != row + forced.take;
        if (!selected && worst - scores[b] > 0.005 && worst - scores[b] <= 0.008) {
          row[forced.take - 1] = int32_t(b);
          ++*swapped;
          break;
        }
      }
    }
  }
  return topk;
}

TEST_F(JudgeFindings, SwappedBlocksFailWhateverTheDtypeOfOut) {
  Load(CaseNamed(DialectCases(), "dialect_m3_decode"));
  int64_t swapped = 0;
  const std::vector<int32_t> wrong = SwapWorstHistoryBlock(*this, reference_, &swapped);
  ASSERT_GE(swapped, 3) << "the case must hold such rows";
  // The kernel's attention is right on its own (wrong) selection, so only the selection can fail.
  Outputs own = reference_;
  ASSERT_TRUE(reference::AttendSelected(config(), problem_.attention_inputs(), SelectionView{wrong.data()},
                                        own.attention_outputs(), {})
                  .ok());
  const std::vector<int64_t> out_shape = {total_q_, config().num_q_heads, config().value_dim};
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
    nlohmann::json report;
    const CliResult result =
        Check({Ids(HeadMajorShape(), wrong), Tensor("out", dtype, out_shape, own.out)}, {}, {}, &report);
    EXPECT_EQ(result.code, 1) << DTypeName(dtype) << "\n" << result.out;
    EXPECT_EQ(report["selection"]["violation_rows"], swapped) << DTypeName(dtype) << "\n" << result.out;
    EXPECT_LT(report["rules"]["tau"].get<double>(), 5e-3) << "tau must stay inside the official band";
  }
  // Ids alone: the score precision is fp32 too.
  nlohmann::json report;
  EXPECT_EQ(Check({Ids(HeadMajorShape(), wrong)}, {}, {}, &report).code, 1);
  EXPECT_EQ(report["rules"]["score_precision"], "fp32");
  // A candidate that declares bf16 scores gets the bf16 tau, and the report says it was declared.
  const CliResult declared =
      Check({Ids(HeadMajorShape(), reference_.topk_indices)}, {{"score_precision", "bf16"}}, {}, &report);
  EXPECT_EQ(declared.code, 0) << declared.out;
  EXPECT_NE(declared.out.find("scores: bf16 (metadata score_precision)"), std::string::npos) << declared.out;
  EXPECT_GT(report["rules"]["tau"].get<double>(), 1e-2);
}

// ---- findings: correct official fp32 outputs failed -----------------------------------------------------------

TEST_F(JudgeFindings, AnFp32IndexersIdsAndIndexLseAreJudgedAtFp32) {
  for (const char* name : {"dialect_m3_decode", "dialect_m3_prefill", "dialect_init_local", "dialect_chunked"}) {
    Load(CaseNamed(DialectCases(), name));
    nlohmann::json report;
    const CliResult result = CheckFp32Indexer(&report);
    EXPECT_EQ(result.code, 0) << name << "\n" << result.out;
    EXPECT_EQ(report["tensors"][0]["precision"], "fp32") << name;
    TearDown();
  }
}

TEST_F(JudgeFindings, TheOfficialFp32AttentionThatPrescalesQPassesOnLargeLogits) {
  for (const auto& [cases, name] :
       {std::pair{LargeCases(), "m3_large_logits"}, std::pair{DialectCases(), "dialect_large_logits"},
        std::pair{CanonicalCases(), "large_logits"}, std::pair{DialectCases(), "dialect_chunked"}}) {
    Load(CaseNamed(cases, name));
    const AttentionOutputs32 ours = Fp32PrescaledAttention(problem_, reference_.topk_indices);
    const std::vector<int64_t> out_shape = {total_q_, config().num_q_heads, config().value_dim};
    const CliResult result = Check({Tensor("out", DType::kF32, out_shape, ours.out),
                                    Tensor("lse", DType::kF32, {total_q_, config().num_q_heads}, ours.lse)},
                                   {}, {});
    EXPECT_EQ(result.code, 0) << name << "\n" << result.out;
    TearDown();
  }
}

TEST_F(JudgeFindings, TheOfficialFp16ScoreIndexerPasses) {
  for (const auto& [cases, name] :
       {std::pair{DialectCases(), "dialect_fp16_scores"}, std::pair{CanonicalCases(), "m3_fp16_scores"},
        std::pair{CanonicalCases(), "fp16_scores_ties"}}) {
    Load(CaseNamed(cases, name));
    ASSERT_EQ(config().score_format, ScoreFormat::kFp16);
    nlohmann::json report;
    const CliResult result = CheckFp32Indexer(&report);
    EXPECT_EQ(result.code, 0) << name << "\n" << result.out;
    EXPECT_EQ(report["rules"]["score_precision"], "fp32") << name;
    TearDown();
  }
}

TEST_F(JudgeFindings, AnFp8IndexersIndexLseIsJudgedOnItsOwnSelectionOfTheRoundedInputs) {
  Load(CaseNamed(CanonicalCases(), "m3_e4m3"));
  ASSERT_EQ(config().index_format, IndexFormat::kE4M3);
  // In every row that leaves a block out, the lowest-ranked pick replaced by the highest unselected block id.
  std::vector<int32_t> own = reference_.topk_indices;
  int64_t swapped = 0;
  for (int64_t row = 0; row < config().num_kv_heads * total_q_; ++row) {
    const ForcedBlocks forced = ForcedBlocksOf(Visible(row % total_q_), 0, 1, config().top_k);
    int32_t* slots = &own[row * config().top_k];
    if (forced.take == 0 || forced.take == forced.candidates()) continue;
    for (int32_t b = int32_t(forced.local_begin) - 1; b >= 0; --b) {
      if (std::find(slots, slots + forced.take, b) == slots + forced.take) {
        slots[forced.take - 1] = b;
        ++swapped;
        break;
      }
    }
  }
  ASSERT_GT(swapped, 0);
  // The candidate's index_lse on its own selection, from inputs rounded to E4M3 here (BF16 holds every E4M3 value)
  // and judged natively: the function the e4m3 mode defines, by another route than the judge's.
  Problem rounded = problem_;
  rounded.config.index_format = IndexFormat::kNative;
  for (SafetensorsTensor* tensor : {&rounded.index_q, &rounded.index_k}) {
    const TensorView view = ViewOf(*tensor);
    for (int64_t row = 0; row < view.rows; ++row) {
      for (int64_t head = 0; head < view.heads; ++head) {
        for (int64_t d = 0; d < view.dim; ++d) SetElement(*tensor, row, head, d, RoundToE4M3(view.At(row, head, d)));
      }
    }
  }
  std::vector<double> index_lse(config().num_kv_heads * total_q_);
  ASSERT_TRUE(reference::IndexLseForSelection(rounded.config, rounded.index_inputs(), SelectionView{own.data()},
                                              index_lse.data())
                  .ok());
  nlohmann::json report;
  const CliResult result = Check(
      {Ids(HeadMajorShape(), own), Tensor("index_lse", DType::kF32, {config().num_kv_heads, total_q_}, index_lse)}, {},
      {}, &report);
  EXPECT_EQ(result.code, 1) << result.out;  // the swapped blocks are violations...
  EXPECT_GT(report["selection"]["violation_rows"].get<int>(), 0);
  EXPECT_TRUE(report["tensors"][0]["passed"].get<bool>()) << result.out;  // ...but its index_lse is right for them
  // and judged at fp32's size of error (|index_lse| ~ 5): an expectation from unrounded inputs would be ~0.07 off,
  // and so would the naive evaluation measured against it, hiding the mistake in a loose bound.
  EXPECT_LT(report["tensors"][0]["bound"].get<double>(), 1e-4) << result.out;
}

// ---- findings: the ports' own dialects were misread -----------------------------------------------------------

// vLLM's sentinel order (SPEC section 9): init blocks, then the forced local blocks, then history by score.
std::vector<int32_t> SentinelOrder(const JudgeFindings& f, const std::vector<int32_t>& canonical) {
  const Config& c = f.config();
  std::vector<int32_t> topk = canonical;
  for (int64_t row = 0; row < c.num_kv_heads * f.total_q_; ++row) {
    const ForcedBlocks forced = ForcedBlocksOf(f.Visible(row % f.total_q_), c.init_blocks, c.local_blocks, c.top_k);
    int32_t* slots = &topk[row * c.top_k];
    std::rotate(slots, slots + forced.take, slots + forced.take + forced.count());  // forced ones first, in order
  }
  return topk;
}

TEST_F(JudgeFindings, ForcedBlocksFirstIsAnOrderFaultUnderStrictAndPassesUnderAny) {
  Load(CaseNamed(DialectCases(), "dialect_init_local"));
  const std::vector<int32_t> sentinel = SentinelOrder(*this, reference_.topk_indices);
  const std::vector<int64_t> out_shape = {total_q_, config().num_q_heads, config().value_dim};
  const std::vector<SafetensorsTensor> outputs = {Ids(HeadMajorShape(), sentinel),
                                                  Tensor("out", DType::kBF16, out_shape, reference_.out)};
  nlohmann::json report;
  const CliResult strict = Check(outputs, {}, {}, &report);
  EXPECT_EQ(strict.code, 1);
  EXPECT_EQ(report["selection"]["invalid_rows"], 0) << strict.out;
  EXPECT_GT(report["selection"]["order_fault_rows"], 0) << strict.out;
  EXPECT_NE(strict.out.find("\n  order      FAIL  "), std::string::npos) << strict.out;
  EXPECT_NE(strict.out.find("--order any"), std::string::npos) << strict.out;
  EXPECT_EQ(report["attention_selection"], "candidate");
  EXPECT_TRUE(report["tensors"][0]["passed"].get<bool>()) << strict.out;
  const CliResult any = Check(outputs, {{"order", "any"}}, {}, &report);
  EXPECT_EQ(any.code, 0) << any.out;
  EXPECT_EQ(report["rules"]["order_from"], "metadata order");
  EXPECT_EQ(Check(outputs, {}, {"--order", "any"}).code, 0);
}

// The official decode-attention input layout: [total_q, Hidx, top_k].
std::vector<int32_t> QueryMajor(const JudgeFindings& f, const std::vector<int32_t>& head_major) {
  const Config& c = f.config();
  std::vector<int32_t> topk(head_major.size());
  for (int64_t r = 0; r < c.num_kv_heads; ++r) {
    for (int64_t t = 0; t < f.total_q_; ++t) {
      std::copy_n(&head_major[(r * f.total_q_ + t) * c.top_k], c.top_k, &topk[(t * c.num_kv_heads + r) * c.top_k]);
    }
  }
  return topk;
}

TEST_F(JudgeFindings, AQueryMajorSelectionThatTheShapeCannotTellIsALayoutError) {
  Load(CaseNamed(DialectCases(), "dialect_square"));
  ASSERT_EQ(total_q_, config().num_kv_heads);
  const std::vector<int32_t> query_major = QueryMajor(*this, reference_.topk_indices);
  nlohmann::json report;
  const CliResult assumed = Check({Ids(HeadMajorShape(), query_major)}, {}, {}, &report);
  EXPECT_EQ(assumed.code, 1);
  EXPECT_TRUE(report["selection"]["layout"]["ambiguous"].get<bool>());
  EXPECT_TRUE(report["selection"]["layout"]["transposed_passes"].get<bool>());
  EXPECT_NE(assumed.out.find("\n  layout     FAIL  "), std::string::npos) << assumed.out;
  EXPECT_NE(assumed.out.find("--topk-layout query_major"), std::string::npos) << assumed.out;
  const CliResult declared = Check({Ids(HeadMajorShape(), query_major)}, {{"topk_layout", "query_major"}}, {}, &report);
  EXPECT_EQ(declared.code, 0) << declared.out;
  EXPECT_FALSE(report["selection"]["layout"]["transposed_passes"].get<bool>());
  EXPECT_NE(declared.out.find("the shape cannot tell"), std::string::npos) << declared.out;  // says what it assumed
}

TEST_F(JudgeFindings, AQueryMajorShapeUnderTheHeadMajorLayoutIsBadInputNamingTheFix) {
  Load(CaseNamed(DialectCases(), "dialect_m3_decode"));
  const std::vector<int32_t> query_major = QueryMajor(*this, reference_.topk_indices);
  const CliResult result = Check({Ids({total_q_, config().num_kv_heads, config().top_k}, query_major)}, {}, {});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.err.find("the query_major layout, but the layout is head_major"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("pass --topk-layout query_major"), std::string::npos) << result.err;
  EXPECT_EQ(
      Check({Ids({total_q_, config().num_kv_heads, config().top_k}, query_major)}, {}, {"--topk-layout", "query_major"})
          .code,
      0);
}

TEST_F(JudgeFindings, Log2LseIsJudgedInItsBase) {
  Load(CaseNamed(DialectCases(), "dialect_chunked"));
  std::vector<double> lse2 = reference_.lse;
  for (double& value : lse2) value /= std::log(2.0);
  const std::vector<SafetensorsTensor> outputs = {Tensor("lse", DType::kF32, {total_q_, config().num_q_heads}, lse2)};
  EXPECT_EQ(Check(outputs, {{"lse_base", "2"}}, {}).code, 0);
  EXPECT_EQ(Check(outputs, {}, {"--lse-base", "2"}).code, 0);
  EXPECT_EQ(Check(outputs, {}, {}).code, 1);  // undeclared: judged as natural log, and wrong
  const std::vector<SafetensorsTensor> natural = {
      Tensor("lse", DType::kF32, {total_q_, config().num_q_heads}, reference_.lse)};
  EXPECT_EQ(Check(natural, {{"lse_base", "2"}}, {}).code, 1);  // natural lse labelled log2
}

TEST_F(JudgeFindings, BadRuleValuesAreRefusedByName) {
  Load(CaseNamed(DialectCases(), "dialect_chunked"));
  const std::vector<SafetensorsTensor> outputs = {Ids(HeadMajorShape(), reference_.topk_indices)};
  CliResult result = Check(outputs, {{"order", "sorted"}}, {});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.err.find("__metadata__[\"order\"] = \"sorted\": must be strict or any"), std::string::npos)
      << result.err;
  result = Check(outputs, {}, {"--lse-base", "10"});
  EXPECT_EQ(result.err, "msa: error: --lse-base 10: must be e or 2\n");
  result = Check(outputs, {}, {"--score-precision", "fp8"});
  EXPECT_EQ(result.err, "msa: error: --score-precision fp8: must be exact, fp32, bf16 or fp16\n");
  result = Check(outputs, {{"topk_layout", "row_major"}}, {});
  EXPECT_NE(result.err.find("must be head_major or query_major"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace msa
