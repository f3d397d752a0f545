// SHA-256 against the published FIPS 180-2 / NIST CSRC example digests (an independent route).
#include "io/sha256.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace msa {
namespace {

TEST(Sha256Test, EmptyMessage) {
  EXPECT_EQ(Sha256Hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(Sha256Hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, TwoBlockMessage448Bits) {
  const std::string message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Sha256Hex(message.data(), message.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, OneMillionA) {
  const std::string message(1000000, 'a');
  EXPECT_EQ(Sha256Hex(message.data(), message.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalOddChunksEqualOneShot) {
  std::vector<uint8_t> message(10007);
  for (size_t i = 0; i < message.size(); ++i) message[i] = uint8_t(i * 131 + 7);
  const std::string one_shot = Sha256Hex(message.data(), message.size());
  for (size_t chunk : {1u, 3u, 7u, 55u, 63u, 64u, 65u, 127u, 1000u}) {
    Sha256 hasher;
    for (size_t at = 0; at < message.size(); at += chunk) {
      hasher.Update(message.data() + at, std::min(chunk, message.size() - at));
    }
    EXPECT_EQ(ToHex(hasher.Finish()), one_shot) << "chunk " << chunk;
  }
}

TEST(Sha256Test, FinishResetsToEmptyMessage) {
  Sha256 hasher;
  hasher.Update("abc", 3);
  (void)hasher.Finish();
  EXPECT_EQ(ToHex(hasher.Finish()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, FileDigestEqualsMemoryDigest) {
  const std::string path = testing::TempDir() + "sha256_test_" + std::to_string(getpid()) + ".bin";
  const std::string message(3 * (1 << 20) + 17, 'x');
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(std::fwrite(message.data(), 1, message.size(), file), message.size());
  ASSERT_EQ(std::fclose(file), 0);
  std::string hex;
  const Status status = Sha256OfFile(path, &hex);
  std::remove(path.c_str());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(hex, Sha256Hex(message.data(), message.size()));
}

TEST(Sha256Test, MissingFileIsIoErrorNamingPath) {
  std::string hex;
  const Status status = Sha256OfFile("/nonexistent/dir/input.safetensors", &hex);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find("/nonexistent/dir/input.safetensors"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace msa
