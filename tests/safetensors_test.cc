// Safetensors reader and writer: round trips, a byte-for-byte check against a file spelled out by hand from
// the format definition, and one test per hostile input (each through both the memory and the file reader).
#include "io/safetensors.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace msa {
namespace {

using Bytes = std::vector<uint8_t>;

// A fresh empty directory per test, removed (with its files) afterwards.
class SafetensorsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "safetensors_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& name : ListDir()) std::remove((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }

  std::vector<std::string> ListDir() const {
    std::vector<std::string> names;
    DIR* dir = opendir(dir_.c_str());
    if (dir == nullptr) return names;
    while (const dirent* entry = readdir(dir)) {
      if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
        names.push_back(entry->d_name);
      }
    }
    closedir(dir);
    return names;
  }

  std::string WriteRaw(const std::string& name, const Bytes& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::FILE* file = std::fopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    if (!bytes.empty()) {
      EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
    }
    EXPECT_EQ(std::fclose(file), 0);
    return path;
  }

  Bytes ReadRaw(const std::string& path) const {
    Bytes bytes;
    std::FILE* file = std::fopen(path.c_str(), "rb");
    EXPECT_NE(file, nullptr);
    for (int c; (c = std::fgetc(file)) != EOF;) bytes.push_back(uint8_t(c));
    std::fclose(file);
    return bytes;
  }

  // The image must be refused with `code` and a message containing `substring`, both from memory and from
  // a file; a failed read leaves the output untouched.
  void ExpectRejected(const Bytes& image, StatusCode code, const std::string& substring) {
    SafetensorsFile file;
    file.metadata["untouched"] = "yes";
    const Status parsed = ParseSafetensors(image, &file, "in.safetensors");
    EXPECT_EQ(parsed.code(), code) << parsed.message();
    EXPECT_NE(parsed.message().find("in.safetensors: "), std::string::npos) << parsed.message();
    EXPECT_NE(parsed.message().find(substring), std::string::npos) << parsed.message();

    const std::string path = WriteRaw("in.safetensors", image);
    const Status read = ReadSafetensors(path, &file);
    EXPECT_EQ(read.code(), code) << read.message();
    EXPECT_NE(read.message().find(path + ": "), std::string::npos) << read.message();
    EXPECT_NE(read.message().find(substring), std::string::npos) << read.message();
    EXPECT_EQ(file.metadata.at("untouched"), "yes");
    EXPECT_TRUE(file.tensors.empty());
  }

  std::string dir_;
};

