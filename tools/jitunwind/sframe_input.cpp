#include "sframe_input.hpp"

#include "cli.hpp"
#include <jitunwind/toolkit/elf_reader.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include <jitunwind/sframe.h>

#include <limits>
#include <map>

namespace jitunwind::cli {

namespace {

using toolkit::elf_image;
using toolkit::elf_section;

// Relocation types that can appear on a 32-bit FDE start field.
constexpr uint32_t r_x86_64_none = 0, r_x86_64_pc32 = 2, r_x86_64_plt32 = 4, r_x86_64_32 = 10,
                   r_x86_64_32s = 11;
constexpr uint32_t r_aarch64_none = 0, r_aarch64_abs32 = 258, r_aarch64_prel32 = 261;
// SFrame v3 start offsets are 64-bit fields.
constexpr uint32_t r_x86_64_64 = 1, r_x86_64_pc64 = 24, r_aarch64_abs64 = 257,
                   r_aarch64_prel64 = 260;

std::string elf_kind(const elf_image& img) {
  std::string kind;
  switch (img.type()) {
    case toolkit::elf_et_rel:
      kind = "relocatable";
      break;
    case toolkit::elf_et_exec:
      kind = "executable";
      break;
    case toolkit::elf_et_dyn:
      kind = "shared object";
      break;
    default:
      kind = "ELF type " + std::to_string(img.type());
      break;
  }
  kind += " " + toolkit::elf_machine_name(img.machine());
  if (img.big_endian()) kind += " (big endian)";
  return kind;
}

enum class reloc_kind { none, field32, field64, unsupported };

/// Relocations that can sit on an FDE start field (32 bits in v1/v2, 64 in v3). PC-relative or
/// absolute makes no difference here: the target (S + A) is the function start either way.
reloc_kind classify_relocation(uint16_t machine, uint32_t type) {
  if (machine == toolkit::elf_em_x86_64) {
    if (type == r_x86_64_none) return reloc_kind::none;
    if (type == r_x86_64_pc32 || type == r_x86_64_plt32 || type == r_x86_64_32 ||
        type == r_x86_64_32s)
      return reloc_kind::field32;
    if (type == r_x86_64_pc64 || type == r_x86_64_64) return reloc_kind::field64;
  } else if (machine == toolkit::elf_em_aarch64) {
    if (type == r_aarch64_none) return reloc_kind::none;
    if (type == r_aarch64_prel32 || type == r_aarch64_abs32) return reloc_kind::field32;
    if (type == r_aarch64_prel64 || type == r_aarch64_abs64) return reloc_kind::field64;
  }
  return reloc_kind::unsupported;
}

/// Resolves the relocations that apply to the SFrame section of a relocatable object (see the
/// header for the meaning given to them).
result<size_t> apply_relocations(const elf_image& img, const elf_section& target,
                                 uint64_t section_address, std::vector<uint8_t>& bytes) {
  size_t applied = 0;
  const bool pcrel = bytes.size() > 3 && (bytes[3] & sframe::flag_fde_func_start_pcrel);
  // Linear in the file: each symbol table is decoded once, and relocation sections that claim
  // more bytes in all than the file has overlap (a hostile file), which is refused.
  std::map<uint32_t, std::vector<toolkit::elf_symbol>> symbol_tables;
  uint64_t relocation_bytes = 0, symbol_bytes = 0;
  for (const elf_section& rs : img.sections()) {
    if ((rs.type != toolkit::elf_sht_rela && rs.type != toolkit::elf_sht_rel) ||
        rs.info != target.index)
      continue;
    relocation_bytes += rs.size;
    if (relocation_bytes > img.file_size())
      return error(errc::malformed, "relocation sections for " + target.name +
                                        " claim more bytes than the file has: they overlap");
    auto relocs = img.relocations(rs);
    if (!relocs) return relocs.error();
    if (rs.link >= img.sections().size())
      return error(errc::malformed, "relocation section " + rs.name + ": symbol table index " +
                                        std::to_string(rs.link) + " out of range");
    auto table = symbol_tables.find(rs.link);
    if (table == symbol_tables.end()) {
      symbol_bytes += img.sections()[rs.link].size;
      if (symbol_bytes > img.file_size())
        return error(errc::malformed, "the symbol tables of the relocations for " + target.name +
                                          " claim more bytes than the file has: they overlap");
      auto decoded = img.symbols(img.sections()[rs.link]);
      if (!decoded) return decoded.error();
      table = symbol_tables.emplace(rs.link, std::move(*decoded)).first;
    }
    const std::vector<toolkit::elf_symbol>* symbols = &table->second;
    for (size_t i = 0; i < relocs->size(); ++i) {
      const auto& r = (*relocs)[i];
      const std::string where = rs.name + "[" + std::to_string(i) + "]";
      const reloc_kind kind = classify_relocation(img.machine(), r.type);
      if (kind == reloc_kind::unsupported)
        return error(errc::unsupported, where + ": relocation type " + std::to_string(r.type) +
                                            " on an SFrame section is not supported");
      if (kind == reloc_kind::none) continue;
      const size_t width = kind == reloc_kind::field64 ? 8 : 4;
      if (r.offset > bytes.size() || bytes.size() - r.offset < width)
        return error(errc::malformed, where + ": offset " + hex_text(r.offset) +
                                          " is past the section (" + std::to_string(bytes.size()) +
                                          " bytes)");
      if (r.symbol >= symbols->size())
        return error(errc::malformed, where + ": symbol index " + std::to_string(r.symbol) +
                                          " out of range (" + std::to_string(symbols->size()) +
                                          " symbols)");
      const auto& sym = (*symbols)[r.symbol];
      uint64_t s = sym.value;
      // Section-relative symbol values (SHN_UNDEF = 0, reserved indices ≥ 0xff00 excluded).
      if (sym.shndx != 0 && sym.shndx < 0xff00 && sym.shndx < img.sections().size())
        s += img.sections()[sym.shndx].addr;
      int64_t addend = r.addend;
      if (rs.type == toolkit::elf_sht_rel)
        addend = width == 8 ? static_cast<int64_t>(img.read_uint(bytes.data() + r.offset, 8))
                            : static_cast<int32_t>(img.read_uint(bytes.data() + r.offset, 4));
      const uint64_t target_address = s + static_cast<uint64_t>(addend);
      const uint64_t base = pcrel ? section_address + r.offset : section_address;
      const int64_t value = static_cast<int64_t>(target_address - base);
      if (width == 4 && (value < std::numeric_limits<int32_t>::min() ||
                         value > std::numeric_limits<int32_t>::max()))
        return error(errc::out_of_range, where + ": target " + hex_text(target_address) +
                                             " is not within ±2 GiB of the field");
      const auto v = static_cast<uint64_t>(value);
      for (size_t k = 0; k < width; ++k) {
        const size_t shift = 8 * (img.big_endian() ? width - 1 - k : k);
        bytes[r.offset + k] = static_cast<uint8_t>(v >> shift);
      }
      ++applied;
    }
  }
  return applied;
}

void collect_function_symbols(const std::string& path, const elf_image& img, sframe_source& out) {
  // The first table of each kind (an object has one): thousands of symbol table headers over
  // one table must not decode it thousands of times.
  for (const uint32_t type : {toolkit::elf_sht_symtab, toolkit::elf_sht_dynsym}) {
    const elf_section* table = img.first_section_of_type(type);
    if (table == nullptr) continue;
    const elf_section& s = *table;
    auto symbols = img.symbols(s);
    if (!symbols) {
      // Names are a convenience (a bad symbol table is not fatal), but an answer without them
      // says why (input_cuts.hpp).
      const std::string what = "symbol table " + s.name + " [" + std::to_string(s.index) +
                               "] of " + path + " (function names)";
      out.left_out.push_back(toolkit::is_limit(symbols.error())
                                 ? out.cut.add(what, symbols.error().message())
                                 : toolkit::terminal_text(what) + " left out: " +
                                       toolkit::terminal_text(symbols.error().message()));
      continue;
    }
    for (const auto& sym : *symbols) {
      if (sym.type != 2 || sym.name.empty() || sym.shndx == 0) continue;  // STT_FUNC, defined
      uint64_t address = sym.value;
      if (img.type() == toolkit::elf_et_rel && sym.shndx < 0xff00 &&
          sym.shndx < img.sections().size())
        address += img.sections()[sym.shndx].addr;
      out.function_symbols.emplace(address, sym.name);  // first name wins (.symtab before aliases)
    }
  }
}

}  // namespace

result<sframe_source> load_sframe_source(const std::string& path,
                                         const sframe_source_options& options) {
  auto file = read_file(path);
  if (!file) return file.error();
  return load_sframe_source(path, std::move(*file), options);
}

result<sframe_source> load_sframe_source(const std::string& path, std::vector<uint8_t> bytes,
                                         const sframe_source_options& options) {
  sframe_source out;
  if (options.raw) {
    out.bytes = std::move(bytes);
    out.address = options.address.value_or(0);
    out.where = "raw file";
    return out;
  }

  // `img` views `bytes`, which outlives it; the section is copied out.
  auto img = elf_image::parse(bytes);
  if (!img) {
    const bool is_elf = bytes.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' &&
                        bytes[2] == 'L' && bytes[3] == 'F';
    if (!is_elf)
      return error(errc::malformed,
                   path + ": not an ELF file (use --raw for a bare SFrame section)");
    return error(img.error().code(), path + ": " + img.error().message());
  }
  out.elf_kind = elf_kind(*img);

  const elf_section* sec = img->find_section(options.section);
  if (!sec) {
    const auto* seg = img->find_segment(toolkit::elf_pt_gnu_sframe);
    if (options.section == ".sframe" && img->sections().size() <= 1 && seg) {
      auto data = img->segment_data(*seg);
      if (!data) return error(data.error().code(), path + ": " + data.error().message());
      out.bytes.assign(data->begin(), data->end());
      out.address = options.address.value_or(seg->vaddr);
      out.where = "PT_GNU_SFRAME";
      return out;
    }
    return error(errc::not_found, path + ": no section " + options.section + " (" + out.elf_kind +
                                      ", " + std::to_string(img->sections().size()) + " sections)");
  }
  if (sec->type == toolkit::elf_sht_nobits)
    return error(errc::malformed, path + ": section " + sec->name + " is SHT_NOBITS (no data)");
  auto data = img->section_data(*sec);
  if (!data) return error(data.error().code(), path + ": " + data.error().message());
  out.bytes.assign(data->begin(), data->end());
  out.address = options.address.value_or(sec->addr);
  out.where = "section " + sec->name + " [" + std::to_string(sec->index) + "]";
  if (img->type() == toolkit::elf_et_rel) {
    auto applied = apply_relocations(*img, *sec, out.address, out.bytes);
    if (!applied) return error(applied.error().code(), path + ": " + applied.error().message());
    out.relocations_applied = *applied;
  }
  collect_function_symbols(path, *img, out);
  return out;
}

}  // namespace jitunwind::cli
