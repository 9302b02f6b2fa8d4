// Private: the byte rule every publisher applies to symbol names — bytes below 0x20 and 0x7f
// (newline, tab, NUL, escape, DEL) cannot appear in a perf map line or a terminal and become
// '?'; everything else (UTF-8 included) is kept. Scanning is word-at-a-time: names are checked
// and copied on every publish.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace jitunwind::detail {

inline bool is_control_byte(unsigned char c) noexcept {
  return c < 0x20 || c == 0x7f;
}

/// Whether `name` has a byte `is_control_byte` rejects.
inline bool has_control_bytes(std::string_view name) noexcept {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const char* p = name.data();
  size_t n = name.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    // A byte below 0x20 (bytes >= 0x80 are excluded by ~x), or a byte equal to 0x7f (a zero
    // byte of x ^ 0x7f..): each test is exact for "is there any such byte".
    const uint64_t below = (x - 0x20 * ones) & ~x & highs;
    const uint64_t y = x ^ (0x7f * ones);
    const uint64_t del = (y - ones) & ~y & highs;
    if ((below | del) != 0) return true;
  }
  for (; n > 0; ++p, --n)
    if (is_control_byte(static_cast<unsigned char>(*p))) return true;
  return false;
}

/// Copies `name` to `out` (name.size() bytes) with control bytes replaced by '?'.
inline void copy_sanitized(char* out, std::string_view name) noexcept {
  if (name.empty()) return;
  std::memcpy(out, name.data(), name.size());
  if (!has_control_bytes(name)) return;
  for (size_t i = 0; i < name.size(); ++i)
    if (is_control_byte(static_cast<unsigned char>(out[i]))) out[i] = '?';
}

}  // namespace jitunwind::detail
