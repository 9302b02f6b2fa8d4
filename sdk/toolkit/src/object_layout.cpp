#include <jitunwind/toolkit/object_layout.hpp>

#include <jitunwind/toolkit/format.hpp>

#include <limits>

namespace jitunwind::toolkit {

namespace {

constexpr uint64_t shf_alloc = 2;
constexpr uint16_t shn_abs = 0xfff1;

struct reloc_form {
  unsigned width = 0;  // bytes written; 0: R_*_NONE
  bool pc_relative = false;
  bool is_signed = false;  // the value must fit a signed field (else unsigned)
};

// nullopt: a type we do not apply.
std::optional<reloc_form> form_of(uint16_t machine, uint32_t type) {
  if (machine == elf_em_x86_64) {
    switch (type) {
      case 0:
        return reloc_form{0, false, false};  // R_X86_64_NONE
      case 1:
        return reloc_form{8, false, false};  // R_X86_64_64
      case 2:
        return reloc_form{4, true, true};  // R_X86_64_PC32
      case 4:
        return reloc_form{4, true, true};  // R_X86_64_PLT32 (a PC32 for data)
      case 10:
        return reloc_form{4, false, false};  // R_X86_64_32
      case 11:
        return reloc_form{4, false, true};  // R_X86_64_32S
      case 24:
        return reloc_form{8, true, true};  // R_X86_64_PC64
      default:
        return std::nullopt;
    }
  }
  if (machine == elf_em_aarch64) {
    switch (type) {
      case 0:
        return reloc_form{0, false, false};  // R_AARCH64_NONE
      case 257:
        return reloc_form{8, false, false};  // R_AARCH64_ABS64
      case 258:
        return reloc_form{4, false, true};  // R_AARCH64_ABS32
      case 260:
        return reloc_form{8, true, true};  // R_AARCH64_PREL64
      case 261:
        return reloc_form{4, true, true};  // R_AARCH64_PREL32
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

bool fits(int64_t v, const reloc_form& f) {
  if (f.width == 8) return true;
  if (f.is_signed)
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  // Unsigned 32-bit fields also take values that are negative as signed (two's complement
  // addends), as linkers accept for R_*_32 with a wrapping check of their own.
  return v >= std::numeric_limits<int32_t>::min() &&
         v <= static_cast<int64_t>(std::numeric_limits<uint32_t>::max());
}

}  // namespace

object_layout lay_out_sections(const elf_image& img) {
  object_layout l;
  l.address.assign(img.sections().size(), 0);
  uint64_t next = 0;
  for (const elf_section& s : img.sections()) {
    if ((s.flags & shf_alloc) == 0) continue;
    uint64_t align = s.addralign < 16 ? 16 : s.addralign;
    if ((align & (align - 1)) != 0 || align > (uint64_t{1} << 32)) align = 16;  // hostile value
    next = (next + align - 1) & ~(align - 1);
    l.address[s.index] = next;
    // Sizes are bounded by the file, except SHT_NOBITS: keep those from wrapping the layout.
    const uint64_t size = s.size > (uint64_t{1} << 40) ? (uint64_t{1} << 40) : s.size;
    next += size;
  }
  return l;
}

result<relocated_section> relocate_section(const elf_image& img, const elf_section& s,
                                           const object_layout& layout) {
  auto data = img.section_data(s);
  if (!data) return std::move(data).error();
  relocated_section out;
  out.bytes.assign(data->begin(), data->end());
  const uint64_t section_address = s.index < layout.address.size() ? layout.address[s.index] : 0;
  for (const elf_section& rs : img.sections()) {
    if ((rs.type != elf_sht_rela && rs.type != elf_sht_rel) || rs.info != s.index) continue;
    auto relocs = img.relocations(rs);
    if (!relocs) return std::move(relocs).error();
    if (rs.link >= img.sections().size())
      return make_error(errc::malformed, "elf: %s: symbol table index %u out of range",
                        rs.name.c_str(), rs.link);
    auto symbols = img.symbols(img.sections()[rs.link]);
    if (!symbols) return std::move(symbols).error();
    for (size_t i = 0; i < relocs->size(); ++i) {
      const elf_relocation& r = (*relocs)[i];
      const auto form = form_of(img.machine(), r.type);
      if (!form)
        return make_error(errc::unsupported, "elf: %s[%zu]: relocation type %u (%s) not supported",
                          rs.name.c_str(), i, r.type, elf_machine_name(img.machine()).c_str());
      if (form->width == 0) continue;
      if (r.offset > out.bytes.size() || out.bytes.size() - r.offset < form->width)
        return make_error(errc::malformed, "elf: %s[%zu]: offset 0x%llx past %s (%zu bytes)",
                          rs.name.c_str(), i, static_cast<unsigned long long>(r.offset),
                          s.name.c_str(), out.bytes.size());
      if (r.symbol >= symbols->size())
        return make_error(errc::malformed, "elf: %s[%zu]: symbol index %u out of range (%zu)",
                          rs.name.c_str(), i, r.symbol, symbols->size());
      const elf_symbol& sym = (*symbols)[r.symbol];
      uint64_t value = sym.value;
      if (sym.shndx != 0 && sym.shndx != shn_abs) {
        if (sym.shndx >= layout.address.size())
          return make_error(errc::malformed,
                            "elf: %s[%zu]: symbol '%s' in section %u, out of range",
                            rs.name.c_str(), i, sym.name.c_str(), sym.shndx);
        value += layout.address[sym.shndx];
      }
      int64_t addend = r.addend;
      if (rs.type == elf_sht_rel) {
        const uint64_t raw = img.read_uint(out.bytes.data() + r.offset, form->width);
        addend = form->width == 4 ? static_cast<int32_t>(raw) : static_cast<int64_t>(raw);
      }
      uint64_t result = value + static_cast<uint64_t>(addend);
      if (form->pc_relative) result -= section_address + r.offset;
      if (!fits(static_cast<int64_t>(result), *form))
        return make_error(errc::out_of_range,
                          "elf: %s[%zu]: value 0x%llx does not fit the %u-byte field",
                          rs.name.c_str(), i, static_cast<unsigned long long>(result), form->width);
      for (unsigned k = 0; k < form->width; ++k) {
        const unsigned shift = 8 * (img.big_endian() ? form->width - 1 - k : k);
        out.bytes[r.offset + k] = static_cast<uint8_t>(result >> shift);
      }
      ++out.relocations;
    }
  }
  return out;
}

}  // namespace jitunwind::toolkit
