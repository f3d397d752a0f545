// Bad input to `msa run`: each case runs the CLI in-process and asserts exit code 2, exactly
// one stderr line "msa: error: <field or tensor> <value>: <rule>" (the full message is the contract), and that
// nothing was written: no file at --out and no temporary file left beside it.
//
// Well-formed but invalid inputs start from a small valid problem and mutate its SafetensorsFile; hostile
// files are raw bytes. The valid problem: Hq = 4, Hkv = Hidx = 2, D = 8, Dv = 6, Di = 4, Bk = 4, top_k = 3,
// max pooling, two sequences (q_len, k_len) = (3, 10) and (5, 5): total_q = 8, total_k = 15,
// cu_seqlens_q = [0, 3, 8], cu_seqlens_k = [0, 10, 15].
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/file_contract.h"
#include "io/safetensors.h"
#include "oracle/problem.h"
#include "tests/run_cli.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kValidConfig = R"({"block_size":4,"top_k":3,"init_blocks":0,"pooling":"max"})";

ProblemSpec SmallSpec(DType dtype = DType::kF64) {
  ProblemSpec spec;
  spec.config.num_q_heads = 4;
  spec.config.num_kv_heads = 2;
  spec.config.head_dim = 8;
  spec.config.value_dim = 6;
  spec.config.index_head_dim = 4;
  spec.config.block_size = 4;
  spec.config.top_k = 3;
  spec.config.init_blocks = 0;
  spec.config.pooling = Pooling::kMax;
  spec.lengths = {{3, 10}, {5, 5}};
  spec.dtype = dtype;
  spec.seed = 7;
  return spec;
}

// The valid small problem as an inputs file image.
SafetensorsFile ValidFile(DType dtype = DType::kF64) { return ProblemToSafetensors(GenerateProblem(SmallSpec(dtype))); }

SafetensorsTensor& Tensor(SafetensorsFile& file, const std::string& name) {
  for (SafetensorsTensor& tensor : file.tensors) {
    if (tensor.name == name) return tensor;
  }
  ADD_FAILURE() << "no tensor " << name;
  return file.tensors.front();
}

// Gives a tensor a new shape (and dtype), with zero bytes of the matching size: finite, so only the shape or
// dtype rule can be broken.
void Reshape(SafetensorsFile& file, const std::string& name, std::vector<int64_t> shape,
             std::optional<DType> dtype = std::nullopt) {
  SafetensorsTensor& tensor = Tensor(file, name);
  if (dtype) tensor.dtype = *dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.assign(size_t(tensor.num_elements()) * DTypeSize(tensor.dtype), 0);
}

void SetPrefixSums(SafetensorsFile& file, const std::string& name, const std::vector<int32_t>& values) {
  SafetensorsTensor& tensor = Tensor(file, name);
  tensor.shape = {int64_t(values.size())};
  tensor.bytes.resize(values.size() * sizeof(int32_t));
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
}

std::vector<uint8_t> LengthField(uint64_t length) {
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &length, 8);
  return bytes;
}

// A raw file: the 8-byte little-endian length of `header`, the header, then `data_bytes` zero bytes.
std::vector<uint8_t> RawFile(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0);
  const uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

// A test's name as one path component (a parameterized test's name holds '/').
std::string FileName(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

class CliErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("msa_cli_errors_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
                                        "_" + FileName(info->name()));
    fs::remove_all(dir_);
    ASSERT_TRUE(fs::create_directories(dir_));
    in_ = (dir_ / "in.safetensors").string();
    out_ = (dir_ / "out.safetensors").string();
  }

  void TearDown() override {
    std::error_code error;
    fs::remove_all(dir_, error);
  }

  CliResult Run(const std::vector<std::string>& args) { return RunMsa(args); }

  // `msa run --inputs IN --out OUT` on `file` written as the inputs.
  CliResult RunOn(const SafetensorsFile& file) {
    const Status status = WriteSafetensors(in_, file);
    EXPECT_TRUE(status.ok()) << status.message();
    return Run({"run", "--inputs", in_, "--out", out_});
  }

  CliResult RunOnBytes(const std::vector<uint8_t>& bytes) {
    std::ofstream stream(in_, std::ios::binary);
    stream.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    stream.close();
    EXPECT_TRUE(stream.good());
    return Run({"run", "--inputs", in_, "--out", out_});
  }

  // Exit code 2, exactly the one line "msa: error: <message>", and nothing written: the directory holds at
  // most the inputs file (no --out file, no temporary file).
  void ExpectRefused(const CliResult& result, const std::string& message) {
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.err, "msa: error: " + message + "\n");
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_FALSE(fs::exists(out_)) << out_;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
      EXPECT_EQ(entry.path().string(), in_) << "unexpected file left behind: " << entry.path();
    }
  }

  // The inputs-file form: the message is prefixed by the inputs path.
  void ExpectRefusedInput(const CliResult& result, const std::string& message) {
    ExpectRefused(result, in_ + ": " + message);
  }

  fs::path dir_;
  std::string in_, out_;
};

