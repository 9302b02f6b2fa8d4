// The read protocol of docs/registry-abi.md over a memory_source: decode and validate the
// header (hostile data), copy the entry array three times, accept entries whose sequence counter
// was the same even value before and after, re-read the others one by one.
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/result.h>

#include "remote/target_memory.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace jitunwind::remote::detail {

/// Hard limits a reader applies to values that come from the target.
inline constexpr uint64_t max_entries = uint64_t{1} << 20;
inline constexpr uint32_t max_struct_size = 4096;

struct header_fields {
  uint32_t version = 0;
  uint32_t header_size = 0;
  uint32_t entry_size = 0;
  uint32_t capacity = 0;
  uint64_t entries = 0;
  uint64_t slot_count = 0;
  uint64_t change_count = 0;
  uint64_t writer_pid = 0;
};

/// Decodes and validates a 64-byte header copy. `where` names it in errors
/// ("pid 12: registry at 0x7f.. in /usr/lib/libjitunwind.so").
result<header_fields> decode_header(std::span<const uint8_t> bytes, const std::string& where);

/// Decodes one stable entry copy (bytes.size() >= 64). Errors: malformed state or ABI values.
result<window_record> decode_entry(std::span<const uint8_t> bytes, const std::string& where,
                                   uint32_t slot);

/// Buffers for the three copies of the entry array, kept between reads (allocating 3 x 64 KiB
/// per read costs more in page faults than the copies themselves).
struct read_scratch {
  std::vector<uint8_t> before, body, after;
};

/// Appends the windows of the registry at `address` to `out` (and counts retries).
result<void> read_registry_at(const memory_source& memory, uint64_t address,
                              const std::string& object_path, const read_options& options,
                              registry_snapshot& out, read_scratch& scratch);

/// Reads `w`'s SFrame bytes, then re-validates the entry (same even sequence value).
result<std::vector<uint8_t>> read_sframe_checked(const memory_source& memory,
                                                 const window_record& w,
                                                 const read_options& options);

/// Appends the publisher records of the status area the registry header at `address` points
/// to (none: nothing). Errors: the registry header cannot be read or is invalid; a bad area or
/// record goes to out.skipped.
result<void> read_publishers_at(const memory_source& memory, uint64_t address,
                                const std::string& object_path, unsigned max_attempts,
                                publisher_snapshot& out);

/// "pid N: registry at 0xADDR in PATH".
std::string describe_registry(pid_t pid, uint64_t address, const std::string& object_path);

}  // namespace jitunwind::remote::detail
