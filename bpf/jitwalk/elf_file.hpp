// An ELF object of the target (executable, shared library, memfd object) with what jitwalk needs
// from it: function symbols, unwind sections, SDT probes, build id, program interpreter. The
// object is the target's: it is read through the SDK's hostile-safe ELF reader with pread (a
// file truncated meanwhile is an error, never SIGBUS), only the sections used, each read and
// what is kept of it charged to the run's memory budget (docs/jitwalk.md, "Reading hostile
// processes").
#pragma once

#include <jitunwind/toolkit/elf_reader.hpp>
#include "jitwalk/common.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace jitwalk {

struct function_symbol {
  uint64_t start = 0;  ///< ELF virtual address
  uint64_t size = 0;   ///< 0 = unknown (extends to the next symbol, within its section)
  std::string name;
  uint64_t limit = 0;  ///< end of the symbol's section (a size-0 symbol stops there), 0: unknown
  uint8_t bind = 0;    ///< STB_*: a global name wins over a weak alias at the same address
};

struct sdt_probe {
  std::string provider;
  std::string name;
  uint64_t pc = 0;
  uint64_t semaphore = 0;
  std::string args;
};

/// What reading the target's objects may cost.
struct elf_file_limits {
  jitunwind::toolkit::memory_budget* budget = nullptr;  ///< null: not counted
  uint64_t max_read = uint64_t{512} << 20;             ///< largest section read at once
  /// The path is the target's choice (not a /proc/PID/map_files link): links are not followed.
  bool target_path = false;
  /// With target_path: the target's root directory the path is resolved in (process_view).
  int root_fd = -1;
  /// How messages name the object (its path in the target's maps); empty: the path opened.
  std::string name;
};

class elf_file {
 public:
  /// Opens `path` (a regular file). Errors name the path: not_found, io_error (not a regular
  /// file, changed while read), permission_denied (a link refused), `malformed` from the ELF
  /// reader, limit_exceeded (the budget, a section above max_read).
  static result<std::shared_ptr<elf_file>> open(const std::string& path,
                                                const elf_file_limits& limits = {});
  /// The same over bytes in memory (fuzzing, tests); they must outlive the object.
  static result<std::shared_ptr<elf_file>> from_bytes(std::span<const uint8_t> bytes,
                                                      const std::string& name);
  elf_file(const elf_file&) = delete;
  elf_file& operator=(const elf_file&) = delete;

  const std::string& path() const noexcept { return path_; }
  /// What messages call it (elf_file_limits::name, or the path).
  const std::string& name() const noexcept { return limits_.name.empty() ? path_ : limits_.name; }
  const jitunwind::toolkit::elf_image& image() const noexcept { return *image_; }

  /// Bytes of a named section (empty if absent, NOBITS, out of bounds or unreadable), and its
  /// address. The bytes live as long as the returned value.
  jitunwind::toolkit::elf_data section(const char* name, uint64_t* vaddr = nullptr) const;

  /// Function symbols from .symtab (or, if absent, .dynsym), sorted; loaded on first use. A
  /// separate debug file found by build id (/usr/lib/debug/.build-id/xx/yyy.debug) is used when
  /// the object itself has no .symtab. Only the first table of each kind is read (an object has
  /// one); what is kept is charged to the budget, and symbols that do not fit are left out.
  const std::vector<function_symbol>& symbols() const;
  /// PLT entries are named "name@plt" (as perf does), from .rela.plt and the layout of .plt /
  /// .plt.sec (x86-64 only).
  /// The symbol covering `vaddr`, or null.
  const function_symbol* find_symbol(uint64_t vaddr) const;

  std::vector<sdt_probe> sdt_probes() const;
  /// Hex build id (from the note sections, read up to their total size once), or empty.
  std::string build_id() const;
  /// PT_INTERP (the dynamic loader's path), or empty for static executables and libraries.
  std::string interpreter() const;

  /// ELF virtual address of a file offset inside some PT_LOAD segment.
  std::optional<uint64_t> offset_to_vaddr(uint64_t file_offset) const noexcept;
  /// Load bias of the object given one of its mappings (start address, file offset).
  std::optional<uint64_t> load_bias(uint64_t map_start, uint64_t map_offset) const noexcept;

 private:
  elf_file() = default;
  std::string path_;
  elf_file_limits limits_;
  std::optional<jitunwind::toolkit::elf_image> image_;
  mutable jitunwind::toolkit::budget_charge symbols_charge_;
  mutable bool symbols_loaded_ = false;
  mutable std::vector<function_symbol> symbols_;
  mutable std::shared_ptr<elf_file> debug_file_;
  mutable bool build_id_loaded_ = false;
  mutable std::string build_id_;
  std::string compute_build_id() const;

  void load_symbols_from(const jitunwind::toolkit::elf_image& img, bool want_symtab) const;
  void load_plt_symbols() const;
  bool keep_symbol(function_symbol&& s) const;
};

}  // namespace jitwalk