// ---- positive control --------------------------------------------------------------------------------------

TEST_F(CliErrorsTest, ValidInputsWriteEveryOutput) {
  const CliResult result = RunOn(ValidFile());
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  ASSERT_TRUE(fs::exists(out_));
  SafetensorsFile written;
  const Status status = ReadSafetensors(out_, &written);
  ASSERT_TRUE(status.ok()) << status.message();

  // SPEC section 7: Hidx = 2, total_q = 8, top_k = 3, max_blocks = ceil(10 / 4) = 3, Hq = 4, Dv = 6.
  struct Expected {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const Expected expected[] = {{"topk_indices", DType::kI32, {2, 8, 3}},
                               {"block_scores", DType::kF64, {2, 8, 3}},
                               {"index_lse", DType::kF64, {2, 8}},
                               {"out", DType::kF64, {8, 4, 6}},
                               {"lse", DType::kF64, {8, 4}}};
  EXPECT_EQ(written.tensors.size(), 5u);
  for (const Expected& e : expected) {
    const SafetensorsTensor* tensor = written.Find(e.name);
    ASSERT_NE(tensor, nullptr) << e.name;
    EXPECT_EQ(tensor->dtype, e.dtype) << e.name;
    EXPECT_EQ(tensor->shape, e.shape) << e.name;
  }
  for (const char* key : {"msa_config", "backend", "version", "inputs_sha256", "outputs_sha256"}) {
    EXPECT_TRUE(written.metadata.count(key)) << key;
  }
  // By default the fastest available backend that supports the precision (exact) runs, and says so.
  const std::string fastest(FastestBackend(SmallSpec().config)->name);
  EXPECT_EQ(written.metadata["backend"], fastest);
  EXPECT_NE(result.out.find("backend " + fastest + " (the fastest available), precision exact"), std::string::npos)
      << result.out;
  EXPECT_EQ(written.metadata["outputs_sha256"].size(), 64u);
  EXPECT_NE(result.out.find("outputs " + written.metadata["outputs_sha256"]), std::string::npos) << result.out;
  // Every exact backend gives the reference's bits: --backend reference writes the same outputs.
  const CliResult reference = Run({"run", "--inputs", in_, "--out", out_, "--backend", "reference"});
  ASSERT_EQ(reference.code, 0) << reference.err;
  EXPECT_NE(reference.out.find("backend reference, precision exact"), std::string::npos) << reference.out;
  EXPECT_NE(reference.out.find("outputs " + written.metadata["outputs_sha256"]), std::string::npos) << reference.out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
    const std::string path = entry.path().string();
    EXPECT_TRUE(path == in_ || path == out_) << "unexpected file left behind: " << path;
  }
}

// ---- shapes ------------------------------------------------------------------------------------------------

// A tensor of the valid file given another shape (zero bytes of that size), and the reason the CLI must give.
struct ReshapeCase {
  const char* name;
  const char* tensor;
  std::vector<int64_t> shape;
  const char* reason;
};

