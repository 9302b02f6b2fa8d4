// Minimal PNG reader for screenshot tests: 8-bit RGB/RGBA, non-interlaced (what Chromium
// writes). Returns false for anything else.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace jitwalk_test {

struct image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
};

inline uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

inline bool decode_png(const std::string& file, image& out) {
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return false;
  size_t pos = 8;
  std::string idat;
  int color = -1, depth = 0, interlace = 0;
  while (pos + 12 <= file.size()) {
    uint32_t len = be32(file, pos);
    std::string type = file.substr(pos + 4, 4);
    if (pos + 12 + len > file.size()) return false;
    if (type == "IHDR") {
      out.width = be32(file, pos + 8);
      out.height = be32(file, pos + 12);
      depth = uint8_t(file[pos + 16]);
      color = uint8_t(file[pos + 17]);
      interlace = uint8_t(file[pos + 20]);
    } else if (type == "IDAT") {
      idat += file.substr(pos + 8, len);
    } else if (type == "IEND") {
      break;
    }
    pos += 12 + len;
  }
  if (depth != 8 || interlace != 0 || (color != 2 && color != 6)) return false;
  const size_t bpp = color == 6 ? 4 : 3, stride = out.width * bpp;
  std::vector<uint8_t> raw((stride + 1) * out.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size()) {
    return false;
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  out.rgb.clear();
  for (uint32_t y = 0; y < out.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* line = &raw[y * (stride + 1) + 1];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? cur[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      int p = line[x];
      switch (filter) {
        case 0:
          break;
        case 1:
          p += a;
          break;
        case 2:
          p += b;
          break;
        case 3:
          p += (a + b) / 2;
          break;
        case 4: {
          const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
          p += (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          return false;
      }
      cur[x] = static_cast<uint8_t>(p);
    }
    for (uint32_t x = 0; x < out.width; ++x) {
      out.rgb.push_back(cur[x * bpp]);
      out.rgb.push_back(cur[x * bpp + 1]);
      out.rgb.push_back(cur[x * bpp + 2]);
    }
    prev = cur;
  }
  return true;
}

}  // namespace jitwalk_test
