// Private: the perf map publisher (`/tmp/perf-PID.map`), driven by the session/window module.
//
// perf reads `DIR/perf-PID.map` to name samples in anonymous executable memory. Each line is
// `START SIZE name` (lower-case hex without 0x). perf ignores a map not owned by its euid or
// root; it only consults it for anonymous mappings (not file or memfd mappings).
#pragma once

#include <jitunwind/result.h>

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::detail {

struct perfmap_options {
  std::string dir = "/tmp";  ///< where perf looks: /tmp (inside the process's mount namespace)
  pid_t pid = 0;             ///< 0: getpid()
};

/// Longest name `add` accepts, in bytes.
inline constexpr size_t perfmap_max_name = 4096;

/// Replaces bytes perf cannot keep on one line or that would corrupt a terminal: every byte
/// below 0x20 (newline, tab, NUL, escape, ...) and 0x7f becomes '?'. Other bytes (UTF-8
/// included) are kept.
std::string sanitize_symbol_name(std::string_view name);

/// One line of a batch.
struct perfmap_entry {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string_view name;
  /// The caller has already made sure `name` has no control bytes (window::append rejects
  /// them): it is copied without being scanned again.
  bool clean = false;
};

/// Appends lines to DIR/perf-PID.map. Thread-safe: each call writes its lines whole with one
/// `write` under a mutex (O_APPEND), so lines never interleave; a failed write leaves no partial
/// line. (A process killed by a signal in the middle of a write that spans pages can leave the
/// file cut at a page boundary — the kernel checks for fatal signals between pages; perf then
/// reads a truncated last line.)
class perfmap_writer {
 public:
  /// Opens (creates, mode 0644) the map safely: never follows a symlink, refuses a non-regular
  /// file, a file with several hard links or one owned by another user (permission_denied),
  /// not_found if the directory does not exist.
  static result<std::unique_ptr<perfmap_writer>> create(const perfmap_options& options);
  ~perfmap_writer();
  perfmap_writer(const perfmap_writer&) = delete;
  perfmap_writer& operator=(const perfmap_writer&) = delete;

  /// Writes `START SIZE name\n`. The name is sanitized (`sanitize_symbol_name`).
  /// invalid_argument: size 0, empty name or longer than perfmap_max_name;
  /// out_of_range: start + size overflows; io_error: the write failed (nothing was left).
  result<void> add(uint64_t start, uint64_t size, std::string_view name);

  /// Writes one line per entry, all with one `write` (one system call for the batch instead of
  /// one per line). Every entry is checked first, as `add` does; if any is bad, nothing is
  /// written. An empty batch writes nothing.
  result<void> add_batch(std::span<const perfmap_entry> entries);

  const std::string& path() const noexcept { return path_; }

 private:
  perfmap_writer(int fd, std::string path, off_t end)
      : fd_(fd), path_(std::move(path)), end_(end) {}

  result<void> check(const perfmap_entry& e) const;

  std::mutex mu_;
  int fd_;
  std::string path_;
  off_t end_;
  std::vector<char> buffer_;  // the lines of one call (guarded by mu_; keeps its capacity)
};

}  // namespace jitunwind::detail
