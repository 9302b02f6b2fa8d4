#include "registry/registry_writer.hpp"

#include "common/error.hpp"

#include <sys/mman.h>
#include <sys/sdt.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

namespace jitunwind::detail {

uint64_t next_publication_generation() noexcept {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Every field of the shared structures is accessed through atomic_ref: other threads of this
// process may read them concurrently (read_local), and the accesses must be single, untorn
// instructions the compiler cannot split, merge or reorder across the fences below.
template <class T>
std::atomic_ref<T> at(T& field) {
  return std::atomic_ref<T>(field);
}
template <class T>
std::atomic_ref<T> at(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field));
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

constexpr unsigned local_read_attempts = 1000;

// The probe jitunwind_registry:change (docs/registry-abi.md, "Being told of changes"): one
// site (noinline), a one-byte nop without a semaphore, so that a tracer without watchpoints can
// stop every thread that changed the registry with a software breakpoint, whatever else the
// SDK publishes.
[[gnu::noinline]] void announce_change(const jitunwind_registry_header* header,
                                       uint64_t change_count) {
  STAP_PROBE2(jitunwind_registry, change, header, change_count);
}

}  // namespace

result<void> validate_window(const registry_window& w) {
  if (w.text_size == 0) {
    return make_error(errc::invalid_argument, "registry: window %llu: empty text range at 0x%llx",
                      static_cast<unsigned long long>(w.window_id),
                      static_cast<unsigned long long>(w.text_start));
  }
  if (w.text_start == 0 || w.text_start + w.text_size < w.text_start) {
    return make_error(errc::invalid_argument,
                      "registry: window %llu: text range 0x%llx + 0x%llx is null or wraps",
                      static_cast<unsigned long long>(w.window_id),
                      static_cast<unsigned long long>(w.text_start),
                      static_cast<unsigned long long>(w.text_size));
  }
  if (w.sframe_version > 3) {
    return make_error(errc::invalid_argument,
                      "registry: window %llu: SFrame version %u (0 = not said, 1, 2 or 3)",
                      static_cast<unsigned long long>(w.window_id), w.sframe_version);
  }
  if ((w.sframe_address == 0) != (w.sframe_size == 0) ||
      w.sframe_address + w.sframe_size < w.sframe_address) {
    return make_error(errc::invalid_argument,
                      "registry: window %llu: SFrame 0x%llx + 0x%llx: address and size must be "
                      "both zero or both set, without wrapping",
                      static_cast<unsigned long long>(w.window_id),
                      static_cast<unsigned long long>(w.sframe_address),
                      static_cast<unsigned long long>(w.sframe_size));
  }
  switch (w.code_abi) {
    case abi::aarch64_be:
    case abi::aarch64_le:
    case abi::amd64:
      break;
    default:
      return make_error(errc::invalid_argument, "registry: window %llu: unknown ABI %u",
                        static_cast<unsigned long long>(w.window_id),
                        static_cast<unsigned>(w.code_abi));
  }
  return ok_result();
}

registry_writer::registry_writer(jitunwind_registry_header& header, uint32_t capacity)
    : header_(header), capacity_(capacity) {
  static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);
  static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
  std::memcpy(header_.magic, JITUNWIND_REGISTRY_MAGIC, sizeof(header_.magic));
  at(header_.version).store(JITUNWIND_REGISTRY_VERSION, std::memory_order_relaxed);
  at(header_.header_size).store(sizeof(jitunwind_registry_header), std::memory_order_relaxed);
  at(header_.entry_size).store(sizeof(jitunwind_registry_entry), std::memory_order_relaxed);
  at(header_.capacity).store(capacity_, std::memory_order_relaxed);
  // A registry inherited over fork() keeps its storage; only a fresh one starts empty.
  if (at(header_.entries).load(std::memory_order_acquire) != 0) {
    entries_ = reinterpret_cast<jitunwind_registry_entry*>(header_.entries);
    high_water_ = static_cast<uint32_t>(at(header_.slot_count).load(std::memory_order_relaxed));
  }
}

