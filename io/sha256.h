// SHA-256 (FIPS 180-4), our own implementation: hashes the inputs that an output file records.
#ifndef MSA_IO_SHA256_H_
#define MSA_IO_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "msa/status.h"

namespace msa {

// Incremental hasher: any split of the message into Update calls gives the same digest.
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);  // data may be null when size is 0
  // Pads, returns the digest and resets the hasher to the empty message.
  std::array<uint8_t, 32> Finish();

 private:
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hexadecimal spelling of a digest (64 characters).
std::string ToHex(const std::array<uint8_t, 32>& digest);
std::string Sha256Hex(const void* data, size_t size);
// Streams the file at `path`; IoError naming the path when it cannot be opened or read.
Status Sha256OfFile(const std::string& path, std::string* hex);

}  // namespace msa

#endif  // MSA_IO_SHA256_H_
