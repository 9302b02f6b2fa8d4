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

/// Nothing if an enum field is out of range.
inline std::optional<frame_row> from_c(const jitunwind_frame_row& c) {
  if (c.cfa_base > 1 || c.ra_rule > 2 || c.fp_rule > 1 || c.ra_mangled > 1) return std::nullopt;
  frame_row r;
  r.pc_offset = c.pc_offset;
  r.cfa = static_cast<cfa_base>(c.cfa_base);
  r.ra = static_cast<ra_rule>(c.ra_rule);
  r.fp = static_cast<fp_rule>(c.fp_rule);
  r.ra_mangled = c.ra_mangled != 0;
  r.cfa_offset = c.cfa_offset;
  r.ra_offset = c.ra_offset;
  r.fp_offset = c.fp_offset;
  return r;
}

/// Converts a C function; on failure fills `error` and returns the status in `status`.
inline std::optional<function_desc> from_c(const jitunwind_function* f, jitunwind_error* error,
                                           jitunwind_status& status) {
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
  for (size_t i = 0; i < f->row_count; ++i) {
    auto r = from_c(f->rows[i]);
    if (!r) {
      status = fail(error, errc::invalid_argument,
                    "function row has an enum field out of range (cfa_base, ra_rule, fp_rule or "
                    "ra_mangled)");
      return std::nullopt;
    }
    d.rows.push_back(*r);
  }
  return d;
}

}  // namespace jitunwind::capi
