#include <jitunwind/frame.h>

#include "common/error.hpp"
#include "frame/row_rules.hpp"

#include <limits>

namespace jitunwind {

using detail::format;
using detail::make_error;

const char* to_string(abi a) noexcept {
  switch (a) {
    case abi::amd64:
      return "amd64";
    case abi::aarch64_le:
      return "aarch64-le";
    case abi::aarch64_be:
      return "aarch64-be";
    case abi::s390x:
      return "s390x";
  }
  return "unknown";
}

dwarf_regs dwarf_registers(abi a) noexcept {
  switch (a) {
    case abi::amd64:
      return {7, 6, 16};
    case abi::aarch64_le:
    case abi::aarch64_be:
      return {31, 29, 30};
    case abi::s390x:
      return {15, 11, 14};
  }
  return {0, 0, 0};
}

bool default_expressible(abi a, const frame_row& r) noexcept {
  if (r.ra == ra_rule::undefined) return true;
  if (r.cfa == cfa_base::reg || r.cfa_deref) return false;
  if (r.fp != fp_rule::unchanged && r.fp != fp_rule::saved) return false;
  switch (r.ra) {
    case ra_rule::saved:
      return a != abi::amd64 || r.ra_offset == -8;
    case ra_rule::in_register:
      return a != abi::amd64 && r.fp == fp_rule::unchanged;
    default:
      return false;
  }
}

result<abi> parse_abi(std::string_view name) {
  for (abi a : {abi::amd64, abi::aarch64_le, abi::aarch64_be, abi::s390x}) {
    if (name == to_string(a)) return a;
  }
  return make_error(errc::invalid_argument,
                    "unknown ABI '%.*s' (expected amd64, aarch64-le, aarch64-be or s390x)",
                    static_cast<int>(name.size()), name.data());
}

frame_row entry_row(abi a) noexcept {
  frame_row r;
  if (a == abi::amd64) {
    r.cfa_offset = 8;
    r.ra = ra_rule::saved;
    r.ra_offset = -8;
  } else {
    r.cfa_offset = 0;
    r.ra = ra_rule::in_register;
    r.ra_offset = 0;
  }
  return r;
}

frame_row outermost_row(uint32_t pc_offset) noexcept {
  frame_row r;
  r.pc_offset = pc_offset;
  r.cfa = cfa_base::sp;
  r.cfa_offset = 0;
  r.ra = ra_rule::undefined;
  r.ra_offset = 0;
  r.fp = fp_rule::unchanged;
  r.fp_offset = 0;
  r.ra_mangled = false;
  return r;
}

namespace detail {

namespace {

// The CFA rule: SP/FP + offset as before; the v3 forms (another register, a dereference) only
// need an 8-byte aligned offset and a register that is not spelled another way.
std::optional<std::string> check_cfa(abi a, const frame_row& r) {
  const bool amd64 = a == abi::amd64;
  const dwarf_regs regs = dwarf_registers(a);
  if (r.cfa == cfa_base::reg && (r.cfa_reg == regs.sp || r.cfa_reg == regs.fp))
    return format("CFA register %u is the %s: use cfa_base::%s", r.cfa_reg,
                  r.cfa_reg == regs.sp ? "stack pointer" : "frame pointer",
                  r.cfa_reg == regs.sp ? "sp" : "fp");
  if (r.cfa != cfa_base::reg && r.cfa_reg != 0)
    return format("CFA register %u given for an SP- or FP-based CFA", r.cfa_reg);
  if (r.cfa_offset % 8 != 0) return format("CFA offset %d is not a multiple of 8", r.cfa_offset);
  if (r.cfa_deref || r.cfa == cfa_base::reg) return std::nullopt;
  const int32_t min_cfa = amd64 ? 8 : 0;
  if (r.cfa == cfa_base::sp && r.cfa_offset < min_cfa)
    return format("SP-based CFA offset %d is below %d (the CFA is above the stack pointer)",
                  r.cfa_offset, min_cfa);
  if (r.cfa == cfa_base::fp && r.cfa_offset <= 0)
    return format("FP-based CFA offset %d must be positive", r.cfa_offset);
  return std::nullopt;
}

// A saved slot below the stack pointer is dead: only checkable for a plain SP-based CFA.
bool below_sp(const frame_row& r, int32_t offset) {
  return r.cfa == cfa_base::sp && !r.cfa_deref && offset < -r.cfa_offset;
}

std::optional<std::string> check_ra(abi a, const frame_row& r) {
  const bool amd64 = a == abi::amd64;
  const dwarf_regs regs = dwarf_registers(a);
  if (r.ra_mangled && amd64)
    return std::string("RA mangling (pointer authentication) exists only on AArch64");
  if (r.ra != ra_rule::register_value && r.ra != ra_rule::register_saved && r.ra_reg != 0)
    return format("RA register %u given for a rule without a register", r.ra_reg);
  switch (r.ra) {
    case ra_rule::saved:
      if (r.ra_offset >= 0 || r.ra_offset % 8 != 0)
        return format("RA offset %d must be negative and a multiple of 8", r.ra_offset);
      if (below_sp(r, r.ra_offset))
        return format("RA saved at CFA%d, below the stack pointer (CFA = SP+%d)", r.ra_offset,
                      r.cfa_offset);
      return std::nullopt;
    case ra_rule::in_register:
      if (amd64) return std::string("AMD64 has no link register: the RA cannot be 'in register'");
      if (r.ra_offset != 0)
        return format("RA offset %d given while RA is in the link register", r.ra_offset);
      return std::nullopt;
    case ra_rule::register_value:
    case ra_rule::register_saved:
      if (r.ra_reg == regs.sp)
        return format(
            "RA rule names the stack pointer (DWARF %u); the CFA rule gives the caller's SP",
            r.ra_reg);
      if (r.ra == ra_rule::register_saved && r.ra_offset % 8 != 0)
        return format("RA saved at register %u %+d: not a multiple of 8", r.ra_reg, r.ra_offset);
      return std::nullopt;
    case ra_rule::undefined:
      break;
  }
  return format("unknown RA rule %u", static_cast<unsigned>(r.ra));
}

std::optional<std::string> check_fp(abi a, const frame_row& r) {
  const bool amd64 = a == abi::amd64;
  const dwarf_regs regs = dwarf_registers(a);
  if (r.fp != fp_rule::register_value && r.fp != fp_rule::register_saved && r.fp_reg != 0)
    return format("FP register %u given for a rule without a register", r.fp_reg);
  switch (r.fp) {
    case fp_rule::unchanged:
      if (r.fp_offset != 0) return format("FP offset %d given while FP is unchanged", r.fp_offset);
      return std::nullopt;
    case fp_rule::saved:
      if (r.fp_offset >= 0 || r.fp_offset % 8 != 0)
        return format("FP offset %d must be negative and a multiple of 8", r.fp_offset);
      if (amd64 && r.ra == ra_rule::saved && r.fp_offset == r.ra_offset)
        return format("FP saved at CFA%d, which is the return address slot", r.fp_offset);
      if (!amd64 && r.ra == ra_rule::saved && r.fp_offset == r.ra_offset)
        return format("FP and RA saved in the same slot CFA%d", r.fp_offset);
      if (below_sp(r, r.fp_offset))
        return format("FP saved at CFA%d, below the stack pointer (CFA = SP+%d)", r.fp_offset,
                      r.cfa_offset);
      return std::nullopt;
    case fp_rule::register_value:
      if (r.fp_reg == regs.fp && r.fp_offset == 0)
        return std::string("FP = FP + 0 is 'unchanged': use fp_rule::unchanged");
      return std::nullopt;
    case fp_rule::register_saved:
      if (r.fp_offset % 8 != 0)
        return format("FP saved at register %u %+d: not a multiple of 8", r.fp_reg, r.fp_offset);
      return std::nullopt;
  }
  return format("unknown FP rule %u", static_cast<unsigned>(r.fp));
}

}  // namespace

std::optional<std::string> check_row_rules(abi a, const frame_row& r) {
  if (r.ra == ra_rule::undefined) {
    if (r != outermost_row(r.pc_offset))
      return std::string("an outermost row (RA undefined) must not carry CFA, FP or RA offsets");
    return std::nullopt;
  }
  if (auto why = check_cfa(a, r)) return why;
  if (auto why = check_ra(a, r)) return why;
  return check_fp(a, r);
}

result<void> check_saved_registers(abi a, const function_desc& f) {
  const auto start = static_cast<unsigned long long>(f.start);
  if (f.pcmask_rep != 0)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: saved registers are not supported on a PCMASK "
                      "function",
                      start);
  for (size_t i = 0; i < f.saved_registers.size(); ++i) {
    const saved_register& s = f.saved_registers[i];
    auto bad = [&](const char* why) {
      return make_error(errc::invalid_argument,
                        "function at 0x%llx: saved register %zu (DWARF %u at offset %u): %s",
                        start, i, s.dwarf_reg, s.pc_offset, why);
    };
    if (s.pc_offset >= f.size) return bad("offset past the function end");
    if (i > 0) {
      const saved_register& p = f.saved_registers[i - 1];
      if (s.pc_offset < p.pc_offset) return bad("offsets must not decrease");
      if (s.pc_offset == p.pc_offset && s.dwarf_reg <= p.dwarf_reg)
        return bad("entries at one offset must be sorted by register, each register once");
    }
    if (is_frame_register(a, s.dwarf_reg)) return bad("SP, FP and RA are described by the rows");
    switch (s.rule) {
      case saved_rule::at_cfa:
        if (s.cfa_offset % 8 != 0) return bad("CFA offset not a multiple of 8");
        break;
      case saved_rule::unchanged:
      case saved_rule::undefined:
        if (s.cfa_offset != 0) return bad("CFA offset given for a rule that has none");
        break;
      default:
        return bad("unknown rule");
    }
  }
  return {};
}

}  // namespace detail

