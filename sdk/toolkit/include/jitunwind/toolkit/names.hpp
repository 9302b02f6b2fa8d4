// Toolkit: the byte rule every publisher applies to symbol names — bytes below 0x20 and 0x7f
// (newline, tab, NUL, escape, DEL) cannot appear in a perf map line or a terminal and become
// '?'; everything else (UTF-8 included) is kept.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace jitunwind::toolkit {

inline bool is_control_byte(unsigned char c) noexcept {
  return c < 0x20 || c == 0x7f;
}

namespace names_impl {

// "Is any byte of these 8 below 0x20 or equal to 0x7f", exact: a byte below 0x20 (bytes >=
// 0x80 are excluded by ~x), or a zero byte of x ^ 0x7f...
inline bool word_has_control_bytes(uint64_t x) noexcept {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const uint64_t below = (x - 0x20 * ones) & ~x & highs;
  const uint64_t y = x ^ (0x7f * ones);
  const uint64_t del = (y - ones) & ~y & highs;
  return (below | del) != 0;
}

inline uint64_t load8(const char* p) noexcept {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

#if defined(__SSE2__)
inline bool block_has_control_bytes(const char* p) noexcept {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Unsigned v <= 0x1f  <=>  min(v, 0x1f) == v.
  const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
  const __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
  return _mm_movemask_epi8(_mm_or_si128(low, del)) != 0;
}
#endif

}  // namespace names_impl

/// `has_control_bytes` 8 bytes a step (the fallback without SSE2; tested on its own).
inline bool has_control_bytes_by_words(std::string_view name) noexcept {
  using namespace names_impl;
  const char* p = name.data();
  const size_t n = name.size();
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8)
      if (word_has_control_bytes(load8(p + i))) return true;
    return word_has_control_bytes(load8(p + n - 8));
  }
  for (size_t i = 0; i < n; ++i)
    if (is_control_byte(static_cast<unsigned char>(p[i]))) return true;
  return false;
}

/// Whether `name` has a byte `is_control_byte` rejects. Names are checked on every append, so
/// the scan takes 16 bytes a step (SSE2), the last step overlapping the one before instead of
/// a byte-wise tail.
inline bool has_control_bytes(std::string_view name) noexcept {
#if defined(__SSE2__)
  const char* p = name.data();
  const size_t n = name.size();
  if (n >= 16) {
    for (size_t i = 0; i + 16 < n; i += 16)
      if (names_impl::block_has_control_bytes(p + i)) return true;
    return names_impl::block_has_control_bytes(p + n - 16);
  }
#endif
  return has_control_bytes_by_words(name);
}

/// Copies `name` to `out` (name.size() bytes) with control bytes replaced by '?'.
inline void copy_sanitized(char* out, std::string_view name) noexcept {
  if (name.empty()) return;
  std::memcpy(out, name.data(), name.size());
  if (!has_control_bytes(name)) return;
  for (size_t i = 0; i < name.size(); ++i)
    if (is_control_byte(static_cast<unsigned char>(out[i]))) out[i] = '?';
}

}  // namespace jitunwind::toolkit
