#include "io/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace msa {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is copied as is; this host must be little-endian");

using Json = nlohmann::ordered_json;
using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr size_t kMaxQuotedChars = 64;
// Deepest JSON nesting the header may have (a valid header needs 3: header, entry, shape). Deeper values are
// refused while parsing: printing one in a message (nlohmann's dump recurses) would overflow the stack.
constexpr int kMaxJsonDepth = 16;

// A header entry whose every rule has been checked; offsets are relative to the data section.
struct Entry {
  std::string name;
  DType dtype = DType::kF64;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

// A JSON value spelled for a message: escaped, invalid UTF-8 replaced, cut to kMaxQuotedChars.
std::string Brief(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxQuotedChars) text = text.substr(0, kMaxQuotedChars) + "...";
  return text;
}

std::string Quoted(std::string_view text) { return Brief(Json(std::string(text.substr(0, kMaxQuotedChars + 1)))); }

// Elements in `shape`: 0 when any dimension is 0; false when a dimension is negative or the product
// overflows int64.
bool ElementCount(std::span<const int64_t> shape, int64_t* count) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) return false;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *count = 0;
    return true;
  }
  int64_t product = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(product, d, &product)) return false;
  }
  *count = product;
  return true;
}

// Bytes that `shape` of `dtype` occupies; false on overflow of int64.
bool ByteCount(std::span<const int64_t> shape, DType dtype, int64_t* bytes) {
  int64_t count;
  return ElementCount(shape, &count) && !__builtin_mul_overflow(count, int64_t{DTypeSize(dtype)}, bytes);
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = uint8_t(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint32_t code_point, minimum;
    if ((lead & 0xe0) == 0xc0) {
      extra = 1, code_point = lead & 0x1f, minimum = 0x80;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code_point = lead & 0x0f, minimum = 0x800;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code_point = lead & 0x07, minimum = 0x10000;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const uint8_t next = uint8_t(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3f);
    }
    if (code_point < minimum || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Records the parser's own description of the first syntax error (used only after a parse has failed).
class SyntaxErrorRecorder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    message = error.what();
    return false;
  }

  std::string message;
};

// A non-negative JSON integer literal no larger than `limit`; the message names `field`, the value and the
// rule it breaks.
Status NonNegativeInteger(const Json& value, uint64_t limit, const std::string& field, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
  } else if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = 0;  // "-0"
  } else if (value.is_number_integer()) {
    return InvalidArgument(field + " is " + Brief(value) + ", which is negative");
  } else {
    return InvalidArgument(field + " is " + Brief(value) + ", which is not an integer");
  }
  if (*out > limit) {
    return InvalidArgument(field + " is " + Brief(value) + ", above the limit of " + std::to_string(limit));
  }
  return Status::Ok();
}

