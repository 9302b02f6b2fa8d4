// Toolkit: a small, hostile-safe ELF reader (ELF32/ELF64, little/big endian) over bytes in
// memory or over a file read with pread (guarded_file.hpp: a file truncated meanwhile gives an
// error, never SIGBUS).
//
// Used by the CLI, the eBPF walker's user side, the SDK's remote reader and tests to find
// `.sframe` sections, program headers and symbols. It never trusts the image: every offset,
// size, count and string index is checked against the file; errors are `errc::malformed` naming
// the structure, its index and the values ("elf: section 7 (.sframe): data [0x4000, +0x1200)
// past end of file (0x4800 bytes)").
//
// Cost is bounded by the bytes the file really has, not by counts it claims (docs/jitwalk.md,
// "Reading hostile processes"): parsing reads the ELF header, the section and program header
// tables (no more entries than the file can hold) and the section name table, nothing else;
// names are materialized at most to 4 times the size of their string table plus 1 MiB (a table
// whose entries all share one long name is refused with `limit_exceeded`, not copied per entry;
// a caller that goes on without it reports the cut, input_cuts.hpp); section data is read
// only when asked for, into buffers charged to the memory budget given at open. Callers keep
// their own work linear: they take the first SHT_SYMTAB and the first SHT_DYNSYM (an object has
// at most one of each) and do not re-read overlapping sections.
//
// Ownership: an image over memory does not copy the bytes; they must outlive it and what it
// returns. An image over a file owns it; the data it returns keeps its buffer alive.
// Thread-safety: immutable after `parse`/`open`, may be shared.
#pragma once

#include <jitunwind/result.h>

#include <jitunwind/toolkit/budget.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::toolkit {

inline constexpr uint32_t elf_pt_load = 1;
inline constexpr uint32_t elf_pt_dynamic = 2;
inline constexpr uint32_t elf_pt_gnu_eh_frame = 0x6474e550;
inline constexpr uint32_t elf_pt_gnu_sframe = 0x6474e554;

inline constexpr uint32_t elf_sht_progbits = 1;
inline constexpr uint32_t elf_sht_symtab = 2;
inline constexpr uint32_t elf_sht_rela = 4;
inline constexpr uint32_t elf_sht_nobits = 8;
inline constexpr uint32_t elf_sht_rel = 9;
inline constexpr uint32_t elf_sht_dynsym = 11;
/// binutils/LLVM give `.sframe` this section type (SHT_GNU_SFRAME).
inline constexpr uint32_t elf_sht_gnu_sframe = 0x6ffffff4;

inline constexpr uint16_t elf_et_rel = 1;
inline constexpr uint16_t elf_et_exec = 2;
inline constexpr uint16_t elf_et_dyn = 3;

inline constexpr uint16_t elf_em_386 = 3;
inline constexpr uint16_t elf_em_x86_64 = 62;
inline constexpr uint16_t elf_em_aarch64 = 183;

struct elf_section {
  uint32_t index = 0;
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t addralign = 0;
  uint64_t entsize = 0;
};

struct elf_segment {
  uint32_t index = 0;
  uint32_t type = 0;
  uint32_t flags = 0;  ///< PF_X = 1, PF_W = 2, PF_R = 4
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t paddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint64_t align = 0;
};

struct elf_symbol {
  std::string name;
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type = 0;  ///< STT_*: 0 notype, 1 object, 2 func, 3 section
  uint8_t bind = 0;  ///< STB_*: 0 local, 1 global, 2 weak
  uint16_t shndx = 0;
};

/// One relocation of a SHT_RELA or SHT_REL section (addend 0 for REL).
struct elf_relocation {
  uint64_t offset = 0;  ///< in the section the relocations apply to
  uint32_t type = 0;
  uint32_t symbol = 0;  ///< index into the linked symbol table
  int64_t addend = 0;
};

/// Bytes of an image: a view of the image's memory, or a buffer read from its file that this
/// object keeps alive (with its charge to the memory budget). Take the span from an lvalue only:
/// the bytes live as long as the elf_data does.
class elf_data {
 public:
  elf_data() = default;
  explicit elf_data(std::span<const uint8_t> view, std::shared_ptr<const charged_bytes> owner = {})
      : view_(view), owner_(std::move(owner)) {}

  const uint8_t* data() const noexcept { return view_.data(); }
  size_t size() const noexcept { return view_.size(); }
  bool empty() const noexcept { return view_.empty(); }
  const uint8_t* begin() const noexcept { return view_.data(); }
  const uint8_t* end() const noexcept { return view_.data() + view_.size(); }
  uint8_t operator[](size_t i) const noexcept { return view_[i]; }
  std::span<const uint8_t> span() const& noexcept { return view_; }
  std::span<const uint8_t> span() && = delete;

