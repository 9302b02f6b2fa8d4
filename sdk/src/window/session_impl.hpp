// Private: the implementation classes behind jitunwind::session and jitunwind::window.
#pragma once

#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include "perfmap/flusher.hpp"
#include "window/backend.hpp"
#include "window/code_memory.hpp"
#include "window/placement.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace jitunwind::detail {

class session_impl;

/// Creates the backend of one publisher, or says why it cannot run here.
using backend_factory = result<std::unique_ptr<publisher_backend>> (*)(const session_options&);

/// A window's per-function bookkeeping and its SFrame encoder. A freed window hands them, emptied,
/// to the session and the next window takes them over: the vectors, the name string and the
/// encoder keep their capacity, so a session that keeps opening windows stops allocating once
/// warm.
struct window_lists {
  std::vector<published_function> pending;
  struct record {
    uint64_t start;
    uint32_t size;
    uint32_t name_size;
    size_t name_offset;
  };
  std::vector<record> records;
  std::string names;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::optional<sframe::encoder> encoder;
};

class window_impl final : public window {
 public:
  window_impl(session_impl& s, uint64_t id, owned_memory mem);
  window_impl(session_impl& s, uint64_t id, uint64_t text_start, size_t text_size,
              sframe_block block);
  ~window_impl() override;

  window_state state() const noexcept override { return state_.load(std::memory_order_acquire); }
  uint64_t text_start() const noexcept override { return text_start_; }
  size_t text_size() const noexcept override { return text_size_; }
  bool owned() const noexcept override { return owned_; }
  uint64_t published_generation() const noexcept override { return publication_generation_; }

  result<code_space> allocate(size_t size, size_t alignment) override;
  result<void> append(std::string_view name, const function_desc& frames,
                      uint64_t moved_from) override;
  result<void> name_range(std::string_view name, const function_desc& frames) override;
  result<void> publish() override;
  result<void> seal() override;
  result<void> patch(uint64_t address, span<const uint8_t> bytes) override;
  result<void> retire_function(uint64_t start) override;
  result<void> retire(std::chrono::milliseconds grace,
                      std::function<bool(window&)> on_grace_over) override;
  result<void> reuse() override;
  std::vector<function_entry> functions() const override;
  span<const uint8_t> published_sframe() const noexcept override;

  /// Called by session::poll: runs the grace callback when due. Returns true if it acted.
  bool poll_grace(std::chrono::steady_clock::time_point now);
  /// Unpublishes and releases everything (session shutdown).
  void shutdown();
  /// session::release: true if the handle can go now (freed, or freed now because it was kept
  /// for reuse); otherwise the window is marked to go when its grace period ends.
  result<bool> prepare_release();
  /// Marked by prepare_release: poll destroys the window once it is freed.
  bool release_when_freed() const noexcept { return release_when_freed_; }
  /// Position in the session's live list (swap-removal in O(1)); guarded by its mutex.
  size_t live_index = 0;

 private:
  result<void> reset_encoder();
  /// publish(); `compact`: the section ends up without room between its FDEs and FREs (seal).
  result<void> publish_section(bool compact);
  void adopt(window_lists lists);
  window_lists release_lists();
  /// `with_changes`: the functions appended and removed since the last publish are in
  /// `added` and `removed`.
  window_view view(bool with_changes) const;
  published_function& next_pending();
  /// Records an appended function or named range for the next publish.
  void add_pending(std::string_view name, const function_desc& frames, uint64_t moved_from,
                   bool name_only);
  void forget_functions();
  const sframe_buffers& buffers() const noexcept;
  /// `recycle`: hand the memory to the session for the next window instead of releasing it.
  void free_memory(bool recycle);
  /// The appended function [start, end) containing [address, address + size), or null.
  const std::pair<uint64_t, uint64_t>* function_at(uint64_t address, size_t size) const;

  session_impl& session_;
  const bool owned_;
  owned_memory mem_;
  sframe_block block_;
  uint64_t text_start_ = 0;
  size_t text_size_ = 0;

