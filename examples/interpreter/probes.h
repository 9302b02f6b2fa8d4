// The interpreter's USDT probes, provider `toyinterp`, modelled on CPython's and Node's:
//   function__entry(char* name, i64 depth)   a toy function starts running
//   function__return(char* name, i64 depth)  it returns
//   line(char* name, i64 line)               a statement of that line starts
//   checkpoint(i64 tag, u64 count, u64* addrs)  ground truth (docs/ground-truth.md)
// The provider is a dynamic USDT object the SDK generates at start-up (jitunwind/usdt.h).
// Each `*_enabled()` is one load of the probe's semaphore, so an untraced run pays one load and
// a not-taken branch per event site.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace toyinterp {

class probes {
 public:
  /// Creates the provider (where the probes live is up to the implementation). Null with
  /// `error` set if the probes cannot be created.
  static std::unique_ptr<probes> create(std::string& error);
  virtual ~probes() = default;

  bool entry_enabled() const { return *entry_semaphore_ != 0; }
  bool return_enabled() const { return *return_semaphore_ != 0; }
  bool line_enabled() const { return *line_semaphore_ != 0; }
  /// The semaphores themselves, for a hot loop that keeps them in its own state (one load per
  /// check). Valid as long as this object.
  const volatile uint16_t* entry_semaphore() const { return entry_semaphore_; }
  const volatile uint16_t* return_semaphore() const { return return_semaphore_; }
  const volatile uint16_t* line_semaphore() const { return line_semaphore_; }

  /// A word that is nonzero while any of the four probes is enabled, for a hot path that checks
  /// them all with one load: the SDK gives a provider's probes consecutive 16-bit semaphores,
  /// and this provider's four fill one aligned 8-byte word. Should they ever not, this points at
  /// a constant nonzero word: the check then always says "maybe" and the caller checks the
  /// probes one by one. Valid as long as this object.
  const uint64_t* any_enabled_word() const { return any_enabled_word_; }
  /// Whether `any_enabled_word` really is the probes' word (for --stats and tests).
  bool one_word_check() const;

  virtual void function_entry(const char* name, int64_t depth) = 0;
  virtual void function_return(const char* name, int64_t depth) = 0;
  virtual void line(const char* name, int64_t line) = 0;
  /// Fires `checkpoint` when traced and the chain has at most 512 entries (the protocol).
  virtual void checkpoint(int64_t tag, std::span<const uint64_t> addrs) = 0;
  /// Waits until a tracer has attached to one of the probes (--wait-for-tracer), or to every
  /// probe named in `all_of` (--wait-for-probes; names from `probe_names`, checked by the caller).
  virtual bool wait_for_tracer(std::chrono::seconds timeout,
                               const std::vector<std::string>& all_of) = 0;
  /// The probes' names, in the provider's order.
  static constexpr const char* probe_names[] = {"function__entry", "function__return", "line",
                                                "checkpoint"};

  /// Where the probes can be found, for messages ("static probes in /proc/self/exe", ...).
  virtual std::string describe() const = 0;

 protected:
  const volatile uint16_t* entry_semaphore_ = nullptr;
  const volatile uint16_t* return_semaphore_ = nullptr;
  const volatile uint16_t* line_semaphore_ = nullptr;
  const uint64_t* any_enabled_word_ = nullptr;
};

}  // namespace toyinterp
