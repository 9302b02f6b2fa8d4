// A read-only mmapped ELF object of the target (executable, shared library, memfd object) with
// what jitwalk needs from it: function symbols, unwind sections, SDT probes, build id, program
// interpreter. Parsing goes through the SDK's hostile-safe ELF reader.
#pragma once

#include "elf/elf_reader.hpp"
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
  uint64_t size = 0;   ///< 0 = unknown (extends to the next symbol)
  std::string name;
};

struct sdt_probe {
  std::string provider;
  std::string name;
  uint64_t pc = 0;
  uint64_t semaphore = 0;
  std::string args;
};

class elf_file {
 public:
  /// Maps `path` read-only. `io_error` naming the path; `malformed` from the ELF reader.
  static result<std::shared_ptr<elf_file>> open(const std::string& path);
  ~elf_file();
  elf_file(const elf_file&) = delete;
  elf_file& operator=(const elf_file&) = delete;

  const std::string& path() const noexcept { return path_; }
  const jitunwind::detail::elf_image& image() const noexcept { return *image_; }

  /// Bytes of a named section (empty span if absent, NOBITS or out of bounds), and its address.
  std::span<const uint8_t> section(const char* name, uint64_t* vaddr = nullptr) const;

  /// Function symbols from .symtab (or, if absent, .dynsym), sorted; loaded on first use. A
  /// separate debug file found by build id (/usr/lib/debug/.build-id/xx/yyy.debug) is used when
  /// the object itself has no .symtab.
  const std::vector<function_symbol>& symbols() const;
  /// The symbol covering `vaddr`, or null.
  const function_symbol* find_symbol(uint64_t vaddr) const;

  std::vector<sdt_probe> sdt_probes() const;
  /// Hex build id, or empty.
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
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::optional<jitunwind::detail::elf_image> image_;
  mutable bool symbols_loaded_ = false;
  mutable std::vector<function_symbol> symbols_;
  mutable std::shared_ptr<elf_file> debug_file_;
  mutable bool build_id_loaded_ = false;
  mutable std::string build_id_;
  std::string compute_build_id() const;

  void load_symbols_from(const jitunwind::detail::elf_image& img, bool want_symtab) const;
};

}  // namespace jitwalk