const ReshapeCase kReshapeCases[] = {
    {"QRowsMustEqualLastCuSeqlensQ",
     "q",
     {9, 4, 8},
     "q has 9 rows but cu_seqlens_q[2] = 8: the rows of q must equal the last entry of cu_seqlens_q"},
    {"KAndVRowsMustAgree",
     "v",
     {16, 2, 6},
     "v has 16 rows but cu_seqlens_k[2] = 15: the rows of v must equal the last entry of cu_seqlens_k"},
    {"QAndKShareHeadDim", "k", {15, 2, 6}, "k has head dim 6: must equal D = 8 (q and k share the head dim D)"},
    {"VHeadsMustEqualKHeads", "v", {15, 3, 6}, "v has 3 heads: must equal Hkv = 2 (v has the heads of k)"},
    {"HqMustBeAMultipleOfHkv",
     "q",
     {8, 3, 8},
     "num_q_heads (Hq) = 3: must be a multiple of num_kv_heads (Hkv) = 2 (GQA: G = Hq / Hkv query "
     "heads share one kv head)"},
    {"HidxMustEqualHkv",
     "index_q",
     {8, 3, 4},
     "index_q has 3 heads: must equal Hkv = 2 (Hidx == Hkv: one index-query head per GQA group)"},
    {"IndexKHasOneHead",
     "index_k",
     {15, 2, 4},
     "index_k has 2 heads: must be 1 (one index-key head shared by all groups)"},
    {"IndexQAndIndexKShareDi",
     "index_k",
     {15, 1, 5},
     "index_k has head dim 5: must equal Di = 4 (index_q and index_k share Di)"},
    {"RankTwoQ", "q", {8, 32}, "tensor \"q\" has shape [8, 32]: must be rank 3 [rows, heads, dim]"},
    {"CuSeqlensMustBeRankOne", "cu_seqlens_q", {1, 3}, "tensor \"cu_seqlens_q\" is I32 [1, 3]: must be I32 [B+1]"},
};

void PrintTo(const ReshapeCase& c, std::ostream* os) { *os << c.name; }

class CliReshapeTest : public CliErrorsTest, public ::testing::WithParamInterface<ReshapeCase> {};

TEST_P(CliReshapeTest, IsRefusedWithItsReason) {
  SafetensorsFile file = ValidFile();
  Reshape(file, GetParam().tensor, GetParam().shape);
  ExpectRefusedInput(RunOn(file), GetParam().reason);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CliReshapeTest, ::testing::ValuesIn(kReshapeCases),
                         [](const ::testing::TestParamInfo<ReshapeCase>& info) { return info.param.name; });

TEST_F(CliErrorsTest, IntegerDtypeQ) {
  SafetensorsFile file = ValidFile();
  Reshape(file, "q", {8, 4, 8}, DType::kI32);
  ExpectRefusedInput(RunOn(file), "tensor \"q\" has dtype I32: must be F64, F32, BF16 or F16");
}

TEST_F(CliErrorsTest, MissingTensorV) {
  SafetensorsFile file = ValidFile();
  std::erase_if(file.tensors, [](const SafetensorsTensor& t) { return t.name == "v"; });
  ExpectRefusedInput(RunOn(file),
                     "tensor \"v\" is missing: inputs must hold q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k");
}

// ---- cu_seqlens --------------------------------------------------------------------------------------------

TEST_F(CliErrorsTest, CuSeqlensMustStartAtZero) {
  SafetensorsFile file = ValidFile();
  SetPrefixSums(file, "cu_seqlens_q", {1, 3, 8});
  ExpectRefusedInput(RunOn(file), "cu_seqlens_q[0] = 1: must be 0");
}

TEST_F(CliErrorsTest, CuSeqlensMustNotDecrease) {
  SafetensorsFile file = ValidFile();
  SetPrefixSums(file, "cu_seqlens_k", {0, 16, 15});
  ExpectRefusedInput(RunOn(file), "cu_seqlens_k[2] = 15: must be >= cu_seqlens_k[1] = 16 (prefix sums never decrease)");
}

TEST_F(CliErrorsTest, CuSeqlensMustNotPointPastTheTensors) {
  SafetensorsFile file = ValidFile();
  SetPrefixSums(file, "cu_seqlens_k", {0, 10, 20});
  ExpectRefusedInput(RunOn(file),
                     "k has 15 rows but cu_seqlens_k[2] = 20: the rows of k must equal the last entry of cu_seqlens_k");
}

TEST_F(CliErrorsTest, CuSeqlensQAndKMustHaveTheSameLength) {
  SafetensorsFile file = ValidFile();
  SetPrefixSums(file, "cu_seqlens_q", {0, 8});
  ExpectRefusedInput(RunOn(file),
                     "cu_seqlens_q has 2 entries but cu_seqlens_k has 3: both must have B+1 entries (one batch)");
}

TEST_F(CliErrorsTest, CuSeqlensMustBeI32) {
  SafetensorsFile file = ValidFile();
  Reshape(file, "cu_seqlens_k", {3}, DType::kI64);
  ExpectRefusedInput(RunOn(file), "tensor \"cu_seqlens_k\" is I64 [3]: must be I32 [B+1]");
}

