// Private: SFrame buffers for described windows, placed within SFrame's reach (±2 GiB) of the
// runtime's code.
//
// Room is found by reading the address space (/proc/self/maps) and taking the free gap nearest
// to the code, not by trying a list of hints. Buffers of small windows are carved out of shared
// arenas (one mapping serves many windows), and freed buffers go back to their arena for the
// next window of the same size: their pages stay faulted in.
#pragma once

#include <jitunwind/result.h>

#include "window/code_memory.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace jitunwind::detail {

/// Maps `len` bytes (page multiple) RW at the free address nearest to [text_start, text_end)
/// such that text and mapping together span less than 2 GiB. Errors: `out_of_range` (no gap
/// big enough in reach: the message gives the largest one), `no_memory` (mmap refused).
result<uint8_t*> map_within_reach(uint64_t text_start, uint64_t text_size, size_t len);

/// Two SFrame buffers of one described window, inside an arena of `sframe_space`.
struct sframe_block {
  sframe_buffers buffers;
  uint32_t arena = UINT32_MAX;  // index in sframe_space; UINT32_MAX: none
  size_t offset = 0;
  size_t length = 0;  // both buffers
  bool valid() const noexcept { return arena != UINT32_MAX; }
};

/// The session's SFrame buffers of described windows. Not thread-safe (the session locks).
/// A window whose buffers need a mapping of their own (more than a quarter of an arena) leaves
/// it mapped when freed, for the next window of that size (at most max_idle_own are kept).
class sframe_space {
 public:
  sframe_space() = default;
  sframe_space(const sframe_space&) = delete;
  sframe_space& operator=(const sframe_space&) = delete;
  ~sframe_space();

  /// Two buffers of `each` bytes (rounded up to 64) within reach of the text.
  result<sframe_block> take(uint64_t text_start, uint64_t text_size, size_t each);
  /// The block's bytes may serve another window (the caller made sure nobody reads them).
  void give_back(const sframe_block& b);

  /// Mappings made so far and bytes in them (tests, diagnostics).
  size_t arenas() const noexcept;
  size_t mapped_bytes() const noexcept;

  /// Size of a shared arena; blocks larger than a quarter of it get a mapping of their own.
  static constexpr size_t arena_size = size_t{1} << 20;

 private:
  struct arena {
    uint8_t* base = nullptr;
    size_t size = 0;
    size_t bump = 0;   // bytes carved so far
    size_t live = 0;   // blocks handed out
    bool own = false;  // one block's own mapping: unmapped when given back
    std::map<size_t, std::vector<size_t>> free_blocks;  // length -> offsets
  };
  std::vector<arena> arenas_;  // an unmapped own arena leaves an empty entry (reused)
  // Own arenas given back and kept mapped for the next window of their size.
  static constexpr size_t max_idle_own = 2;
  size_t idle_own_ = 0;
};

}  // namespace jitunwind::detail
