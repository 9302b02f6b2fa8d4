#include "gdbjit/elf_object.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace jitunwind::detail::elf {

uint16_t machine_for(abi a) noexcept {
  switch (a) {
    case abi::amd64:
      return EM_X86_64;
    case abi::aarch64_le:
      return EM_AARCH64;
    case abi::aarch64_be:
    case abi::s390x:
      return 0;
  }
  return 0;
}

object_writer::object_writer(uint16_t machine, uint16_t type) : machine_(machine), type_(type) {}

uint32_t object_writer::intern(std::string& table, std::string_view s) {
  const auto at = static_cast<uint32_t>(table.size());
  table.append(s);
  table.push_back('\0');
  return at;
}

uint16_t object_writer::add_section(const section_spec& s) {
  section sec;
  sec.name = intern(shstrtab_, s.name);
  sec.type = s.type;
  sec.flags = s.flags;
  sec.address = s.address;
  sec.align = s.align == 0 ? 1 : s.align;
  if (s.type != SHT_NOBITS) sec.data.assign(s.data.begin(), s.data.end());
  sec.nobits_size = s.nobits_size;
  sections_.push_back(std::move(sec));
  return static_cast<uint16_t>(sections_.size());  // index 0 is the null section
}

void object_writer::add_symbol(const symbol_spec& s) {
  symbol sym;
  sym.name = intern(strtab_, s.name);
  sym.value = s.value;
  sym.size = s.size;
  sym.section = s.section;
  sym.info = static_cast<uint8_t>(
      ELF64_ST_INFO(s.global ? STB_GLOBAL : STB_LOCAL, s.function ? STT_FUNC : STT_OBJECT));
  symbols_.push_back(sym);
}

void object_writer::add_segment(uint32_t type, uint32_t flags, uint16_t section_index) {
  segments_.push_back({type, flags, section_index});
}