TEST_F(CliErrorsTest, QLenMustNotExceedKLen) {
  SafetensorsFile file = ValidFile();
  SetPrefixSums(file, "cu_seqlens_k", {0, 11, 15});  // sequence 1: q_len 5, k_len 4
  ExpectRefusedInput(RunOn(file),
                     "sequence 1 has q_len 5 > k_len 4: must have q_len <= k_len (the queries are the causal suffix "
                     "of the keys)");
}

// ---- msa_config --------------------------------------------------------------------------------------------

// The config of the valid file replaced (__metadata__["msa_config"]), and the reason the CLI must give.
struct ConfigCase {
  const char* name;
  const char* config;
  const char* reason;
};

const ConfigCase kConfigCases[] = {
    {"BlockSizeZero", R"({"block_size":0,"top_k":3,"init_blocks":0,"pooling":"max"})",
     "msa_config.block_size = 0: must be at least 1"},
    {"BlockSizeNegative", R"({"block_size":-4,"top_k":3,"init_blocks":0,"pooling":"max"})",
     "msa_config.block_size = -4: must be at least 1"},
    {"BlockSizeBeyondUint64DoesNotWrap", R"({"block_size":18446744073709551615,"top_k":3,"pooling":"max"})",
     "msa_config.block_size = 18446744073709551615: must be a 32-bit integer"},
    {"TopKZero", R"({"block_size":4,"top_k":0,"init_blocks":0,"pooling":"max"})",
     "msa_config.top_k = 0: must be at least 1"},
    {"TopKMustCoverTheForcedBlocks", R"({"block_size":4,"top_k":2,"init_blocks":2,"pooling":"max"})",
     "msa_config.top_k = 2: must be at least init_blocks + local_blocks = 3 (the forced blocks: 2 "
     "init blocks and the local block)"},
    // Rows hold top_k slots: a tiny file must not ask for 16 GiB.
    {"TopKAboveTheLimit", R"({"block_size":4,"top_k":2147483647,"init_blocks":0,"pooling":"max"})",
     "msa_config.top_k = 2147483647: must be at most 1048576 (every output row holds top_k slots; "
     "a top_k of at least the visible blocks already selects everything)"},
    {"HugeInitBlocksDoesNotOverflow", R"({"block_size":4,"top_k":3,"init_blocks":2147483647,"pooling":"max"})",
     "msa_config.top_k = 3: must be at least init_blocks + local_blocks = 2147483648 (the forced "
     "blocks: 2147483647 init blocks and the local block)"},
    {"InitBlocksNegative", R"({"block_size":4,"top_k":3,"init_blocks":-1,"pooling":"max"})",
     "msa_config.init_blocks = -1: must be at least 0"},
    {"UnknownPooling", R"({"block_size":4,"top_k":3,"init_blocks":0,"pooling":"avg"})",
     "msa_config.pooling = \"avg\": must be \"max\", \"lse\" or \"mean\""},
    {"UnknownConfigKey", R"({"block_size":4,"topk":3,"init_blocks":0,"pooling":"max"})",
     "msa_config.topk = 3: not a known key (known: block_size, top_k, init_blocks, local_blocks, "
     "pooling, softmax_scale, index_scale, precision, index_format, score_format)"},
    {"TopKMustCoverSeveralLocalBlocks",
     R"({"block_size":4,"top_k":3,"init_blocks":1,"local_blocks":3,"pooling":"max"})",
     "msa_config.top_k = 3: must be at least init_blocks + local_blocks = 4 (the forced blocks: 1 "
     "init blocks and 3 local blocks)"},
    {"LocalBlocksZero", R"({"block_size":4,"top_k":3,"local_blocks":0,"pooling":"max"})",
     "msa_config.local_blocks = 0: must be at least 1"},
    {"LocalBlocksNotAnInteger", R"({"block_size":4,"top_k":3,"local_blocks":"two","pooling":"max"})",
     "msa_config.local_blocks = \"two\": must be a 32-bit integer"},
    {"UnknownScoreFormat", R"({"block_size":4,"top_k":3,"pooling":"max","score_format":"bf16"})",
     "msa_config.score_format = \"bf16\": must be \"native\" or \"fp16\""},
    {"Fp16ScoresNeedMaxPooling", R"({"block_size":4,"top_k":3,"pooling":"lse","score_format":"fp16"})",
     "msa_config.score_format = fp16 with pooling = lse: fp16 block scores are defined for max "
     "pooling only"},
    {"ConfigNotJson", "block_size=4\ntop_k=3",
     "__metadata__[\"msa_config\"] = \"block_size=4\\ntop_k=3\": must be a JSON object (block_size, "
     "top_k, init_blocks, pooling, ...)"},
    {"SoftmaxScaleNegative", R"({"block_size":4,"top_k":3,"pooling":"max","softmax_scale":-0.5})",
     "msa_config.softmax_scale = -0.5: must be finite and positive"},
    {"SoftmaxScaleZero", R"({"block_size":4,"top_k":3,"pooling":"max","softmax_scale":0})",
     "msa_config.softmax_scale = 0: must be finite and positive"},
};

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.name; }

