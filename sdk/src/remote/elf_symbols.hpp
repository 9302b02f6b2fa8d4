// Finding one defined symbol in a mapped object's .dynsym or .symtab and turning its link-time
// value into a run-time address. The file comes from another process's mappings and is treated
// as hostile: it is read through the toolkit's ELF reader (jitunwind/toolkit/elf_reader.hpp) with pread,
// only its headers and the symbol tables searched; covered by fuzz/registry_reader.cpp.
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/result.h>

#include <jitunwind/toolkit/elf_reader.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::remote::detail {

struct elf_load_segment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
};

struct elf_symbol_match {
  uint64_t value = 0;  ///< st_value (link-time address)
  uint64_t size = 0;
  symbol_table table = symbol_table::dynsym;
  std::vector<elf_load_segment> loads;  ///< PT_LOAD headers, in file order
};

/// Looks for a defined data object named `name`, first in the (first) .dynsym, then in the
/// (first) .symtab. nullopt: valid ELF without it. Errors: malformed (with `what` naming the
/// file), unsupported (not a 64-bit little-endian object).
result<std::optional<elf_symbol_match>> find_elf_symbol(const jitunwind::toolkit::elf_image& image,
                                                        std::string_view name,
                                                        const std::string& what);
/// The same on bytes in memory.
result<std::optional<elf_symbol_match>> find_elf_symbol(std::span<const uint8_t> image,
                                                        std::string_view name,
                                                        const std::string& what);

}  // namespace jitunwind::remote::detail
