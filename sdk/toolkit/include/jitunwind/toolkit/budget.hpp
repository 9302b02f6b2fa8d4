// Toolkit: the memory a tool may spend on what another process controls (its files, its perf
// map, its registry), as one budget per run. Every allocation whose size comes from the other
// process takes its bytes from the budget first and gives them back when freed; the first one
// that would pass the limit fails with a message that says what was being read and how to raise
// the limit. The budget counts what the data makes the tool hold, not the tool's own overhead.
//
// Thread-safety: a budget may be shared by threads (atomic counters). A `budget_charge` is owned
// by one thread at a time.
#pragma once

#include <jitunwind/result.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jitunwind::toolkit {

class memory_budget {
 public:
  /// `hint` ends the limit message ("raise it with --max-memory").
  explicit memory_budget(uint64_t limit_bytes, std::string hint = {})
      : limit_(limit_bytes), hint_(std::move(hint)) {}
  memory_budget(const memory_budget&) = delete;
  memory_budget& operator=(const memory_budget&) = delete;

  /// Takes `bytes` for `what` ("section .symtab of /usr/lib/libc.so.6"). `limit_exceeded`:
  /// "memory budget of 512 MiB reached: WHAT needs N bytes, M bytes of the target's data are
  /// held (HINT)"; nothing is taken then.
  result<void> take(uint64_t bytes, std::string_view what);
  void give_back(uint64_t bytes) noexcept;

  uint64_t limit() const noexcept { return limit_; }
  uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  uint64_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }
  /// How often take() refused (a tool says so once in its summary).
  uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }

 private:
  uint64_t limit_;
  std::string hint_;
  std::atomic<uint64_t> used_{0}, peak_{0}, refusals_{0};
};

/// Bytes taken from a budget, given back when this is destroyed (or `release`d). A null budget
/// charges nothing (unbudgeted callers such as tests).
class budget_charge {
 public:
  budget_charge() = default;
  budget_charge(budget_charge&& o) noexcept
      : budget_(std::exchange(o.budget_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  budget_charge& operator=(budget_charge&& o) noexcept {
    if (this != &o) {
      release();
      budget_ = std::exchange(o.budget_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~budget_charge() { release(); }

  /// Takes `bytes` more from `budget` (which must be the one already charged, if any).
  static result<budget_charge> take(memory_budget* budget, uint64_t bytes, std::string_view what);
  /// Adds `bytes` to this charge. Errors: as memory_budget::take (nothing added).
  result<void> grow(memory_budget* budget, uint64_t bytes, std::string_view what);
  /// Gives back what is above `bytes` (no-op if the charge is not larger).
  void shrink_to(uint64_t bytes) noexcept;
  void release() noexcept;
  uint64_t bytes() const noexcept { return bytes_; }

 private:
  memory_budget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

/// Bytes read from another process's file or memory, charged to a budget while they live.
struct charged_bytes {
  std::vector<uint8_t> bytes;
  budget_charge charge;
};

/// "1.5 GiB", "512 MiB", "12 KiB", "100 bytes": sizes in messages.
std::string size_text(uint64_t bytes);

}  // namespace jitunwind::toolkit