result<void> validate(abi a, const function_desc& f) {
  if (a == abi::s390x)
    return make_error(errc::unsupported,
                      "function at 0x%llx: s390x is read as data only; the SDK does not generate "
                      "or check s390x rows",
                      static_cast<unsigned long long>(f.start));
  if (a != abi::amd64 && a != abi::aarch64_le && a != abi::aarch64_be)
    return make_error(errc::invalid_argument, "unknown ABI id %d", static_cast<int>(a));
  if (f.pauth_key > 1)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: pointer-authentication key %u (0 = A, 1 = B)",
                      static_cast<unsigned long long>(f.start), f.pauth_key);
  if (f.pauth_key != 0 && a == abi::amd64)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: a pointer-authentication key exists only on AArch64",
                      static_cast<unsigned long long>(f.start));
  if (f.size == 0)
    return make_error(errc::invalid_argument, "function at 0x%llx: size is 0",
                      static_cast<unsigned long long>(f.start));
  if (f.start > std::numeric_limits<uint64_t>::max() - f.size)
    return make_error(errc::out_of_range, "function at 0x%llx: size %u wraps the address space",
                      static_cast<unsigned long long>(f.start), f.size);
  if (f.pcmask_rep > f.size)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: repetition size %u larger than the function (%u)",
                      static_cast<unsigned long long>(f.start), f.pcmask_rep, f.size);
  if (f.rows.empty())
    return make_error(errc::invalid_argument, "function at 0x%llx: no rows",
                      static_cast<unsigned long long>(f.start));
  if (f.rows.front().pc_offset != 0)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: first row at offset %u, not 0 (the entry has no rule)",
                      static_cast<unsigned long long>(f.start), f.rows.front().pc_offset);
  const uint32_t limit = f.pcmask_rep != 0 ? f.pcmask_rep : f.size;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    const frame_row& r = f.rows[i];
    if (r.pc_offset >= limit)
      return make_error(errc::invalid_argument,
                        "function at 0x%llx: row %zu at offset %u is past the %s end (%u)",
                        static_cast<unsigned long long>(f.start), i, r.pc_offset,
                        f.pcmask_rep ? "repeated block's" : "function's", limit);
    if (i > 0 && r.pc_offset <= f.rows[i - 1].pc_offset)
      return make_error(errc::invalid_argument,
                        "function at 0x%llx: row %zu at offset %u does not come after row %zu "
                        "(offset %u)",
                        static_cast<unsigned long long>(f.start), i, r.pc_offset, i - 1,
                        f.rows[i - 1].pc_offset);
    if (a == abi::amd64 && detail::amd64_row_obviously_valid(r)) continue;
    if (auto why = detail::check_row_rules(a, r))
      return make_error(errc::invalid_argument, "function at 0x%llx: row %zu (offset %u): %s",
                        static_cast<unsigned long long>(f.start), i, r.pc_offset, why->c_str());
  }
  if (!f.saved_registers.empty()) return detail::check_saved_registers(a, f);
  return {};
}

}  // namespace jitunwind