// Checks one tensor entry of the header against every rule except overlap with other tensors.
Status ParseEntry(const std::string& name, const Json& value, uint64_t data_size, Entry* entry) {
  const std::string where = "tensor " + Quoted(name);
  if (!value.is_object()) {
    return InvalidArgument(where + " is a JSON " + value.type_name() + ", not an object");
  }
  for (const auto& [key, unused] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return InvalidArgument(where + " has unknown field " + Quoted(key) + " (allowed: dtype, shape, data_offsets)");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) return InvalidArgument(where + " has no \"" + key + "\" field");
  }
  entry->name = name;

  const Json& dtype = value["dtype"];
  if (!dtype.is_string() || !ParseDType(dtype.get<std::string>(), &entry->dtype)) {
    return InvalidArgument(where + ": dtype " + Brief(dtype) +
                           " is not one of \"F64\", \"F32\", \"BF16\", \"F16\", \"I32\", \"I64\"");
  }

  const Json& shape = value["shape"];
  if (!shape.is_array()) {
    return InvalidArgument(where + ": shape is a JSON " + shape.type_name() + ", not an array");
  }
  if (shape.size() > size_t{kSafetensorsMaxDims}) {
    return InvalidArgument(where + ": shape has " + std::to_string(shape.size()) + " dimensions, above the limit of " +
                           std::to_string(kSafetensorsMaxDims));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t dim;
    MSA_RETURN_IF_ERROR(
        NonNegativeInteger(shape[i], uint64_t{kSafetensorsMaxDim}, where + ": shape[" + std::to_string(i) + "]", &dim));
    entry->shape.push_back(int64_t(dim));
  }

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return InvalidArgument(where + ": data_offsets is " + Brief(offsets) + ", not an array of two integers");
  }
  MSA_RETURN_IF_ERROR(NonNegativeInteger(offsets[0], UINT64_MAX, where + ": data_offsets[0]", &entry->begin));
  MSA_RETURN_IF_ERROR(NonNegativeInteger(offsets[1], UINT64_MAX, where + ": data_offsets[1]", &entry->end));
  const std::string offsets_text =
      "data_offsets [" + std::to_string(entry->begin) + ", " + std::to_string(entry->end) + "]";
  if (entry->begin > entry->end) {
    return InvalidArgument(where + ": " + offsets_text + " are reversed (begin > end)");
  }
  if (entry->end > data_size) {
    return InvalidArgument(where + ": " + offsets_text + " run past the data section of " + std::to_string(data_size) +
                           " bytes (the file is truncated or the offsets are wrong)");
  }

  const std::string shape_text = "shape " + ShapeString(entry->shape) + " of " + std::string(DTypeName(entry->dtype));
  int64_t needed;
  if (!ByteCount(entry->shape, entry->dtype, &needed)) {
    return InvalidArgument(where + ": " + shape_text + " needs more bytes than int64 can count (overflow)");
  }
  if (uint64_t(needed) != entry->end - entry->begin) {
    return InvalidArgument(where + ": " + offsets_text + " hold " + std::to_string(entry->end - entry->begin) +
                           " bytes but " + shape_text + " needs " + std::to_string(needed));
  }
  return Status::Ok();
}

// Validates the JSON header text against every rule, given the size of the data section that follows it.
// Messages carry no file name; the caller prefixes it.
Status ParseHeader(std::string_view text, uint64_t data_size, Header* header) {
  std::set<std::string> top_level_keys;
  std::string duplicate;
  bool too_deep = false;
  const Json::parser_callback_t find_duplicates = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && duplicate.empty() &&
        !top_level_keys.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      too_deep = true;
      return false;  // discard the value: nothing that deep is ever kept
    }
    return true;
  };
  const Json json = Json::parse(text.begin(), text.end(), find_duplicates, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    SyntaxErrorRecorder recorder;
    Json::sax_parse(text.begin(), text.end(), &recorder);
    return InvalidArgument("header is not valid JSON: " + recorder.message.substr(0, 200));
  }
  if (too_deep) {
    return InvalidArgument("header nests JSON arrays or objects more than " + std::to_string(kMaxJsonDepth) +
                           " levels deep (a safetensors header needs 3)");
  }
  if (!json.is_object()) {
    return InvalidArgument(std::string("header is a JSON ") + json.type_name() + ", not an object");
  }
  if (!duplicate.empty()) return InvalidArgument("header names " + Quoted(duplicate) + " twice");

  for (const auto& [key, value] : json.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        return InvalidArgument("__metadata__ is a JSON " + std::string(value.type_name()) + ", not an object");
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return InvalidArgument("__metadata__ " + Quoted(meta_key) + " is " + Brief(meta_value) + ", not a string");
        }
        header->metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    Entry entry;
    MSA_RETURN_IF_ERROR(ParseEntry(key, value, data_size, &entry));
    header->entries.push_back(std::move(entry));
  }

  // Two tensors overlap when they share a byte; empty tensors hold none.
  std::vector<const Entry*> by_begin;
  for (const Entry& entry : header->entries) {
    if (entry.begin < entry.end) by_begin.push_back(&entry);
  }
  std::sort(by_begin.begin(), by_begin.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const Entry& before = *by_begin[i - 1];
    const Entry& after = *by_begin[i];
    if (before.end > after.begin) {
      return InvalidArgument("tensors " + Quoted(before.name) + " (data_offsets [" + std::to_string(before.begin) +
                             ", " + std::to_string(before.end) + "]) and " + Quoted(after.name) + " (data_offsets [" +
                             std::to_string(after.begin) + ", " + std::to_string(after.end) + "]) overlap");
    }
  }
  return Status::Ok();
}

