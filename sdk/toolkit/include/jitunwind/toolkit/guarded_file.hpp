// Toolkit: the one way the SDK's remote reader and the tools open and read a file that another
// process controls — the objects a profiled process maps, the perf map and jitdump it writes,
// its /proc files, a file named on a command line. The rules (docs/jitwalk.md, "Reading hostile
// processes"):
//   - opened with O_NONBLOCK (a FIFO never blocks the open) and, where the other process chose
//     the path, O_NOFOLLOW (a planted symbolic link is not followed);
//   - accepted only as a regular file (not a FIFO, device, directory or socket), optionally
//     only when owned by a given user, and only up to a stated size;
//   - read with pread, never mapped: a file truncated while it is read gives an error naming it,
//     where a mapping would kill the reader with SIGBUS;
//   - what is read into memory is charged to the run's memory budget (budget.hpp).
//
// Thread-safety: a guarded_file may be read from several threads (pread has no file position).
#pragma once

#include <jitunwind/result.h>

#include <jitunwind/toolkit/budget.hpp>

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::toolkit {

struct open_rules {
  /// What the file is, for messages ("perf map" gives "perf map PATH: is a FIFO, ..."; empty:
  /// "PATH: ...").
  const char* what = "";
  /// The other process chose the path (or can write its directory): a symbolic link as the
  /// last component is refused, not followed. Off for paths the reader built itself that are
  /// meant to be links (/proc/PID/map_files/..., /proc/PID/exe).
  bool no_follow = true;
  /// Largest st_size accepted at open; read_all() also stops there on a file that grows.
  uint64_t max_bytes = uint64_t{1} << 30;
  /// If set, the file must be owned by this user (as perf requires of a perf map).
  std::optional<uid_t> owner;
  /// If >= 0, a directory fd that is the root `path` is resolved in (another process's root,
  /// /proc/PID/root): openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, so neither "..",
  /// an absolute symbolic link nor a /proc magic link leads out of it.
  int root_fd = -1;
};

class guarded_file {
 public:
  /// Opens `path` under `rules`. Errors name the path and the reason ("PATH: is a FIFO, not a
  /// regular file"): not_found (ENOENT), permission_denied (EACCES, a symbolic link refused,
  /// another owner), io_error (not a regular file, other errors), limit_exceeded (larger than
  /// max_bytes).
  static result<guarded_file> open(const std::string& path, const open_rules& rules);

  guarded_file(guarded_file&& o) noexcept;
  guarded_file& operator=(guarded_file&& o) noexcept;
  guarded_file(const guarded_file&) = delete;
  guarded_file& operator=(const guarded_file&) = delete;
  ~guarded_file();

  const std::string& path() const noexcept { return path_; }
  /// st_size when opened.
  uint64_t size() const noexcept { return size_; }
  dev_t device() const noexcept { return device_; }
  ino_t inode() const noexcept { return inode_; }
  uint64_t max_bytes() const noexcept { return max_bytes_; }
  int fd() const noexcept { return fd_; }

  /// Exactly `n` bytes at `offset`. A file that has become shorter since it was opened gives
  /// io_error "PATH: changed while it was read (...)" instead of a signal.
  result<void> read_at(uint64_t offset, void* out, size_t n) const;
  /// Up to `n` bytes at `offset` (fewer at the end of the file); the count read.
  result<size_t> read_some(uint64_t offset, void* out, size_t n) const;
  /// `n` bytes at `offset` into a new buffer charged to `budget` (may be null) for `what`.
  result<charged_bytes> read_range(uint64_t offset, uint64_t n, memory_budget* budget,
                                   std::string_view what) const;
  /// The whole file as it is now, read until its end (files in /proc report size 0), at most
  /// max_bytes (limit_exceeded beyond), charged to `budget`.
  result<charged_bytes> read_all(memory_budget* budget = nullptr) const;

 private:
  guarded_file() = default;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  uint64_t max_bytes_ = 0;
};

/// Opens `path` under `rules` and reads it whole (read_all). Errors: as open and read_all.
result<std::vector<uint8_t>> read_guarded_file(const std::string& path, const open_rules& rules);

/// A whole small text file of the kernel's (/proc/PID/stat, /status, /maps, /environ), read
/// with read_all under its default rules (links followed: /proc/self is one) and at most
/// `max_bytes`. Errors: as guarded_file::open and read_all; ESRCH while reading is not_found.
result<std::string> read_proc_text(const std::string& path,
                                   uint64_t max_bytes = uint64_t{64} << 20);

/// read_proc_text, or "" if it fails (the process is gone, the file is not there).
std::string proc_text_or_empty(const std::string& path);

/// "is a FIFO", "is a directory", "is a character device", ... for a non-regular st_mode.
const char* file_type_text(unsigned mode);

}  // namespace jitunwind::toolkit
