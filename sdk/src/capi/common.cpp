#include <jitunwind/jitunwind.h>
#include <jitunwind/result.h>

#include "capi/common.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <cstring>

extern "C" const char* jitunwind_status_string(jitunwind_status status) {
  return jitunwind::to_string(static_cast<jitunwind::errc>(-static_cast<int>(status)));
}

extern "C" int jitunwind_version(void) {
  return JITUNWIND_VERSION;
}

extern "C" const char* jitunwind_version_string(void) {
  return JITUNWIND_VERSION_STRING;
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

jitunwind_status read_options_bytes(const void* in, uint32_t in_size, void* out, size_t size,
                                    size_t min_size, const char* type, const char* init,
                                    jitunwind_error* error) {
  if (in_size == 0)
    return fail(error, detail::make_error(errc::invalid_argument,
                                          "%s.struct_size is 0 (a zeroed or uninitialised "
                                          "struct): fill it with %s() first, or pass NULL for "
                                          "the defaults",
                                          type, init));
  if (in_size < min_size)
    return fail(error, detail::make_error(errc::invalid_argument,
                                          "%s.struct_size is %u: no release had a struct smaller "
                                          "than %zu bytes (use %s())",
                                          type, in_size, min_size, init));
  const auto* bytes = static_cast<const unsigned char*>(in);
  if (in_size > size &&
      std::any_of(bytes + size, bytes + in_size, [](unsigned char b) { return b != 0; }))
    return fail(error,
                detail::make_error(errc::unsupported,
                                   "%s: the caller's struct (%u bytes) sets fields this library "
                                   "(%s, %zu bytes) does not know: a newer jitunwind is needed",
                                   type, in_size, JITUNWIND_VERSION_STRING, size));
  std::memcpy(out, in, std::min<size_t>(in_size, size));
  const auto ours = static_cast<uint32_t>(size);  // what `out` is now: a struct of our size
  std::memcpy(out, &ours, sizeof ours);
  return succeed(error);
}

}  // namespace jitunwind::capi
