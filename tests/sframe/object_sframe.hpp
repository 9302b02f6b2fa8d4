// Test helper: the `.sframe` section of an object file or executable, ready to decode.
//
// Relocatable objects (.o) hold FDE start fields that are still relocations against their code
// sections. We play linker: every allocated section gets a distinct address, and each start
// field is resolved the way the section header says it is encoded — relative to the field
// itself when FDE_FUNC_START_PCREL is set (LLVM, binutils >= 2.45), relative to the section
// start otherwise (binutils 2.40 v1: gas leaves a PC-relative relocation in the object, and ld
// rewrites it section-relative when it merges the sections; we do what ld does).
#pragma once

#include <jitunwind/toolkit/elf_reader.hpp>

#include <jitunwind/sframe.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

namespace jitunwind::test {

struct object_sframe {
  std::vector<uint8_t> file;
  std::vector<uint8_t> bytes;  ///< the .sframe section, relocated for relocatable objects
  uint64_t address = 0;        ///< where the section is (sh_addr, or our layout for .o)
  bool relocatable = false;
  std::map<uint32_t, uint64_t> section_base;  ///< our layout: section index -> address
  /// For .o files: FDE start field offset -> address of the code section it is relocated
  /// against (tools print .o start addresses relative to that section).
  std::map<uint64_t, uint64_t> fde_section_base;
};

inline object_sframe load_object_sframe(const std::string& path) {
  using namespace jitunwind::toolkit;
  object_sframe o;
  auto file = read_whole_file(path);
  REQUIRE(file.ok());
  o.file = std::move(*file);
  auto img = elf_image::parse(o.file);
  REQUIRE(img.ok());
  const elf_section* sf = img->find_section(".sframe");
  REQUIRE(sf != nullptr);
  auto data = img->section_data(*sf);
  REQUIRE(data.ok());
  o.bytes.assign(data->begin(), data->end());
  o.address = sf->addr;
  o.relocatable = img->type() == elf_et_rel;
  if (!o.relocatable) return o;

  // Lay out allocated sections 1 MiB apart; .sframe goes after all of them.
  uint64_t next = 0x100000;
  for (const auto& s : img->sections()) {
    if ((s.flags & 2) == 0) continue;  // SHF_ALLOC
    o.section_base[s.index] = next;
    next += (s.size + 0xfffff + 0x100000) & ~uint64_t{0xfffff};
  }
  o.address = o.section_base.at(sf->index);
  const bool pcrel = o.bytes.size() > 3 && (o.bytes[3] & sframe::flag_fde_func_start_pcrel);
  for (const auto& rs : img->sections()) {
    if (rs.type != elf_sht_rela || rs.info != sf->index) continue;
    auto relocs = img->relocations(rs);
    REQUIRE(relocs.ok());
    auto syms = img->symbols(img->sections().at(rs.link));
    REQUIRE(syms.ok());
    for (const auto& r : *relocs) {
      // R_X86_64_PC32 and R_AARCH64_PREL32: a 32-bit S + A - P.
      INFO("relocation type " << r.type << " at " << r.offset);
      REQUIRE((r.type == 2 || r.type == 261));
      REQUIRE(r.symbol < syms->size());
      const elf_symbol& sym = (*syms)[r.symbol];
      const uint64_t base = o.section_base.at(sym.shndx);
      const uint64_t target = base + sym.value + static_cast<uint64_t>(r.addend);
      const uint64_t place = o.address + r.offset;
      const auto value = static_cast<uint32_t>(target - (pcrel ? place : o.address));
      REQUIRE(r.offset + 4 <= o.bytes.size());
      for (int k = 0; k < 4; ++k)
        o.bytes[r.offset + k] =
            static_cast<uint8_t>(value >> (img->big_endian() ? 24 - 8 * k : 8 * k));
      o.fde_section_base[r.offset] = base;
    }
  }
  return o;
}

}  // namespace jitunwind::test
