// `msa check` end to end: files in, report out, exit code 0 pass, 1 fail, 2 bad input.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/file_contract.h"
#include "oracle/naive_lowp.h"
#include "tools/msa/cli.h"

namespace msa {
namespace {

class CheckCommandTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("msa_check_test_" + std::to_string(getpid()) + "_" +
                                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    ProblemSpec spec;
    spec.config.num_q_heads = 4;
    spec.config.num_kv_heads = 2;
    spec.config.head_dim = spec.config.value_dim = spec.config.index_head_dim = 16;
    spec.config.block_size = 8;
    spec.config.top_k = 3;
    spec.lengths = {{40, 40}, {3, 50}};
    spec.dtype = DType::kBF16;
    spec.seed = 5;
    problem_ = GenerateProblem(spec);
    ASSERT_TRUE(WriteSafetensors(Path("in.safetensors"), ProblemToSafetensors(problem_)).ok());
    ASSERT_TRUE(RunBackend(*FindBackend("reference"), problem_, &reference_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `tensors` (named outputs of SPEC section 7) as their outputs file.
  std::string WriteTheirs(const std::string& name, std::vector<SafetensorsTensor> tensors) {
    SafetensorsFile file;
    file.tensors = std::move(tensors);
    EXPECT_TRUE(WriteSafetensors(Path(name), file).ok());
    return Path(name);
  }

  static SafetensorsTensor Floats(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                  const std::vector<double>& values) {
    SafetensorsTensor tensor{name, dtype, std::move(shape), {}};
    tensor.bytes.resize(values.size() * DTypeSize(dtype));
    for (size_t i = 0; i < values.size(); ++i) {
      uint8_t* at = tensor.bytes.data() + i * DTypeSize(dtype);
      if (dtype == DType::kF64) std::memcpy(at, &values[i], 8);
      if (dtype == DType::kBF16) {
        const uint16_t bits = DoubleToBF16(values[i]);
        std::memcpy(at, &bits, 2);
      }
    }
    return tensor;
  }

  int Check(std::vector<std::string> extra) {
    std::vector<std::string> args = {"check", "--inputs", Path("in.safetensors")};
    args.insert(args.end(), extra.begin(), extra.end());
    out_.str("");
    err_.str("");
    return RunCli(args, {out_, err_, false});
  }

  std::filesystem::path dir_;
  Problem problem_;
  Outputs reference_;
  std::ostringstream out_, err_;
};

TEST_F(CheckCommandTest, ReferenceOutputsPass) {
  const SafetensorsFile file = OutputsToSafetensors(problem_, reference_, "reference", "");
  ASSERT_TRUE(WriteSafetensors(Path("ref.safetensors"), file).ok());
  EXPECT_EQ(Check({"--outputs", Path("ref.safetensors")}), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("RESULT: PASS"), std::string::npos);
  EXPECT_NE(out_.str().find("    out: at exact (its dtype F64)"), std::string::npos);  // F64 out: FP64 rules
  EXPECT_NE(out_.str().find("    scores: exact (default for an FP64 candidate)"), std::string::npos) << out_.str();
}

TEST_F(CheckCommandTest, Bf16RoundedAttentionPassesWithThePrecisionFromItsDtype) {
  const std::string theirs = WriteTheirs("bf16.safetensors", {Floats("out", DType::kBF16, {43, 4, 16}, reference_.out),
                                                              Floats("lse", DType::kBF16, {43, 4}, reference_.lse)});
  EXPECT_EQ(Check({"--outputs", theirs}), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("    out: at bf16 (its dtype BF16)"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("    lse: at bf16 (its dtype BF16)"), std::string::npos) << out_.str();
}

TEST_F(CheckCommandTest, PerturbedOutputFailsWithItsPositionAndJson) {
  std::vector<double> out = reference_.out;
  out[(41 * 4 + 3) * 16 + 7] += 1.0;  // sequence 1, query 1 (row 41), head 3, dim 7
  const std::string theirs = WriteTheirs("bad.safetensors", {Floats("out", DType::kF64, {43, 4, 16}, out)});
  EXPECT_EQ(Check({"--outputs", theirs, "--precision", "fp32", "--json", Path("report.json")}), 1);
  EXPECT_NE(out_.str().find("seq 1 query 1 (row 41) head 3 dim 7"), std::string::npos) << out_.str();
  std::ifstream json_file(Path("report.json"));
  const nlohmann::json report = nlohmann::json::parse(json_file);
  EXPECT_EQ(report["passed"], false);
  EXPECT_EQ(report["tensors"][0]["listed"][0]["row"], 41);
}

TEST_F(CheckCommandTest, NothingToCheckIsBadInput) {
  const std::string theirs = WriteTheirs("empty.safetensors", {Floats("other", DType::kF64, {1}, {1.0})});
  EXPECT_EQ(Check({"--outputs", theirs}), 2);
  EXPECT_EQ(err_.str(),
            "msa: error: " + theirs +
                ": supplies none of topk_indices, out, lse, index_lse (nor training's dq, dk, dv, dqi, dki, "
                "kl_loss): nothing to check\n");
}

TEST_F(CheckCommandTest, WrongShapeIsBadInput) {
  const std::string theirs = WriteTheirs("shape.safetensors", {Floats("lse", DType::kF64, {4, 43}, reference_.lse)});
  EXPECT_EQ(Check({"--outputs", theirs}), 2);
  EXPECT_EQ(err_.str(), "msa: error: " + theirs + ": tensor \"lse\" has shape [4, 43]: must be [43, 4]\n");
}

TEST_F(CheckCommandTest, MissingOutputsOptionIsBadInput) {
  EXPECT_EQ(Check({}), 2);
  EXPECT_NE(err_.str().find("--outputs is required"), std::string::npos) << err_.str();
}

}  // namespace
}  // namespace msa