registry_writer::~registry_writer() {
  if (entries_ != nullptr) {
    at(header_.slot_count).store(0, std::memory_order_release);
    at(header_.entries).store(0, std::memory_order_release);
    ::munmap(entries_, size_t{capacity_} * sizeof(jitunwind_registry_entry));
  }
}

uint64_t registry_writer::entries_address() const {
  return at(header_.entries).load(std::memory_order_acquire);
}

jitunwind_registry_entry* registry_writer::entry(registry_slot slot) const {
  // Through the header (acquire), not entries_: entries_ belongs to add() under the mutex, and
  // this may run on a thread that never took it.
  const uint64_t base = at(header_.entries).load(std::memory_order_acquire);
  if (base == 0 || slot.index >= capacity_) return nullptr;
  if (slot.index >= at(header_.slot_count).load(std::memory_order_acquire)) return nullptr;
  return reinterpret_cast<jitunwind_registry_entry*>(base) + slot.index;
}

result<void> registry_writer::ensure_storage() {
  if (entries_ != nullptr) return ok_result();
  const size_t bytes = size_t{capacity_} * sizeof(jitunwind_registry_entry);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return make_error(errc::no_memory, "registry: cannot map %zu bytes for %u entries: %s", bytes,
                      capacity_, std::strerror(errno));
  }
  entries_ = static_cast<jitunwind_registry_entry*>(p);
  at(header_.writer_pid).store(static_cast<uint64_t>(::getpid()), std::memory_order_relaxed);
  // Release: a reader that sees the pointer sees the (zeroed) array and the pid.
  at(header_.entries).store(reinterpret_cast<uint64_t>(p), std::memory_order_release);
  return ok_result();
}

// Seqlock write side (Boehm, "Can seqlocks get along with programming language memory
// models?"): counter to odd, release fence, relaxed field stores, counter to even with release.
// The CAS also serializes two writers of the same slot. On x86-64 all of it compiles to plain
// moves plus one lock cmpxchg, and TSO keeps the stores in program order for readers in other
// processes, which see bytes rather than atomics (docs/registry-abi.md, "Memory ordering").
uint64_t registry_writer::lock_slot(jitunwind_registry_entry& e) const {
  auto seq = at(e.seq);
  for (;;) {
    uint64_t s = seq.load(std::memory_order_relaxed);
    if ((s & 1) == 0 &&
        seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
      std::atomic_thread_fence(std::memory_order_release);
      return s + 1;
    }
    cpu_relax();
  }
}

void registry_writer::unlock_slot(jitunwind_registry_entry& e, uint64_t locked_seq, bool changed) {
  // Nothing changed (a refused operation): restore the old even value, so readers that copied
  // the slot meanwhile keep their (still correct) copy.
  at(e.seq).store(changed ? locked_seq + 1 : locked_seq - 1, std::memory_order_release);
  if (!changed) return;
  const uint64_t count = at(header_.change_count).fetch_add(1, std::memory_order_release) + 1;
  announce_change(&header_, count);
}

void registry_writer::store_window(jitunwind_registry_entry& e, const registry_window& w,
                                   uint64_t generation, registry_state state) {
  constexpr auto r = std::memory_order_relaxed;
  at(e.window_id).store(w.window_id, r);
  at(e.generation).store(generation, r);
  at(e.text_start).store(w.text_start, r);
  at(e.text_size).store(w.text_size, r);
  at(e.sframe_addr).store(w.sframe_address, r);
  at(e.sframe_size).store(w.sframe_size, r);
  at(e.state).store(static_cast<uint32_t>(state), r);
  at(e.abi).store(static_cast<uint32_t>(w.code_abi), r);
  at(e.sframe_version).store(w.sframe_version, r);
}