// 8-byte little-endian length, the header text as given, then the data section.
Bytes Image(uint64_t header_length, const std::string& header, const Bytes& data = {}) {
  Bytes bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(uint8_t(header_length >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}
Bytes Image(const std::string& header, const Bytes& data = {}) { return Image(header.size(), header, data); }

SafetensorsTensor MakeTensor(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  SafetensorsTensor tensor{name, dtype, std::move(shape), {}};
  tensor.bytes.resize(size_t(tensor.num_elements() * DTypeSize(dtype)));
  for (size_t i = 0; i < tensor.bytes.size(); ++i) tensor.bytes[i] = uint8_t(i * 37 + name.size() * 11 + 5);
  return tensor;
}

void ExpectSameFile(const SafetensorsFile& actual, const SafetensorsFile& expected) {
  EXPECT_EQ(actual.metadata, expected.metadata);
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (size_t i = 0; i < expected.tensors.size(); ++i) {
    EXPECT_EQ(actual.tensors[i].name, expected.tensors[i].name);
    EXPECT_EQ(actual.tensors[i].dtype, expected.tensors[i].dtype) << expected.tensors[i].name;
    EXPECT_EQ(actual.tensors[i].shape, expected.tensors[i].shape) << expected.tensors[i].name;
    EXPECT_EQ(actual.tensors[i].bytes, expected.tensors[i].bytes) << expected.tensors[i].name;
  }
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeWithMetadata) {
  SafetensorsFile file;
  file.tensors = {MakeTensor("q", DType::kBF16, {5, 2, 3}),     MakeTensor("k", DType::kF64, {4, 1, 3}),
                  MakeTensor("v", DType::kF32, {3, 7}),         MakeTensor("index_q", DType::kF16, {2, 1, 1, 1}),
                  MakeTensor("cu_seqlens_q", DType::kI32, {3}), MakeTensor("count", DType::kI64, {}),
                  MakeTensor("empty", DType::kF32, {0, 4})};
  file.metadata = {{"msa_config", R"({"block_size": 64, "pooling": "max"})"}, {"note", "µ \"quoted\"\n"}};
  const std::string path = dir_ + "/round.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, file).ok());

  SafetensorsFile read;
  const Status status = ReadSafetensors(path, &read);
  ASSERT_TRUE(status.ok()) << status.message();
  ExpectSameFile(read, file);
  EXPECT_EQ(read.Find("count")->num_elements(), 1);
  EXPECT_EQ(read.Find("empty")->num_elements(), 0);
  EXPECT_EQ(read.Find("missing"), nullptr);

  Bytes image;
  ASSERT_TRUE(SerializeSafetensors(file, &image).ok());
  EXPECT_EQ(image, ReadRaw(path));
  SafetensorsFile parsed;
  ASSERT_TRUE(ParseSafetensors(image, &parsed).ok());
  ExpectSameFile(parsed, file);
}

// The expected image is spelled out from the format definition, not produced by the writer.
TEST_F(SafetensorsTest, MatchesHandWrittenBytes) {
  const std::string header = R"({"__metadata__":{"k":"v"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("y":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})"
                             "    ";  // 132 characters, padded with spaces to 136
  ASSERT_EQ(header.size(), 136u);
  Bytes expected = {0x88, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  const Bytes data = {0x00, 0x00, 0x80, 0x3f,                           // 1.0f
                      0x00, 0x00, 0x00, 0xc0,                           // -2.0f
                      0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};  // int64 -2
  expected.insert(expected.end(), data.begin(), data.end());

  SafetensorsFile file;
  file.metadata["k"] = "v";
  SafetensorsTensor x{"x", DType::kF32, {2}, {}};
  const float x_values[] = {1.0f, -2.0f};
  x.bytes.resize(sizeof(x_values));
  std::memcpy(x.bytes.data(), x_values, sizeof(x_values));
  SafetensorsTensor y{"y", DType::kI64, {}, {}};
  const int64_t y_value = -2;
  y.bytes.resize(sizeof(y_value));
  std::memcpy(y.bytes.data(), &y_value, sizeof(y_value));
  file.tensors = {x, y};

  Bytes image;
  ASSERT_TRUE(SerializeSafetensors(file, &image).ok());
  EXPECT_EQ(image, expected);
  const std::string path = dir_ + "/hand.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, file).ok());
  EXPECT_EQ(ReadRaw(path), expected);

  SafetensorsFile parsed;
  ASSERT_TRUE(ParseSafetensors(expected, &parsed).ok());
  ExpectSameFile(parsed, file);
}

// A foreign writer may order the header differently from the data, use whitespace and leave gaps.
TEST_F(SafetensorsTest, ReadsHeaderOrderAndGaps) {
  const std::string header = R"( { "b" : {"shape": [1], "data_offsets": [12, 16], "dtype": "I32"},)"
                             R"( "a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]} }  )";
  const Bytes data = {1, 0, 0, 0, 2, 0, 0, 0, 0xaa, 0xaa, 0xaa, 0xaa, 3, 0, 0, 0, 0xbb};
  SafetensorsFile file;
  const Status status = ParseSafetensors(Image(header, data), &file);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].name, "b");
  EXPECT_EQ(file.tensors[0].bytes, (Bytes{3, 0, 0, 0}));
  EXPECT_EQ(file.tensors[1].name, "a");
  EXPECT_EQ(file.tensors[1].bytes, (Bytes{1, 0, 0, 0, 2, 0, 0, 0}));
}

TEST_F(SafetensorsTest, EmptyTensorInsideAnotherIsNotAnOverlap) {
  const std::string header = R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                             R"("e":{"dtype":"F64","shape":[0],"data_offsets":[4,4]}})";
  SafetensorsFile file;
  EXPECT_TRUE(ParseSafetensors(Image(header, Bytes(8)), &file).ok());
}

