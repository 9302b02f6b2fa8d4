// Shared helpers of jitwalk's user side: error values (the SDK's result/errc) and stderr
// reporting. jitwalk is a tool: it prints, unlike the library.
#pragma once

#include <jitunwind/result.h>
#include <jitunwind/toolkit/format.hpp>
#include <jitunwind/toolkit/input_cuts.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jitwalk {

using jitunwind::errc;
using jitunwind::error;
using jitunwind::result;
using jitunwind::toolkit::format;
using jitunwind::toolkit::make_error;

/// Verbosity of stderr messages: 0 = errors and the summary, 1 = progress (default),
/// 2 = details (every table loaded, every event).
extern int g_verbosity;

[[gnu::format(printf, 1, 2)]] void note(const char* fmt, ...);    // verbosity >= 1
[[gnu::format(printf, 1, 2)]] void detail(const char* fmt, ...);  // verbosity >= 2
[[gnu::format(printf, 1, 2)]] void warn(const char* fmt, ...);    // always
/// "jitwalk: <message>" for an error value.
void report(const error& e);
/// "jitwalk: warning: WHAT left out: WHY" for part of the input a limit refused, counted: a run
/// with such a cut ends with exit status 3 (input_cuts(), jitunwind/toolkit/input_cuts.hpp).
void warn_cut(std::string_view what, const error& why);
/// The cuts of this run.
jitunwind::toolkit::input_cuts& input_cuts();
/// `status`, or 3 when it is 0 and a limit left part of the target's data out this run (a cut,
/// or a refusal of the memory budget): then said once more, last.
int status_after_cuts(int status, uint64_t budget_refusals);

/// 100 * part / whole, 0 for an empty whole (summary lines).
inline double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * part / whole : 0.0;
}

/// "0x7f12..." for an address.
std::string hex(uint64_t v);

/// An output file checked before a run (jitunwind/toolkit/output_file.hpp: an existing symbolic
/// link, FIFO or device refused, the directory writable), so that a bad path fails at once and not after the
/// whole run; nothing is created or touched. io_error / permission_denied naming it.
result<void> check_output(const std::string& path, const char* what = "");
/// Writes an output under the same policy: a new file renamed over PATH once complete (never
/// written through a link; a failed run leaves PATH as it was).
result<void> write_output(const std::string& path, std::string_view contents,
                          const char* what = "");

}  // namespace jitwalk
