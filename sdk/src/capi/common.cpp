#include <jitunwind/jitunwind.h>
#include <jitunwind/result.h>

#include "capi/common.hpp"

#include <cstring>

extern "C" const char* jitunwind_status_string(jitunwind_status status) {
  return jitunwind::to_string(static_cast<jitunwind::errc>(-static_cast<int>(status)));
}

namespace jitunwind::capi {

jitunwind_status fail(jitunwind_error* out, const error& e) noexcept {
  const auto status = static_cast<jitunwind_status>(-static_cast<int>(e.code()));
  if (out != nullptr) {
    out->status = status;
    const std::string& m = e.message();
    const size_t n = std::min(m.size(), sizeof(out->message) - 1);
    std::memcpy(out->message, m.data(), n);
    out->message[n] = '\0';
  }
  return status;
}

jitunwind_status fail(jitunwind_error* out, errc code, const char* message) noexcept {
  const auto status = static_cast<jitunwind_status>(-static_cast<int>(code));
  if (out != nullptr) {
    out->status = status;
    std::strncpy(out->message, message, sizeof(out->message) - 1);
    out->message[sizeof(out->message) - 1] = '\0';
  }
  return status;
}

jitunwind_status succeed(jitunwind_error* out) noexcept {
  if (out != nullptr) {
    out->status = JITUNWIND_OK;
    out->message[0] = '\0';
  }
  return JITUNWIND_OK;
}

}  // namespace jitunwind::capi
