#include "remote/elf_symbols.hpp"

#include "common/error.hpp"

#include <elf.h>
#include <cstring>

namespace jitunwind::remote::detail {

using jitunwind::detail::make_error;

namespace {

template <class T>
bool load_at(std::span<const uint8_t> image, uint64_t offset, T& out) {
  if (offset > image.size() || image.size() - offset < sizeof(T)) return false;
  std::memcpy(&out, image.data() + offset, sizeof(T));
  return true;
}

bool range_ok(std::span<const uint8_t> image, uint64_t offset, uint64_t size) {
  return offset <= image.size() && size <= image.size() - offset;
}

// Scans one symbol table; its string table is the section named by sh_link.
result<std::optional<elf_symbol_match>> scan_table(std::span<const uint8_t> image,
                                                   const std::vector<Elf64_Shdr>& sections,
                                                   const Elf64_Shdr& table, std::string_view name,
                                                   symbol_table kind, const std::string& what) {
  if (table.sh_entsize != sizeof(Elf64_Sym) || !range_ok(image, table.sh_offset, table.sh_size)) {
    return make_error(errc::malformed,
                      "%s: symbol table at 0x%llx (size %llu, entsize %llu) "
                      "is outside the file or has a wrong entry size",
                      what.c_str(), static_cast<unsigned long long>(table.sh_offset),
                      static_cast<unsigned long long>(table.sh_size),
                      static_cast<unsigned long long>(table.sh_entsize));
  }
  if (table.sh_link >= sections.size()) {
    return make_error(errc::malformed, "%s: symbol table links to section %u of %zu", what.c_str(),
                      table.sh_link, sections.size());
  }
  const Elf64_Shdr& strtab = sections[table.sh_link];
  if (strtab.sh_type != SHT_STRTAB || !range_ok(image, strtab.sh_offset, strtab.sh_size)) {
    return make_error(errc::malformed,
                      "%s: string table of a symbol table is not a STRTAB "
                      "inside the file",
                      what.c_str());
  }
  const char* strings = reinterpret_cast<const char*>(image.data() + strtab.sh_offset);
  const uint64_t strings_size = strtab.sh_size;
  const uint64_t count = table.sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 0; i < count; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, image.data() + table.sh_offset + i * sizeof(Elf64_Sym), sizeof(sym));
    if (sym.st_name >= strings_size || sym.st_shndx == SHN_UNDEF) continue;
    const uint64_t room = strings_size - sym.st_name;
    if (room < name.size() + 1) continue;
    const char* s = strings + sym.st_name;
    if (std::memcmp(s, name.data(), name.size()) != 0 || s[name.size()] != '\0') continue;
    if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT) continue;
    elf_symbol_match m;
    m.value = sym.st_value;
    m.size = sym.st_size;
    m.table = kind;
    return std::optional<elf_symbol_match>(std::move(m));
  }
  return std::optional<elf_symbol_match>();
}

}  // namespace

result<std::optional<elf_symbol_match>> find_elf_symbol(std::span<const uint8_t> image,
                                                        std::string_view name,
                                                        const std::string& what) {
  Elf64_Ehdr eh;
  if (!load_at(image, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return make_error(errc::malformed, "%s: not an ELF file", what.c_str());
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return make_error(errc::unsupported, "%s: not a little-endian 64-bit ELF file", what.c_str());
  }
  std::vector<elf_load_segment> loads;
  if (eh.e_phnum != 0) {
    if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !range_ok(image, eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
      return make_error(errc::malformed, "%s: program headers (%u at 0x%llx) outside the file",
                        what.c_str(), eh.e_phnum, static_cast<unsigned long long>(eh.e_phoff));
    }
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, image.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
      if (ph.p_type == PT_LOAD) loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
    }
  }
  if (eh.e_shnum == 0 || eh.e_shoff == 0) return std::optional<elf_symbol_match>();
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !range_ok(image, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    return make_error(errc::malformed, "%s: section headers (%u at 0x%llx) outside the file",
                      what.c_str(), eh.e_shnum, static_cast<unsigned long long>(eh.e_shoff));
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), image.data() + eh.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  for (auto [type, kind] :
       {std::pair{SHT_DYNSYM, symbol_table::dynsym}, std::pair{SHT_SYMTAB, symbol_table::symtab}}) {
    for (const Elf64_Shdr& s : sections) {
      if (s.sh_type != static_cast<Elf64_Word>(type)) continue;
      auto found = scan_table(image, sections, s, name, kind, what);
      if (!found) return std::move(found).error();
      if (found->has_value()) {
        (*found)->loads = loads;
        return found;
      }
    }
  }
  return std::optional<elf_symbol_match>();
}

}  // namespace jitunwind::remote::detail