TEST_F(SafetensorsTest, RejectsFileShorterThanLengthField) {
  ExpectRejected(Bytes{1, 2, 3, 4, 5}, StatusCode::kInvalidArgument,
                 "file is 5 bytes, shorter than the 8-byte header length field");
}

TEST_F(SafetensorsTest, RejectsHugeHeaderLength) {
  ExpectRejected(Image(uint64_t{1} << 63, "{}"), StatusCode::kInvalidArgument,
                 "header length 9223372036854775808 exceeds the limit of 104857600 bytes");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastEndOfFile) {
  ExpectRejected(Image(100, "{}      "), StatusCode::kInvalidArgument,
                 "header length 100 runs past the end of the file (8 bytes follow the length field)");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBelowMinimum) {
  ExpectRejected(Image(1, "{}"), StatusCode::kInvalidArgument, "header length 1 is below the minimum of 2");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotJson) {
  ExpectRejected(Image(R"({"a": nope})"), StatusCode::kInvalidArgument, "header is not valid JSON: ");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsAnArray) {
  ExpectRejected(Image("[1, 2]"), StatusCode::kInvalidArgument, "header is a JSON array, not an object");
}

TEST_F(SafetensorsTest, RejectsDeeplyNestedHeaderWithoutCrashing) {
  const std::string deep = R"({"a":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
  ExpectRejected(Image(deep), StatusCode::kInvalidArgument,
                 "header nests JSON arrays or objects more than 16 levels deep (a safetensors header needs 3)");
}

TEST_F(SafetensorsTest, RejectsDuplicateTensorName) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
                       Bytes(8)),
                 StatusCode::kInvalidArgument, R"(header names "a" twice)");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  ExpectRejected(Image(R"({"a":{"dtype":"F8","shape":[],"data_offsets":[0,1]}})", Bytes(1)),
                 StatusCode::kInvalidArgument, R"(tensor "a": dtype "F8" is not one of)");
}

TEST_F(SafetensorsTest, RejectsMissingAndUnknownFields) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[]}})"), StatusCode::kInvalidArgument,
                 R"(tensor "a" has no "data_offsets" field)");
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":1}})", Bytes(4)),
                 StatusCode::kInvalidArgument, R"(tensor "a" has unknown field "x")");
}

TEST_F(SafetensorsTest, RejectsNegativeShapeEntry) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})"), StatusCode::kInvalidArgument,
                 R"(tensor "a": shape[1] is -1, which is negative)");
}

TEST_F(SafetensorsTest, RejectsNonIntegerShapeEntry) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})"), StatusCode::kInvalidArgument,
                 R"(tensor "a": shape[0] is 2.5, which is not an integer)");
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", Bytes(8)),
                 StatusCode::kInvalidArgument, R"(shape[0] is "2", which is not an integer)");
}

TEST_F(SafetensorsTest, RejectsShapeBeyondLimits) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", Bytes(4)),
                 StatusCode::kInvalidArgument, "shape has 9 dimensions, above the limit of 8");
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[1099511627777,0],"data_offsets":[0,0]}})"),
                 StatusCode::kInvalidArgument, "shape[0] is 1099511627777, above the limit of 1099511627776");
}

TEST_F(SafetensorsTest, RejectsReversedOffsets) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", Bytes(8)),
                 StatusCode::kInvalidArgument, R"(tensor "a": data_offsets [8, 4] are reversed)");
}

TEST_F(SafetensorsTest, RejectsOffsetsPastDataSection) {
  ExpectRejected(
      Image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Bytes(8)), StatusCode::kInvalidArgument,
      R"(tensor "a": data_offsets [0, 16] run past the data section of 8 bytes (the file is truncated or the offsets are wrong))");
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551615]}})"),
                 StatusCode::kInvalidArgument, "run past the data section of 0 bytes");
}

TEST_F(SafetensorsTest, RejectsByteCountDisagreeingWithShape) {
  const Bytes image = Image(R"({"q":{"dtype":"F32","shape":[2,3],"data_offsets":[0,100]}})", Bytes(100));
  SafetensorsFile file;
  const Status status = ParseSafetensors(image, &file, "in.safetensors");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            R"(in.safetensors: tensor "q": data_offsets [0, 100] hold 100 bytes but shape [2, 3] of F32 needs 24)");
  ExpectRejected(image, StatusCode::kInvalidArgument, "hold 100 bytes but shape [2, 3] of F32 needs 24");
}

