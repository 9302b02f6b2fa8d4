// Runtime support shared by both example runtimes: errors with source positions and the
// native stack limit that both check instead of crashing on runaway recursion.
#pragma once

#include <cstdint>
#include <string>

namespace toylang {

/// Flushes stdout, prints `file:line:column: runtime error: message` to stderr and exits with
/// status 3 (compile errors exit 1, usage errors 2).
[[noreturn]] void runtime_error(const std::string& file, uint32_t line, uint32_t column,
                                const std::string& message);

/// Lowest stack address the calling thread may use before toy code reports "stack overflow":
/// the thread's stack bottom plus `margin` bytes (room for native helpers, signal handlers and
/// the error path), or plus half the stack when it is smaller than twice `margin`. 0 if the
/// stack bounds cannot be determined.
uint64_t native_stack_limit(size_t margin = 256 * 1024);

}  // namespace toylang
