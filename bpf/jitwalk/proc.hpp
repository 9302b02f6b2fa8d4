// The target process: its mappings, names, and (for `-- CMD`) starting it under control.
#pragma once

#include "jitwalk/common.hpp"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitwalk {

struct mapping {
  uint64_t start = 0, end = 0;
  bool readable = false, writable = false, executable = false;
  uint64_t offset = 0;
  uint64_t dev = 0;  ///< major << 20 | minor ... as printed, combined
  uint64_t inode = 0;
  std::string path;  ///< as printed: "/usr/lib/x.so", "[stack]", "/memfd:name (deleted)", ""

  bool file_backed() const noexcept {
    return inode != 0 && !path.empty() && path[0] == '/' && !shared_anonymous();
  }
  /// Private anonymous memory, or shared anonymous memory (a shmem object the kernel shows as
  /// "/dev/zero (deleted)"; perf counts it as anonymous too): JIT code lives there.
  bool anonymous() const noexcept { return inode == 0 || shared_anonymous(); }
  bool shared_anonymous() const noexcept { return path.rfind("/dev/zero", 0) == 0; }
};

/// Parses /proc/PID/maps. `not_found` if the process is gone.
result<std::vector<mapping>> read_maps(pid_t pid);
/// Parses the text of a maps file (for tests).
std::vector<mapping> parse_maps(const std::string& text);

/// A path through which the object behind a mapping can be opened even if it was deleted,
/// replaced, is a memfd or lives in another mount namespace: /proc/PID/map_files/START-END.
std::string map_files_path(pid_t pid, const mapping& m);

/// /proc/PID/comm (or /proc/PID/task/TID/comm), without the newline; "?" if unreadable.
std::string read_comm(pid_t pid, pid_t tid = 0);
/// /proc/PID/exe resolved, or empty.
std::string read_exe(pid_t pid);
bool process_alive(pid_t pid);
/// The thread ids in /proc/PID/task (empty if the process is gone).
std::vector<pid_t> list_threads(pid_t pid);

/// Where a process's own files are, seen from jitwalk: a process in another PID namespace names
/// its perf map and jitdump after its PID there (the innermost `NSpid` of /proc/PID/status), and
/// one in another mount namespace has its own /tmp, reached through /proc/PID/root. The root is
/// held open (O_PATH), so the files stay readable after the process is gone (names read at the
/// end of a profile). Paths are resolved inside that root (guarded open_rules::root_fd): no link
/// leads out of it. Move-only; not thread-safe.
class process_view {
 public:
  /// The view of process `pid` now (its root and namespaces); a process that is gone gets a
  /// view without a root (paths are then opened as jitwalk sees them).
  explicit process_view(pid_t pid);
  process_view(process_view&& o) noexcept;
  process_view& operator=(process_view&& o) noexcept;
  process_view(const process_view&) = delete;
  process_view& operator=(const process_view&) = delete;
  ~process_view();

  /// Re-reads the root and namespaces while the process lives (it may have entered a new
  /// namespace or chroot since); keeps the last view once it is gone. True if the root changed.
  bool refresh();

  pid_t pid() const noexcept { return pid_; }
  /// The PID the process knows itself by (innermost NSpid; `pid()` in jitwalk's namespace).
  pid_t ns_pid() const noexcept { return ns_pid_; }
  /// O_PATH fd of its root directory, or -1.
  int root_fd() const noexcept { return root_fd_; }
  bool other_mount_ns() const noexcept { return other_mnt_; }
  bool other_pid_ns() const noexcept { return ns_pid_ != pid_; }
  /// "" in jitwalk's own namespaces; else where its files were looked up, for the name-source
  /// report: "in the mount namespace of pid 4242 (mnt:[4026532177]), pid 1 there".
  std::string where() const;

 private:
  pid_t pid_ = 0;
  pid_t ns_pid_ = 0;
  int root_fd_ = -1;
  bool other_mnt_ = false;
  std::string mnt_ns_;  // "mnt:[4026532177]"
};

/// The innermost PID of `pid` (the last field of NSpid in /proc/PID/status); `pid` if unknown.
pid_t read_ns_pid(pid_t pid);

/// A command started by jitwalk. The child is created stopped at a gate (before exec) so BPF
/// programs and probes can be attached to its PID first; `release` lets it exec.
class child_process {
 public:
  /// Forks; the child waits, then execvp(argv). `io_error` if fork fails.
  static result<child_process> spawn(const std::vector<std::string>& argv);
  child_process(child_process&&) noexcept;
  child_process& operator=(child_process&&) = delete;
  ~child_process();

  pid_t pid() const noexcept { return pid_; }
  /// Lets the child exec. `not_found`/`io_error` naming the command if exec failed.
  result<void> release();
  /// Non-blocking: true once the child exited (then exit_code() is valid).
  bool poll_exit();
  /// Blocking wait.
  int wait();
  int exit_code() const noexcept { return exit_code_; }
  /// The signal that ended it (0: it exited by itself, with exit_code()).
  int term_signal() const noexcept { return term_signal_; }
  /// How it ended, for the summary: "exited with status 3", "killed by signal 11 (SIGSEGV)",
  /// and, when jitwalk had sent it a signal (end of -d, Ctrl-C), that jitwalk ended it:
  /// "ended by jitwalk (SIGTERM)", "ended by jitwalk (SIGKILL: still running after
  /// SIGINT and SIGTERM)", "exited with status 0 after jitwalk's SIGINT".
  std::string describe_end() const;
  /// True once jitwalk sent it SIGINT, SIGTERM or SIGKILL (it may still have exited by itself).
  bool ended_by_jitwalk() const noexcept { return sent_term_ != 0; }
  /// User + system CPU time of the command (and its waited-for children), once exited.
  double cpu_seconds() const noexcept { return cpu_s_; }
  bool exited() const noexcept { return exited_; }
  /// Sends a signal (no-op once exited); remembered as jitwalk ending the command
  /// (describe_end).
  void signal(int sig);

 private:
  child_process() = default;
  pid_t pid_ = -1;
  int gate_fd_ = -1;   // write end: one byte releases the child
  int error_fd_ = -1;  // read end: errno of a failed exec (CLOEXEC pipe)
  std::string command_;
  bool exited_ = false;
  int exit_code_ = -1;
  int term_signal_ = 0;
  int sent_term_ = 0;  // the last signal jitwalk sent (SIGINT, SIGTERM, SIGKILL), 0 if none
  double cpu_s_ = 0;
  void record(int status);
};

}  // namespace jitwalk
