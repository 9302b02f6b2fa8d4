// Toolkit: a linker-like layout of a relocatable object (.o), so that sections whose contents
// are relocations against code (`.eh_frame`, `.sframe`, `.debug_frame`) can be read with final
// addresses. Used by the CLI (`sframe build --from-eh-frame`) and the differential tests.
#pragma once

#include <jitunwind/toolkit/elf_reader.hpp>

#include <jitunwind/result.h>

#include <cstdint>
#include <vector>

namespace jitunwind::toolkit {

/// Address of every section (by index) after the layout: the allocated sections (SHF_ALLOC) in
/// index order, each at the next address aligned to max(its alignment, 16), the first at 0;
/// other sections at 0.
struct object_layout {
  std::vector<uint64_t> address;
};

object_layout lay_out_sections(const elf_image& img);

/// The bytes of section `s` with every relocation that applies to it resolved against
/// `layout` (x86-64: R_X86_64_64, PC32, PLT32, 32, 32S, PC64; AArch64: R_AARCH64_ABS64, ABS32,
/// PREL32, PREL64), and how many were applied. Symbols are section-relative (plus the section's
/// layout address), SHN_ABS absolute, undefined ones 0. Errors: `unsupported` for another
/// relocation type or machine, `malformed` for an index, offset or value out of range (named:
/// "elf: .rela.eh_frame[3]: ...").
struct relocated_section {
  std::vector<uint8_t> bytes;
  size_t relocations = 0;
};
result<relocated_section> relocate_section(const elf_image& img, const elf_section& s,
                                           const object_layout& layout);

}  // namespace jitunwind::toolkit
