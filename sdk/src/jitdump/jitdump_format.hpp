// Private: the jitdump file format (tools/perf/Documentation/jitdump-specification.txt).
// All fields are in the writer's byte order; the magic tells a reader which one.
#pragma once

#include <cstdint>

namespace jitunwind::detail::jitdump {

inline constexpr uint32_t magic = 0x4A695444;  // "JiTD" read as a little-endian u32 is "DTiJ"
inline constexpr uint32_t magic_swapped = 0x4454694A;
inline constexpr uint32_t version = 1;
inline constexpr uint64_t flag_arch_timestamp = 1;

enum record_id : uint32_t {
  code_load = 0,
  code_move = 1,
  code_debug_info = 2,
  code_close = 3,
  code_unwinding_info = 4,
};

struct file_header {  // 40 bytes
  uint32_t magic;
  uint32_t version;
  uint32_t total_size;
  uint32_t elf_mach;
  uint32_t pad1;
  uint32_t pid;
  uint64_t timestamp;
  uint64_t flags;
};
static_assert(sizeof(file_header) == 40);

struct record_header {  // 16 bytes, counted in total_size
  uint32_t id;
  uint32_t total_size;
  uint64_t timestamp;
};
static_assert(sizeof(record_header) == 16);

struct load_body {  // followed by name\0 and code_size bytes of code (the record's last bytes)
  uint32_t pid;
  uint32_t tid;
  uint64_t vma;
  uint64_t code_addr;
  uint64_t code_size;
  uint64_t code_index;
};
static_assert(sizeof(load_body) == 40);

struct move_body {
  uint32_t pid;
  uint32_t tid;
  uint64_t vma;
  uint64_t old_code_addr;
  uint64_t new_code_addr;
  uint64_t code_size;
  uint64_t code_index;
};
static_assert(sizeof(move_body) == 48);

struct unwinding_body {        // followed by .eh_frame, then .eh_frame_hdr, then padding
  uint64_t unwinding_size;     ///< .eh_frame + .eh_frame_hdr bytes
  uint64_t eh_frame_hdr_size;  ///< the last bytes of the unwinding data
  uint64_t mapped_size;        ///< bytes after ALIGN_8(code_size) perf maps for them (0: none)
};
static_assert(sizeof(unwinding_body) == 24);

struct debug_info_body {  // followed by nr_entry entries {u64 addr; u32 lineno; u32 discrim;
                          // name\0}
  uint64_t code_addr;
  uint64_t nr_entry;
};
static_assert(sizeof(debug_info_body) == 16);

/// perf's genelf puts `.text` at a fixed offset in the synthesized jitted-PID-N.so
/// (sizeof(Elf64_Ehdr)) and `.eh_frame` right after the code, 8-byte aligned; the injected
/// mapping maps that offset at code_addr.
inline constexpr uint64_t genelf_text_offset = 64;
inline constexpr uint64_t align8(uint64_t v) {
  return (v + 7) & ~uint64_t{7};
}

}  // namespace jitunwind::detail::jitdump
