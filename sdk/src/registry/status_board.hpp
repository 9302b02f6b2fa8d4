// The publisher status area of the registry (jitunwind/registry_abi.h, docs/registry-abi.md,
// "Publisher status"): every session writes its publishers' states there, so that a tool outside
// the process (`jitunwind windows list`) shows what session::status() says inside it.
//
// Thread-safety: any thread may call any function. Records are written under the seqlock of the
// registry's entries; acquire/release take a mutex. Nothing here allocates after the first use,
// and nothing fails: a full area leaves the record out (counted, the tools say so).
#pragma once

#include <jitunwind/registry_abi.h>

#include <cstdint>
#include <string_view>

namespace jitunwind::detail {

/// Index of a record, valid from acquire() to release().
struct status_slot {
  uint32_t index = UINT32_MAX;
  bool valid() const { return index != UINT32_MAX; }
};

class status_board {
 public:
  /// Records in the process-wide area (a session has at most six publishers).
  static constexpr uint32_t capacity = 96;

  /// The area bound to the exported registry header's `status` field (set on first acquire).
  static status_board& global();

  /// A free record for `publisher` (its jitunwind::publisher value) of session `session` (> 0);
  /// an invalid slot when all are taken.
  status_slot acquire(uint64_t session, uint32_t publisher);
  /// Rewrites the record: state (jitunwind::publisher_state value), warnings so far, the note or
  /// error, the last warning (texts cut to their fields at a UTF-8 character boundary).
  void write(status_slot slot, uint32_t state, uint64_t warnings, std::string_view message,
             std::string_view last_warning);
  /// Frees the record (the session is gone).
  void release(status_slot slot);

  /// Records that could not be acquired so far.
  uint64_t refused() const noexcept;

  status_board(jitunwind_registry_header& registry, jitunwind_registry_status_header& area,
               jitunwind_registry_status_record* records);

 private:
  jitunwind_registry_header& registry_;
  jitunwind_registry_status_header& area_;
  jitunwind_registry_status_record* records_;
};

/// The longest prefix of `text` of at most `limit` bytes that does not end inside a UTF-8
/// character (a byte sequence that is not UTF-8 is cut anywhere).
std::string_view cut_utf8(std::string_view text, size_t limit) noexcept;

}  // namespace jitunwind::detail
