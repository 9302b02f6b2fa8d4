// Private: the per-row ABI rules shared by validate() and frame_builder.
#pragma once

#include <jitunwind/frame.h>

#include <optional>
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
  if (r.cfa_reg != 0 || r.cfa_deref || r.ra_reg != 0 || r.fp_reg != 0) return false;
  if (r.cfa_offset % 8 != 0) return false;
  if (r.cfa == cfa_base::sp ? r.cfa_offset < 8 : (r.cfa != cfa_base::fp || r.cfa_offset <= 0))
    return false;
  if (r.fp == fp_rule::unchanged) return r.fp_offset == 0;
  if (r.fp != fp_rule::saved) return false;
  return r.fp_offset < 0 && r.fp_offset % 8 == 0 && r.fp_offset != -8 &&
         (r.cfa != cfa_base::sp || r.fp_offset >= -r.cfa_offset);
}

/// SP, FP or RA as a DWARF register number: the rows describe them, saved_registers the others.
inline bool is_frame_register(abi a, uint16_t dwarf_reg) noexcept {
  if (a == abi::amd64) return dwarf_reg == 6 || dwarf_reg == 7 || dwarf_reg == 16;
  return dwarf_reg == 29 || dwarf_reg == 30 || dwarf_reg == 31;
}

/// The `saved_registers` part of `validate`.
result<void> check_saved_registers(abi a, const function_desc& f);

/// check_row_rules(a, r) has nothing to say.
inline bool row_rules_hold(abi a, const frame_row& r) {
  if (a == abi::amd64 && amd64_row_obviously_valid(r)) return true;
  return !check_row_rules(a, r).has_value();
}

}  // namespace jitunwind::detail
