// Private helpers shared by the C API implementations (sdk/src/capi/<module>.cpp).
#pragma once

#include <jitunwind/jitunwind.h>
#include <jitunwind/result.h>

#include <new>

namespace jitunwind::capi {

/// Fills `out` (if not null) from `e` and returns the matching status.
jitunwind_status fail(jitunwind_error* out, const error& e) noexcept;
jitunwind_status fail(jitunwind_error* out, errc code, const char* message) noexcept;
/// Clears `out` (if not null) and returns JITUNWIND_OK.
jitunwind_status succeed(jitunwind_error* out) noexcept;

/// Runs `body` (returning jitunwind_status) and turns an escaping exception (only bad_alloc can
/// escape the SDK) into JITUNWIND_E_NO_MEMORY: nothing crosses the C boundary.
template <class F>
jitunwind_status guard(jitunwind_error* out, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(out, errc::no_memory, "out of memory");
  } catch (...) {
    return fail(out, errc::bad_state, "unexpected internal exception");
  }
}

}  // namespace jitunwind::capi
