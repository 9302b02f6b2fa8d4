// C API of the on-ramp (jitunwind/onramp.h).
#include <jitunwind/jitunwind.h>
#include <jitunwind/onramp.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"

#include <string>
#include <vector>

using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

namespace {

// jitunwind_name_code(_v3): `v3` accepts the v3 rules with `regs` (NULL: all zero).
jitunwind_status name_code_c(const void* code, size_t size, const char* name,
                             const jitunwind_frame_row* rows, const jitunwind_frame_regs* regs,
                             bool v3, size_t row_count, jitunwind_error* error) {
  return guard(error, [&] {
    if (name == nullptr) return fail(error, errc::invalid_argument, "name_code: name is NULL");
    if (rows == nullptr && row_count > 0)
      return fail(error, errc::invalid_argument, "name_code: rows is NULL but row_count > 0");
    const jitunwind_frame_regs none{};
    std::vector<frame_row> cxx;
    cxx.reserve(row_count);
    for (size_t i = 0; i < row_count; ++i) {
      auto r = capi::from_c(rows[i], v3 ? (regs != nullptr ? &regs[i] : &none) : nullptr);
      if (!r)
        return fail(error, errc::invalid_argument,
                    (std::string("name_code: ") + capi::row_enum_message(v3)).c_str());
      cxx.push_back(*r);
    }
    auto r = name_code(code, size, name, cxx);
    return r ? succeed(error) : fail(error, r.error());
  });
}

}  // namespace

extern "C" {

jitunwind_status jitunwind_name_code_v3(const void* code, size_t size, const char* name,
                                        const jitunwind_frame_row* rows,
                                        const jitunwind_frame_regs* regs, size_t row_count,
                                        jitunwind_error* error) {
  return name_code_c(code, size, name, rows, regs, true, row_count, error);
}

jitunwind_status jitunwind_name_code(const void* code, size_t size, const char* name,
                                     const jitunwind_frame_row* rows, size_t row_count,
                                     jitunwind_error* error) {
  return name_code_c(code, size, name, rows, nullptr, false, row_count, error);
}

jitunwind_status jitunwind_forget_code(const void* code, jitunwind_error* error) {
  return guard(error, [&] {
    auto r = forget_code(code);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_default_session(jitunwind_session** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
    *out = nullptr;
    auto s = default_session();
    if (!s) return fail(error, s.error());
    *out = reinterpret_cast<jitunwind_session*>(*s);
    return succeed(error);
  });
}

}  // extern "C"
