#include "common/error.hpp"

#include <jitunwind/log.h>

#include <cstdio>

namespace jitunwind {

const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::malformed: return "malformed";
    case errc::out_of_range: return "out_of_range";
    case errc::unsupported: return "unsupported";
    case errc::io_error: return "io_error";
    case errc::permission_denied: return "permission_denied";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::bad_state: return "bad_state";
    case errc::no_memory: return "no_memory";
    case errc::limit_exceeded: return "limit_exceeded";
  }
  return "unknown";
}

const char* to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warning: return "warning";
    case log_level::error: return "error";
  }
  return "unknown";
}

namespace detail {

std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

error make_error(errc code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return error(code, std::move(s));
}

}  // namespace detail
}  // namespace jitunwind
