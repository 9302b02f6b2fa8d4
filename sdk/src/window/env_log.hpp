// Private: the log sink JITUNWIND_LOG / JITUNWIND_LOG_LEVEL choose (session_options::from_env).
#pragma once

#include <jitunwind/log.h>
#include <jitunwind/result.h>

namespace jitunwind::detail {

/// JITUNWIND_LOG=stderr | file:PATH | off (unset: off), JITUNWIND_LOG_LEVEL=debug | info |
/// warning (the default) | error. A discarding sink when unset; `invalid_argument` naming the
/// variable for a value that does not parse, `io_error` for a file that cannot be opened.
result<log_sink> log_sink_from_env();

}  // namespace jitunwind::detail
