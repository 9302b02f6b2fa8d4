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
    auto r = detail::onramp_name_code(code, size, name, cxx, /*c_names=*/true);
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
    auto r = detail::onramp_forget_code(code, /*c_names=*/true);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_default_session(jitunwind_session** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
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
    // The block lives for the process: the default session is never destroyed, and a sink
    // replaced here may still be running on another thread.
    log_sink sink;
    if (log != nullptr) {
      struct c_log {
        jitunwind_log_fn fn;
        void* user;
      };
      sink.user = new c_log{log, log_user};
      sink.fn = [](void* u, log_level level, std::string_view m) {
        auto* c = static_cast<c_log*>(u);
        c->fn(c->user, static_cast<int>(level), m.data(), m.size());
      };
      sink.min_level = static_cast<log_level>(min_level < 0 ? 0 : min_level > 3 ? 3 : min_level);
    }
    set_default_session_log(sink);
    detail::onramp_use_c_names();
    return succeed(error);
  });
}

jitunwind_status jitunwind_perf_code_gap(jitunwind_abi abi, size_t code_size,
                                        const jitunwind_frame_row* rows, size_t row_count,
                                        size_t* gap, jitunwind_error* error) {
  return guard(error, [&] {
    if (gap == nullptr) return fail(error, errc::invalid_argument, "jitunwind_perf_code_gap: gap is NULL");
    *gap = 0;
    if (rows == nullptr && row_count > 0)
      return fail(error, errc::invalid_argument,
                  "jitunwind_perf_code_gap: rows is NULL but row_count > 0");
    if (code_size == 0 || code_size > UINT32_MAX)
      return fail(error, errc::invalid_argument,
                  "jitunwind_perf_code_gap: code_size must be from 1 to 4 GiB");
    function_desc f;
    f.size = static_cast<uint32_t>(code_size);
    f.rows.reserve(row_count);
    for (size_t i = 0; i < row_count; ++i) {
      auto r = capi::from_c(rows[i], nullptr);
      if (!r)
        return fail(error, errc::invalid_argument,
                    (std::string("jitunwind_perf_code_gap: ") + capi::row_enum_message(false)).c_str());
      f.rows.push_back(*r);
    }
    auto g = perf_code_gap(static_cast<jitunwind::abi>(abi), f);
    if (!g) return fail(error, g.error());
    *gap = *g;
    return succeed(error);
  });
}

}  // extern "C"
