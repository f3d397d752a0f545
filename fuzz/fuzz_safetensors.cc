// Fuzz target: the safetensors reader (SPEC section 7) on arbitrary bytes.
// Rules checked on every input:
//   - ParseSafetensors never crashes, hangs or allocates beyond the input's size; a refusal is
//     InvalidArgument with a non-empty message naming the source;
//   - ReadSafetensors on the same bytes as a file agrees with ParseSafetensors (same verdict, same message
//     after the source prefix, same tensors and metadata);
//   - what the reader accepts the writer accepts, and the round trip Parse -> Serialize -> Parse gives the
//     same tensors (names, order, dtypes, shapes, bytes) and metadata; Serialize is a fixed point.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "io/safetensors.h"

namespace msa::fuzz {
namespace {

constexpr std::string_view kSource = "<fuzz>";

std::string Describe(const SafetensorsFile& file) {
  std::string text = std::to_string(file.tensors.size()) + " tensors:";
  for (const SafetensorsTensor& tensor : file.tensors) {
    text += " " + tensor.name + ":" + std::string(DTypeName(tensor.dtype)) + "[";
    for (int64_t d : tensor.shape) text += std::to_string(d) + ",";
    text += "]" + std::to_string(tensor.bytes.size()) + "B";
  }
  text += "; " + std::to_string(file.metadata.size()) + " metadata entries";
  return text;
}

bool SameTensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const SafetensorsTensor& x = a.tensors[i];
    const SafetensorsTensor& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.bytes != y.bytes) return false;
  }
  return true;
}

// A memory-backed regular file that ReadSafetensors can open by path, reused across inputs.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("msa_fuzz_safetensors", 0)) {
    MSA_FUZZ_CHECK(fd_ >= 0, "memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& Write(std::span<const uint8_t> bytes) {
    MSA_FUZZ_CHECK(ftruncate(fd_, 0) == 0, "ftruncate failed");
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = pwrite(fd_, bytes.data() + done, bytes.size() - done, off_t(done));
      MSA_FUZZ_CHECK(n > 0, "pwrite failed");
      done += size_t(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// The message without its "<source>: " prefix.
std::string WithoutSource(const std::string& message, std::string_view source) {
  const std::string prefix = std::string(source) + ": ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size()) : message;
}

}  // namespace
}  // namespace msa::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  msa::fuzz::UseOneThread();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace msa;
  using namespace msa::fuzz;
  const std::span<const uint8_t> bytes(data, size);

  SafetensorsFile parsed;
  const Status status = ParseSafetensors(bytes, &parsed, kSource);
  if (!status.ok()) {
    MSA_FUZZ_CHECK(status.code() == StatusCode::kInvalidArgument, status.message());
    MSA_FUZZ_CHECK(
        status.message().rfind(std::string(kSource) + ": ", 0) == 0 && status.message().size() > kSource.size() + 2,
        "a refusal must name the source and say why: " + status.message());
    MSA_FUZZ_CHECK(parsed.tensors.empty() && parsed.metadata.empty(), "a refusal must leave *file unchanged");
  }

  // The file reader applies the same rules to the same bytes.
  static MemoryFile memory_file;
  const std::string& path = memory_file.Write(bytes);
  SafetensorsFile read;
  const Status read_status = ReadSafetensors(path, &read);
  MSA_FUZZ_CHECK(read_status.ok() == status.ok(),
                 "ParseSafetensors: " + (status.ok() ? std::string("OK") : status.message()) +
                     "\nReadSafetensors: " + (read_status.ok() ? std::string("OK") : read_status.message()));
  if (!status.ok()) {
    MSA_FUZZ_CHECK(read_status.code() == status.code() &&
                       WithoutSource(read_status.message(), path) == WithoutSource(status.message(), kSource),
                   "ParseSafetensors: " + status.message() + "\nReadSafetensors: " + read_status.message());
    return 0;
  }
  MSA_FUZZ_CHECK(SameTensors(parsed, read), "Parse: " + Describe(parsed) + "\nRead:  " + Describe(read));
  for (const SafetensorsTensor& tensor : parsed.tensors) {
    const int64_t elements = tensor.num_elements();
    MSA_FUZZ_CHECK(elements >= 0 && tensor.shape.size() <= size_t{kSafetensorsMaxDims} &&
                       uint64_t(elements) * uint64_t(DTypeSize(tensor.dtype)) == tensor.bytes.size() &&
                       tensor.name != "__metadata__",
                   "accepted a tensor that breaks the rules: " + Describe(parsed));
  }

  // What the reader accepts, the writer accepts; the round trip keeps everything.
  std::vector<uint8_t> serialized;
  const Status write_status = SerializeSafetensors(parsed, &serialized);
  MSA_FUZZ_CHECK(write_status.ok(), "SerializeSafetensors refused a parsed file: " + write_status.message());
  SafetensorsFile reparsed;
  const Status reparse_status = ParseSafetensors(serialized, &reparsed, "<serialized>");
  MSA_FUZZ_CHECK(reparse_status.ok(),
                 "ParseSafetensors refused SerializeSafetensors' image: " + reparse_status.message());
  MSA_FUZZ_CHECK(SameTensors(parsed, reparsed), "before: " + Describe(parsed) + "\nafter:  " + Describe(reparsed));
  std::vector<uint8_t> serialized_again;
  MSA_FUZZ_CHECK(SerializeSafetensors(reparsed, &serialized_again).ok(), "second SerializeSafetensors failed");
  MSA_FUZZ_CHECK(serialized_again == serialized, "SerializeSafetensors is not a fixed point of the round trip");
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t(serialized[i]) << (8 * i);
  MSA_FUZZ_CHECK(header_length % 8 == 0, "the writer pads the header to a multiple of 8 bytes");
  return 0;
}
