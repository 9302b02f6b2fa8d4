// Private: a minimal ELF64 little-endian object writer (sections + one symbol table), enough for
// GDB JIT objects and for wrapping generated sections so that readelf / llvm-dwarfdump /
// llvm-readobj can read them. No relocations; program headers only as views of one section each.
#pragma once

#include <jitunwind/frame.h>

#include <elf.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::detail::elf {

/// EM_X86_64 or EM_AARCH64 for a supported little-endian ABI; 0 otherwise.
uint16_t machine_for(abi a) noexcept;

struct section_spec {
  std::string_view name;
  uint32_t type = 1;  ///< SHT_PROGBITS
  uint64_t flags = 0;
  uint64_t address = 0;
  uint64_t align = 1;
  std::span<const uint8_t> data;  ///< copied; ignored for SHT_NOBITS
  uint64_t nobits_size = 0;       ///< size of an SHT_NOBITS section
};

struct symbol_spec {
  std::string_view name;
  uint64_t value = 0;  ///< ET_REL: relative to the section's address
  uint64_t size = 0;
  uint16_t section = 0;  ///< index returned by add_section
  bool function = true;
  bool global = true;
};

/// Collects sections and symbols, then lays them out in one buffer. Section 0 is the null
/// section; `.symtab`, `.strtab` and `.shstrtab` are added by `write` after the user's sections.
class object_writer {
 public:
  object_writer(uint16_t machine, uint16_t type);

  /// Returns the new section's index.
  uint16_t add_section(const section_spec& s);
  void add_symbol(const symbol_spec& s);
  /// A program header (e.g. PT_GNU_EH_FRAME) covering exactly the section `section_index`.
  void add_segment(uint32_t type, uint32_t flags, uint16_t section_index);

  std::vector<uint8_t> write() const;

 private:
  struct section {
    uint32_t name;
    uint32_t type;
    uint64_t flags, address, align;
    std::vector<uint8_t> data;
    uint64_t nobits_size;
  };
  struct symbol {
    uint32_t name;
    uint64_t value, size;
    uint16_t section;
    uint8_t info;
  };
  uint32_t intern(std::string& table, std::string_view s);

  uint16_t machine_;
  uint16_t type_;
  std::vector<section> sections_;
  struct segment {
    uint32_t type, flags;
    uint16_t section;
  };
  std::vector<symbol> symbols_;
  std::vector<segment> segments_;
  std::string shstrtab_{'\0'};
  std::string strtab_{'\0'};
};

/// An ELF64 little-endian file header with the fields every object of this module shares
/// (identification, type, machine, version, header sizes); the caller fills in the tables.
Elf64_Ehdr file_header(uint16_t type, uint16_t machine);

}  // namespace jitunwind::detail::elf
