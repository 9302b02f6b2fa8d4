// Private: the perf map publisher (`/tmp/perf-PID.map`), driven by the session/window module.
//
// perf reads `DIR/perf-PID.map` to name samples in anonymous executable memory. Each line is
// `START SIZE name` (lower-case hex without 0x). perf ignores a map not owned by its euid or
// root; it only consults it for anonymous mappings (not file or memfd mappings).
#pragma once

#include <jitunwind/result.h>

#include "perfmap/named_ranges.hpp"
#include "perfmap/record_file.hpp"

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace jitunwind::detail {

struct perfmap_options {
  std::string dir = "/tmp";  ///< where perf looks: /tmp (inside the process's mount namespace)
  pid_t pid = 0;             ///< 0: getpid()
  /// When lines reach the file (record_file.hpp). The writer's default is sync; sessions pass
  /// their durability (batched by default).
  file_policy policy;
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

/// Appends lines to DIR/perf-PID.map. Thread-safe: the lines of each call stay together, in call
/// order; under sync they are written with one `write` before the call returns, under batched
/// with many other calls' lines later (record_file.hpp). A failed write leaves no partial line.
/// No line of at most 4096 bytes crosses a 4096-byte boundary of the file: newlines pad the
/// previous line up to the boundary (readers skip empty lines: perf, bcc, blazesym, ours). So
/// `kill -9` in the middle of a `write` — which the kernel can stop only where it moves to the
/// next page of the file — never leaves part of a line behind.
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
  /// one per line) under sync, into the buffer under batched. Every entry is checked first, as
  /// `add` does; if any is bad, nothing is written. An empty batch writes nothing. `bad_state`
  /// in a forked child (the map is the parent's) and after close().
  result<void> add_batch(std::span<const perfmap_entry> entries);

  /// A line written over bytes an earlier line of this writer named (see add_batch's `reused`).
  struct reused_line {
    size_t entry;     ///< index in the batch
    uint64_t start;   ///< the earlier line's range
    uint64_t end;
  };
  /// add_batch, and (when the lines are written) appends to `reused` each line that meets a range
  /// an earlier line named (named_ranges: the check runs under the writer's lock, in the order
  /// of the file; the caller says it after the call).
  result<void> add_batch(std::span<const perfmap_entry> entries, std::vector<reused_line>& reused);

  /// Writes the buffered lines (batched) now; see record_file::flush.
  result<void> flush() { return file_.flush(); }
  /// Writes them if the oldest is due at `now_ns` (CLOCK_MONOTONIC).
  result<void> flush_if_due(uint64_t now_ns) { return file_.flush_if_due(now_ns); }
  /// flush(), then closes the file. Also done by the destructor.
  result<void> close() { return file_.close(); }

  const std::string& path() const noexcept { return file_.path(); }

 private:
  perfmap_writer(int fd, std::string path, off_t end, const file_policy& policy)
      : file_(fd, std::move(path), end, policy) {}

  result<void> check(const perfmap_entry& e) const;
  result<void> write_lines(std::span<const perfmap_entry> entries,
                           std::vector<reused_line>* reused);

  record_file file_;
  named_ranges named_;  // every range named so far, when reuse is tracked (file_'s lock)
};

}  // namespace jitunwind::detail