class CliConfigTest : public CliErrorsTest, public ::testing::WithParamInterface<ConfigCase> {};

TEST_P(CliConfigTest, IsRefusedWithItsReason) {
  SafetensorsFile file = ValidFile();
  file.metadata["msa_config"] = GetParam().config;
  ExpectRefusedInput(RunOn(file), GetParam().reason);
}

INSTANTIATE_TEST_SUITE_P(Configs, CliConfigTest, ::testing::ValuesIn(kConfigCases),
                         [](const ::testing::TestParamInfo<ConfigCase>& info) { return info.param.name; });

// Finite F64 inputs whose weighted value sum overflows a double: q = 0 gives every key weight 1, so the first
// query (8 visible keys, all selected) sums 8 values of 1e308. Attend refuses rather than writing inf.
TEST_F(CliErrorsTest, AttentionOverflowIsRefused) {
  SafetensorsFile file = ValidFile();
  SafetensorsTensor& q = Tensor(file, "q");
  std::fill(q.bytes.begin(), q.bytes.end(), uint8_t{0});
  SafetensorsTensor& v = Tensor(file, "v");
  for (int64_t e = 0; e < v.num_elements(); ++e) {
    const double huge = 1e308;
    std::memcpy(v.bytes.data() + e * sizeof(double), &huge, sizeof(double));
  }
  ExpectRefused(RunOn(file),
                "attention of query 0, head 0 is not finite: q, k or v are too large for the precision exact");
}

TEST_F(CliErrorsTest, UnknownIndexFormat) {
  SafetensorsFile file = ValidFile();
  file.metadata["msa_config"] = R"({"block_size":4,"top_k":3,"init_blocks":0,"pooling":"max","index_format":"fp8"})";
  ExpectRefusedInput(RunOn(file), "msa_config.index_format = \"fp8\": must be \"native\" or \"e4m3\"");
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--index-format", "fp8"}),
                "--index-format fp8: must be native or e4m3");
}

TEST_F(CliErrorsTest, ScoreFormatFlag) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--score-format", "bf16"}),
                "--score-format bf16: must be native or fp16");
  SafetensorsFile lse_pooled = ValidFile();
  lse_pooled.metadata["msa_config"] = R"({"block_size":4,"top_k":3,"pooling":"lse"})";
  ASSERT_TRUE(WriteSafetensors(in_, lse_pooled).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--score-format", "fp16"}),
                "score_format = fp16 with pooling = lse: fp16 block scores are defined for max pooling only");
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  const CliResult fp16 = Run({"run", "--inputs", in_, "--out", out_, "--score-format", "fp16"});
  ASSERT_EQ(fp16.code, 0) << fp16.err;
  SafetensorsFile written;
  ASSERT_TRUE(ReadSafetensors(out_, &written).ok());
  EXPECT_NE(written.metadata["msa_config"].find("\"score_format\":\"fp16\""), std::string::npos)
      << written.metadata["msa_config"];
}

// With index_format e4m3, an index value beyond the format's range is refused by name and position.
TEST_F(CliErrorsTest, IndexValueBeyondE4M3) {
  SafetensorsFile file = ValidFile();
  SafetensorsTensor& index_k = Tensor(file, "index_k");  // [total_k, 1, Di] F64
  const double beyond = -1000;
  std::memcpy(index_k.bytes.data() + 2 * sizeof(double), &beyond, sizeof(double));  // row 0, dim 2
  ASSERT_TRUE(WriteSafetensors(in_, file).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--index-format", "e4m3"}),
                "index_k[0, 0, 2] = -1000: index_format e4m3 takes finite values in [-448, 448]");
}

