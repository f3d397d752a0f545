// Reader and writer for safetensors files (SPEC section 7): an 8-byte little-endian header length N, N bytes
// of UTF-8 JSON header, then the raw little-endian C-order data section. The reader treats every file as
// hostile: it validates the whole header against the real file size before it allocates any tensor, and
// every failure is a Status naming the file, the tensor or field, the bad value and the rule.
#ifndef MSA_IO_SAFETENSORS_H_
#define MSA_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "msa/status.h"
#include "msa/tensor.h"

namespace msa {

// Limits the reader enforces (the writer refuses what the reader would refuse).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = uint64_t{100} << 20;  // 100 MiB
inline constexpr int kSafetensorsMaxDims = 8;
inline constexpr int64_t kSafetensorsMaxDim = int64_t{1} << 40;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF64;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian raw elements, C order

  // Product of the shape (1 for a scalar, 0 when any dimension is 0); -1 when a dimension is negative or
  // the product overflows int64.
  int64_t num_elements() const;
};

struct SafetensorsFile {
  std::vector<SafetensorsTensor> tensors;       // in header order (the order the writer lays out the data)
  std::map<std::string, std::string> metadata;  // "__metadata__"

  // The tensor called `name`, or nullptr.
  const SafetensorsTensor* Find(std::string_view name) const;
};

// "[2, 3, 4]": a shape as messages spell it.
std::string ShapeString(std::span<const int64_t> shape);

// Reads and validates the file at `path`. IoError when it cannot be opened or read; InvalidArgument when
// its content breaks a rule. On failure `*file` is left unchanged.
Status ReadSafetensors(const std::string& path, SafetensorsFile* file);

// The same rules over an in-memory image of a file; `source` names it in messages.
Status ParseSafetensors(std::span<const uint8_t> bytes, SafetensorsFile* file, std::string_view source = "<memory>");

// Lays out the file image: tensors in the given order, data contiguous in that order, the header padded
// with spaces to a multiple of 8 bytes, "__metadata__" only when non-empty. InvalidArgument when a tensor's
// byte count disagrees with its shape and dtype, a name repeats or is "__metadata__", a shape breaks the
// reader's limits, or a string is not valid UTF-8.
Status SerializeSafetensors(const SafetensorsFile& file, std::vector<uint8_t>* bytes);

// Writes the image to path + ".tmp.<pid>" and renames it into place. On any failure the temporary file is
// removed and nothing new is left at `path`.
Status WriteSafetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace msa

#endif  // MSA_IO_SAFETENSORS_H_
