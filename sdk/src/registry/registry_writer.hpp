// The writer side of the in-process window registry (ABI: jitunwind/registry_abi.h,
// docs/registry-abi.md). Internal to the SDK: the window module publishes its windows here.
//
// Concurrency: any number of threads may call any function concurrently. Changes of one slot are
// serialized by the slot's sequence counter (a writer that finds the counter odd spins until the
// other writer of the same slot is done; the window module normally owns a slot exclusively, so
// this never happens in practice). add() and release() also take a mutex for slot allocation.
// No writer ever waits for a reader: readers only copy memory and retry.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/registry_abi.h>
#include <jitunwind/result.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace jitunwind::detail {

/// What the window module publishes about one window.
struct registry_window {
  uint64_t window_id = 0;
  uint64_t text_start = 0;
  uint64_t text_size = 0;
  uint64_t sframe_address = 0;  ///< 0 (with size 0) while the window has no SFrame yet
  uint64_t sframe_size = 0;
  abi code_abi = abi::amd64;
  uint8_t sframe_version = 0;  ///< the section's version byte; 0 while there is no section
};

enum class registry_state : uint32_t {
  free = JITUNWIND_WINDOW_FREE,
  live = JITUNWIND_WINDOW_LIVE,
  retired = JITUNWIND_WINDOW_RETIRED,
};

/// Index of a slot in the entry array. Handed out by add(), valid until release().
struct registry_slot {
  uint32_t index = UINT32_MAX;
  bool valid() const { return index != UINT32_MAX; }
  bool operator==(const registry_slot&) const = default;
};

/// Result of add(): the slot and the generation the window was published with.
struct registry_publication {
  registry_slot slot;
  uint64_t generation = 0;
};

/// A consistent copy of one non-free slot, read in-process (tests, diagnostics).
struct registry_record {
  registry_slot slot;
  registry_state state = registry_state::free;
  uint64_t generation = 0;
  uint64_t sequence = 0;
  registry_window window;
};

class registry_writer {
 public:
  /// Process-wide default capacity of the global registry (entries are reserved virtually with
  /// MAP_NORESERVE; only pages up to the high-water mark are ever touched).
  static constexpr uint32_t default_capacity = 65536;

  /// Binds a writer to `header` (which must outlive it) and initializes the header's constant
  /// fields. The entry array (capacity * 128 bytes) is mapped on the first add().
  registry_writer(jitunwind_registry_header& header, uint32_t capacity);
  ~registry_writer();
  registry_writer(const registry_writer&) = delete;
  registry_writer& operator=(const registry_writer&) = delete;

  /// Publishes a new live window in a free slot with a fresh generation.
  /// Errors: invalid_argument (empty or wrapping text range, SFrame size without address),
  /// limit_exceeded (all `capacity` slots in use), no_memory (the entry array cannot be mapped).
  result<registry_publication> add(const registry_window& window, uint64_t generation = 0);

  /// Atomically replaces a live or retired slot's contents (text, SFrame, id, abi), makes it
  /// live and gives it a fresh generation, which is returned. The memory the slot pointed to may
  /// be changed or freed once update() has returned (readers detect the change).
  /// Errors: invalid_argument (bad window, as add), bad_state (slot not in use).
  result<uint64_t> update(registry_slot slot, const registry_window& window,
                          uint64_t generation = 0);

  /// For changing the pointed-to memory in place: marks the slot as being written (readers retry
  /// or skip it) until commit_update(), which then behaves like update(). Nothing else may
  /// change the slot in between. Errors: bad_state (slot not in use).
  result<void> begin_update(registry_slot slot);
  result<uint64_t> commit_update(registry_slot slot, const registry_window& window,
                                 uint64_t generation = 0);

  /// Live -> retired: readers stop treating the window as live; the generation is kept and the
  /// memory must stay valid until update() or release(). Errors: bad_state (not live).
  result<void> retire(registry_slot slot);

  /// Any used state -> free; the slot may be handed out again by add(). The window's memory may
  /// be reused once release() has returned. Errors: bad_state (slot already free / not issued).
  result<void> release(registry_slot slot);

  /// Reads every non-free slot with the seqlock protocol (C++ atomics; the same protocol an
  /// external reader follows on copied bytes). Skips slots that stay busy for many attempts.
  std::vector<registry_record> read_local() const;

  /// State and generation of one slot (consistent copy), for tests.
  result<registry_record> read_slot(registry_slot slot) const;

  uint32_t capacity() const { return capacity_; }
  const jitunwind_registry_header& header() const { return header_; }
  /// Address of the entry array (0 before the first add()).
  uint64_t entries_address() const;

 private:
  jitunwind_registry_entry* entry(registry_slot slot) const;
  result<void> ensure_storage();  // called with mutex_ held
  uint64_t lock_slot(jitunwind_registry_entry& e) const;
  void unlock_slot(jitunwind_registry_entry& e, uint64_t locked_seq, bool changed);
  void store_window(jitunwind_registry_entry& e, const registry_window& w, uint64_t generation,
                    registry_state state);

  jitunwind_registry_header& header_;
  const uint32_t capacity_;
  jitunwind_registry_entry* entries_ = nullptr;  // set once under mutex_ (add)
  std::mutex mutex_;                             // slot allocation only
  std::vector<uint32_t> free_slots_;             // min-heap: reuse the lowest index first
  uint32_t high_water_ = 0;
};

/// The exported `jitunwind_registry` object itself.
jitunwind_registry_header& registry_header();

/// The process-wide registry bound to the exported `jitunwind_registry` object. Created on first
/// use, never destroyed (threads may publish until the very end of the process).
registry_writer& registry();

/// Generations are unique in the process and increase: every publication of a window (registry
/// entry, USDT event, kernel registration) is keyed by (window id, generation). A caller may pass
/// its own generation from here to add()/update(); 0 means "take the next one".
uint64_t next_publication_generation() noexcept;

/// Validates a window description (shared by add/update and by tests).
result<void> validate_window(const registry_window& window);

}  // namespace jitunwind::detail