TEST_F(CliErrorsTest, ConfigMissing) {
  SafetensorsFile file = ValidFile();
  file.metadata.erase("msa_config");
  ExpectRefusedInput(RunOn(file),
                     "__metadata__[\"msa_config\"] is missing: inputs must carry the config (a JSON object with "
                     "block_size, top_k, init_blocks, pooling)");
}

// ---- NaN / Inf ---------------------------------------------------------------------------------------------

TEST_F(CliErrorsTest, NaNInQ) {
  Problem problem = GenerateProblem(SmallSpec());
  SetElement(problem.q, 3, 1, 2, kNaN);
  ExpectRefusedInput(RunOn(ProblemToSafetensors(problem)), "q[3, 1, 2] = nan: inputs must be finite");
}

TEST_F(CliErrorsTest, PositiveInfInIndexK) {
  Problem problem = GenerateProblem(SmallSpec());
  SetElement(problem.index_k, 14, 0, 3, kInf);
  ExpectRefusedInput(RunOn(ProblemToSafetensors(problem)), "index_k[14, 0, 3] = inf: inputs must be finite");
}

TEST_F(CliErrorsTest, NegativeInfInV) {
  Problem problem = GenerateProblem(SmallSpec());
  SetElement(problem.v, 0, 1, 5, -kInf);
  ExpectRefusedInput(RunOn(ProblemToSafetensors(problem)), "v[0, 1, 5] = -inf: inputs must be finite");
}

TEST_F(CliErrorsTest, NaNInBF16Tensor) {
  Problem problem = GenerateProblem(SmallSpec(DType::kBF16));
  SetElement(problem.k, 7, 0, 0, kNaN);
  ExpectRefusedInput(RunOn(ProblemToSafetensors(problem)), "k[7, 0, 0] = nan: inputs must be finite");
}

// ---- hostile files -----------------------------------------------------------------------------------------

TEST_F(CliErrorsTest, ShapeElementCountOverflows) {
  ExpectRefusedInput(
      RunOnBytes(RawFile(R"({"q":{"dtype":"F64","shape":[1099511627776,1099511627776,1],"data_offsets":[0,8]}})", 8)),
      "tensor \"q\": shape [1099511627776, 1099511627776, 1] of F64 needs more bytes than int64 can count "
      "(overflow)");
}

// The valid file's image, its header length and its data section size.
struct Image {
  std::vector<uint8_t> bytes;
  uint64_t header_length = 0, data_size = 0;
};

Image ValidImage() {
  Image image;
  const Status status = SerializeSafetensors(ValidFile(), &image.bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  std::memcpy(&image.header_length, image.bytes.data(), 8);
  image.data_size = image.bytes.size() - 8 - image.header_length;
  return image;
}

TEST_F(CliErrorsTest, TruncatedInTheDataSection) {
  Image image = ValidImage();
  image.bytes.resize(image.bytes.size() - 4);  // cuts into cu_seqlens_k, the last tensor (3 x I32 = 12 bytes)
  const uint64_t begin = image.data_size - 12;
  ExpectRefusedInput(RunOnBytes(image.bytes), "tensor \"cu_seqlens_k\": data_offsets [" + std::to_string(begin) + ", " +
                                                  std::to_string(begin + 12) + "] run past the data section of " +
                                                  std::to_string(image.data_size - 4) +
                                                  " bytes (the file is truncated or the offsets are wrong)");
}

TEST_F(CliErrorsTest, TruncatedInTheHeader) {
  Image image = ValidImage();
  image.bytes.resize(8 + image.header_length / 2);
  ExpectRefusedInput(RunOnBytes(image.bytes),
                     "header length " + std::to_string(image.header_length) + " runs past the end of the file (" +
                         std::to_string(image.header_length / 2) + " bytes follow the length field)");
}

TEST_F(CliErrorsTest, HeaderLengthTwoToThe63) {
  std::vector<uint8_t> bytes = LengthField(uint64_t{1} << 63);
  bytes.push_back('{');
  bytes.push_back('}');
  ExpectRefusedInput(RunOnBytes(bytes), "header length 9223372036854775808 exceeds the limit of 104857600 bytes");
}

TEST_F(CliErrorsTest, HeaderLengthPastTheEndOfTheFile) {
  std::vector<uint8_t> bytes = LengthField(1000);
  bytes.push_back('{');
  bytes.push_back('}');
  ExpectRefusedInput(RunOnBytes(bytes),
                     "header length 1000 runs past the end of the file (2 bytes follow the length field)");
}

TEST_F(CliErrorsTest, HeaderNotJson) {
  ExpectRefusedInput(RunOnBytes(RawFile("{\"q\": nope}", 0)),
                     "header is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 8: "
                     "syntax error while parsing value - invalid literal; last read: '\"q\": no'");
}

TEST_F(CliErrorsTest, OverlappingOffsets) {
  ExpectRefusedInput(RunOnBytes(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                        12)),
                     "tensors \"a\" (data_offsets [0, 8]) and \"b\" (data_offsets [4, 12]) overlap");
}

