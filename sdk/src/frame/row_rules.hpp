// Private: the per-row ABI rules shared by validate() and frame_builder.
#pragma once

#include <jitunwind/frame.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace jitunwind::detail {

/// Why `r` cannot be right on ABI `a`, or nothing if it can.
std::optional<std::string> check_row_rules(abi a, const frame_row& r);

/// True for the rows every AMD64 function consists of (RA at CFA-8, FP unchanged or saved in
/// its own slot, a sane CFA) — exactly the non-outermost rows `check_row_rules` accepts on
/// AMD64. Lets the hot paths (validate, frame_builder) skip the general check; false means
/// "ask check_row_rules", not "invalid".
inline bool amd64_row_obviously_valid(const frame_row& r) noexcept {
  if (r.ra != ra_rule::saved || r.ra_offset != -8 || r.ra_mangled) return false;
  if (r.cfa_offset % 8 != 0) return false;
  if (r.cfa == cfa_base::sp ? r.cfa_offset < 8 : (r.cfa != cfa_base::fp || r.cfa_offset <= 0))
    return false;
  if (r.fp == fp_rule::unchanged) return r.fp_offset == 0;
  if (r.fp != fp_rule::saved) return false;
  return r.fp_offset < 0 && r.fp_offset % 8 == 0 && r.fp_offset != -8 &&
         (r.cfa != cfa_base::sp || r.fp_offset >= -r.cfa_offset);
}

/// Whether two row lists are equal (as `operator==` says), without branching per field: the
/// encoders compare each function's rows with the previous function's on every append.
inline bool same_rows(std::span<const frame_row> a, std::span<const frame_row> b) noexcept {
  // A new field in frame_row must be compared here too.
  static_assert(sizeof(frame_row) == 32, "frame_row changed: update same_rows");
  if (a.size() != b.size()) return false;
  uint32_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const frame_row& x = a[i];
    const frame_row& y = b[i];
    diff |= (x.pc_offset ^ y.pc_offset) | static_cast<uint32_t>(x.cfa_offset ^ y.cfa_offset) |
            static_cast<uint32_t>(x.ra_offset ^ y.ra_offset) |
            static_cast<uint32_t>(x.fp_offset ^ y.fp_offset) |
            static_cast<uint32_t>(static_cast<uint8_t>(x.cfa) ^ static_cast<uint8_t>(y.cfa)) |
            static_cast<uint32_t>(static_cast<uint8_t>(x.ra) ^ static_cast<uint8_t>(y.ra)) |
            static_cast<uint32_t>(static_cast<uint8_t>(x.fp) ^ static_cast<uint8_t>(y.fp)) |
            static_cast<uint32_t>(x.ra_mangled != y.ra_mangled);
  }
  return diff == 0;
}

/// check_row_rules(a, r) has nothing to say.
inline bool row_rules_hold(abi a, const frame_row& r) {
  if (a == abi::amd64 && amd64_row_obviously_valid(r)) return true;
  return !check_row_rules(a, r).has_value();
}

}  // namespace jitunwind::detail
