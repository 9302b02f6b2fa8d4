// Private: memory for code windows and their SFrame buffers.
//
// Owned windows map code and SFrame buffers in one reservation so the SFrame is always within
// ±2 GiB of the code. Code pages start RW (never executable while writable) and are switched to
// RX by `make_executable`; with dual mapping the code lives in a memfd mapped twice (RX for
// running, RW for writing) and protections never change.
#pragma once

#include <jitunwind/result.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace jitunwind::detail {

size_t page_size() noexcept;
size_t round_up(size_t v, size_t align) noexcept;

/// True if [a, a+len) and [b, b+len2) are within the reach of SFrame's signed 32-bit offsets.
bool within_sframe_reach(uint64_t text_start, uint64_t text_size, uint64_t sframe_start,
                         uint64_t sframe_size) noexcept;

/// Two SFrame buffers (double-buffered so a new section is built while the old one is in use).
class sframe_buffers {
 public:
  sframe_buffers() = default;
  sframe_buffers(uint8_t* base, size_t each) : base_(base), each_(each) {}
  size_t capacity() const noexcept { return each_; }
  uint8_t* buffer(int which) const noexcept { return base_ + static_cast<size_t>(which) * each_; }

 private:
  uint8_t* base_ = nullptr;
  size_t each_ = 0;
};

/// An owned window's mappings.
class owned_memory {
 public:
  static result<owned_memory> create(size_t code_capacity, size_t sframe_capacity, bool dual);
  owned_memory() = default;
  owned_memory(owned_memory&& other) noexcept;
  owned_memory& operator=(owned_memory&& other) noexcept;
  ~owned_memory();

  uint64_t code_address() const noexcept { return reinterpret_cast<uint64_t>(exec_); }
  size_t code_capacity() const noexcept { return code_capacity_; }
  /// Where code that will run at `address` is written.
  uint8_t* writable_for(uint64_t address) const noexcept;
  bool dual() const noexcept { return write_alias_ != nullptr; }
  const sframe_buffers& sframe() const noexcept { return sframe_; }
  /// Whether this memory can serve a window created with these (page-rounded) capacities.
  bool fits(size_t code_capacity, size_t sframe_each, bool dual) const noexcept {
    return exec_ != nullptr && code_capacity == code_capacity_ &&
           sframe_each == sframe_.capacity() && dual == this->dual();
  }

  /// Switches [offset, offset+len) (page-rounded) of the code to RX (no-op with dual mapping).
  result<void> make_executable(size_t offset, size_t len);
  /// Back to a writable, non-executable window for reuse after the grace period: the first
  /// `used` bytes (what was ever allocated) become int3, so a stale jump into old code traps.
  /// The pages stay resident: a reused window does not pay page faults again.
  result<void> wipe(size_t used);

 private:
  void release() noexcept;

  uint8_t* exec_ = nullptr;         // start of the reservation: code, then SFrame buffers
  size_t reservation_ = 0;
  size_t code_capacity_ = 0;
  uint8_t* write_alias_ = nullptr;  // dual mapping only
  int memfd_ = -1;
  sframe_buffers sframe_;
};

/// SFrame buffers for a described window, placed within reach of the runtime's code.
class near_buffers {
 public:
  static result<near_buffers> create(uint64_t text_start, size_t text_size, size_t each);
  near_buffers() = default;
  near_buffers(near_buffers&& other) noexcept;
  near_buffers& operator=(near_buffers&& other) noexcept;
  ~near_buffers();
  const sframe_buffers& sframe() const noexcept { return sframe_; }
  /// The whole mapping (both buffers); 0 when empty.
  uint64_t address() const noexcept { return reinterpret_cast<uint64_t>(base_); }
  size_t length() const noexcept { return len_; }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
  sframe_buffers sframe_;
};

}  // namespace jitunwind::detail
