// Just enough ELF64 to find one defined symbol in a mapped object's .dynsym or .symtab and to
// turn its link-time value into a run-time address. The file comes from another process's
// mappings and is treated as hostile: every offset, size and count is checked against the image.
// (sdk/src/elf/elf_reader.hpp is the general ELF reader; this one stays because it looks for one
// name while streaming over the tables, without materializing every symbol of every object
// mapped into the target, and is covered by fuzz/registry_reader.cpp.)
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/result.h>

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

/// Looks for a defined data object named `name`, first in .dynsym, then in .symtab.
/// nullopt: valid ELF without it. Errors: malformed (with `what` naming the file).
result<std::optional<elf_symbol_match>> find_elf_symbol(std::span<const uint8_t> image,
                                                        std::string_view name,
                                                        const std::string& what);

}  // namespace jitunwind::remote::detail
