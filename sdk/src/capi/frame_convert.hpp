// Private: conversions between the C API's frame structs and the C++ frame model, shared by
// capi/frame.cpp and capi/sframe.cpp.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/jitunwind.h>

#include "capi/common.hpp"

#include <cstring>
#include <optional>

namespace jitunwind::capi {

/// The number a C caller stored in an enum argument or field. C allows any int there; reading a
/// value outside the enumerators through the C++ view of the enum is undefined behaviour (and
/// UBSan says so), reading its bytes is not.
template <class E>
int raw_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

inline bool known_abi(const jitunwind_abi& a) {
  const int v = raw_value(a);
  return v == JITUNWIND_ABI_AMD64 || v == JITUNWIND_ABI_AARCH64_LE || v == JITUNWIND_ABI_AARCH64_BE;
}

/// A register argument: anything but sp, fp and ra becomes a value the frame builder refuses
/// (it fails, naming the directive), never a wrapped-around valid one.
inline reg to_reg(const jitunwind_reg& r) {
  const int v = raw_value(r);
  return static_cast<reg>(v >= JITUNWIND_REG_SP && v <= JITUNWIND_REG_RA ? v : 0xff);
}

inline jitunwind_frame_row to_c(const frame_row& r) {
  jitunwind_frame_row c{};
  c.pc_offset = r.pc_offset;
  c.cfa_base = static_cast<uint8_t>(r.cfa);
  c.ra_rule = static_cast<uint8_t>(r.ra);
  c.fp_rule = static_cast<uint8_t>(r.fp);
  c.ra_mangled = r.ra_mangled ? 1 : 0;
  c.cfa_offset = r.cfa_offset;
  c.ra_offset = r.ra_offset;
  c.fp_offset = r.fp_offset;
  return c;
}

/// The register rules of a row (jitunwind_frame_regs, parallel to the rows).
inline jitunwind_frame_regs regs_of(const frame_row& r) {
  jitunwind_frame_regs c{};
  c.cfa_reg = r.cfa_reg;
  c.cfa_deref = r.cfa_deref ? 1 : 0;
  c.ra_reg = r.ra_reg;
  c.fp_reg = r.fp_reg;
  return c;
}

/// True if the row uses a rule only SFrame v3 (flexible FDE) has, which needs its
/// jitunwind_frame_regs to be read correctly.
inline bool has_v3_rules(const frame_row& r) {
  return r.cfa == cfa_base::reg || r.cfa_deref || r.ra == ra_rule::register_value ||
         r.ra == ra_rule::register_saved || r.fp == fp_rule::register_value ||
         r.fp == fp_rule::register_saved;
}

/// Nothing if an enum field is out of range. Without `regs` (the entry points of
/// JITUNWIND_0.1/0.2) only the v2 rules are accepted: a v3 rule without its register numbers
/// would silently name register 0; with `regs` (the _v3 entry points) the v3 rules too.
inline std::optional<frame_row> from_c(const jitunwind_frame_row& c,
                                       const jitunwind_frame_regs* regs = nullptr) {
  const bool v3 = regs != nullptr;
  if (c.cfa_base > (v3 ? 2 : 1) || c.ra_rule > (v3 ? 4 : 2) || c.fp_rule > (v3 ? 3 : 1) ||
      c.ra_mangled > 1 || (v3 && regs->cfa_deref > 1))
    return std::nullopt;
  frame_row r;
  r.pc_offset = c.pc_offset;
  r.cfa = static_cast<cfa_base>(c.cfa_base);
  r.ra = static_cast<ra_rule>(c.ra_rule);
  r.fp = static_cast<fp_rule>(c.fp_rule);
  r.ra_mangled = c.ra_mangled != 0;
  r.cfa_offset = c.cfa_offset;
  r.ra_offset = c.ra_offset;
  r.fp_offset = c.fp_offset;
  if (v3) {
    r.cfa_reg = regs->cfa_reg;
    r.cfa_deref = regs->cfa_deref != 0;
    r.ra_reg = regs->ra_reg;
    r.fp_reg = regs->fp_reg;
  }
  return r;
}

/// What from_c refuses, for messages.
inline const char* row_enum_message(bool v3) {
  return v3 ? "a row has an enum field out of range (cfa_base, ra_rule, fp_rule, ra_mangled or "
              "regs.cfa_deref)"
            : "a row has an enum field out of range (cfa_base, ra_rule, fp_rule or ra_mangled; "
              "the SFrame v3 rules need the _v3 functions and their jitunwind_frame_regs)";
}

/// Converts a C function; on failure fills `error` and returns the status in `status`.
/// `regs`: NULL, or `row_count` register rules parallel to the rows (the _v3 entry points:
/// `v3` true; a NULL `regs` there means all zero).
inline std::optional<function_desc> from_c(const jitunwind_function* f, jitunwind_error* error,
                                           jitunwind_status& status,
                                           const jitunwind_frame_regs* regs = nullptr,
                                           bool v3 = false) {
  if (f == nullptr) {
    status = fail(error, errc::invalid_argument, "function is NULL");
    return std::nullopt;
  }
  if (f->row_count > 0 && f->rows == nullptr) {
    status = fail(error, errc::invalid_argument, "function has rows == NULL but row_count > 0");
    return std::nullopt;
  }
  function_desc d;
  d.start = f->start;
  d.size = f->size;
  d.pcmask_rep = f->pcmask_rep;
  d.rows.reserve(f->row_count);
  const jitunwind_frame_regs none{};
  for (size_t i = 0; i < f->row_count; ++i) {
    auto r = from_c(f->rows[i], v3 ? (regs != nullptr ? &regs[i] : &none) : nullptr);
    if (!r) {
      status = fail(error, errc::invalid_argument, row_enum_message(v3));
      return std::nullopt;
    }
    d.rows.push_back(*r);
  }
  return d;
}

}  // namespace jitunwind::capi
