// Waiting for a target's first publication (`jitunwind unwind check`): the target runs until its
// registry lists published code, and the thread to check is stopped there, before it runs any
// of that code (a short program is over before a poll from outside would see it).
//
// Every thread of the target is traced meanwhile (tracee::thread_group). Each is stopped right
// after it changes a registry: by a watchpoint on the registry's change counter, set at its
// first stop once a registry is found, or, where debug registers do not trap, by a software
// breakpoint on the SDK's probe (registry_traps), armed while every thread of the process is
// traced and no new process is being created. Until a registry is found (and without either
// means) the threads run from system call to system call: a registry is looked for after exec
// and after each mmap of a file (how the SDK, if a shared library, arrives), and, by polling,
// when another file appears in the maps.
#pragma once

#include "step_check.hpp"

#include <jitunwind/result.h>

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace jitunwind::cli {

/// What the wait found: the code, and the thread to single-step, stopped; every other thread of
/// the target is detached.
struct first_publication {
  stepcheck::published_code code;
  pid_t thread = 0;
  int stop = 0;      ///< its wait status (a trap of ours reads as a ptrace stop: no signal)
  std::string how;   ///< how the publication was caught, where debug registers do not trap
  std::string whom;  ///< why this thread, when it is not the one given (empty otherwise)
};

/// How the wait ended when it found no code.
struct wait_failure {
  std::optional<int> ended;  ///< the process was reaped: its wait status
};

/// `pid`: the spawned command's process (`spawned`: the thread that publishes first is the one
/// checked) or the thread given with --pid (the one checked, whichever thread publishes). Errors
/// (every thread detached, unless the process ended): the process or the thread ended before
/// publishing, nothing within `patience`, Ctrl-C; an error names what was published instead
/// when the registry stayed empty.
result<first_publication> wait_for_code(pid_t pid, bool spawned,
                                        std::chrono::milliseconds patience,
                                        wait_failure& failure);

}  // namespace jitunwind::cli
