// Private: the GDB JIT object of one code window, built to grow in place.
//
// Building and registering one ELF object per publish cost more than the rest of a publish at
// one function per publish (docs/performance.md). A window's functions come in address order, so
// its object is laid out with room to grow instead: ELF header, section headers and `.shstrtab`
// first, then `.eh_frame`, `.symtab` and `.strtab`, each with spare capacity. Adding functions
// writes only their FDEs, symbols and names behind what is there and then the sections' sizes;
// nothing moves. The bytes gdb reads (`data()`, `capacity()`) stay where they are for the life of
// the object; only a copy (grown(), without()) has other ones.
//
// A debugger may stop the process at any instruction and read the object (gdb reads the whole
// descriptor list when it attaches): the new bytes are written before the sizes that make them
// part of a section, so a reader sees the object before or after the append, or with names and
// FDEs it has no symbol for yet, never a symbol without its name.
#pragma once

#include <jitunwind/cfi.h>
#include <jitunwind/result.h>

#include "gdbjit/gdbjit.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace jitunwind::detail::gdbjit {

/// The checks every object's batch passes (the messages name the function), and what laying it
/// out needs.
struct batch_facts {
  uint64_t lo = 0, hi = 0;  ///< the batch's code range
  size_t name_bytes = 0;    ///< names with their NULs
  /// The batch in address order (empty when it already is: then the span's order is used).
  std::vector<const function_symbol*> order;
  const function_symbol& at(std::span<const function_symbol> f, size_t i) const {
    return order.empty() ? f[i] : *order[i];
  }
};
result<batch_facts> check_batch(std::span<const function_symbol> functions);

class growing_object {
 public:
  /// An object holding `functions`, with room for `room` functions like them in all.
  static result<std::unique_ptr<growing_object>> create(cfi::encoder& enc, uint16_t machine,
                                                        std::span<const function_symbol> functions,
                                                        size_t room = 0);

  /// Adds `functions` in place. false (nothing changed) when they do not fit or start before the
  /// object's first function: the caller moves to grown() or another object. The encoder is
  /// cleared and reused (its CIE must be the one this object was created with).
  result<bool> append(cfi::encoder& enc, std::span<const function_symbol> functions);

  /// A copy with room for `functions` and about as many again besides what it holds.
  result<std::unique_ptr<growing_object>> grown(cfi::encoder& enc,
                                                std::span<const function_symbol> functions) const;
  /// A copy without the function starting at `start` (its symbol, name and FDE). nullptr when
  /// no function starts there.
  std::unique_ptr<growing_object> without(uint64_t start) const;

  size_t function_count() const noexcept { return functions_.size(); }
  /// What the debugger reads: the whole capacity (bytes past the sections are zero).
  const uint8_t* data() const noexcept { return buf_.get(); }
  size_t capacity() const noexcept { return capacity_; }

 private:
  struct record {
    uint64_t start;
    uint32_t fde_offset;  // in .eh_frame
    uint32_t fde_size;    // 0: no FDE
  };
  struct sizes {
    size_t eh_frame, symbols, names;  // capacities: bytes, entries (with the null one), bytes
  };
  growing_object(uint16_t machine, const sizes& cap, std::span<const uint8_t> cie, uint64_t lo);
  /// Writes the batch behind what is there; the caller checked that it fits.
  void put(cfi::encoder& enc, std::span<const function_symbol> functions, const batch_facts& b);
  /// Makes what put() wrote part of the sections (sizes last, in an order a reader can stop at).
  void commit(uint64_t hi);
  void write_headers(uint16_t machine);
  size_t symtab_offset() const noexcept;
  size_t strtab_offset() const noexcept;

  std::unique_ptr<uint8_t[]> buf_;
  size_t capacity_ = 0;
  uint16_t machine_ = 0;
  sizes cap_{};
  size_t cie_size_ = 0;
  size_t eh_size_ = 0;      // .eh_frame bytes (CIE + FDEs)
  size_t symbols_ = 1;      // .symtab entries, the null one included
  size_t names_size_ = 1;   // .strtab bytes, the leading NUL included
  uint64_t lo_ = 0, hi_ = 0;
  std::vector<record> functions_;  // in symbol order
};

/// Whether a debugger has a software breakpoint on the function at `code` (gdb and LLDB keep one
/// on `__jit_debug_register_code` while the process runs). A uprobe shows the same.
bool breakpoint_at(const void* code) noexcept;

}  // namespace jitunwind::detail::gdbjit
