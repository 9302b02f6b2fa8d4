/// jitunwind/onramp.h — the on-ramp: name code the runtime already placed, in one call.
///
/// For a runtime that only wants its JIT code named and unwound by profilers and debuggers:
///
///     jitunwind::name_code(code, size, "lua:fib", rows);   // C: jitunwind_name_code
///
/// The first call creates an implicit default session configured from the environment
/// (`session_options::from_env()`: JITUNWIND_PUBLISH, JITUNWIND_DIR, JITDUMPDIR, ...; by default
/// the registry, USDT events, perf map, jitdump and GDB publishers). Each named range becomes a
/// described window of that session holding one function: the memory stays the runtime's. For a
/// JIT that places many functions in regions it manages, windows of its own (window.h) cost
/// less per function and offer more (owned W^X memory, batching, patching, lifecycle).
///
/// The default session is the one process-wide object the on-ramp keeps (created on first use,
/// never destroyed: code named through it may run until the process is gone). It is an ordinary
/// session: `default_session()` returns it for the rest of the API (status, more windows).
///
/// Thread-safety: every function here may be called from any thread. Errors: as
/// `session_options::from_env`, `session::describe_window`, `window::append` (their messages),
/// `not_found` for `forget_code` of code that was not named.
///
/// C++17 and later.
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/frame.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>

#include <cstddef>
#include <string_view>

namespace jitunwind {

class session;

/// The implicit default session, created from the environment by the first call (of this or
/// of `name_code`). Owned by the library: never destroy it.
JITUNWIND_API result<session*> default_session();

/// Names `size` bytes of executable code at `code` for every publisher of the default session
/// and publishes them at once. `rows` say how to find the caller at each instruction
/// (`pc_offset` relative to `code`; from a `frame_builder` or `recipes`, as `function_desc::rows`);
/// they are checked like `window::append` does, and at least one is needed (an empty row list
/// would mark an outermost frame). Naming the same range twice is `already_exists`:
/// `forget_code` it first.
JITUNWIND_API result<void> name_code(const void* code, size_t size, std::string_view name,
                                     span<const frame_row> rows);

/// `name_code` for a whole function description: its range (`f.start`, `f.size`), rows, and
/// also what rows alone cannot say — the callee-saved registers (`f.saved_registers`, which
/// the jitdump and GDB publishers give debuggers) and a signal frame. Errors as `name_code`.
JITUNWIND_API result<void> name_function(std::string_view name, const function_desc& f);

/// The code named at `code` will not run again (no thread is inside it or will return into
/// it): its window is retired and freed; the range may be named again. Its cost does not
/// depend on how much other code is named. perf's perf map cannot take a name back: code named
/// later at the same addresses is misnamed by `perf report` without `perf inject` (the perf map
/// publisher warns; docs/integrating.md, "What perf sees").
JITUNWIND_API result<void> forget_code(const void* code);

/// Where the default session's messages go (publisher warnings such as "perf will lose this
/// function's unwinding data", failures), besides JITUNWIND_LOG's destination: `sink` replaces
/// the sink set before (a default-constructed one removes it). May be called before or after
/// the first `name_code`, from any thread; the sink may be called from any thread that names
/// or forgets code.
JITUNWIND_API void set_default_session_log(log_sink sink);

/// Bytes to leave free after a function of `f.size` bytes at `f.start` with rows `f.rows`
/// before the next function starts, so that `perf inject --jit` keeps its unwinding data: perf
/// maps each jitdump load over its code rounded up to 8 bytes plus the `.eh_frame` and header
/// that follow (a few dozen bytes per function, more with many rows), and code starting inside
/// that range hides the earlier function's unwinding data from `perf --call-graph dwarf`. For
/// runtimes that place their own code (the on-ramp, described windows); owned windows leave it
/// themselves. `invalid_argument` for rows that do not validate.
JITUNWIND_API result<size_t> perf_code_gap(abi target, const function_desc& f);

/// The bytes to leave after each function when its rows are not known yet (code placed before it
/// is described): owned windows leave it after every allocation while the jitdump publisher is
/// active, and the ORC plugin pads JITLink's blocks with it. perf_code_gap() of a function is
/// ALIGN_8(size) - size plus its unwinding data (a CIE, its FDE and the .eh_frame_hdr, rounded
/// up to 16 bytes): this is room for an FDE of a few dozen rows.
inline constexpr size_t perf_code_gap_reserve = 256;

}  // namespace jitunwind
