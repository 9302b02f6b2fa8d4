#include "sframe_elf.hpp"

#include <jitunwind/toolkit/elf_writer.hpp>

#include <elf.h>

#include <algorithm>

namespace jitunwind::cli {

using toolkit::elf_writer;

result<sframe_elf_image> build_sframe_elf(const sframe_description& d,
                                          const sframe::encoder_options& options) {
  if (d.functions.empty())
    return error(errc::invalid_argument, "an ELF image needs at least one function");
  sframe_elf_image out;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const function_desc& f : d.functions) {
    lo = std::min(lo, f.start);
    hi = std::max(hi, f.start + f.size);
  }
  out.text_address = lo;
  out.text_size = hi - lo;
  out.text_zero_filled = out.text_size <= max_zero_filled_text;
  // The R+X and R segments must not share a page.
  const uint64_t page = elf_writer::page_size;
  if (hi > UINT64_MAX - 2 * page)
    return error(errc::out_of_range, "functions end too close to the top of the address space");
  out.sframe_address = (hi + page - 1) / page * page;

  sframe::encoder_options eo = options;
  eo.section_address = out.sframe_address;
  auto encoded = sframe::encode(eo, d.functions);
  if (!encoded) return encoded.error();
  out.sframe_size = encoded->size();

  elf_writer::options wo;
  wo.type = ET_DYN;
  wo.machine = d.target == abi::amd64 ? EM_X86_64 : EM_AARCH64;
  wo.big_endian = d.target == abi::aarch64_be;
  elf_writer w(wo);

  elf_writer::section text;
  text.name = ".text";
  text.flags = SHF_ALLOC | SHF_EXECINSTR;
  text.address = lo;
  // The largest power of two (up to 16) that the start address honours.
  text.align = 16;
  while (text.align > 1 && lo % text.align != 0) text.align /= 2;
  if (out.text_zero_filled) {
    text.data.assign(out.text_size, 0);
  } else {
    text.type = SHT_NOBITS;
    text.nobits_size = out.text_size;
  }
  w.add_section(std::move(text));

  elf_writer::section sf;
  sf.name = ".sframe";
  sf.type = elf_writer::sht_gnu_sframe;
  sf.flags = SHF_ALLOC;
  sf.address = out.sframe_address;
  sf.align = 8;
  sf.data = std::move(*encoded);
  w.add_section(std::move(sf));

  for (size_t i = 0; i < d.names.size() && i < d.functions.size(); ++i) {
    if (d.names[i].empty()) continue;
    elf_writer::symbol s;
    s.name = d.names[i];
    s.section = ".text";
    s.value = d.functions[i].start;
    s.size = d.functions[i].size;
    w.add_symbol(std::move(s));
  }

  w.add_segment({PT_LOAD, PF_R | PF_X, {".text"}, 0});
  w.add_segment({PT_LOAD, PF_R, {".sframe"}, 0});
  w.add_segment({elf_writer::pt_gnu_sframe, PF_R, {".sframe"}, 0});
  auto image = w.write();
  if (!image) return image.error();
  out.bytes = std::move(*image);
  return out;
}

}  // namespace jitunwind::cli
