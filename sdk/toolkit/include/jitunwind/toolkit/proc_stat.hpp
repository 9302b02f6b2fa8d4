// Toolkit: what the tools read about a process from /proc/PID/stat, parsed the way the kernel
// writes it. The command name (field 2) is whatever the process set with prctl(PR_SET_NAME) or
// its executable's name: it may hold spaces, parentheses and newlines, so it runs from the first
// '(' to the LAST ')' of the file, and the fields after it are counted from there.
#pragma once

#include <jitunwind/result.h>

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace jitunwind::toolkit {

struct proc_stat {
  pid_t pid = 0;
  std::string comm;  ///< as the process set it: escape it before printing (terminal_text.hpp)
  char state = '?';  ///< R, S, D, Z, T, t, X, I, ...
  pid_t ppid = 0;
  uint64_t flags = 0;  ///< PF_* (field 9)

  /// A thread that has ended: a zombie (Z) or dead (X, x).
  bool ended() const noexcept { return state == 'Z' || state == 'X' || state == 'x'; }
  /// A kernel thread (PF_KTHREAD): it has no user memory, no registry, nothing to trace.
  bool kernel_thread() const noexcept { return (flags & 0x00200000) != 0; }
};

/// Parses the text of /proc/PID/stat (or /proc/PID/task/TID/stat); nothing if it is not one.
std::optional<proc_stat> parse_proc_stat(std::string_view text);

/// Reads and parses /proc/PID/stat (tid 0) or /proc/PID/task/TID/stat. Errors: not_found (no
/// such process or thread), malformed (unparsable text), io_error.
result<proc_stat> read_proc_stat(pid_t pid, pid_t tid = 0);

}  // namespace jitunwind::toolkit
