// ELF files shaped the way a hostile process would shape the objects it maps, for the tests of
// the tools that read them (tests/hostile), for jitwalk's test JIT (which maps them) and for the
// fuzz seeds of the ELF reader (fuzz/corpus/elf_reader, written by test_hostile with
// JITUNWIND_WRITE_FUZZ_SEEDS=1): each is a valid ELF header over tables whose counts and
// offsets make a naive reader copy or scan the same bytes again and again.
//
// ELF64 little endian, x86-64, ET_DYN. Header-only: the test JIT includes it too.
#pragma once

#include "gdbjit/elf_object.hpp"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace jitunwind::test::hostile {

namespace elf_detail {

inline void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

inline void pad_to(std::vector<uint8_t>& out, size_t align) {
  while (out.size() % align != 0) out.push_back(0);
}

inline Elf64_Ehdr header(uint64_t shoff, uint16_t shnum, uint16_t shstrndx, uint64_t phoff = 0,
                         uint16_t phnum = 0) {
  Elf64_Ehdr h = jitunwind::detail::elf::file_header(ET_DYN, EM_X86_64);
  h.e_phoff = phoff;
  h.e_shoff = shoff;
  h.e_phentsize = sizeof(Elf64_Phdr);
  h.e_phnum = phnum;
  h.e_shnum = shnum;
  h.e_shstrndx = shstrndx;
  return h;
}

inline Elf64_Shdr section(uint32_t name, uint32_t type, uint64_t offset, uint64_t size,
                          uint32_t link = 0, uint64_t entsize = 0) {
  Elf64_Shdr s{};
  s.sh_name = name;
  s.sh_type = type;
  s.sh_offset = offset;
  s.sh_size = size;
  s.sh_link = link;
  s.sh_entsize = entsize;
  s.sh_addralign = 1;
  return s;
}

// A string table of `count` names (`prefix` and the index) and, 8-aligned after it, a symbol
// table of as many global functions in section 1 at `value(i)` of `size(i)` bytes.
struct function_symbols {
  uint64_t str_at = 0, str_size = 0, sym_at = 0, sym_size = 0;
};

// With `shared_name` bytes, every symbol is named by one name of that many bytes instead.
template <class Value, class Size>
function_symbols append_function_symbols(std::vector<uint8_t>& out, const std::string& prefix,
                                         uint32_t count, Value value, Size size,
                                         size_t shared_name = 0) {
  function_symbols f;
  f.str_at = out.size();
  out.push_back(0);
  std::vector<uint32_t> name_at(count, 1);
  if (shared_name != 0) {
    const std::string n = prefix + std::string(shared_name - prefix.size(), 'n');
    put(out, n.c_str(), n.size() + 1);
  }
  for (uint32_t i = 0; i < count && shared_name == 0; ++i) {
    name_at[i] = static_cast<uint32_t>(out.size() - f.str_at);
    const std::string n = prefix + std::to_string(i);
    put(out, n.c_str(), n.size() + 1);
  }
  f.str_size = out.size() - f.str_at;
  pad_to(out, 8);
  f.sym_at = out.size();
  const Elf64_Sym none{};
  put(out, &none, sizeof none);
  for (uint32_t i = 0; i < count; ++i) {
    Elf64_Sym s{};
    s.st_name = name_at[i];
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s.st_shndx = 1;
    s.st_value = value(i);
    s.st_size = size(i);
    put(out, &s, sizeof s);
  }
  f.sym_size = out.size() - f.sym_at;
  pad_to(out, 8);
  return f;
}

}  // namespace elf_detail