TEST_F(CliErrorsTest, OffsetsOutOfRange) {
  ExpectRefusedInput(RunOnBytes(RawFile(R"({"q":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", 8)),
                     "tensor \"q\": data_offsets [0, 16] run past the data section of 8 bytes"
                     " (the file is truncated or the offsets are wrong)");
}

TEST_F(CliErrorsTest, DtypeAndByteCountDisagree) {
  ExpectRefusedInput(RunOnBytes(RawFile(R"({"q":{"dtype":"F64","shape":[3],"data_offsets":[0,16]}})", 16)),
                     "tensor \"q\": data_offsets [0, 16] hold 16 bytes but shape [3] of F64 needs 24");
}

// ---- the command line --------------------------------------------------------------------------------------

TEST_F(CliErrorsTest, InputsPathDoesNotExist) {
  const std::string missing = (dir_ / "missing.safetensors").string();
  ExpectRefused(Run({"run", "--inputs", missing, "--out", out_}),
                missing + ": cannot open for reading: No such file or directory");
}

TEST_F(CliErrorsTest, OutDirectoryDoesNotExist) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  const std::string missing_dir = (dir_ / "no_such_dir").string();
  out_ = missing_dir + "/out.safetensors";
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_}),
                "--out " + out_ + ": directory " + missing_dir + " does not exist");
  EXPECT_FALSE(fs::exists(missing_dir));
}

TEST_F(CliErrorsTest, UnknownBackend) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  std::string names;
  for (const Backend& backend : AllBackends()) names += (names.empty() ? "" : ", ") + std::string(backend.name);
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--backend", "nope"}),
                "--backend nope: unknown backend (compiled in: " + names + ")");
}

TEST_F(CliErrorsTest, UnknownPrecision) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--precision", "fp64"}),
                "--precision fp64: must be exact, fp32, bf16 or fp16");
}

TEST_F(CliErrorsTest, BackendThatDoesNotSupportThePrecision) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--backend", "reference", "--precision", "bf16"}),
                "--backend reference, --precision bf16: backend reference computes only precision exact (FP64 "
                "canonical), not bf16");
}

TEST_F(CliErrorsTest, PrecisionNoBackendSupports) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    Config config = SmallSpec().config;
    ASSERT_TRUE(ParsePrecision(precision, &config.precision));
    if (FastestBackend(config) != nullptr) continue;  // some compiled-in backend computes it
    const CliResult result = Run({"run", "--inputs", in_, "--out", out_, "--precision", precision});
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.err.rfind("msa: error: --precision " + std::string(precision) +
                                   ": no available backend supports it (backend reference computes only",
                               0),
              0u)
        << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_FALSE(fs::exists(out_));
  }
}

TEST_F(CliErrorsTest, UnknownOption) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--bogus"}),
                "The following argument was not expected: --bogus (see msa --help)");
}

TEST_F(CliErrorsTest, NoSubcommand) {
  ExpectRefused(Run({}),
                "no subcommand given: must be one of: run, check, golden, cost, recall, explain (see msa --help)");
}

TEST_F(CliErrorsTest, ThreadsZero) {
  ASSERT_TRUE(WriteSafetensors(in_, ValidFile()).ok());
  ExpectRefused(Run({"run", "--inputs", in_, "--out", out_, "--threads", "0"}),
                "--threads: Value 0 not in range 1 to 4096 (see msa --help)");
}

}  // namespace
}  // namespace msa