namespace {

size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

template <class T>
void put(std::vector<uint8_t>& out, size_t at, const T& v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

std::vector<uint8_t> object_writer::write() const {
  // Local symbols must precede global ones (sh_info = first global).
  std::vector<symbol> syms;
  syms.reserve(symbols_.size() + 1);
  syms.push_back(symbol{0, 0, 0, 0, 0});
  for (const symbol& s : symbols_)
    if (ELF64_ST_BIND(s.info) == STB_LOCAL) syms.push_back(s);
  const auto first_global = static_cast<uint32_t>(syms.size());
  for (const symbol& s : symbols_)
    if (ELF64_ST_BIND(s.info) != STB_LOCAL) syms.push_back(s);

  std::string shstrtab = shstrtab_;
  auto name_of = [&shstrtab](const char* n) {
    const auto at = static_cast<uint32_t>(shstrtab.size());
    shstrtab.append(n);
    shstrtab.push_back('\0');
    return at;
  };
  const uint32_t symtab_name = name_of(".symtab");
  const uint32_t strtab_name = name_of(".strtab");
  const uint32_t shstrtab_name = name_of(".shstrtab");

  const size_t user = sections_.size();
  const size_t symtab_index = user + 1, strtab_index = user + 2, shstrtab_index = user + 3;
  const size_t section_count = user + 4;

  // Layout: header, program headers, section contents (aligned), symtab, strtab, shstrtab,
  // section headers.
  size_t at = sizeof(Elf64_Ehdr);
  const size_t phdr_off = at;
  at += segments_.size() * sizeof(Elf64_Phdr);
  std::vector<size_t> offsets(user);
  for (size_t i = 0; i < user; ++i) {
    at = align_up(at, std::min<uint64_t>(sections_[i].align, 4096));
    offsets[i] = at;
    at += sections_[i].data.size();
  }
  at = align_up(at, 8);
  const size_t symtab_off = at;
  at += syms.size() * sizeof(Elf64_Sym);
  const size_t strtab_off = at;
  at += strtab_.size();
  const size_t shstrtab_off = at;
  at += shstrtab.size();
  at = align_up(at, 8);
  const size_t shdr_off = at;
  at += section_count * sizeof(Elf64_Shdr);

  std::vector<uint8_t> out(at, 0);
  Elf64_Ehdr eh = file_header(type_, machine_);
  eh.e_shoff = shdr_off;
  if (!segments_.empty()) {
    eh.e_phoff = phdr_off;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<uint16_t>(segments_.size());
  }
  eh.e_shnum = static_cast<uint16_t>(section_count);
  eh.e_shstrndx = static_cast<uint16_t>(shstrtab_index);
  put(out, 0, eh);

  for (size_t i = 0; i < user; ++i) {
    const section& s = sections_[i];
    if (!s.data.empty()) std::memcpy(out.data() + offsets[i], s.data.data(), s.data.size());
    Elf64_Shdr sh{};
    sh.sh_name = s.name;
    sh.sh_type = s.type;
    sh.sh_flags = s.flags;
    sh.sh_addr = s.address;
    sh.sh_offset = offsets[i];
    sh.sh_size = s.type == SHT_NOBITS ? s.nobits_size : s.data.size();
    sh.sh_addralign = s.align;
    put(out, shdr_off + (i + 1) * sizeof(Elf64_Shdr), sh);
  }
  for (size_t i = 0; i < segments_.size(); ++i) {
    const segment& g = segments_[i];
    if (g.section == 0 || g.section > user) continue;  // not one of ours: leave PT_NULL
    const section& s = sections_[g.section - 1];
    Elf64_Phdr ph{};
    ph.p_type = g.type;
    ph.p_flags = g.flags;
    ph.p_offset = offsets[g.section - 1];
    ph.p_vaddr = ph.p_paddr = s.address;
    ph.p_filesz = s.type == SHT_NOBITS ? 0 : s.data.size();
    ph.p_memsz = s.type == SHT_NOBITS ? s.nobits_size : s.data.size();
    ph.p_align = s.align;
    put(out, phdr_off + i * sizeof(Elf64_Phdr), ph);
  }
  for (size_t i = 0; i < syms.size(); ++i) {
    Elf64_Sym es{};
    es.st_name = syms[i].name;
    es.st_info = syms[i].info;
    es.st_shndx = syms[i].section;
    es.st_value = syms[i].value;
    es.st_size = syms[i].size;
    put(out, symtab_off + i * sizeof(Elf64_Sym), es);
  }
  std::memcpy(out.data() + strtab_off, strtab_.data(), strtab_.size());
  std::memcpy(out.data() + shstrtab_off, shstrtab.data(), shstrtab.size());

  Elf64_Shdr symtab{};
  symtab.sh_name = symtab_name;
  symtab.sh_type = SHT_SYMTAB;
  symtab.sh_offset = symtab_off;
  symtab.sh_size = syms.size() * sizeof(Elf64_Sym);
  symtab.sh_link = static_cast<uint32_t>(strtab_index);
  symtab.sh_info = first_global;
  symtab.sh_addralign = 8;
  symtab.sh_entsize = sizeof(Elf64_Sym);
  put(out, shdr_off + symtab_index * sizeof(Elf64_Shdr), symtab);

  Elf64_Shdr strtab{};
  strtab.sh_name = strtab_name;
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = strtab_off;
  strtab.sh_size = strtab_.size();
  strtab.sh_addralign = 1;
  put(out, shdr_off + strtab_index * sizeof(Elf64_Shdr), strtab);

  Elf64_Shdr shstr{};
  shstr.sh_name = shstrtab_name;
  shstr.sh_type = SHT_STRTAB;
  shstr.sh_offset = shstrtab_off;
  shstr.sh_size = shstrtab.size();
  shstr.sh_addralign = 1;
  put(out, shdr_off + shstrtab_index * sizeof(Elf64_Shdr), shstr);
  return out;
}

Elf64_Ehdr file_header(uint16_t type, uint16_t machine) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = type;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  return eh;
}

}  // namespace jitunwind::detail::elf