// The header length must be at least 2 ("{}"), at most kSafetensorsMaxHeaderBytes, and fit in the file.
Status CheckHeaderLength(uint64_t file_size, uint64_t header_length) {
  if (header_length < 2) {
    return InvalidArgument("header length " + std::to_string(header_length) + " is below the minimum of 2");
  }
  if (header_length > kSafetensorsMaxHeaderBytes) {
    return InvalidArgument("header length " + std::to_string(header_length) + " exceeds the limit of " +
                           std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  }
  if (header_length > file_size - 8) {
    return InvalidArgument("header length " + std::to_string(header_length) + " runs past the end of the file (" +
                           std::to_string(file_size - 8) + " bytes follow the length field)");
  }
  return Status::Ok();
}

// The file must hold at least the 8-byte header length field.
Status CheckFileSize(uint64_t file_size) {
  if (file_size < 8) {
    return InvalidArgument("file is " + std::to_string(file_size) +
                           " bytes, shorter than the 8-byte header length field");
  }
  return Status::Ok();
}

uint64_t LoadLittleEndian64(const uint8_t* bytes) {
  uint64_t value;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

// Prefixes a failed status's message with the file it concerns.
Status InFile(std::string_view source, Status status) {
  if (status.ok()) return status;
  return Status(status.code(), std::string(source) + ": " + status.message());
}

// Builds a tensor with an empty byte buffer from a validated entry.
SafetensorsTensor TensorFromEntry(Entry&& entry) {
  SafetensorsTensor tensor;
  tensor.name = std::move(entry.name);
  tensor.dtype = entry.dtype;
  tensor.shape = std::move(entry.shape);
  return tensor;
}

// Reads exactly `size` bytes at `offset`; IoError on a short read.
Status ReadAt(std::FILE* file, const std::string& path, uint64_t offset, void* data, size_t size) {
  if (size == 0) return Status::Ok();
  if (fseeko(file, off_t(offset), SEEK_SET) != 0) {
    return IoError(path + ": cannot seek to byte " + std::to_string(offset) + ": " + std::strerror(errno));
  }
  if (std::fread(data, 1, size, file) != size) {
    return IoError(path + ": cannot read " + std::to_string(size) + " bytes at byte " + std::to_string(offset) +
                   (std::ferror(file) ? std::string(": ") + std::strerror(errno) : ": the file ended early"));
  }
  return Status::Ok();
}

// Checks every tensor and metadata rule; this is what the reader will accept back.
Status CheckWritable(const SafetensorsFile& file) {
  std::set<std::string_view> names;
  for (const SafetensorsTensor& tensor : file.tensors) {
    const std::string where = "tensor " + Quoted(tensor.name);
    if (!IsValidUtf8(tensor.name)) return InvalidArgument(where + ": name is not valid UTF-8");
    if (tensor.name == kMetadataKey) return InvalidArgument(where + ": the name is reserved for metadata");
    if (!names.insert(tensor.name).second) return InvalidArgument(where + " appears twice");
    if (tensor.shape.size() > size_t{kSafetensorsMaxDims}) {
      return InvalidArgument(where + ": shape " + ShapeString(tensor.shape) + " has more than " +
                             std::to_string(kSafetensorsMaxDims) + " dimensions");
    }
    for (int64_t dim : tensor.shape) {
      if (dim < 0 || dim > kSafetensorsMaxDim) {
        return InvalidArgument(where + ": shape " + ShapeString(tensor.shape) + " has a dimension outside [0, 2^40]");
      }
    }
    const std::string shape_text = "shape " + ShapeString(tensor.shape) + " of " + std::string(DTypeName(tensor.dtype));
    int64_t needed;
    if (!ByteCount(tensor.shape, tensor.dtype, &needed)) {
      return InvalidArgument(where + ": " + shape_text + " needs more bytes than int64 can count (overflow)");
    }
    if (uint64_t(needed) != tensor.bytes.size()) {
      return InvalidArgument(where + ": holds " + std::to_string(tensor.bytes.size()) + " bytes but " + shape_text +
                             " needs " + std::to_string(needed));
    }
  }
  for (const auto& [key, value] : file.metadata) {
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return InvalidArgument("__metadata__ " + Quoted(key) + ": key or value is not valid UTF-8");
    }
  }
  return Status::Ok();
}

// The length field and the space-padded header of a file that CheckWritable accepted.
std::string LengthAndHeader(const SafetensorsFile& file) {
  Json header = Json::object();
  if (!file.metadata.empty()) header[std::string(kMetadataKey)] = file.metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor& tensor : file.tensors) {
    header[tensor.name] = {{"dtype", DTypeName(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::string length_field(8, '\0');
  std::memcpy(length_field.data(), &length, sizeof(length));
  return length_field + text;
}

}  // namespace

std::string ShapeString(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

int64_t SafetensorsTensor::num_elements() const {
  int64_t count;
  return ElementCount(shape, &count) ? count : -1;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  for (const SafetensorsTensor& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

Status ParseSafetensors(std::span<const uint8_t> bytes, SafetensorsFile* file, std::string_view source) {
  MSA_RETURN_IF_ERROR(InFile(source, CheckFileSize(bytes.size())));
  const uint64_t header_length = LoadLittleEndian64(bytes.data());
  MSA_RETURN_IF_ERROR(InFile(source, CheckHeaderLength(bytes.size(), header_length)));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_length);
  const std::span<const uint8_t> data = bytes.subspan(8 + header_length);
  Header header;
  MSA_RETURN_IF_ERROR(InFile(source, ParseHeader(text, data.size(), &header)));

  SafetensorsFile result;
  result.metadata = std::move(header.metadata);
  for (Entry& entry : header.entries) {
    const auto region = data.subspan(entry.begin, entry.end - entry.begin);
    result.tensors.push_back(TensorFromEntry(std::move(entry)));
    result.tensors.back().bytes.assign(region.begin(), region.end());
  }
  *file = std::move(result);
  return Status::Ok();
}

Status ReadSafetensors(const std::string& path, SafetensorsFile* file) {
  FilePtr stream(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!stream) return IoError(path + ": cannot open for reading: " + std::strerror(errno));
  struct stat info;
  if (fstat(fileno(stream.get()), &info) != 0) {
    return IoError(path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) return IoError(path + ": not a regular file");
  const uint64_t file_size = uint64_t(info.st_size);

  MSA_RETURN_IF_ERROR(InFile(path, CheckFileSize(file_size)));
  uint8_t length_field[8];
  MSA_RETURN_IF_ERROR(ReadAt(stream.get(), path, 0, length_field, sizeof(length_field)));
  const uint64_t header_length = LoadLittleEndian64(length_field);
  MSA_RETURN_IF_ERROR(InFile(path, CheckHeaderLength(file_size, header_length)));
  std::string text(header_length, '\0');
  MSA_RETURN_IF_ERROR(ReadAt(stream.get(), path, 8, text.data(), text.size()));
  Header header;
  MSA_RETURN_IF_ERROR(InFile(path, ParseHeader(text, file_size - 8 - header_length, &header)));

  SafetensorsFile result;
  result.metadata = std::move(header.metadata);
  for (Entry& entry : header.entries) {
    const uint64_t offset = 8 + header_length + entry.begin;
    const size_t size = entry.end - entry.begin;
    result.tensors.push_back(TensorFromEntry(std::move(entry)));
    std::vector<uint8_t>& bytes = result.tensors.back().bytes;
    bytes.resize(size);
    MSA_RETURN_IF_ERROR(ReadAt(stream.get(), path, offset, bytes.data(), size));
  }
  *file = std::move(result);
  return Status::Ok();
}

Status SerializeSafetensors(const SafetensorsFile& file, std::vector<uint8_t>* bytes) {
  MSA_RETURN_IF_ERROR(CheckWritable(file));
  const std::string prefix = LengthAndHeader(file);
  bytes->assign(prefix.begin(), prefix.end());
  for (const SafetensorsTensor& tensor : file.tensors) {
    bytes->insert(bytes->end(), tensor.bytes.begin(), tensor.bytes.end());
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, const SafetensorsFile& file) {
  MSA_RETURN_IF_ERROR(InFile(path, CheckWritable(file)));
  return WriteFileAtomically(path, [&file](std::FILE* stream) {
    const std::string prefix = LengthAndHeader(file);
    if (std::fwrite(prefix.data(), 1, prefix.size(), stream) != prefix.size()) return false;
    for (const SafetensorsTensor& tensor : file.tensors) {
      const size_t size = tensor.bytes.size();
      if (size != 0 && std::fwrite(tensor.bytes.data(), 1, size, stream) != size) return false;
    }
    return true;
  });
}

}  // namespace msa
