// Private: the interface between windows and the publishers.
//
// A session holds one backend per active publisher. Windows call them in a fixed order on every
// publish/retire; a backend that returns an error is marked failed by the session and is not
// called again, so one publisher can never stop the others.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/result.h>
#include <jitunwind/window.h>

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace jitunwind::detail {

struct published_function {
  /// Points into the window's name storage and is NUL-terminated (`name.data()[name.size()]`
  /// is 0); valid during the on_publish call.
  std::string_view name;
  /// `frames.rows` is filled only while a publisher that reads rows (jitdump, GDB) is active.
  function_desc frames;
  uint64_t moved_from = 0;  ///< != 0: the code was copied from there (jitdump CODE_MOVE)
  /// A name for part of an appended function (window::name_range): named and described by the
  /// naming publishers, not part of the window's SFrame.
  bool name_only = false;
  /// Where `name` is in the window's name storage (names move while appends grow it; `name` is
  /// set from these when the window publishes).
  size_t name_offset = 0;
  uint32_t name_size = 0;

  /// Whether the naming publishers (perf map, jitdump, GDB, code_add events) announce this
  /// entry: everything but PCMASK stub arrays, whose stubs are named one by one with
  /// name_range (see window::append).
  bool named() const noexcept { return frames.pcmask_rep == 0; }
};

/// A function window::retire_function took out, announced at the next publish.
struct removed_function {
  uint64_t start = 0;
  uint32_t size = 0;
  /// NUL-terminated like published_function::name; valid during the on_publish call.
  std::string_view name;
};

/// What a backend sees of a window when it is published or retired.
struct window_view {
  uint64_t id = 0;
  /// Unique in the process and increasing: a fresh one for every publish of any window
  /// (registry entries and USDT events carry it; consumers key rows by (id, generation)).
  uint64_t generation = 0;
  /// window::reuse_count(): how many times the window's range was reused.
  uint32_t reuse_count = 0;
  abi target = abi::amd64;
  uint64_t text_start = 0;
  uint64_t text_size = 0;
  /// The SFrame section now in effect (publish) or last in effect (retire).
  uint64_t sframe_address = 0;
  std::span<const uint8_t> sframe;
  /// The SFrame section that was in effect before this publish (empty on the first one).
  uint64_t previous_sframe_address = 0;
  uint64_t previous_sframe_size = 0;
  /// The functions and named ranges this publish makes visible (empty on retire and free).
  std::span<const published_function> added;
  /// The functions this publish takes out (window::retire_function; empty on retire and free).
  std::span<const removed_function> removed;
  /// End of the last function (the code that is actually published starts at text_start).
  uint64_t code_end = 0;
  /// One word per publisher kind that the window keeps for that publisher's backend (zero
  /// until the backend sets it): per-window state found without a lookup of the backend's own.
  /// A backend touches only its own word (state_of), in calls for this window, which are never
  /// concurrent (a window publishes from one thread at a time; retire and free come after).
  uint64_t* publisher_state = nullptr;
  uint64_t& state_of(publisher p) const noexcept {
    return publisher_state[std::countr_zero(static_cast<uint32_t>(p))];
  }
};

/// The session logs the first warnings of each publisher and only counts the others (status());
/// a backend that warns per function may send the later ones without formatting them.
inline constexpr uint64_t logged_warnings_per_publisher = 10;

/// Words of window_view::publisher_state: one per bit of `publisher`.
inline constexpr size_t publisher_state_words = 8;

class publisher_backend {
 public:
  virtual ~publisher_backend() = default;
  virtual publisher kind() const noexcept = 0;
  /// A human note for session::status() while active ("writing /tmp/perf-1.map").
  virtual std::string note() const { return {}; }
  virtual result<void> on_publish(const window_view& w) = 0;
  virtual result<void> on_retire(const window_view& w) = 0;
  /// The window's memory is about to be freed or wiped for reuse.
  virtual result<void> on_free(const window_view& w) {
    (void)w;
    return {};
  }
  /// The window was sealed (after its last publish).
  virtual result<void> on_seal(const window_view& w) {
    (void)w;
    return {};
  }
  /// Writes what a file publisher has buffered (durability::batched); `due_only`: only if its
  /// oldest record has waited the latency bound at `now_ns` (CLOCK_MONOTONIC).
  virtual result<void> flush(bool due_only, uint64_t now_ns) {
    (void)due_only;
    (void)now_ns;
    return {};
  }
};

}  // namespace jitunwind::detail