  std::atomic<window_state> state_{window_state::open};
  // The encoder may come from a freed window (adopt): ready once reset_encoder set it up for
  // this window's section.
  std::optional<sframe::encoder> encoder_;
  bool encoder_ready_ = false;
  // Functions and named ranges appended since the last publish: the first pending_count_
  // entries. Entries are reused (assign, not construct), so their name strings and row vectors
  // keep their capacity and appending allocates nothing once a window has warmed up.
  std::vector<published_function> pending_;
  size_t pending_count_ = 0;
  // Every function and named range of the window in append order (functions()); names in one
  // string.
  std::vector<window_lists::record> records_;
  std::string names_;
  // [start, end) of the appended functions, in address order (name_range searches them).
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  uint64_t last_end_ = 0;  // end address of the last appended function
  // Functions retired since the last publish (names in names_; views set at publish).
  std::vector<window_lists::record> removed_;
  std::vector<removed_function> removed_views_;

  size_t alloc_cursor_ = 0;  // owned: bytes of code reserved so far
  size_t exec_from_ = 0;     // owned: first byte not yet made executable

  int current_buffer_ = -1;  // SFrame buffer in effect, -1 before the first publish
  size_t current_size_ = 0;
  // How many of the encoder's functions each SFrame buffer holds: a publish only adds what the
  // target buffer lacks (sframe::encoder::write_update) instead of rewriting the section.
  size_t written_[2] = {0, 0};
  // The FDE room of each buffer's layout (sframe::encoder::write_update with room): while a
  // window is open its sections keep room for more FDEs before their FREs, so a publish writes
  // only the new functions; sealing writes the section without room (the layout `write` gives).
  size_t room_[2] = {0, 0};
  uint64_t previous_sframe_address_ = 0;
  size_t previous_sframe_size_ = 0;
  uint64_t publication_generation_ = 0;  // of the last publish

  // The grace period, which session::poll may handle on any thread while retire() runs on
  // another: retire sets the deadline and callback first and publishes them by arming `grace_`
  // (release); exactly one poller claims it (compare-exchange) and publishes the outcome
  // (`kept_for_reuse_`) as done for reuse().
  enum class grace_stage : uint8_t { idle, armed, running, done };
  std::atomic<grace_stage> grace_{grace_stage::idle};
  std::chrono::steady_clock::time_point grace_deadline_{};
  std::function<bool(window&)> on_grace_over_;
  bool kept_for_reuse_ = false;
  bool release_when_freed_ = false;  // set by session::release (under the poll lock)
};

class session_impl final : public session {
 public:
  explicit session_impl(const session_options& options);
  ~session_impl() override;

  void start_publishers();

  result<window*> create_owned_window(const owned_window_options& options) override;
  result<window*> describe_window(const described_window_options& options) override;
  size_t poll() override;
  result<void> release(window* w) override;
  /// Frees a window retired with no grace period and ends its handle, without looking at the
  /// other windows (the on-ramp's forget_code: its cost must not grow with the live windows).
  result<void> free_and_release(window* w);
  bool recycles_addresses() const noexcept override { return recycles_; }
  result<void> flush() override;
  std::vector<publisher_status> status() const override;
  const session_options& options() const noexcept override { return options_; }

  /// Runs `call` on every active backend in publishing order; failures mark the backend failed.
  template <class Call>
  void for_each_backend(const char* what, uint64_t window_id, Call&& call);

  void log(log_level level, const std::string& message) const { options_.log(level, message); }

  /// Names of API functions in the caller's language: a session created through the C API (or
  /// the default session once a C function used it) says `jitunwind_perf_code_gap`, otherwise
  /// `jitunwind::perf_code_gap`. Messages carry `{api:NAME}` for them.
  void use_c_names() noexcept { c_names_.store(true, std::memory_order_relaxed); }
  std::string in_caller_language(std::string_view message) const;

  /// A freed described window's SFrame buffers go back to the arena they came from (pages
  /// stay faulted in for the next window of that size).
  void give_back(const sframe_block& block);
  /// A freed owned window's memory, already wiped (owned_memory::wipe), for the next owned
  /// window of the same capacities: a fresh mapping costs a page fault per 4 KiB of code and
  /// SFrame. Keeps at most max_spare_buffers.
  void recycle(owned_memory memory);
  /// Spare memory for an owned window of these capacities, or empty memory.
  owned_memory take_owned(size_t code_capacity, size_t sframe_each, code_layout layout);
  /// A freed window's per-function lists and encoder (see window_lists): the next window's
  /// appends grow nothing. One set is kept, the larger.
  void recycle(window_lists lists);
  window_lists take_lists();

