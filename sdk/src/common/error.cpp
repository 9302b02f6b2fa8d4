#include "common/error.hpp"

#include <jitunwind/log.h>


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

}  // namespace jitunwind
