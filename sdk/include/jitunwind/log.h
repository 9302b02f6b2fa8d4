/// jitunwind/log.h — the embedder's log sink.
///
/// The library never prints. Objects that have something to report outside their return values
/// (a publisher that failed in the background, a kernel feature that is missing) take a `log_sink`
/// in their options and call it synchronously from the thread doing the work. The sink must be
/// thread-safe if the object is used from several threads; it must not call back into the object.
#pragma once

#include <jitunwind/config.h>

#include <string_view>

namespace jitunwind {

enum class log_level : int { debug = 0, info = 1, warning = 2, error = 3 };

/// Stable lower-case name ("debug", "info", "warning", "error").
JITUNWIND_API const char* to_string(log_level level) noexcept;

/// A callback plus its user pointer. A default-constructed sink discards everything.
struct log_sink {
  void (*fn)(void* user, log_level level, std::string_view message) = nullptr;
  void* user = nullptr;
  log_level min_level = log_level::info;

  void operator()(log_level level, std::string_view message) const {
    if (fn != nullptr && level >= min_level) fn(user, level, message);
  }
};

}  // namespace jitunwind