  /// Bytes owned windows leave free after each allocation. perf maps each jitdump-injected
  /// object over the code plus its unwinding data (about 8 bytes per row + 60): the next function
  /// must not start inside that range or perf loses the earlier one's unwinding info.
  size_t code_gap() const noexcept { return code_gap_; }

  /// Whether an active publisher reads the rows of published functions (jitdump and GDB write
  /// `.eh_frame` from them); otherwise `append` does not copy them.
  bool rows_needed() const noexcept {
    return (active_mask_.load(std::memory_order_relaxed) & rows_mask_) != 0;
  }

 private:
  struct slot {
    publisher kind;
    publisher_state state = publisher_state::disabled;
    std::string message;
    std::unique_ptr<publisher_backend> backend;
    // What the publisher warned about (what a consumer will get wrong): counted for status().
    uint64_t warnings = 0;
    std::string last_warning;
  };
  // The log sink each backend gets: its messages go through `publisher_said`.
  struct backend_voice {
    session_impl* session;
    size_t slot;
    publisher kind;
  };
  void publisher_said(const backend_voice& voice, log_level level, std::string_view message);
  void mark_failed(slot& s, const char* what, uint64_t window_id, const error& e);
  /// Adds a new window to the session's lists.
  window* adopt_window(std::unique_ptr<window_impl> w);
  /// Drops freed windows from the live lists; destroys those released. Caller holds poll_mutex_.
  void forget_freed();
  /// The window behind a handle of this session; `invalid_argument` naming `what` otherwise.
  result<window_impl*> find_window(window* handle, const char* what);
  /// Takes `w` out of live_ and live_by_start_ (caller holds mutex_).
  void remove_live(window_impl* w);

  session_options options_;
  // Keeps the batched files' latency bound while the runtime publishes nothing (thread started
  // lazily); outlives the backends, which stop using it when they close their files.
  std::unique_ptr<flusher> flusher_;
  // A file publisher is batched: poll() checks its latency bound.
  bool batched_files_ = false;
  std::vector<slot> slots_;   // publishing order
  std::vector<backend_voice> voices_;  // one per slot, created before the backends
  std::atomic<bool> c_names_{false};
  mutable std::mutex mutex_;  // guards slots_' state/message, the window lists and spares
  // Serializes poll() and release(): a window is destroyed only by one of them, never while
  // the other walks the live list.
  std::mutex poll_mutex_;
  // Bit i set: slots_[i] is active. Read without the lock on every publish (a publish would
  // otherwise take mutex_ once per publisher); cleared under mutex_ when a publisher fails.
  std::atomic<uint32_t> active_mask_{0};
  uint32_t rows_mask_ = 0;  // slots of the publishers that read rows (jitdump, gdb)
  bool recycles_ = true;    // session_options::reuse resolved against the active publishers
  // Every window handle not released, and those not freed: poll() looks only at the latter, so
  // its cost does not grow with the number of windows a long-running runtime has retired.
  std::unordered_map<const window*, std::unique_ptr<window_impl>> windows_;
  std::vector<window_impl*> live_;
  std::map<uint64_t, window_impl*> live_by_start_;  // overlap checks of describe_window
  // Memory of freed owned windows, at most max_spare_buffers, newest last; and one window's
  // lists.
  static constexpr size_t max_spare_buffers = 2;
  std::vector<owned_memory> spare_owned_;
  window_lists spare_lists_;
  sframe_space sframe_space_;
  size_t code_gap_ = 0;
};

/// Window ids are unique in the process (the registry ABI keys windows by id).
uint64_t next_window_id() noexcept;

template <class Call>
void session_impl::for_each_backend(const char* what, uint64_t window_id, Call&& call) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if ((active_mask_.load(std::memory_order_acquire) & (1u << i)) == 0) continue;
    slot& s = slots_[i];
    result<void> r = call(*s.backend);
    if (!r) mark_failed(s, what, window_id, r.error());
  }
}

}  // namespace jitunwind::detail
