// Private: the row comparison behind the SFrame and CFI encoders' shape caches.
#pragma once

#include <jitunwind/frame.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace jitunwind::detail {

// frame_row is four 8-byte words. Word 0: pc_offset, cfa, cfa_reg, cfa_deref, 1 byte of padding;
// word 1: cfa_offset, ra, ra_reg, 2 bytes of padding; word 2: ra_offset, fp, fp_reg, 2 bytes of
// padding; word 3: fp_offset, ra_mangled, 3 bytes of padding. Comparing the words with the
// padding masked off is the memberwise `==` without a branch per field (the comparison runs for
// every appended function). Reading the padding through unsigned char is allowed; its values are
// unspecified, hence the masks.
static_assert(sizeof(frame_row) == 32 && alignof(frame_row) == 4);
static_assert(offsetof(frame_row, pc_offset) == 0 && offsetof(frame_row, cfa) == 4 &&
              offsetof(frame_row, cfa_reg) == 5 && offsetof(frame_row, cfa_deref) == 6 &&
              offsetof(frame_row, cfa_offset) == 8 && offsetof(frame_row, ra) == 12 &&
              offsetof(frame_row, ra_reg) == 13 && offsetof(frame_row, ra_offset) == 16 &&
              offsetof(frame_row, fp) == 20 && offsetof(frame_row, fp_reg) == 21 &&
              offsetof(frame_row, fp_offset) == 24 && offsetof(frame_row, ra_mangled) == 28);
static_assert(sizeof(cfa_base) == 1 && sizeof(ra_rule) == 1 && sizeof(fp_rule) == 1 &&
              sizeof(bool) == 1);

// The field bytes of word k: the first `n` bytes, which bits they are depends on byte order.
constexpr uint64_t first_bytes(unsigned n) {
  const uint64_t low = n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
  return std::endian::native == std::endian::little ? low : ~(~0ull >> (8 * n));
}
inline constexpr uint64_t row_word_fields[4] = {first_bytes(7), first_bytes(6), first_bytes(6),
                                                first_bytes(5)};

/// Differences between `count` rows at `a` and at `b` with the padding masked off: one pass
/// without early exit, which the compiler can vectorize.
inline bool rows_differ(const frame_row* a, const frame_row* b, size_t count) noexcept {
  const auto* x = reinterpret_cast<const unsigned char*>(a);
  const auto* y = reinterpret_cast<const unsigned char*>(b);
  uint64_t acc[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < 4; ++k) {
      uint64_t u, v;
      std::memcpy(&u, x + 32 * i + 8 * k, 8);
      std::memcpy(&v, y + 32 * i + 8 * k, 8);
      acc[k] |= u ^ v;
    }
  }
  return ((acc[0] & row_word_fields[0]) | (acc[1] & row_word_fields[1]) |
          (acc[2] & row_word_fields[2]) | (acc[3] & row_word_fields[3])) != 0;
}

inline bool same_row(const frame_row& a, const frame_row& b) noexcept {
  return !rows_differ(&a, &b, 1);
}

/// `a == b`, last rows first: functions of different sizes usually differ in their last rows
/// (epilogue offsets) while their prologue rows are equal, so a mismatch mostly costs one row's
/// comparison; equal rows (a cache hit) are compared in one pass.
inline bool same_rows(std::span<const frame_row> a, std::span<const frame_row> b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  if (!same_row(a.back(), b.back())) return false;
  return !rows_differ(a.data(), b.data(), a.size() - 1);
}

}  // namespace jitunwind::detail
