// Private: memory for code windows and their SFrame buffers.
//
// Owned windows map code and SFrame buffers in one reservation so the SFrame is always within
// ±2 GiB of the code. page_flip: code pages start RW (never executable while writable) and are
// switched to RX by `make_executable`. Alias layouts: the code pages are mapped twice (RX for
// running, RW for writing; a memfd, or shared anonymous memory duplicated with mremap) and
// protections never change.
#pragma once

#include <jitunwind/result.h>
#include <jitunwind/window.h>

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

/// An owned window's mappings, laid out as `code_layout` says.
class owned_memory {
 public:
  static result<owned_memory> create(size_t code_capacity, size_t sframe_capacity,
                                     code_layout layout);
  owned_memory() = default;
  owned_memory(owned_memory&& other) noexcept;
  owned_memory& operator=(owned_memory&& other) noexcept;
  ~owned_memory();

  uint64_t code_address() const noexcept { return reinterpret_cast<uint64_t>(exec_); }
  size_t code_capacity() const noexcept { return code_capacity_; }
  /// Where code that will run at `address` is written.
  uint8_t* writable_for(uint64_t address) const noexcept;
  code_layout layout() const noexcept { return layout_; }
  /// Code is written through a separate RW view (memfd_alias, shared_alias): protections never
  /// change and functions pack tightly.
  bool aliased() const noexcept { return write_alias_ != nullptr; }
  const sframe_buffers& sframe() const noexcept { return sframe_; }
  /// Whether this memory can serve a window created with these (page-rounded) capacities.
  bool fits(size_t code_capacity, size_t sframe_each, code_layout layout) const noexcept {
    return exec_ != nullptr && code_capacity == code_capacity_ &&
           sframe_each == sframe_.capacity() && layout == layout_;
  }

  /// Switches [offset, offset+len) (page-rounded) of the code to RX (no-op for alias layouts).
  result<void> make_executable(size_t offset, size_t len);
  /// Writes `bytes` at code offset `offset`, W^X-safe. `published`: the bytes are in pages made
  /// executable (page_flip flips them RW and back). Alias layouts store at most 8 bytes inside
  /// one aligned 8-byte word atomically. Every thread then serializes (membarrier SYNC_CORE).
  result<void> patch(size_t offset, std::span<const uint8_t> bytes, bool published);
  /// Back to a writable, non-executable window for reuse after the grace period: the first
  /// `used` bytes (what was ever allocated) become int3, so a stale jump into old code traps.
  /// The pages stay resident: a reused window does not pay page faults again.
  result<void> wipe(size_t used);
  /// For a session that never puts code where code was (address_reuse off), after `wipe`:
  /// moves the pages, still resident, to a fresh range (this memory then serves the next
  /// window there) and leaves the old range reserved, empty and inaccessible for the life of
  /// the process. `unsupported` if the pages cannot be moved (alias layouts, a kernel without
  /// MREMAP_DONTUNMAP): then use `release_reserving`.
  result<void> move_away();
  /// Gives the memory back but keeps the address range reserved (inaccessible, no memory) for
  /// the life of the process, so that no later mapping can put code there.
  void release_reserving() noexcept;

 private:
  void release() noexcept;

  uint8_t* exec_ = nullptr;  // start of the reservation: code, then SFrame buffers
  size_t reservation_ = 0;
  size_t code_capacity_ = 0;
  uint8_t* write_alias_ = nullptr;  // alias layouts only
  int memfd_ = -1;
  code_layout layout_ = code_layout::page_flip;
  sframe_buffers sframe_;
};

/// Makes every thread of the process execute a serializing instruction before it runs user
/// code again (membarrier SYNC_CORE): what the x86 cross-modifying-code rules ask of the
/// threads that run modified code. false if the kernel cannot.
bool sync_all_cores() noexcept;

}  // namespace jitunwind::detail
