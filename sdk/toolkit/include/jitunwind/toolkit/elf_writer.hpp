// Toolkit: builds small ELF64 images in memory (little or big endian).
//
// Used by the CLI (`jitunwind sframe build --elf`) and meant for the other places that need a
// tiny ELF object at run time (GDB JIT entries, test fixtures): the caller lists sections with
// their bytes and addresses, optional symbols and program headers; `write` computes the file
// layout (file offsets congruent to addresses modulo the page size, so PT_LOAD segments are
// valid), generates `.shstrtab` (and `.symtab`/`.strtab` when there are symbols) and returns the
// image. Nothing is written to disk and no library is needed, so an image can be produced
// inside a running process (libelf only writes through a file descriptor).
//
// Section contents are copied verbatim: bytes of a big-endian image (e.g. an AArch64 BE
// `.sframe`) must already be in that byte order; headers are written in it by the writer.
//
// Ownership: plain values. Thread-safety: one thread per writer. Errors: `invalid_argument`
// naming the section, symbol or segment and the offending values.
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::toolkit {

class elf_writer {
 public:
  /// Values not in glibc's <elf.h> on Debian 12.
  static constexpr uint32_t sht_gnu_sframe = 0x6ffffff4;  ///< what LLVM and binutils ≥ 2.45 use
  static constexpr uint32_t pt_gnu_sframe = 0x6474e554;
  static constexpr uint64_t page_size = 0x1000;

  struct options {
    uint16_t type = 3;      ///< ET_DYN
    uint16_t machine = 62;  ///< EM_X86_64
    bool big_endian = false;
    uint64_t entry = 0;
    uint32_t flags = 0;  ///< e_flags
  };

  struct section {
    std::string name;
    uint32_t type = 1;   ///< SHT_PROGBITS
    uint64_t flags = 0;  ///< SHF_*
    uint64_t address = 0;
    uint64_t align = 1;
    std::vector<uint8_t> data;  ///< the contents (must be empty for SHT_NOBITS)
    uint64_t nobits_size = 0;   ///< the size of a SHT_NOBITS section
    uint64_t entsize = 0;
    std::string link;  ///< name of the section sh_link refers to (empty: 0)
    uint32_t info = 0;
  };

  struct symbol {
    std::string name;
    std::string section;  ///< defining section's name; empty = SHN_ABS
    uint64_t value = 0;   ///< an address (images with addresses) or a section offset (ET_REL)
    uint64_t size = 0;
    uint8_t type = 2;     ///< STT_FUNC
    uint8_t binding = 1;  ///< STB_GLOBAL
  };

  struct segment {
    uint32_t type = 1;   ///< PT_LOAD
    uint32_t flags = 4;  ///< PF_R
    /// Names of the sections it covers, in address order, contiguous in the file.
    std::vector<std::string> sections;
    uint64_t align = 0;  ///< 0: page_size for PT_LOAD, the first section's alignment otherwise
  };

  explicit elf_writer(const options& o) : options_(o) {}

  void add_section(section s) { sections_.push_back(std::move(s)); }
  void add_symbol(symbol s) { symbols_.push_back(std::move(s)); }
  void add_segment(segment s) { segments_.push_back(std::move(s)); }

  /// The complete image. `invalid_argument` for unknown or duplicate section names,
  /// overlapping allocated sections, segments whose sections are not in increasing address
  /// order, and symbols naming a missing section.
  result<std::vector<uint8_t>> write() const;

 private:
  options options_;
  std::vector<section> sections_;
  std::vector<symbol> symbols_;
  std::vector<segment> segments_;
};

}  // namespace jitunwind::toolkit
