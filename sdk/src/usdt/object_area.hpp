// The address range a provider keeps for as long as it or any handle of its probes exists.
//
// Why the SDK maps its generated object itself instead of using dlopen: dlclose unmaps the
// object's pages, so a probe handle that pointed straight at its semaphore would read unmapped
// memory after an unload, and `enabled()` needed a second, dependent load through a slot that
// unload could redirect. Here the object is always mapped so that its `.probes` section starts
// at the same address (`semaphores()`), and unload replaces the object with inert pages instead
// of a hole. A handle therefore keeps a plain pointer to its semaphore and `enabled()` is one
// load, like a compiled-in `sys/sdt.h` probe.
//
//   [start, semaphores())           the object's R and R X segments (headers, symbols, stubs)
//   [semaphores(), end)             its RW segment: .probes (u16 k at semaphores() + 2k), .dynamic
//
// Inert state (before the first load, after unload): the semaphore pages read zero, the pages
// where stubs were hold `ret` instructions (a `fire()` that raced the unload returns at once),
// everything else is PROT_NONE.
#pragma once

#include "usdt/elf_object.hpp"

#include <jitunwind/result.h>

#include <cstdint>
#include <memory>
#include <string>

namespace jitunwind::usdt::detail {

class object_area {
 public:
  /// Reserves address space for any object of up to `max_probes` probes (no memory is
  /// committed). `io_error` if the kernel refuses.
  static result<std::shared_ptr<object_area>> reserve(const std::string& provider);

  object_area(const object_area&) = delete;
  object_area& operator=(const object_area&) = delete;
  ~object_area();

  /// Semaphore `index` (< max_probes); stable for the area's life, reads 0 while inert.
  const volatile uint16_t* semaphore(uint32_t index) const {
    return reinterpret_cast<const volatile uint16_t*>(semaphores_) + index;
  }

  /// Maps the PT_LOAD segments of the object in `fd` (written with `layout`) so that its
  /// `.probes` section starts at the semaphores' address. Returns the load address (what a
  /// link-time address is relative to). On error the area is inert again.
  /// `limit_exceeded` (object too big for the area), `io_error` (mmap), with `what` (the
  /// object's path) in the message.
  result<uintptr_t> map(int fd, const object_layout& layout, const std::string& what);

  /// Replaces the mapped object with the inert pages. No-op when nothing is mapped.
  result<void> unmap();

 private:
  object_area() = default;
  result<void> make_inert(uintptr_t from, uintptr_t text_start, uintptr_t text_end);

  std::string provider_;
  uintptr_t start_ = 0;       // reservation
  uintptr_t semaphores_ = 0;  // start_ + below
  uintptr_t end_ = 0;
  // The mapped object (0 when inert).
  uintptr_t base_ = 0;
  uintptr_t text_start_ = 0, text_end_ = 0;
};

}  // namespace jitunwind::usdt::detail
