// C API of the on-ramp (jitunwind/onramp.h).
#include <jitunwind/jitunwind.h>
#include <jitunwind/onramp.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"


using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

extern "C" {

jitunwind_status jitunwind_name_code(const void* code, size_t size, const char* name,
                                     const jitunwind_frame_row* rows, size_t row_count,
                                     jitunwind_error* error) {
  return guard(error, [&] {
    if (name == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_name_code: name is NULL");
    jitunwind_status status = JITUNWIND_OK;
    auto cxx = capi::rows_from_c(rows, row_count, "jitunwind_name_code", error, status);
    if (!cxx) return status;
    auto r = name_code(code, size, name, *cxx);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_name_function(const char* name, const jitunwind_function* function,
                                         jitunwind_error* error) {
  return guard(error, [&] {
    if (name == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_name_function: name is NULL");
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, "jitunwind_name_function", error, status);
    if (!f) return status;
    auto r = name_function(name, *f);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_forget_code(const void* code, jitunwind_error* error) {
  return guard(error, [&] {
    auto r = forget_code(code);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_default_session(jitunwind_session** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_default_session: out is NULL");
    *out = nullptr;
    auto s = default_session();
    if (!s) return fail(error, s.error());
    *out = reinterpret_cast<jitunwind_session*>(*s);
    return succeed(error);
  });
}

}  // extern "C"