result<registry_publication> registry_writer::add(const registry_window& window,
                                                   uint64_t generation) {
  if (auto v = validate_window(window); !v) return std::move(v).error();
  std::lock_guard lock(mutex_);
  if (auto s = ensure_storage(); !s) return std::move(s).error();
  uint32_t index;
  if (!free_slots_.empty()) {
    std::pop_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
    index = free_slots_.back();
    free_slots_.pop_back();
  } else if (high_water_ < capacity_) {
    index = high_water_;
  } else {
    return make_error(errc::limit_exceeded,
                      "registry: all %u slots are in use; cannot publish window %llu (release "
                      "retired windows first)",
                      capacity_, static_cast<unsigned long long>(window.window_id));
  }
  jitunwind_registry_entry& e = entries_[index];
  const uint64_t locked = lock_slot(e);
  if (generation == 0) generation = next_publication_generation();
  store_window(e, window, generation, registry_state::live);
  if (index == high_water_) {
    // Readers are told to look at the slot while it is still locked (odd: they retry), so that
    // the change count moves only once the new window is both complete and in range. Raised
    // after the unlock, a reader woken by the count (a watchpoint, a poll) could read the old
    // range, and a later poll would see an unchanged count and never look again.
    ++high_water_;
    at(header_.slot_count).store(high_water_, std::memory_order_release);
  }
  unlock_slot(e, locked, true);
  return registry_publication{registry_slot{index}, generation};
}

result<uint64_t> registry_writer::update(registry_slot slot, const registry_window& window,
                                         uint64_t generation) {
  if (auto v = validate_window(window); !v) return std::move(v).error();
  jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::bad_state, "registry: update of slot %u, which was never issued",
                      slot.index);
  }
  const uint64_t locked = lock_slot(*e);
  if (at(e->state).load(std::memory_order_relaxed) == JITUNWIND_WINDOW_FREE) {
    unlock_slot(*e, locked, false);
    return make_error(errc::bad_state, "registry: update of free slot %u (window %llu)", slot.index,
                      static_cast<unsigned long long>(window.window_id));
  }
  if (generation == 0) generation = next_publication_generation();
  store_window(*e, window, generation, registry_state::live);
  unlock_slot(*e, locked, true);
  return generation;
}

result<void> registry_writer::begin_update(registry_slot slot) {
  jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::bad_state, "registry: begin_update of slot %u, which was never issued",
                      slot.index);
  }
  const uint64_t locked = lock_slot(*e);
  if (at(e->state).load(std::memory_order_relaxed) == JITUNWIND_WINDOW_FREE) {
    unlock_slot(*e, locked, false);
    return make_error(errc::bad_state, "registry: begin_update of free slot %u", slot.index);
  }
  return ok_result();  // the slot stays odd (locked) until commit_update
}

result<uint64_t> registry_writer::commit_update(registry_slot slot,
                                                const registry_window& window,
                                                uint64_t generation) {
  jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::bad_state, "registry: commit_update of slot %u, which was never issued",
                      slot.index);
  }
  const uint64_t locked = at(e->seq).load(std::memory_order_relaxed);
  if ((locked & 1) == 0) {
    return make_error(errc::bad_state, "registry: commit_update of slot %u without begin_update",
                      slot.index);
  }
  if (auto v = validate_window(window); !v) {
    // Keep the old contents but end the write section: the caller's in-place change is done.
    unlock_slot(*e, locked, true);
    return std::move(v).error();
  }
  if (generation == 0) generation = next_publication_generation();
  store_window(*e, window, generation, registry_state::live);
  unlock_slot(*e, locked, true);
  return generation;
}

