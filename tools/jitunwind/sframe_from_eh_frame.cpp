// `jitunwind sframe build --from-eh-frame FILE`: the DWARF CFI of an ELF file (`.eh_frame`, or
// `.debug_frame`) converted into an SFrame section, with every function that cannot be
// converted reported (and why). Hooked into `sframe build` (sframe_cmd.cpp).
#include "sframe_from_eh_frame.hpp"

#include "elf/elf_reader.hpp"
#include "elf/object_layout.hpp"
#include "sframe_elf.hpp"
#include "sframe_json.hpp"

#include <jitunwind/cfi.h>
#include <jitunwind/sframe.h>

#include <cstdio>
#include <map>

namespace jitunwind::cli {

namespace {

using detail::elf_image;
using detail::elf_section;

struct eh_frame_input {
  std::vector<uint8_t> bytes;
  cfi::decoder_options options;
  std::string where;  ///< "section .eh_frame [5]"
  size_t relocations = 0;
  std::map<uint64_t, std::string> names;  ///< function symbols by address (layout applied)
};

result<abi> target_of(const elf_image& img) {
  if (img.machine() == detail::elf_em_x86_64 && !img.big_endian()) return abi::amd64;
  if (img.machine() == detail::elf_em_aarch64 && !img.big_endian()) return abi::aarch64_le;
  return error(errc::unsupported, "machine " + detail::elf_machine_name(img.machine()) +
                                      (img.big_endian() ? " (big endian)" : "") +
                                      ": only x86-64 and little-endian AArch64 CFI is converted");
}

result<eh_frame_input> load(const std::string& path, const std::string& section_name) {
  auto file = read_file(path);
  if (!file) return file.error();
  auto img = elf_image::parse(*file);
  if (!img) return error(img.error().code(), path + ": " + img.error().message());
  auto target = target_of(*img);
  if (!target) return error(target.error().code(), path + ": " + target.error().message());

  const elf_section* sec = nullptr;
  if (!section_name.empty()) {
    sec = img->find_section(section_name);
  } else {
    sec = img->find_section(".eh_frame");
    if (!sec) sec = img->find_section(".debug_frame");
  }
  if (!sec)
    return error(
        errc::not_found,
        path + ": no section " +
            (section_name.empty() ? std::string(".eh_frame or .debug_frame") : section_name));
  if (sec->type == detail::elf_sht_nobits)
    return error(errc::malformed, path + ": section " + sec->name + " is SHT_NOBITS (no data)");

  eh_frame_input in;
  in.options.target = *target;
  in.options.kind =
      sec->name == ".debug_frame" ? cfi::section_kind::debug_frame : cfi::section_kind::eh_frame;
  in.where = "section " + sec->name + " [" + std::to_string(sec->index) + "]";
  std::vector<uint64_t> base(img->sections().size(), 0);
  if (img->type() == detail::elf_et_rel) {
    // Code sections of an object all start at 0: lay them out like a linker would, so that
    // every function gets an address of its own, and resolve the CFI's relocations.
    const detail::object_layout layout = detail::lay_out_sections(*img);
    auto rel = detail::relocate_section(*img, *sec, layout);
    if (!rel) return error(rel.error().code(), path + ": " + rel.error().message());
    in.bytes = std::move(rel->bytes);
    in.relocations = rel->relocations;
    in.options.section_address = layout.address[sec->index];
    base = layout.address;
  } else {
    auto data = img->section_data(*sec);
    if (!data) return error(data.error().code(), path + ": " + data.error().message());
    in.bytes.assign(data->begin(), data->end());
    in.options.section_address = sec->addr;
    // DW_EH_PE_datarel in .eh_frame is relative to .eh_frame_hdr (LSB) when there is one.
    if (const elf_section* hdr = img->find_section(".eh_frame_hdr"))
      in.options.data_address = hdr->addr;
    if (const elf_section* text = img->find_section(".text")) in.options.text_address = text->addr;
  }
  for (const elf_section& s : img->sections()) {
    if (s.type != detail::elf_sht_symtab && s.type != detail::elf_sht_dynsym) continue;
    auto symbols = img->symbols(s);
    if (!symbols) continue;  // names are a convenience
    for (const auto& sym : *symbols) {
      if (sym.type != 2 || sym.name.empty() || sym.shndx == 0 || sym.shndx >= base.size())
        continue;  // defined STT_FUNC in a real section
      in.names.emplace(sym.value + base[sym.shndx], sym.name);
    }
  }
  return in;
}

std::string name_at(const std::map<uint64_t, std::string>& names, uint64_t address) {
  auto it = names.find(address);
  return it == names.end() ? std::string() : it->second;
}

}  // namespace

option_spec from_eh_frame_option() {
  return {
      "from-eh-frame", 0, "FILE",
      "Instead of a JSON description, convert the DWARF CFI (.eh_frame, else .debug_frame) of "
      "the ELF file FILE: a relocatable object (its sections laid out one after the other from "
      "address 0, relocations applied), a shared object or an executable. Functions whose rules "
      "SFrame cannot express (a CFA computed by a DWARF expression or from a register other "
      "than SP/FP, a return address not at CFA-8 on x86-64, ...) are left out, as gas and LLVM "
      "do with --gsframe, and each is reported with the reason."};
}
option_spec cfi_section_option() {
  return {"section", 0, "NAME",
          "With --from-eh-frame: the CFI section to read (.eh_frame or .debug_frame)."};
}

int run_build_from_eh_frame(const std::string& program, const parsed_args& args) {
  const std::string path = *args.value("from-eh-frame");
  if (args.value("input"))
    return report(program, "--from-eh-frame and --input are alternatives", exit_usage);
  struct {
    std::optional<std::string> raw, elf;
    std::optional<uint64_t> address;
  } out{args.value("raw"), args.value("elf"), std::nullopt};
  if (out.raw.has_value() == out.elf.has_value())
    return report(program, "give exactly one of --raw OUT and --elf OUT", exit_usage);
  if (auto a = args.value("address")) {
    if (!out.raw)
      return report(program, "--address applies to --raw only (the ELF layout decides it)",
                    exit_usage);
    out.address = parse_u64(*a);
    if (!out.address) return report(program, "--address: not a number: '" + *a + "'", exit_usage);
  }
  if (args.flag("section-relative"))
    return report(program, "--section-relative applies to JSON input only", exit_usage);
  auto in = load(path, args.value("section").value_or(""));
  if (!in) return report(program, in.error().message(), exit_failure);
  auto decoded = cfi::decode(in->bytes, in->options);
  if (!decoded)
    return report(program, path + ": " + in->where + ": " + decoded.error().message(),
                  exit_failure);

  size_t malformed = 0;
  for (const cfi::left_out_function& l : decoded->left_out) {
    const std::string name = name_at(in->names, l.start);
    if (l.code == errc::malformed) ++malformed;
    std::printf("left out: %s[0x%llx, +0x%llx): %s\n", name.empty() ? "" : (name + " ").c_str(),
                static_cast<unsigned long long>(l.start), static_cast<unsigned long long>(l.size),
                l.reason.c_str());
  }

  sframe_description d;
  d.target = in->options.target;
  size_t rows = 0;
  for (const function_desc& f : decoded->functions) {
    rows += f.rows.size();
    d.names.push_back(name_at(in->names, f.start));
  }
  d.functions = std::move(decoded->functions);

  sframe::encoder_options eo;
  eo.target = d.target;
  eo.strict = false;  // compilers' rows are legal SFrame our generator would not write
  if (auto v = args.value("sframe-version")) {
    if (*v != "2" && *v != "3")
      return report(program, "--sframe-version: expected 2 or 3, got '" + *v + "'", exit_usage);
    eo.version = static_cast<uint8_t>((*v)[0] - '0');
  }
  eo.allow_flex = args.state("flex").value_or(true);
  std::string written;
  if (out.raw) {
    eo.section_address = out.address.value_or(0);
    auto bytes = sframe::encode(eo, d.functions);
    if (!bytes) return report(program, path + ": " + bytes.error().message(), exit_failure);
    if (auto w = write_file(*out.raw, *bytes); !w)
      return report(program, w.error().message(), exit_failure);
    written = "wrote " + *out.raw + ": SFrame v" + std::to_string(eo.version) +
              " section for address " +
              hex_text(eo.section_address) + ", " + std::to_string(bytes->size()) + " bytes";
  } else {
    auto image = build_sframe_elf(d, eo);
    if (!image) return report(program, path + ": " + image.error().message(), exit_failure);
    if (auto w = write_file(*out.elf, image->bytes); !w)
      return report(program, w.error().message(), exit_failure);
    written = "wrote " + *out.elf + ": ELF " + to_string(d.target) + " (ET_DYN), .sframe v" +
              std::to_string(eo.version) + " at " +
              hex_text(image->sframe_address) + " (" + std::to_string(image->sframe_size) +
              " bytes)";
  }
  std::printf("%s; from %s %s (%s): %s converted (%s), %zu left out (%zu malformed)\n",
              written.c_str(), path.c_str(), in->where.c_str(),
              count_text(in->relocations, "relocation").c_str(),
              count_text(d.functions.size(), "function").c_str(), count_text(rows, "row").c_str(),
              decoded->left_out.size(), malformed);
  return std::fflush(stdout) == 0 ? exit_ok : exit_failure;
}

}  // namespace jitunwind::cli
