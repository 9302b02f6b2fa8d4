// Shared helpers of jitwalk's user side: error values (the SDK's result/errc) and stderr
// reporting. jitwalk is a tool: it prints, unlike the library.
#pragma once

#include <jitunwind/result.h>

#include "common/error.hpp"

#include <cstdint>
#include <string>

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

/// "0x7f12..." for an address.
std::string hex(uint64_t v);

}  // namespace jitwalk
