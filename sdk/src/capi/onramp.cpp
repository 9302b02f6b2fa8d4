// C API of the on-ramp (jitunwind/onramp.h).
#include <jitunwind/jitunwind.h>
#include <jitunwind/onramp.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"
#include "onramp/onramp_impl.hpp"

#include <string>
#include <vector>

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
    auto r = detail::onramp_name_code(code, size, name, *cxx, /*c_names=*/true);
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
    auto r = detail::onramp_name_function(name, *f, /*c_names=*/true);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_forget_code(const void* code, jitunwind_error* error) {
  return guard(error, [&] {
    auto r = detail::onramp_forget_code(code, /*c_names=*/true);
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
    detail::onramp_use_c_names();
    *out = reinterpret_cast<jitunwind_session*>(*s);
    return succeed(error);
  });
}

jitunwind_status jitunwind_default_session_log(jitunwind_log_fn log, void* log_user,
                                              int min_level, jitunwind_error* error) {
  return guard(error, [&] {
    // The callback's block lives for the process (never delete_c_sink'd): the default session
    // is never destroyed, and a sink replaced here may still be running on another thread.
    set_default_session_log(capi::c_sink(log, log_user, min_level));
    detail::onramp_use_c_names();
    return succeed(error);
  });
}

jitunwind_status jitunwind_perf_code_gap(jitunwind_abi abi, const jitunwind_function* function,
                                         size_t* gap, jitunwind_error* error) {
  return guard(error, [&] {
    if (gap == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_perf_code_gap: gap is NULL");
    *gap = 0;
    if (!capi::known_abi(abi))
      return fail(error, errc::invalid_argument, "jitunwind_perf_code_gap: unknown ABI");
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, "jitunwind_perf_code_gap", error, status);
    if (!f) return status;
    auto g = perf_code_gap(static_cast<jitunwind::abi>(abi), *f);
    if (!g) return fail(error, g.error());
    *gap = *g;
    return succeed(error);
  });
}

}  // extern "C"
