// The checking half of `jitunwind unwind check`: what a correct unwind must give at any
// instruction, learned by watching the thread execute, and the comparison with what the
// published SFrame rows give. No ptrace here (unwind_cmd.cpp drives the thread), so this part
// can be fed synthetic stops.
//
// The ground truth needs no cooperation from the runtime: when a single-stepped thread arrives
// at the first instruction of a published function, the `call` that got it there has just
// pushed the return address, so the caller's stack pointer after the return (the CFA) is
// rsp + 8, the return address is at rsp and the caller's rbp is the current rbp. Those three
// stay the right answer for that frame until the stack pointer rises to the CFA (it returned,
// or something unwound past it). A correct description of the code must reproduce them at
// every instruction of the function and of everything it calls.
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/sframe.h>

#include "window_tables.hpp"

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::cli::stepcheck {

/// A JIT frame whose entry the checker saw: what unwinding it must give.
struct expected_frame {
  uint64_t function_start = 0;
  uint64_t cfa = 0;        ///< the caller's rsp after the return
  uint64_t ra = 0;         ///< the return address the call pushed
  uint64_t caller_fp = 0;  ///< rbp at the entry (callee-saved: the caller's value)
};

/// The frames of one thread that were entered while it was watched, outermost first.
class frame_oracle {
 public:
  /// Called at every stop, in execution order. `entry` is true when the thread is at the first
  /// instruction of a published function (or of a repeated block of one), `function_start`
  /// being that function's start and `ra_at_sp` the word at sp.
  void observe(uint64_t function_start, uint64_t sp, uint64_t fp, bool entry, uint64_t ra_at_sp);
  const std::vector<expected_frame>& frames() const noexcept { return frames_; }
  size_t deepest() const noexcept { return deepest_; }

 private:
  std::vector<expected_frame> frames_;
  size_t deepest_ = 0;
};

/// Reads the stopped thread's memory a page at a time and keeps the pages until `clear()`
/// (the next stop): a deep stack is compared frame by frame, a few words per frame.
class page_cache {
 public:
  explicit page_cache(pid_t pid) : pid_(pid) {}
  bool read(uint64_t address, void* out, size_t len);
  void clear() noexcept { used_ = 0; }
  sframe::memory_reader reader() noexcept;

 private:
  struct page {
    uint64_t base = 0;
    bool ok = false;
    uint8_t bytes[4096];
  };
  const page* get(uint64_t base);
  pid_t pid_;
  std::vector<std::unique_ptr<page>> pages_;
  size_t used_ = 0;
};

/// A published window whose SFrame data a profiler could not use: none, unreadable, invalid.
struct unusable_window {
  remote::window_record record;
  std::string why;
};

/// The published windows of the target (from its registry) as SFrame tables.
class published_code {
 public:
  explicit published_code(remote::registry_reader reader) : reader_(std::move(reader)) {}
  /// Re-reads the registry if anything was published or retired since the last call. A window
  /// whose SFrame cannot be copied three times in a row (the registry is read again in between:
  /// the window may have changed), or whose SFrame is invalid, not for amd64 or for code outside
  /// the window, is unusable (listed by unusable(), still found by window_at); the other
  /// windows are used. Errors: the registry reads' (then the previous tables stay).
  result<void> refresh();
  const sframe::unwinder& unwinder() const noexcept { return unwinder_; }
  /// The window whose text contains pc, or null; `why` is set if it is unusable.
  const remote::window_record* window_at(uint64_t pc,
                                         const std::string** why = nullptr) const noexcept;
  /// Every unusable window seen so far (also those since republished or retired), in order.
  const std::vector<unusable_window>& unusable() const noexcept { return unusable_seen_; }
  /// The most functions the target had published at once, as far as refresh() saw.
  size_t function_count() const noexcept { return functions_; }
  /// Whether a window is published (usable or not).
  bool empty() const noexcept { return windows_.empty(); }
  const remote::registry_reader& reader() const noexcept { return reader_; }
  /// The change count of the registry as the last refresh() read it.
  std::optional<uint64_t> change_count() const noexcept { return seen_; }
  /// Where the usable windows' code is entered: each function's start, and each block's start
  /// in a function of repeated blocks (trampolines); at most `max`, lowest windows first.
  std::vector<uint64_t> entry_points(size_t max) const;

 private:
  remote::registry_reader reader_;
  std::optional<uint64_t> seen_;
  std::vector<loaded_window> windows_;
  sframe::unwinder unwinder_;  // over windows_' tables
  size_t functions_ = 0;
  std::vector<unusable_window> unusable_seen_;
};

/// What went wrong at one stop.
struct mismatch {
  uint64_t pc = 0;              ///< where the thread was
  size_t frame = 0;             ///< 0: the innermost JIT frame; n: n callers up
  uint64_t frame_pc = 0;        ///< that frame's pc
  uint64_t function_start = 0;  ///< the function the oracle says that frame is in
  std::string what;             ///< what differs, with the expected and the unwound values
};

/// Compares the unwind of the stopped thread's registers with the oracle's frames, innermost
/// first, until a frame's pc is not JIT code (a native frame: the JIT frames above it were
/// compared) or `max_frames` frames. `compared` counts the frames that matched.
std::optional<mismatch> compare(const published_code& code, const frame_oracle& oracle,
                                const sframe::regs& at, const sframe::memory_reader& memory,
                                size_t max_frames, size_t& compared);

}  // namespace jitunwind::cli::stepcheck