/// `sections` section headers that all name one `name_bytes`-byte name (a reader that copies
/// each section's name copies it `sections` times: 40 000 x 1 MB is 40 GB from a 3.5 MB file).
inline std::vector<uint8_t> shared_section_names(uint16_t sections, size_t name_bytes) {
  using namespace elf_detail;
  std::vector<uint8_t> out(sizeof(Elf64_Ehdr), 0);
  const uint64_t strtab_at = out.size();
  const std::string first = std::string(1, '\0') + ".shstrtab";
  put(out, first.data(), first.size() + 1);
  const uint32_t long_name = static_cast<uint32_t>(out.size() - strtab_at);
  out.insert(out.end(), name_bytes, 'N');
  out.push_back(0);
  const uint64_t strtab_size = out.size() - strtab_at;
  pad_to(out, 8);
  const uint64_t shoff = out.size();
  const Elf64_Shdr null{};
  put(out, &null, sizeof null);
  const Elf64_Shdr names = section(1, SHT_STRTAB, strtab_at, strtab_size);
  put(out, &names, sizeof names);
  for (uint32_t i = 2; i < sections; ++i) {
    const Elf64_Shdr s = section(long_name, SHT_PROGBITS, 0, 0);
    put(out, &s, sizeof s);
  }
  const Elf64_Ehdr h = header(shoff, sections, 1);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

/// What the symbol-table shape carries besides its tables.
struct symbol_tables_options {
  uint16_t tables = 60000;      ///< SHT_SYMTAB headers, all over the same symbol table
  uint32_t symbols = 400000;    ///< entries of that table (function symbols f0, f1, ...)
  std::vector<uint8_t> sframe;  ///< if not empty: a `.sframe` section (its address 0x1000)
  uint32_t dynsym_tables = 0;   ///< SHT_DYNSYM headers over the same table too
  /// If not 0: every symbol has the same name of this many bytes (names add up to
  /// symbols x bytes from a string table of `bytes`).
  size_t shared_name_bytes = 0;
};

/// One symbol table claimed by thousands of section headers (a reader that decodes every
/// SHT_SYMTAB decodes it thousands of times: 13 MB took more than 300 s).
inline std::vector<uint8_t> many_symbol_tables(const symbol_tables_options& o) {
  using namespace elf_detail;
  std::vector<uint8_t> out(sizeof(Elf64_Ehdr), 0);
  static const char name_bytes[] = "\0.shstrtab\0.strtab\0.symtab\0.sframe";
  const std::string names(name_bytes, sizeof name_bytes);
  const uint64_t shstr_at = out.size();
  put(out, names.data(), names.size());
  const uint32_t n_shstrtab = 1, n_strtab = 11, n_symtab = 19, n_sframe = 27;
  uint64_t sframe_at = 0;
  if (!o.sframe.empty()) {
    pad_to(out, 8);
    sframe_at = out.size();
    put(out, o.sframe.data(), o.sframe.size());
  }
  const function_symbols syms = append_function_symbols(
      out, "f", o.symbols, [](uint32_t i) { return 0x1000 + 16 * uint64_t{i}; },
      [](uint32_t) { return uint64_t{16}; }, o.shared_name_bytes);
  const uint64_t str_at = syms.str_at, str_size = syms.str_size, sym_at = syms.sym_at,
                 sym_size = syms.sym_size;
  const uint64_t shoff = out.size();
  std::vector<Elf64_Shdr> sh;
  sh.push_back({});
  sh.push_back(section(n_shstrtab, SHT_STRTAB, shstr_at, names.size()));
  sh.push_back(section(n_strtab, SHT_STRTAB, str_at, str_size));
  const uint32_t strtab_index = 2;
  if (!o.sframe.empty()) {
    Elf64_Shdr s = section(n_sframe, 0x6ffffff4 /* SHT_GNU_SFRAME */, sframe_at, o.sframe.size());
    s.sh_addr = 0x1000;
    s.sh_flags = SHF_ALLOC;
    sh.push_back(s);
  }
  for (uint32_t i = 0; i < o.dynsym_tables; ++i)
    sh.push_back(section(n_symtab, SHT_DYNSYM, sym_at, sym_size, strtab_index, sizeof(Elf64_Sym)));
  for (uint32_t i = 0; i < o.tables; ++i)
    sh.push_back(section(n_symtab, SHT_SYMTAB, sym_at, sym_size, strtab_index, sizeof(Elf64_Sym)));
  put(out, sh.data(), sh.size() * sizeof(Elf64_Shdr));
  const Elf64_Ehdr h = header(shoff, static_cast<uint16_t>(sh.size()), 1);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

/// Where the code of a `truncatable` object is, and how much of the file may be cut away
/// while that code stays mapped.
inline constexpr uint64_t truncatable_text_offset = 0x1000;
inline constexpr uint64_t truncatable_keep = 0x2000;

/// An object whose first two pages are a header and `code` (a PT_LOAD R+X at file offset and
/// address 0x1000), followed by a large .dynsym/.symtab (`symbols` entries) and the section
/// headers at the very end. A process maps it, runs the code and cuts the file to its first
/// `truncatable_keep` bytes once a reader opened it: the reader's view of the tables then ends
/// in the middle, and a reader that mapped the file dies of SIGBUS.
inline std::vector<uint8_t> truncatable(const std::vector<uint8_t>& code, uint32_t symbols) {
  using namespace elf_detail;
  std::vector<uint8_t> out(truncatable_text_offset, 0);
  put(out, code.data(), code.size());
  out.resize(truncatable_keep, 0);
  static const char name_bytes[] = "\0.shstrtab\0.text\0.dynstr\0.dynsym\0.symtab";
  const std::string names(name_bytes, sizeof name_bytes);
  const uint32_t n_shstrtab = 1, n_text = 11, n_dynstr = 17, n_dynsym = 25, n_symtab = 33;
  const uint64_t shstr_at = out.size();
  put(out, names.data(), names.size());
  const function_symbols syms = append_function_symbols(
      out, "hostile_object_function_", symbols,
      [](uint32_t i) { return truncatable_text_offset + (i == 0 ? 0 : 0x100000 + i); },
      [&](uint32_t i) { return i == 0 ? uint64_t{code.size()} : 1; });
  const uint64_t str_at = syms.str_at, str_size = syms.str_size, sym_at = syms.sym_at,
                 sym_size = syms.sym_size;
  const uint64_t phoff = out.size();
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_flags = PF_R | PF_X;
  load.p_offset = truncatable_text_offset;
  load.p_vaddr = load.p_paddr = truncatable_text_offset;
  load.p_filesz = load.p_memsz = code.size();
  load.p_align = 0x1000;
  put(out, &load, sizeof load);
  pad_to(out, 8);
  const uint64_t shoff = out.size();
  std::vector<Elf64_Shdr> sh;
  sh.push_back({});
  sh.push_back(section(n_shstrtab, SHT_STRTAB, shstr_at, names.size()));
  Elf64_Shdr text = section(n_text, SHT_PROGBITS, truncatable_text_offset, code.size());
  text.sh_addr = truncatable_text_offset;
  text.sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh.push_back(text);
  sh.push_back(section(n_dynstr, SHT_STRTAB, str_at, str_size));
  sh.push_back(section(n_dynsym, SHT_DYNSYM, sym_at, sym_size, 3, sizeof(Elf64_Sym)));
  sh.push_back(section(n_symtab, SHT_SYMTAB, sym_at, sym_size, 3, sizeof(Elf64_Sym)));
  put(out, sh.data(), sh.size() * sizeof(Elf64_Shdr));
  const Elf64_Ehdr h = header(shoff, static_cast<uint16_t>(sh.size()), 1, phoff, 1);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

}  // namespace jitunwind::test::hostile