TEST_F(SafetensorsTest, RejectsShapeWhoseByteCountOverflows) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})"),
                 StatusCode::kInvalidArgument,
                 "shape [1099511627776, 1099511627776] of F32 needs more bytes than int64 can count (overflow)");
  ExpectRejected(Image(R"({"a":{"dtype":"F64","shape":[1048576,1048576,1048576],"data_offsets":[0,0]}})"),
                 StatusCode::kInvalidArgument, "(overflow)");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  ExpectRejected(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       Bytes(12)),
                 StatusCode::kInvalidArgument,
                 R"(tensors "a" (data_offsets [0, 8]) and "b" (data_offsets [4, 12]) overlap)");
}

TEST_F(SafetensorsTest, RejectsMetadataWithNonStringValue) {
  ExpectRejected(Image(R"({"__metadata__":{"ok":"x","block_size":64}})"), StatusCode::kInvalidArgument,
                 R"(__metadata__ "block_size" is 64, not a string)");
  ExpectRejected(Image(R"({"__metadata__":[]})"), StatusCode::kInvalidArgument,
                 "__metadata__ is a JSON array, not an object");
}

TEST_F(SafetensorsTest, MissingFileIsIoError) {
  SafetensorsFile file;
  const std::string path = dir_ + "/absent.safetensors";
  const Status status = ReadSafetensors(path, &file);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(path + ": cannot open for reading"), std::string::npos) << status.message();
}

TEST_F(SafetensorsTest, DirectoryIsIoError) {
  SafetensorsFile file;
  const Status status = ReadSafetensors(dir_, &file);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find("not a regular file"), std::string::npos) << status.message();
}

TEST_F(SafetensorsTest, WriterRefusesWhatTheReaderWouldRefuse) {
  SafetensorsFile file;
  file.tensors = {MakeTensor("a", DType::kF32, {2})};
  file.tensors[0].bytes.pop_back();
  Bytes image;
  Status status = SerializeSafetensors(file, &image);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(R"(tensor "a": holds 7 bytes but shape [2] of F32 needs 8)"), std::string::npos)
      << status.message();

  file.tensors = {MakeTensor("a", DType::kF32, {1}), MakeTensor("a", DType::kF32, {1})};
  status = SerializeSafetensors(file, &image);
  EXPECT_NE(status.message().find(R"(tensor "a" appears twice)"), std::string::npos) << status.message();

  file.tensors = {MakeTensor("__metadata__", DType::kF32, {1})};
  status = SerializeSafetensors(file, &image);
  EXPECT_NE(status.message().find("reserved"), std::string::npos) << status.message();

  file.tensors = {MakeTensor("bad\xff", DType::kF32, {1})};
  status = SerializeSafetensors(file, &image);
  EXPECT_NE(status.message().find("not valid UTF-8"), std::string::npos) << status.message();

  const std::string path = dir_ + "/refused.safetensors";
  status = WriteSafetensors(path, file);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(path + ": tensor"), std::string::npos) << status.message();
  EXPECT_TRUE(ListDir().empty());
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryFailsAndLeavesNoFile) {
  SafetensorsFile file;
  file.tensors = {MakeTensor("a", DType::kF32, {2})};
  const std::string path = dir_ + "/no_such_dir/out.safetensors";
  const Status status = WriteSafetensors(path, file);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(path + ": cannot create"), std::string::npos) << status.message();
  struct stat info;
  EXPECT_NE(stat(path.c_str(), &info), 0);
  EXPECT_TRUE(ListDir().empty());
}

TEST_F(SafetensorsTest, SuccessfulWriteLeavesNoTempFile) {
  SafetensorsFile file;
  file.tensors = {MakeTensor("a", DType::kF64, {3, 3})};
  ASSERT_TRUE(WriteSafetensors(dir_ + "/out.safetensors", file).ok());
  ASSERT_TRUE(WriteSafetensors(dir_ + "/out.safetensors", file).ok());  // replaces in place
  EXPECT_EQ(ListDir(), std::vector<std::string>{"out.safetensors"});
}

}  // namespace
}  // namespace msa