result<void> registry_writer::retire(registry_slot slot) {
  jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::bad_state, "registry: retire of slot %u, which was never issued",
                      slot.index);
  }
  const uint64_t locked = lock_slot(*e);
  const uint32_t state = at(e->state).load(std::memory_order_relaxed);
  if (state != JITUNWIND_WINDOW_LIVE) {
    unlock_slot(*e, locked, false);
    return make_error(errc::bad_state, "registry: retire of slot %u in state %s (must be live)",
                      slot.index, state == JITUNWIND_WINDOW_FREE ? "free" : "retired");
  }
  at(e->state).store(JITUNWIND_WINDOW_RETIRED, std::memory_order_relaxed);
  unlock_slot(*e, locked, true);
  return ok_result();
}

result<void> registry_writer::release(registry_slot slot) {
  jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::bad_state, "registry: release of slot %u, which was never issued",
                      slot.index);
  }
  const uint64_t locked = lock_slot(*e);
  if (at(e->state).load(std::memory_order_relaxed) == JITUNWIND_WINDOW_FREE) {
    unlock_slot(*e, locked, false);
    return make_error(errc::bad_state, "registry: release of slot %u, which is already free",
                      slot.index);
  }
  store_window(*e, registry_window{}, 0, registry_state::free);
  at(e->abi).store(0, std::memory_order_relaxed);
  unlock_slot(*e, locked, true);
  std::lock_guard lock(mutex_);
  free_slots_.push_back(slot.index);
  std::push_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
  return ok_result();
}

namespace {

// Seqlock read side in C++ terms: acquire load of the counter, relaxed field loads, acquire
// fence, relaxed re-load of the counter; accept only an unchanged even value.
bool read_entry(const jitunwind_registry_entry& e, registry_record& out) {
  constexpr auto r = std::memory_order_relaxed;
  for (unsigned attempt = 0; attempt < local_read_attempts; ++attempt) {
    const uint64_t s1 = at(e.seq).load(std::memory_order_acquire);
    if (s1 & 1) {
      if (attempt > 8) std::this_thread::yield();
      continue;
    }
    registry_record rec;
    rec.window.window_id = at(e.window_id).load(r);
    rec.generation = at(e.generation).load(r);
    rec.window.text_start = at(e.text_start).load(r);
    rec.window.text_size = at(e.text_size).load(r);
    rec.window.sframe_address = at(e.sframe_addr).load(r);
    rec.window.sframe_size = at(e.sframe_size).load(r);
    const uint32_t state = at(e.state).load(r);
    const uint32_t abi_id = at(e.abi).load(r);
    rec.window.sframe_version = static_cast<uint8_t>(at(e.sframe_version).load(r));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (at(e.seq).load(r) != s1) continue;
    rec.state = static_cast<registry_state>(state);
    rec.window.code_abi = static_cast<abi>(abi_id);
    rec.sequence = s1;
    out = rec;
    return true;
  }
  return false;
}

}  // namespace

std::vector<registry_record> registry_writer::read_local() const {
  std::vector<registry_record> out;
  const uint64_t base = at(header_.entries).load(std::memory_order_acquire);
  if (base == 0) return out;
  const uint64_t count = at(header_.slot_count).load(std::memory_order_acquire);
  const auto* entries = reinterpret_cast<const jitunwind_registry_entry*>(base);
  for (uint64_t i = 0; i < count && i < capacity_; ++i) {
    registry_record rec;
    if (!read_entry(entries[i], rec) || rec.state == registry_state::free) continue;
    rec.slot = registry_slot{static_cast<uint32_t>(i)};
    out.push_back(rec);
  }
  return out;
}

result<registry_record> registry_writer::read_slot(registry_slot slot) const {
  const jitunwind_registry_entry* e = entry(slot);
  if (e == nullptr) {
    return make_error(errc::not_found, "registry: slot %u was never issued", slot.index);
  }
  registry_record rec;
  if (!read_entry(*e, rec)) {
    return make_error(errc::bad_state, "registry: slot %u stayed busy for %u attempts", slot.index,
                      local_read_attempts);
  }
  rec.slot = slot;
  return rec;
}

}  // namespace jitunwind::detail
