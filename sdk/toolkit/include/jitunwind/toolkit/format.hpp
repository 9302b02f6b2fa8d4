// Toolkit: printf-style text and error values, the way every message of the toolkit, the SDK
// and the tools is built.
#pragma once

#include <jitunwind/result.h>

#include <cstdarg>
#include <string>

namespace jitunwind::toolkit {

/// printf into a std::string.
std::string vformat(const char* fmt, va_list ap);
[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...);

/// An `error` whose message is formatted like printf.
[[gnu::format(printf, 2, 3)]] error make_error(errc code, const char* fmt, ...);

}  // namespace jitunwind::toolkit
