// Shared helpers of jitwalk's user side: error values (the SDK's result/errc) and stderr
// reporting. jitwalk is a tool: it prints, unlike the library.
#pragma once

#include <jitunwind/result.h>

#include "common/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace jitwalk {

using jitunwind::errc;
using jitunwind::error;
using jitunwind::result;
using jitunwind::detail::format;
using jitunwind::detail::make_error;

/// Verbosity of stderr messages: 0 = errors and the summary, 1 = progress (default),
/// 2 = details (every table loaded, every event).
extern int g_verbosity;

[[gnu::format(printf, 1, 2)]] void note(const char* fmt, ...);    // verbosity >= 1
[[gnu::format(printf, 1, 2)]] void detail(const char* fmt, ...);  // verbosity >= 2
[[gnu::format(printf, 1, 2)]] void warn(const char* fmt, ...);    // always
/// "jitwalk: <message>" for an error value.
void report(const error& e);

/// 100 * part / whole, 0 for an empty whole (summary lines).
inline double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * part / whole : 0.0;
}

/// "0x7f12..." for an address.
std::string hex(uint64_t v);

/// Output files checked before a run, so that an unwritable path fails at once and not after
/// the whole run. A file that did not exist is created for the check and removed again when
/// this goes out of scope, unless keep() was called: a run that fails before writing its
/// outputs leaves no empty files behind (and an existing file is never truncated early).
class output_precheck {
 public:
  output_precheck() = default;
  output_precheck(const output_precheck&) = delete;
  output_precheck& operator=(const output_precheck&) = delete;
  ~output_precheck();
  /// io_error "cannot write PATH: reason".
  result<void> add(const std::string& path);
  /// The outputs are about to be written: nothing is removed.
  void keep() noexcept { created_.clear(); }

 private:
  std::vector<std::string> created_;
};

}  // namespace jitwalk
