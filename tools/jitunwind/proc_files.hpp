// What the tool reads about a process from files: /proc/PID/status fields, and the names a
// runtime writes into its perf map (/tmp/perf-PID.map, `START SIZE name` lines in hex).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace jitunwind::cli {

/// A number from /proc/PID/status ("Threads:", "Tgid:"), or `otherwise`.
long status_field(pid_t pid, std::string_view field, long otherwise);

/// The process a thread belongs to (perf maps are per process); the thread itself if unknown.
pid_t process_of(pid_t tid);

/// False once the process has ended: gone, or a zombie that its parent has not reaped yet.
bool process_running(pid_t pid);

/// Where `process` writes its perf map: the directory of JITUNWIND_DIR in its environment
/// (/proc/PID/environ: what the SDK's session_options::from_env() uses) if set, else /tmp,
/// where perf looks. A runtime that sets the directory in code needs the tool's --perf-map.
std::string perf_map_path(pid_t process);

/// The names of a perf map, read as the file grows. A later line for the same start wins (the
/// address was reused). A last line without its newline is not read yet (still being written,
/// or cut by a kill -9); a missing file is empty.
class perf_map_names {
 public:
  explicit perf_map_names(std::string path) : path_(std::move(path)) {}
  /// Reads what was appended since the last call (everything, the first time; from the start
  /// again if the file shrank: a new process with the same pid rewrote it).
  void update();
  const std::map<uint64_t, std::string>& names() const noexcept { return names_; }
  /// "'toy:fib'", or the hex address without a name.
  std::string name_or_address(uint64_t start) const;

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::map<uint64_t, std::string> names_;
};

}  // namespace jitunwind::cli
