// Private: the row comparison behind the SFrame and CFI encoders' shape caches.
#pragma once

#include <jitunwind/frame.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
/// without early exit (SSE2: a row is two 16-byte blocks; otherwise four words).
inline bool rows_differ(const frame_row* a, const frame_row* b, size_t count) noexcept {
  const auto* x = reinterpret_cast<const unsigned char*>(a);
  const auto* y = reinterpret_cast<const unsigned char*>(b);
#if defined(__SSE2__)
  const __m128i mask_lo = _mm_set_epi64x(static_cast<long long>(row_word_fields[1]),
                                         static_cast<long long>(row_word_fields[0]));
  const __m128i mask_hi = _mm_set_epi64x(static_cast<long long>(row_word_fields[3]),
                                         static_cast<long long>(row_word_fields[2]));
  __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
  for (size_t i = 0; i < count; ++i, x += 32, y += 32) {
    lo = _mm_or_si128(lo, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(y))));
    hi = _mm_or_si128(hi,
                      _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 16))));
  }
  const __m128i diff = _mm_or_si128(_mm_and_si128(lo, mask_lo), _mm_and_si128(hi, mask_hi));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) != 0xffff;
#else
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
#endif
}

inline bool same_row(const frame_row& a, const frame_row& b) noexcept {
  return !rows_differ(&a, &b, 1);
}

/// `a == b` in one pass (a few instructions a row; a cache hit compares them all anyway).
inline bool same_rows(std::span<const frame_row> a, std::span<const frame_row> b) noexcept {
  return a.size() == b.size() && !rows_differ(a.data(), b.data(), a.size());
}

}  // namespace jitunwind::detail
