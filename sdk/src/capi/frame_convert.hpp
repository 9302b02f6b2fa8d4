// Private: conversions between the C API's frame structs and the C++ frame model, shared by the
// C API implementations that take or return rows and functions.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/jitunwind.h>

#include "capi/common.hpp"

#include <cstring>
#include <optional>
#include <vector>

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

// The C rule kinds are the C++ enumerators' values (tests/capi/drift.py checks every one has
// its C name).
static_assert(JITUNWIND_CFA_REG == static_cast<int>(cfa_base::reg) &&
              JITUNWIND_RA_REGISTER_SAVED == static_cast<int>(ra_rule::register_saved) &&
              JITUNWIND_FP_REGISTER_SAVED == static_cast<int>(fp_rule::register_saved) &&
              JITUNWIND_SAVED_UNDEFINED == static_cast<int>(saved_rule::undefined));

inline jitunwind_frame_row to_c(const frame_row& r) {
  jitunwind_frame_row c{};
  c.pc_offset = r.pc_offset;
  c.cfa_base = static_cast<uint8_t>(r.cfa);
  c.ra_rule = static_cast<uint8_t>(r.ra);
  c.fp_rule = static_cast<uint8_t>(r.fp);
  c.ra_mangled = r.ra_mangled ? 1 : 0;
  c.cfa_reg = r.cfa_reg;
  c.cfa_deref = r.cfa_deref ? 1 : 0;
  c.ra_reg = r.ra_reg;
  c.fp_reg = r.fp_reg;
  c.cfa_offset = r.cfa_offset;
  c.ra_offset = r.ra_offset;
  c.fp_offset = r.fp_offset;
  return c;
}

/// True if the row uses a register rule (SFrame v3 flexible FDE only).
inline bool has_register_rules(const frame_row& r) {
  return r.cfa == cfa_base::reg || r.cfa_deref || r.ra == ra_rule::register_value ||
         r.ra == ra_rule::register_saved || r.fp == fp_rule::register_value ||
         r.fp == fp_rule::register_saved;
}

/// Nothing if an enum field is out of range or a reserved field is set.
inline std::optional<frame_row> from_c(const jitunwind_frame_row& c) {
  if (c.cfa_base > 2 || c.ra_rule > 4 || c.fp_rule > 3 || c.ra_mangled > 1 || c.cfa_deref > 1 ||
      c.reserved[0] != 0 || c.reserved[1] != 0)
    return std::nullopt;
  frame_row r;
  r.pc_offset = c.pc_offset;
  r.cfa = static_cast<cfa_base>(c.cfa_base);
  r.ra = static_cast<ra_rule>(c.ra_rule);
  r.fp = static_cast<fp_rule>(c.fp_rule);
  r.ra_mangled = c.ra_mangled != 0;
  r.cfa_reg = c.cfa_reg;
  r.cfa_deref = c.cfa_deref != 0;
  r.ra_reg = c.ra_reg;
  r.fp_reg = c.fp_reg;
  r.cfa_offset = c.cfa_offset;
  r.ra_offset = c.ra_offset;
  r.fp_offset = c.fp_offset;
  return r;
}

/// What from_c refuses, for messages.
inline constexpr const char* row_enum_message =
    "a row has a field out of range (cfa_base, ra_rule, fp_rule, ra_mangled, cfa_deref) or a "
    "non-zero reserved field";

inline jitunwind_saved_register to_c(const saved_register& s) {
  jitunwind_saved_register c{};
  c.pc_offset = s.pc_offset;
  c.dwarf_reg = s.dwarf_reg;
  c.rule = static_cast<uint8_t>(s.rule);
  c.cfa_offset = s.cfa_offset;
  return c;
}

/// Converts rows (`count` of them at `rows`, which may be NULL only when `count` is 0); on
/// failure fills `error` (its message prefixed with `what`) and sets `status`.
inline std::optional<std::vector<frame_row>> rows_from_c(const jitunwind_frame_row* rows,
                                                         size_t count, const char* what,
                                                         jitunwind_error* error,
                                                         jitunwind_status& status) {
  if (rows == nullptr && count > 0) {
    status = fail(error, errc::invalid_argument,
                  (std::string(what) + ": rows is NULL but the row count is not 0").c_str());
    return std::nullopt;
  }
  std::vector<frame_row> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    auto r = from_c(rows[i]);
    if (!r) {
      status = fail(error, errc::invalid_argument,
                    (std::string(what) + ": row " + std::to_string(i) + ": " + row_enum_message)
                        .c_str());
      return std::nullopt;
    }
    out.push_back(*r);
  }
  return out;
}

/// Converts a C function; on failure fills `error` (naming `what`, the C function) and sets
/// `status`.
inline std::optional<function_desc> from_c(const jitunwind_function* f, const char* what,
                                           jitunwind_error* error, jitunwind_status& status) {
  auto refuse = [&](const std::string& message) {
    status = fail(error, errc::invalid_argument, (std::string(what) + ": " + message).c_str());
    return std::nullopt;
  };
  if (f == nullptr) return refuse("function is NULL");
  if (f->saved_registers == nullptr && f->saved_register_count > 0)
    return refuse("function has saved_registers == NULL but saved_register_count > 0");
  if (f->pauth_key > 1) return refuse("function has pauth_key " + std::to_string(f->pauth_key));
  if (f->reserved8[0] != 0 || f->reserved8[1] != 0 || f->reserved8[2] != 0 ||
      f->reserved[0] != 0 || f->reserved[1] != 0)
    return refuse("function has a non-zero reserved field");
  auto rows = rows_from_c(f->rows, f->row_count, what, error, status);
  if (!rows) return std::nullopt;
  function_desc d;
  d.start = f->start;
  d.size = f->size;
  d.pcmask_rep = f->pcmask_rep;
  d.rows = std::move(*rows);
  d.signal_frame = (f->flags & JITUNWIND_FUNCTION_SIGNAL_FRAME) != 0;
  d.pauth_key = f->pauth_key;
  d.saved_registers.reserve(f->saved_register_count);
  for (size_t i = 0; i < f->saved_register_count; ++i) {
    const jitunwind_saved_register& c = f->saved_registers[i];
    if (c.rule > JITUNWIND_SAVED_UNDEFINED || c.reserved != 0)
      return refuse("saved register " + std::to_string(i) +
                    ": rule out of range or a non-zero reserved field");
    d.saved_registers.push_back({.pc_offset = c.pc_offset,
                                 .dwarf_reg = c.dwarf_reg,
                                 .rule = static_cast<saved_rule>(c.rule),
                                 .cfa_offset = c.cfa_offset});
  }
  return d;
}

/// Describes `f` in `out`, its rows and saved registers stored in `rows` and `saved` (which the
/// caller keeps alive as long as `out` is used).
inline void to_c(const function_desc& f, std::vector<jitunwind_frame_row>& rows,
                 std::vector<jitunwind_saved_register>& saved, jitunwind_function& out) {
  rows.clear();
  saved.clear();
  for (const auto& r : f.rows) rows.push_back(to_c(r));
  for (const auto& s : f.saved_registers) saved.push_back(to_c(s));
  out = {};
  out.start = f.start;
  out.size = f.size;
  out.pcmask_rep = f.pcmask_rep;
  out.rows = rows.data();
  out.row_count = rows.size();
  out.saved_registers = saved.empty() ? nullptr : saved.data();
  out.saved_register_count = saved.size();
  out.flags = f.signal_frame ? JITUNWIND_FUNCTION_SIGNAL_FRAME : 0;
  out.pauth_key = f.pauth_key;
}

}  // namespace jitunwind::capi
