// Finding the SFrame section to decode: in an ELF file (by section name, or through
// PT_GNU_SFRAME when section headers are missing), or a bare section file (`--raw`).
#pragma once

#include <jitunwind/result.h>
#include <jitunwind/toolkit/input_cuts.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::cli {

struct sframe_source_options {
  bool raw = false;                 ///< the file is the section itself
  std::optional<uint64_t> address;  ///< section address (raw: default 0; ELF: overrides sh_addr)
  std::string section = ".sframe";
};

struct sframe_source {
  std::vector<uint8_t> bytes;  ///< the section; relocations of relocatable objects applied
  uint64_t address = 0;        ///< where the section lives (sh_addr, PT_GNU_SFRAME vaddr, …)
  std::string where;           ///< "section .sframe [5]", "PT_GNU_SFRAME", "raw file"
  std::string elf_kind;        ///< "relocatable x86-64", … (empty for raw files)
  size_t relocations_applied = 0;
  std::map<uint64_t, std::string> function_symbols;  ///< address → name, from .symtab/.dynsym
  /// Parts of the file left out ("symbol table .symtab [27] of FILE (function names) left out:
  /// ..."): a command whose output would use them prints these warnings, and exits
  /// exit_input_cut when `cut` says a limit refused one (jitunwind/toolkit/input_cuts.hpp).
  std::vector<std::string> left_out;
  toolkit::input_cuts cut;
};

/// Loads the section described by `options` from `path`. Errors name the file and what is
/// wrong or missing ("no section .sframe", the ELF reader's message for corrupt headers).
///
/// Relocatable objects (.o) store FDE start addresses as relocations against code sections
/// (R_X86_64_PC32, R_AARCH64_PREL32, …). They are resolved so that each FDE starts at its
/// relocation target (symbol + addend, with section addresses as in the file, usually 0): what
/// `llvm-readobj --sframe` and `ld` take the start to be, also for binutils 2.40's SFrame v1
/// whose PC-relative relocations contradict v1's section-relative encoding.
result<sframe_source> load_sframe_source(const std::string& path,
                                         const sframe_source_options& options);

/// The same on bytes already in memory; `path` only names them in messages.
result<sframe_source> load_sframe_source(const std::string& path, std::vector<uint8_t> file,
                                         const sframe_source_options& options);

}  // namespace jitunwind::cli
