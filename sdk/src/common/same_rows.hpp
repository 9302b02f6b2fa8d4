// Private: the row comparison behind the SFrame and CFI encoders' shape caches.
#pragma once

#include <jitunwind/frame.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace jitunwind::detail {

// frame_row is four 8-byte words, each a 4-byte field, a 1-byte field and 3 bytes of padding.
// Comparing the words with the padding masked off is the memberwise `==` without a branch per
// field (the comparison runs for every appended function). Reading the padding through
// unsigned char is allowed; its values are unspecified, hence the mask.
static_assert(sizeof(frame_row) == 32 && alignof(frame_row) == 4);
static_assert(offsetof(frame_row, pc_offset) == 0 && offsetof(frame_row, cfa) == 4 &&
              offsetof(frame_row, cfa_offset) == 8 && offsetof(frame_row, ra) == 12 &&
              offsetof(frame_row, ra_offset) == 16 && offsetof(frame_row, fp) == 20 &&
              offsetof(frame_row, fp_offset) == 24 && offsetof(frame_row, ra_mangled) == 28);
static_assert(sizeof(cfa_base) == 1 && sizeof(ra_rule) == 1 && sizeof(fp_rule) == 1 &&
              sizeof(bool) == 1);

// The first five bytes of each word are fields; which bits they are depends on byte order.
inline constexpr uint64_t row_word_fields =
    std::endian::native == std::endian::little ? 0x000000ffffffffffull : 0xffffffffff000000ull;

/// Differences between `count` rows at `a` and at `b`, padding included (mask with
/// row_word_fields): one pass without early exit, which the compiler can vectorize.
inline uint64_t row_differences(const frame_row* a, const frame_row* b, size_t count) noexcept {
  const auto* x = reinterpret_cast<const unsigned char*>(a);
  const auto* y = reinterpret_cast<const unsigned char*>(b);
  uint64_t acc = 0;
  for (size_t i = 0; i < count * (sizeof(frame_row) / 8); ++i) {
    uint64_t u, v;
    std::memcpy(&u, x + 8 * i, 8);
    std::memcpy(&v, y + 8 * i, 8);
    acc |= u ^ v;
  }
  return acc;
}

inline bool same_row(const frame_row& a, const frame_row& b) noexcept {
  return (row_differences(&a, &b, 1) & row_word_fields) == 0;
}

/// `a == b`, last rows first: functions of different sizes usually differ in their last rows
/// (epilogue offsets) while their prologue rows are equal, so a mismatch mostly costs one row's
/// comparison; equal rows (a cache hit) are compared in one pass.
inline bool same_rows(std::span<const frame_row> a, std::span<const frame_row> b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  if (!same_row(a.back(), b.back())) return false;
  return (row_differences(a.data(), b.data(), a.size() - 1) & row_word_fields) == 0;
}

}  // namespace jitunwind::detail
