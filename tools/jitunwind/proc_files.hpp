// What the tool reads about a process from files: /proc/PID/status fields, which of its
// threads can still be read, and the names a runtime writes into its perf map
// (`START SIZE name` lines in hex).
#pragma once

#include <jitunwind/result.h>

#include <jitunwind/toolkit/budget.hpp>

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace jitunwind::cli {

/// A number from /proc/PID/status ("Threads:", "Tgid:"), or `otherwise`.
long status_field(pid_t pid, std::string_view field, long otherwise);

/// The process a thread belongs to (perf maps are per process); the thread itself if unknown.
pid_t process_of(pid_t tid);

/// A thread of process `tgid` that has not ended: `preferred` if it is one of them and alive,
/// else the main thread if alive, else any other (a main thread that left by pthread_exit is a
/// zombie whose /proc files show no memory, while the other threads run on); 0 if none.
pid_t live_task(pid_t tgid, pid_t preferred);

/// False once every thread of process `tgid` has ended (gone, or a zombie not reaped yet).
bool process_running(pid_t tgid);

/// The value of variable `name` in the environment thread `task` started with, if set.
std::optional<std::string> environment_value(pid_t task, std::string_view name);

/// Where process `tgid` writes its perf map, seen from here: the directory of JITUNWIND_DIR in
/// its environment (what the SDK's session_options::from_env() uses) if set, else /tmp, where
/// perf looks; in another PID namespace, below /proc/TASK/root and named with the pid the
/// process knows itself by (as perf does). `task` is a live thread of it (see live_task). A
/// runtime that sets the directory in code needs the tool's --perf-map.
std::string perf_map_path(pid_t tgid, pid_t task);

/// A perf map file given explicitly must be a regular file that can be opened (a FIFO would
/// block the reader). Errors: io_error naming the file and the reason.
result<void> check_perf_map_file(const std::string& path);

/// The uid a process runs as (the owner of /proc/PID), if known: its perf map must be its own.
std::optional<uid_t> process_owner(pid_t pid);

/// The names of a perf map, read as the file grows. A later line for the same start wins (the
/// address was reused). A last line without its newline is kept until its newline arrives (it
/// is still being written, or was cut by a kill -9); a line longer than max_line is skipped.
/// A missing file reads as empty; a replaced or shrunk file is read again. The file belongs to
/// the process (docs/cli.md, "Reading hostile processes"): unless `owner` is empty (a file the
/// user named), a symbolic link is not followed and the file must belong to `owner`; a FIFO or
/// device is never read; at most `max_bytes` of it are read; its names are charged to `budget`.
/// What stopped the reading is kept in problem().
class perf_map_names {
 public:
  static constexpr size_t max_line = 64 * 1024;
  static constexpr uint64_t default_max_bytes = uint64_t{256} << 20;

  explicit perf_map_names(std::string path, std::optional<uid_t> owner = {},
                          toolkit::memory_budget* budget = nullptr,
                          uint64_t max_bytes = default_max_bytes);
  /// Reads what was appended since the last call.
  void update();
  const std::map<uint64_t, std::string>& names() const noexcept { return names_; }
  /// "'toy:fib'" (escaped for a terminal), or the hex address without a name.
  std::string name_or_address(uint64_t start) const;
  const std::string& path() const noexcept { return path_; }
  /// Why names are missing, if something was refused or cut (empty otherwise).
  const std::string& problem() const noexcept { return problem_; }
  /// A limit (--max-file, the memory budget) left names out: the answer is incomplete
  /// (jitunwind/toolkit/input_cuts.hpp).
  bool cut() const noexcept { return cut_; }

 private:
  void consume(const char* p, size_t n);
  void parse_line(std::string_view line);
  void note(std::string problem);

  std::string path_;
  std::optional<uid_t> owner_;
  toolkit::memory_budget* budget_ = nullptr;
  uint64_t max_bytes_ = default_max_bytes;
  uint64_t offset_ = 0;
  uint64_t device_ = 0, inode_ = 0;
  std::string tail_;       // the start of a line whose newline has not been read yet
  bool skipping_ = false;  // in a line longer than max_line: up to its newline
  bool full_ = false;      // the memory budget refused a name: no more are read
  std::map<uint64_t, std::string> names_;
  toolkit::budget_charge charge_;
  std::string problem_;
  bool cut_ = false;
};

}  // namespace jitunwind::cli
