#include "tools/msa/explain_image.h"

#include <algorithm>
#include <array>

#include "reference/reference.h"

namespace msa {
namespace {

using Rgb = std::array<uint8_t, 3>;
constexpr Rgb kRanked = {48, 96, 192}, kInit = {64, 160, 64}, kLocal = {224, 128, 32};
constexpr Rgb kUnselected = {216, 216, 216}, kInvisible = {255, 255, 255};

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void PutU32(std::vector<uint8_t>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(value >> shift));
}

void PutChunk(std::vector<uint8_t>& png, const char type[4], const std::vector<uint8_t>& data) {
  PutU32(png, uint32_t(data.size()));
  std::vector<uint8_t> typed(type, type + 4);
  typed.insert(typed.end(), data.begin(), data.end());
  png.insert(png.end(), typed.begin(), typed.end());
  PutU32(png, Crc32(typed.data(), typed.size()));
}

// A zlib stream of stored (uncompressed) deflate blocks holding `raw`.
std::vector<uint8_t> StoredZlib(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> out = {0x78, 0x01};
  size_t offset = 0;
  do {
    const size_t size = std::min<size_t>(65535, raw.size() - offset);
    const bool last = offset + size == raw.size();
    out.push_back(last ? 1 : 0);
    out.push_back(uint8_t(size));
    out.push_back(uint8_t(size >> 8));
    out.push_back(uint8_t(~size));
    out.push_back(uint8_t(~size >> 8));
    out.insert(out.end(), raw.begin() + offset, raw.begin() + offset + size);
    offset += size;
  } while (offset < raw.size());
  uint32_t a = 1, b = 0;  // Adler-32
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  PutU32(out, (b << 16) | a);
  return out;
}

}  // namespace

RgbImage DrawSelection(const Problem& problem, const std::vector<int32_t>& topk_indices) {
  const Config& c = problem.config;
  const int64_t total_q = problem.batch().total_q(), max_blocks = MaxBlocks(c, problem.batch());
  const int64_t hidx = c.num_kv_heads, cell = kSelectionCell, panel = max_blocks * cell;
  RgbImage image;
  image.width = hidx * panel + (hidx - 1) * cell;
  image.height = total_q * cell;
  image.pixels.assign(image.width * image.height * 3, 255);
  const std::vector<reference::QueryPlace> places = reference::PlaceQueries(problem.batch());
  for (int64_t r = 0; r < hidx; ++r) {
    for (int64_t t = 0; t < total_q; ++t) {
      const int64_t visible = places[t].position / c.block_size + 1;
      const int32_t* row = &topk_indices[(r * total_q + t) * c.top_k];  // [top_k]
      for (int64_t b = 0; b < max_blocks; ++b) {
        Rgb colour = b < visible ? kUnselected : kInvisible;
        if (std::find(row, row + c.top_k, int32_t(b)) != row + c.top_k) {
          colour = b == visible - 1 ? kLocal : (b < c.init_blocks ? kInit : kRanked);
        }
        // The cell, less a one-pixel white frame on its right and bottom so neighbours stay apart.
        for (int64_t y = t * cell; y < (t + 1) * cell - 1; ++y) {
          for (int64_t x = r * (panel + cell) + b * cell; x < r * (panel + cell) + (b + 1) * cell - 1; ++x) {
            std::copy(colour.begin(), colour.end(), &image.pixels[(y * image.width + x) * 3]);
          }
        }
      }
    }
  }
  return image;
}

std::vector<uint8_t> EncodePng(const RgbImage& image) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> header;
  PutU32(header, uint32_t(image.width));
  PutU32(header, uint32_t(image.height));
  header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit, RGB, deflate, filter method 0, no interlace
  PutChunk(png, "IHDR", header);
  std::vector<uint8_t> raw;  // [height, 1 + width * 3]: filter type 0 before each row
  for (int64_t y = 0; y < image.height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), image.pixels.begin() + y * image.width * 3, image.pixels.begin() + (y + 1) * image.width * 3);
  }
  PutChunk(png, "IDAT", StoredZlib(raw));
  PutChunk(png, "IEND", {});
  return png;
}

}  // namespace msa
