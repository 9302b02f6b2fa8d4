#include <jitunwind/toolkit/terminal_text.hpp>

#include <cstdint>
#include <cstdio>

namespace jitunwind::toolkit {

namespace {

void escape_byte(std::string& out, unsigned char c) {
  if (c == '\n') {
    out += "\\n";
  } else if (c == '\t') {
    out += "\\t";
  } else {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
}

// Length of the valid UTF-8 sequence at `p` (1 to 4), or 0 if it is not one. Overlong forms,
// surrogates and code points above U+10FFFF are not valid.
size_t utf8_length(const unsigned char* p, size_t left, uint32_t& cp) {
  const unsigned char c = p[0];
  size_t n;
  uint32_t min;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, min = 0x80, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, min = 0x800, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (left < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string terminal_text(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t clean = 0;
  while (clean < n && p[clean] >= 0x20 && p[clean] < 0x7f) ++clean;
  if (clean == n) return std::string(text);
  std::string out(text.substr(0, clean));
  for (size_t i = clean; i < n;) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = c >= 0x80 ? utf8_length(p + i, n - i, cp) : 0;
    if (len == 0 || (cp >= 0x80 && cp <= 0x9f)) {
      // A control, a C1 control (each of its bytes shown) or a byte that is not UTF-8.
      const size_t bytes = len == 0 ? 1 : len;
      for (size_t k = 0; k < bytes; ++k) escape_byte(out, p[i + k]);
      i += bytes;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string shortened(std::string_view text, size_t max) {
  if (text.size() <= max) return terminal_text(text);
  return terminal_text(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace jitunwind::toolkit
