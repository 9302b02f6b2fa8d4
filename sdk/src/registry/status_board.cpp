#include "registry/status_board.hpp"

#include "registry/registry_writer.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>

namespace jitunwind::detail {

namespace {

template <class T>
std::atomic_ref<T> at(T& field) {
  return std::atomic_ref<T>(field);
}

// The area lives in .bss next to the registry object: never freed, so its address in the
// registry header stays valid for the life of the process (sessions end in static destructors).
struct area {
  alignas(64) jitunwind_registry_status_header header;
  jitunwind_registry_status_record records[status_board::capacity];  // at header_size
};
static_assert(offsetof(area, records) == sizeof(jitunwind_registry_status_header));
area g_area;
std::mutex g_mutex;       // acquire / release
std::atomic<uint64_t> g_refused{0};

// Bytes copied into a text field with relaxed atomic stores, 8 at a time where they fit: a reader
// in this process may copy the record concurrently (the seqlock tells it to discard the copy).
void store_text(char* field, size_t field_size, std::string_view text) {
  for (size_t i = 0; i < field_size; ++i)
    at(field[i]).store(i < text.size() ? text[i] : '\0', std::memory_order_relaxed);
}

// Seqlock write side, as registry_writer's: counter odd (CAS: two threads of one session may
// report at once), release fence; the caller stores the fields with relaxed atomics and calls
// unlock, which makes the counter even with release and counts the change.
uint64_t lock_record(jitunwind_registry_status_record& r) {
  auto seq = at(r.seq);
  uint64_t s = seq.load(std::memory_order_relaxed);
  while ((s & 1) != 0 ||
         !seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
    std::this_thread::yield();
    s = seq.load(std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_release);
  return s + 1;
}

void unlock_record(jitunwind_registry_status_record& r, uint64_t locked,
                   jitunwind_registry_status_header& area) {
  at(r.seq).store(locked + 1, std::memory_order_release);
  at(area.change_count).fetch_add(1, std::memory_order_release);
}

}  // namespace

std::string_view cut_utf8(std::string_view text, size_t limit) noexcept {
  if (text.size() <= limit) return text;
  size_t end = limit;
  // Back up over continuation bytes (10xxxxxx) to the start of the character that would be cut.
  size_t back = 0;
  while (end > 0 && back < 3 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
    ++back;
  }
  if ((static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) end = limit;  // not UTF-8
  return text.substr(0, end);
}

status_board& status_board::global() {
  // Leaked on purpose, like the registry writer: sessions may end in static destructors.
  static status_board* const board =
      new status_board(registry_header(), g_area.header, g_area.records);
  return *board;
}

status_board::status_board(jitunwind_registry_header& registry,
                           jitunwind_registry_status_header& area,
                           jitunwind_registry_status_record* records)
    : registry_(registry), area_(area), records_(records) {
  // A board inherited over fork() (the same static area) keeps its records.
  if (std::memcmp(area_.magic, JITUNWIND_REGISTRY_STATUS_MAGIC, 8) == 0) return;
  std::memcpy(area_.magic, JITUNWIND_REGISTRY_STATUS_MAGIC, 8);
  at(area_.header_size).store(sizeof(jitunwind_registry_status_header), std::memory_order_relaxed);
  at(area_.record_size).store(sizeof(jitunwind_registry_status_record), std::memory_order_relaxed);
  at(area_.capacity).store(capacity, std::memory_order_relaxed);
}

status_slot status_board::acquire(uint64_t session, uint32_t publisher) {
  std::lock_guard lock(g_mutex);
  const uint32_t used = at(area_.record_count).load(std::memory_order_relaxed);
  uint32_t index = used;
  for (uint32_t i = 0; i < used; ++i) {
    if (at(records_[i].session).load(std::memory_order_relaxed) == 0) {
      index = i;
      break;
    }
  }
  if (index == capacity) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  jitunwind_registry_status_record& r = records_[index];
  const uint64_t locked = lock_record(r);
  at(r.session).store(session, std::memory_order_relaxed);
  at(r.publisher).store(publisher, std::memory_order_relaxed);
  at(r.state).store(0, std::memory_order_relaxed);
  at(r.warnings).store(0, std::memory_order_relaxed);
  at(r.message_size).store(0, std::memory_order_relaxed);
  at(r.warning_size).store(0, std::memory_order_relaxed);
  // The new record is inside [0, record_count) before the change is counted (while still odd),
  // and the area is announced once it holds a record (docs/registry-abi.md, "Publisher status").
  if (index == used) at(area_.record_count).store(used + 1, std::memory_order_release);
  unlock_record(r, locked, area_);
  if (at(registry_.status).load(std::memory_order_relaxed) == 0)
    at(registry_.status).store(reinterpret_cast<uint64_t>(&area_), std::memory_order_release);
  return {index};
}

void status_board::write(status_slot slot, uint32_t state, uint64_t warnings,
                         std::string_view message, std::string_view last_warning) {
  if (!slot.valid() || slot.index >= capacity) return;
  jitunwind_registry_status_record& r = records_[slot.index];
  message = cut_utf8(message, sizeof(r.message));
  last_warning = cut_utf8(last_warning, sizeof(r.last_warning));
  const uint64_t locked = lock_record(r);
  at(r.state).store(state, std::memory_order_relaxed);
  at(r.warnings).store(warnings, std::memory_order_relaxed);
  at(r.message_size).store(static_cast<uint16_t>(message.size()), std::memory_order_relaxed);
  at(r.warning_size).store(static_cast<uint16_t>(last_warning.size()), std::memory_order_relaxed);
  store_text(r.message, sizeof(r.message), message);
  store_text(r.last_warning, sizeof(r.last_warning), last_warning);
  unlock_record(r, locked, area_);
}

void status_board::release(status_slot slot) {
  if (!slot.valid() || slot.index >= capacity) return;
  std::lock_guard lock(g_mutex);
  jitunwind_registry_status_record& r = records_[slot.index];
  const uint64_t locked = lock_record(r);
  at(r.session).store(0, std::memory_order_relaxed);
  unlock_record(r, locked, area_);
}

uint64_t status_board::refused() const noexcept {
  return g_refused.load(std::memory_order_relaxed);
}

}  // namespace jitunwind::detail
