// Private: a jitdump reader for tests and tooling. Input is hostile: every size and offset is
// checked against the file before use; nothing is read out of bounds, nothing loops.
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace jitunwind::detail::jitdump {

struct parsed_header {
  uint32_t version = 0;
  uint32_t total_size = 0;
  uint32_t elf_mach = 0;
  uint32_t pid = 0;
  uint64_t timestamp = 0;
  uint64_t flags = 0;
  bool byte_swapped = false;  ///< written on a machine of the other byte order
};

struct parsed_record {
  uint32_t id = 0;
  uint32_t total_size = 0;
  uint64_t timestamp = 0;
  uint64_t file_offset = 0;  ///< of the record header
  // CODE_LOAD / CODE_MOVE
  uint32_t pid = 0, tid = 0;
  uint64_t vma = 0, code_addr = 0, code_size = 0, code_index = 0;
  uint64_t new_code_addr = 0;     ///< CODE_MOVE (code_addr holds old_code_addr)
  std::string name;               ///< CODE_LOAD
  std::span<const uint8_t> code;  ///< CODE_LOAD, into the parsed buffer
  // CODE_UNWINDING_INFO
  uint64_t unwinding_size = 0, eh_frame_hdr_size = 0, mapped_size = 0;
  std::span<const uint8_t> eh_frame, eh_frame_hdr;  ///< into the parsed buffer
  // CODE_DEBUG_INFO
  uint64_t debug_entries = 0;
};

struct parsed_dump {
  parsed_header header;
  std::vector<parsed_record> records;
  /// Bytes after the last complete record: a record cut short by a crash (perf stops there too).
  uint64_t truncated_tail = 0;
};

struct parse_limits {
  size_t max_records = 10'000'000;
};

/// Parses a whole dump held in `bytes` (spans in the result point into it).
/// malformed: bad magic, header or record sizes that cannot be right, a record whose body does
/// not match its type (message names the record index, file offset and values);
/// unsupported: a version other than 1 or unknown header flags;
/// limit_exceeded: more than limits.max_records records.
/// A final incomplete record is not an error (see truncated_tail).
result<parsed_dump> parse(std::span<const uint8_t> bytes, const parse_limits& limits = {});

const char* record_name(uint32_t id) noexcept;

}  // namespace jitunwind::detail::jitdump