 private:
  std::span<const uint8_t> view_;
  std::shared_ptr<const charged_bytes> owner_;
};

/// What reading an image from a file may cost.
struct elf_read_limits {
  /// Charged for every buffer read from the file while it lives (null: not counted).
  memory_budget* budget = nullptr;
  /// Largest single read (a section, a header table): `limit_exceeded` above it.
  uint64_t max_read = uint64_t{256} << 20;
};

class elf_image {
 public:
  /// Validates the ELF header, the section header table (with names) and the program header
  /// table. Section and segment data ranges are checked when they are accessed.
  static result<elf_image> parse(std::span<const uint8_t> bytes);
  /// The same over a file, read with pread as needed. Errors as parse, plus the file's
  /// (io_error "changed while it was read", limit_exceeded from `limits`), naming it.
  static result<elf_image> open(guarded_file file, const elf_read_limits& limits = {});

  bool is_64bit() const noexcept { return is_64_; }
  bool big_endian() const noexcept { return big_endian_; }
  uint16_t type() const noexcept { return type_; }
  uint16_t machine() const noexcept { return machine_; }
  uint64_t entry() const noexcept { return entry_; }
  /// Size of the image (the file's size when opened).
  uint64_t file_size() const noexcept;

  const std::vector<elf_section>& sections() const noexcept { return sections_; }
  const std::vector<elf_segment>& segments() const noexcept { return segments_; }

  /// The first section with this name, or null.
  const elf_section* find_section(std::string_view name) const noexcept;
  /// The first program header of this type (e.g. `elf_pt_gnu_sframe`), or null.
  const elf_segment* find_segment(uint32_t type) const noexcept;

  /// The file bytes of a section. `malformed` if they are not inside the image; empty for
  /// SHT_NOBITS.
  result<elf_data> section_data(const elf_section& s) const;
  /// The file bytes of a segment (`filesz` bytes at `offset`).
  result<elf_data> segment_data(const elf_segment& p) const;
  /// `size` bytes at file offset `offset` (`what` names them in errors).
  result<elf_data> read(uint64_t offset, uint64_t size, const char* what) const;

  /// The first section of this type (e.g. `elf_sht_symtab`), or null.
  const elf_section* first_section_of_type(uint32_t type) const noexcept;

  /// The symbols of a SHT_SYMTAB or SHT_DYNSYM section (names from its linked string table).
  result<std::vector<elf_symbol>> symbols(const elf_section& symtab) const;
  /// The first defined symbol of a symbol table named `name` (of type `type` if given),
  /// without materializing the others. Errors: as symbols().
  result<std::optional<elf_symbol>> find_symbol(const elf_section& symtab, std::string_view name,
                                                std::optional<uint8_t> type = {}) const;
  /// The relocations of a SHT_RELA or SHT_REL section.
  result<std::vector<elf_relocation>> relocations(const elf_section& rel) const;

  /// The lowest PT_LOAD vaddr rounded down to its alignment (what the loader subtracts to get
  /// the load bias: bias = mapping start − this); nothing without PT_LOAD.
  std::optional<uint64_t> first_load_vaddr() const noexcept;
  /// The file offset of a virtual address inside some PT_LOAD's file-backed part.
  std::optional<uint64_t> vaddr_to_offset(uint64_t vaddr) const noexcept;

  /// Reads an unsigned integer of 1, 2, 4 or 8 bytes in the image's byte order from `p`.
  uint64_t read_uint(const uint8_t* p, size_t width) const noexcept;

 private:
  struct source;
  elf_image() = default;
  static result<elf_image> parse_from(std::shared_ptr<const source> src);
  result<void> parse_sections();
  result<void> parse_segments();
  result<elf_data> symbol_table_data(const elf_section& symtab, elf_data& strings) const;

  std::shared_ptr<const source> source_;
  bool is_64_ = true;
  bool big_endian_ = false;
  uint16_t type_ = 0;
  uint16_t machine_ = 0;
  uint64_t entry_ = 0;
  uint64_t shoff_ = 0, phoff_ = 0;
  uint16_t shentsize_ = 0, phentsize_ = 0, shstrndx_ = 0;
  uint64_t shnum_ = 0, phnum_ = 0;
  std::vector<elf_section> sections_;
  std::vector<elf_segment> segments_;
};

/// Reads a whole file into memory (guarded_file rules: links followed, regular files only).
/// Errors name the path: not_found, io_error, limit_exceeded above `max_bytes`.
result<std::vector<uint8_t>> read_whole_file(const std::string& path,
                                             size_t max_bytes = size_t{1} << 31);

/// "x86-64", "aarch64", "i386" or "machine N".
std::string elf_machine_name(uint16_t machine);

}  // namespace jitunwind::toolkit
