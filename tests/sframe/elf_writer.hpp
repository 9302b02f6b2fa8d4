// Test helper: wraps sections into a minimal ELF64 file (either byte order) so that real tools
// (llvm-readobj-22, objdump) can read what our encoder produced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::test {

struct elf_out_section {
  std::string name;
  uint32_t type = 1;   // SHT_PROGBITS
  uint64_t flags = 2;  // SHF_ALLOC
  uint64_t addr = 0;
  std::vector<uint8_t> data;
  uint64_t nobits_size = 0;  // for SHT_NOBITS (type 8)
};

inline std::vector<uint8_t> minimal_elf(uint16_t machine, bool big, uint16_t type,
                                        const std::vector<elf_out_section>& sections) {
  std::vector<uint8_t> out(64, 0);
  auto put = [&](size_t at, uint64_t v, size_t width) {
    if (out.size() < at + width) out.resize(at + width);
    for (size_t i = 0; i < width; ++i)
      out[at + (big ? width - 1 - i : i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  // Section contents, 8-byte aligned, then the name table, then the headers.
  std::vector<uint64_t> offsets;
  for (const auto& s : sections) {
    out.resize((out.size() + 7) & ~size_t{7});
    offsets.push_back(out.size());
    out.insert(out.end(), s.data.begin(), s.data.end());
  }
  std::string names(1, '\0');
  std::vector<uint32_t> name_offsets;
  for (const auto& s : sections) {
    name_offsets.push_back(static_cast<uint32_t>(names.size()));
    names += s.name + '\0';
  }
  const uint32_t shstrtab_name = static_cast<uint32_t>(names.size());
  names += ".shstrtab";
  names += '\0';
  const uint64_t names_offset = out.size();
  out.insert(out.end(), names.begin(), names.end());
  out.resize((out.size() + 7) & ~size_t{7});
  const uint64_t shoff = out.size();
  const size_t shnum = sections.size() + 2;
  out.resize(shoff + shnum * 64, 0);
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t h = shoff + (i + 1) * 64;
    const auto& s = sections[i];
    put(h, name_offsets[i], 4);
    put(h + 4, s.type, 4);
    put(h + 8, s.flags, 8);
    put(h + 16, s.addr, 8);
    put(h + 24, offsets[i], 8);
    put(h + 32, s.type == 8 ? s.nobits_size : s.data.size(), 8);
    put(h + 48, 8, 8);  // alignment
  }
  const size_t h = shoff + (shnum - 1) * 64;
  put(h, shstrtab_name, 4);
  put(h + 4, 3, 4);  // SHT_STRTAB
  put(h + 24, names_offset, 8);
  put(h + 32, names.size(), 8);
  put(h + 48, 1, 8);

  const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, static_cast<uint8_t>(big ? 2 : 1), 1};
  std::copy(std::begin(ident), std::end(ident), out.begin());
  put(16, type, 2);
  put(18, machine, 2);
  put(20, 1, 4);          // EV_CURRENT
  put(40, shoff, 8);      // e_shoff
  put(52, 64, 2);         // e_ehsize
  put(58, 64, 2);         // e_shentsize
  put(60, shnum, 2);      // e_shnum
  put(62, shnum - 1, 2);  // e_shstrndx
  return out;
}

}  // namespace jitunwind::test
