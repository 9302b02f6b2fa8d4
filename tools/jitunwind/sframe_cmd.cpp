// Command group `jitunwind sframe`: dump, check and build SFrame sections.
#include "cli.hpp"
#include "guarded/text.hpp"
#include "sframe_elf.hpp"
#include "sframe_from_eh_frame.hpp"
#include "sframe_input.hpp"
#include "sframe_json.hpp"
#include "sframe_text.hpp"

#include <jitunwind/sframe.h>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace jitunwind::cli {

namespace {

const option_spec raw_option{
    "raw", 0, "",
    "FILE is a bare SFrame section (e.g. bytes a JIT wrote, or `objcopy -O binary "
    "--only-section=.sframe`), not an ELF file."};
const option_spec address_option{
    "address", 0, "ADDR",
    "Address of the section's first byte (decimal or 0x-hex). FDE start addresses are "
    "offsets from it. Default: 0 with --raw, the section's address in an ELF file."};
const option_spec section_option{"section", 0, "NAME",
                                 "ELF section to read (default .sframe). Without section "
                                 "headers, .sframe is found through PT_GNU_SFRAME."};
const option_spec sframe_version_option{
    "sframe-version", 0, "N",
    "SFrame version to write: 3 (binutils 2.46, the kernel's SFrame series since v13) or 2 "
    "(binutils 2.41-2.45, LLVM 22)."};
const option_spec no_flex_option{
    .name = "flex",
    .help =
        "Refuse functions that need a v3 FLEX FDE (for kernels whose v3 reader drops a section "
        "with one), naming the function and row.",
    .type = cmdline::kind::flag,
    .on_by_default = true};

const command_spec dump_spec{
    "dump",
    "FILE",
    "Decode and print an SFrame section (v1, v2 or v3).",
    "FILE is an ELF object, executable or shared object, or with --raw a bare section. "
    "Relocatable objects have their FDE start relocations resolved (addresses then are "
    "section-relative, as in llvm-readobj). The text format shows the header and, for each "
    "function, its PC range, its v3 attributes (FLEX FDE, signal frame, PAuth key B) and the "
    "CFA, return-address and frame-pointer rule of each row (v3 rules as \"r10+0\", "
    "\"*(fp-8)\": register 10 plus 0, the word at fp-8). The JSON format is the description "
    "schema of docs/sframe-json.md, which `sframe build` reads, plus \"flags\" and the "
    "section's \"version\". An empty file or section is reported as having no SFrame data.",
    {section_option,
     raw_option,
     address_option,
     {"format", 'f', "FMT", "Output format: text (default) or json."}},
    1,
    1,
    "jitunwind sframe dump app.o\n"
    "jitunwind sframe dump --format json libfoo.so > rows.json\n"
    "jitunwind sframe dump --raw --address 0x7f0000001000 window.sframe"};

const command_spec check_spec{
    "check",
    "FILE...",
    "Validate SFrame sections; exit 0 only if every FILE is valid.",
    "Prints `FILE: ok (N functions, M rows, SFrame vV)` for each valid FILE (v3: also how many "
    "functions are FLEX FDEs), or `FILE: ` followed by the first problem found (every count, "
    "offset and row is checked against the section; the decoder treats input as hostile). "
    "Versions 1, 2 and 3 are read.",
    {section_option, raw_option, address_option},
    1,
    SIZE_MAX,
    "jitunwind sframe check build/*.o\n"
    "jitunwind sframe check --raw window.sframe"};

const command_spec build_spec{
    "build",
    "",
    "Encode a JSON description (docs/sframe-json.md) into an SFrame v3 (or v2) section.",
    "The version is --sframe-version, else the description's \"version\", else 3. v3 "
    "functions are DEFAULT FDEs unless a row needs a FLEX FDE (--no-flex refuses those, "
    "naming the function and row); v2 cannot hold the v3 rules or signal frames and refuses "
    "them the same way. With --raw the output is the bare section; with --elf an ELF shared "
    "object (ET_DYN) whose "
    "sections have final addresses: .text at the lowest function start covering all functions "
    "(zero-filled; SHT_NOBITS above 16 MiB), .sframe on the next page, PT_LOAD segments for "
    "both and PT_GNU_SFRAME, and a symbol for every function with a \"name\". It needs no "
    "relocations, so llvm-readobj --sframe and `jitunwind sframe dump` show the real addresses.",
    {{"input", 'i', "FILE", "The JSON description to encode (- for standard input). Required."},
     {"raw", 0, "OUT", "Write the bare section to OUT."},
     {"elf", 0, "OUT", "Write an ELF image with .text and .sframe to OUT."},
     {"address", 0, "ADDR",
      "With --raw: the address the section will live at (default 0); FDE starts are encoded "
      "relative to it, so functions must be within 2 GiB of it."},
     {"section-relative", 0, "",
      "Encode FDE start addresses relative to the section start instead of to each FDE's own "
      "field (clears FDE_FUNC_START_PCREL; the kernel's v3 reader refuses such sections)."},
     from_eh_frame_option(),
     cfi_section_option(),
     sframe_version_option,
     no_flex_option},
    0,
    0,
    "jitunwind sframe build --input examples/demo/jit-functions.json --elf jit.so\n"
    "jitunwind sframe build --from-eh-frame app.o --elf app-sframe.so\n"
    "jitunwind sframe build -i rows.json --raw window.sframe --address 0x7f0000100000\n"
    "jitunwind sframe build -i rows.json --sframe-version 2 --raw window-v2.sframe"};

const command_spec convert_spec{
    "convert",
    "IN",
    "Re-encode an SFrame section (v1, v2 or v3) as another version.",
    "IN is an ELF file (its .sframe section, or --section) or with --in-raw a bare section at "
    "--in-address. Its functions and rows are decoded and encoded again as --sframe-version "
    "(PC-relative starts, sorted, minimal widths; v3: FLEX FDEs only where a row needs one), "
    "so that binaries of binutils 2.40-2.45 can be tried with v3 readers, and v3 sections with "
    "v2 readers. What the target version cannot express is refused with the function and row "
    "named (v2: the v3 rules, signal frames; v3 with --no-flex: rows that need FLEX). A v3 "
    "function without rows (an outermost frame) becomes one outermost row in v2; a v1/v2 "
    "function without rows (it says nothing) is left out of a v3 section. Rows are kept "
    "as they are, also those our code-generation rules would not write (e.g. gas's \"FP saved\" "
    "after an epilogue). With --raw the output is the bare section, for --address (default: "
    "where IN's section was); with --elf an ELF image laid out like `sframe build --elf`.",
    {{"in-raw", 0, "", "IN is a bare SFrame section, not an ELF file."},
     {"in-address", 0, "ADDR",
      "With --in-raw: the address of IN's first byte (default 0). FDE starts are offsets from "
      "it."},
     section_option,
     sframe_version_option,
     {"raw", 0, "OUT", "Write the bare section to OUT."},
     {"elf", 0, "OUT", "Write an ELF image with .text and .sframe to OUT."},
     {"address", 0, "ADDR",
      "With --raw: the address the new section will live at (default: IN's section address)."},
     no_flex_option},
    1,
    1,
    "jitunwind sframe convert /usr/bin/app --sframe-version 3 --raw app-v3.sframe\n"
    "jitunwind sframe convert --in-raw --in-address 0x401040 v3.sframe --sframe-version 2 "
    "--elf v2.so"};

result<sframe_source_options> source_options(const parsed_args& args) {
  sframe_source_options o;
  o.raw = args.flag("raw");
  if (auto s = args.value("section")) {
    if (o.raw) return error(errc::invalid_argument, "--section cannot be used with --raw");
    o.section = *s;
  }
  if (auto a = args.value("address")) {
    auto v = parse_u64(*a);
    if (!v)
      return error(errc::invalid_argument,
                   "--address: not a number: '" + detail::shortened(*a) + "'");
    o.address = *v;
  }
  return o;
}

int run_dump(const std::string& program, const parsed_args& args) {
  auto opts = source_options(args);
  if (!opts) return report(program, opts.error().message(), exit_usage);
  const std::string format = args.value("format").value_or("text");
  if (format != "text" && format != "json")
    return report(program, "--format: expected text or json, got '" + format + "'", exit_usage);
  const std::string& path = args.operands[0];
  auto source = load_sframe_source(path, *opts);
  if (!source) return report(program, source.error().message(), exit_failure);
  auto decoded = sframe::decode(source->bytes, source->address);
  if (!decoded) return report(program, path + ": " + decoded.error().message(), exit_failure);

  // Written as it is made: the text is many times the section.
  bool written = true;
  const text_sink to_stdout = [&](std::string& chunk) {
    written = written && std::fwrite(chunk.data(), 1, chunk.size(), stdout) == chunk.size();
    chunk.clear();
  };
  if (format == "json") {
    sframe_description d;
    d.target = decoded->info.target;
    d.version = decoded->info.version;
    d.flags = decoded->info.flags;
    for (const function_desc& f : decoded->functions) {
      auto it = source->function_symbols.find(f.start);
      d.names.push_back(it == source->function_symbols.end() ? std::string() : it->second);
    }
    d.functions = std::move(decoded->functions);
    write_sframe_json(d, to_stdout);
  } else {
    write_sframe_text(path, *source, *decoded, to_stdout);
  }
  return std::fflush(stdout) == 0 && written ? exit_ok : exit_failure;
}

int run_check(const std::string& program, const parsed_args& args) {
  auto opts = source_options(args);
  if (!opts) return report(program, opts.error().message(), exit_usage);
  int status = exit_ok;
  for (const std::string& path : args.operands) {
    auto source = load_sframe_source(path, *opts);
    if (!source) {
      std::printf("%s\n", source.error().message().c_str());
      status = exit_failure;
      continue;
    }
    auto decoded = sframe::decode(source->bytes, source->address);
    if (!decoded) {
      std::printf("%s: %s\n", path.c_str(), decoded.error().message().c_str());
      status = exit_failure;
      continue;
    }
    size_t rows = 0, flex = 0;
    for (const auto& f : decoded->functions) rows += f.rows.size();
    for (const auto& l : decoded->layout) flex += l.fde_type == 1;
    std::printf("%s: ok (%s, %s, SFrame v%u%s)\n", path.c_str(),
                count_text(decoded->functions.size(), "function").c_str(),
                count_text(rows, "row").c_str(), decoded->info.version,
                decoded->info.version >= 3 ? (", " + std::to_string(flex) + " FLEX").c_str() : "");
  }
  std::fflush(stdout);
  return status;
}

// --address of an output section (--raw only); the usage error if it is wrong.
std::optional<std::string> output_address(const parsed_args& args, bool raw,
                                          std::optional<uint64_t>& address) {
  auto a = args.value("address");
  if (!a) return std::nullopt;
  if (!raw) return "--address applies to --raw only (the ELF layout decides it)";
  address = parse_u64(*a);
  if (!address) return "--address: not a number: '" + detail::shortened(*a) + "'";
  return std::nullopt;
}

// --sframe-version: 2 or 3 if given; `*bad` says why not.
std::optional<uint8_t> version_option(const parsed_args& args, std::string* bad) {
  auto v = args.value("sframe-version");
  if (!v) return std::nullopt;
  if (*v != "2" && *v != "3") {
    *bad = "--sframe-version: expected 2 or 3, got '" + detail::shortened(*v) + "'";
    return std::nullopt;
  }
  return static_cast<uint8_t>((*v)[0] - '0');
}

result<std::string> read_text_input(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  return std::string(bytes->begin(), bytes->end());
}

int run_build(const std::string& program, const parsed_args& args) {
  if (args.value("from-eh-frame")) return run_build_from_eh_frame(program, args);
  const auto input = args.value("input");
  if (!input) return report(program, "--input FILE is required", exit_usage);
  const auto raw_out = args.value("raw");
  const auto elf_out = args.value("elf");
  if (raw_out.has_value() == elf_out.has_value())
    return report(program, "give exactly one of --raw OUT and --elf OUT", exit_usage);
  std::optional<uint64_t> address;
  if (auto bad_address = output_address(args, raw_out.has_value(), address))
    return report(program, *bad_address, exit_usage);

  std::string bad;
  const auto version_arg = version_option(args, &bad);
  if (!bad.empty()) return report(program, bad, exit_usage);
  auto text = read_text_input(*input);
  if (!text) return report(program, text.error().message(), exit_failure);
  auto d = parse_sframe_json(*text);
  if (!d) return report(program, *input + ": " + d.error().message(), exit_failure);

  sframe::encoder_options eo;
  eo.target = d->target;
  eo.version = version_arg.value_or(d->version.value_or(sframe::version_3));
  eo.allow_flex = args.state("flex").value_or(true);
  eo.pcrel = !args.flag("section-relative");
  if (d->flags) {
    const bool pcrel = (*d->flags & sframe::flag_fde_func_start_pcrel) != 0;
    if (args.flag("section-relative") && pcrel)
      return report(program,
                    *input + ": flags: FDE_FUNC_START_PCREL contradicts --section-relative",
                    exit_usage);
    eo.pcrel = pcrel;
    if (eo.version == sframe::version_2)
      eo.frame_pointer = (*d->flags & sframe::flag_frame_pointer) != 0;
    else if (*d->flags & sframe::flag_frame_pointer)
      return report(program,
                    *input +
                        ": flags: FRAME_POINTER does not exist in SFrame version 3 (give "
                        "--sframe-version 2 or drop the flag)",
                    exit_failure);
  }
  size_t rows = 0;
  for (const auto& f : d->functions) rows += f.rows.size();

  if (raw_out) {
    eo.section_address = address.value_or(0);
    auto bytes = sframe::encode(eo, d->functions);
    if (!bytes) return report(program, *input + ": " + bytes.error().message(), exit_failure);
    if (auto w = write_file(*raw_out, *bytes); !w)
      return report(program, w.error().message(), exit_failure);
    std::printf("wrote %s: SFrame v%u section for address 0x%llx, %zu bytes, %s, %s\n",
                raw_out->c_str(), eo.version, static_cast<unsigned long long>(eo.section_address),
                bytes->size(), count_text(d->functions.size(), "function").c_str(),
                count_text(rows, "row").c_str());
    return exit_ok;
  }
  auto image = build_sframe_elf(*d, eo);
  if (!image) return report(program, *input + ": " + image.error().message(), exit_failure);
  if (auto w = write_file(*elf_out, image->bytes); !w)
    return report(program, w.error().message(), exit_failure);
  std::printf(
      "wrote %s: ELF %s (ET_DYN), .text [0x%llx, 0x%llx)%s, .sframe v%u at 0x%llx (%zu "
      "bytes), %s, %s\n",
      elf_out->c_str(), to_string(d->target), static_cast<unsigned long long>(image->text_address),
      static_cast<unsigned long long>(image->text_address + image->text_size),
      image->text_zero_filled ? "" : " (SHT_NOBITS)", eo.version,
      static_cast<unsigned long long>(image->sframe_address), image->sframe_size,
      count_text(d->functions.size(), "function").c_str(), count_text(rows, "row").c_str());
  return exit_ok;
}

int run_convert(const std::string& program, const parsed_args& args) {
  std::string bad;
  const auto version = version_option(args, &bad);
  if (!bad.empty()) return report(program, bad, exit_usage);
  if (!version) return report(program, "--sframe-version 2|3 is required", exit_usage);
  const auto raw_out = args.value("raw");
  const auto elf_out = args.value("elf");
  if (raw_out.has_value() == elf_out.has_value())
    return report(program, "give exactly one of --raw OUT and --elf OUT", exit_usage);
  sframe_source_options in;
  in.raw = args.flag("in-raw");
  if (auto s = args.value("section")) {
    if (in.raw) return report(program, "--section cannot be used with --in-raw", exit_usage);
    in.section = *s;
  }
  if (auto a = args.value("in-address")) {
    if (!in.raw) return report(program, "--in-address applies to --in-raw only", exit_usage);
    in.address = parse_u64(*a);
    if (!in.address)
      return report(program, "--in-address: not a number: '" + detail::shortened(*a) + "'",
                    exit_usage);
  }
  std::optional<uint64_t> address;
  if (auto bad_address = output_address(args, raw_out.has_value(), address))
    return report(program, *bad_address, exit_usage);
  const std::string& path = args.operands[0];
  auto source = load_sframe_source(path, in);
  if (!source) return report(program, source.error().message(), exit_failure);
  auto decoded = sframe::decode(source->bytes, source->address);
  if (!decoded) return report(program, path + ": " + decoded.error().message(), exit_failure);
  if (decoded->info.target == abi::s390x)
    return report(program, path + ": s390x sections are read as data only; they cannot be encoded",
                  exit_failure);

  sframe_description d;
  d.target = decoded->info.target;
  d.version = *version;
  for (function_desc& f : decoded->functions) {
    // v2 has no "outermost function without rows": say it with one outermost row.
    if (*version == sframe::version_2 && f.rows.empty() && decoded->info.version >= 3)
      f.rows.push_back(outermost_row(0));
    auto it = source->function_symbols.find(f.start);
    d.names.push_back(it == source->function_symbols.end() ? std::string() : it->second);
  }
  d.functions = std::move(decoded->functions);
  sframe::encoder_options eo;
  eo.target = d.target;
  eo.version = *version;
  eo.allow_flex = args.state("flex").value_or(true);
  eo.strict = false;  // keep the rows as they are, also gas's and LLVM's foreign ones
  size_t rows = 0;
  for (const auto& f : d.functions) rows += f.rows.size();
  const std::string summary = count_text(d.functions.size(), "function") + ", " +
                              count_text(rows, "row") + ", from SFrame v" +
                              std::to_string(decoded->info.version);
  if (raw_out) {
    eo.section_address = address.value_or(source->address);
    auto bytes = sframe::convert(source->bytes, source->address, eo);
    if (!bytes) return report(program, path + ": " + bytes.error().message(), exit_failure);
    if (auto w = write_file(*raw_out, *bytes); !w)
      return report(program, w.error().message(), exit_failure);
    std::printf("wrote %s: SFrame v%u section for address 0x%llx, %zu bytes, %s\n",
                raw_out->c_str(), eo.version, static_cast<unsigned long long>(eo.section_address),
                bytes->size(), summary.c_str());
    return exit_ok;
  }
  auto image = build_sframe_elf(d, eo);
  if (!image) return report(program, path + ": " + image.error().message(), exit_failure);
  if (auto w = write_file(*elf_out, image->bytes); !w)
    return report(program, w.error().message(), exit_failure);
  std::printf("wrote %s: ELF %s (ET_DYN), .sframe v%u at 0x%llx (%zu bytes), %s\n",
              elf_out->c_str(), to_string(d.target), eo.version,
              static_cast<unsigned long long>(image->sframe_address), image->sframe_size,
              summary.c_str());
  return exit_ok;
}

const command commands[] = {
    {&dump_spec, &run_dump},
    {&check_spec, &run_check},
    {&build_spec, &run_build},
    {&convert_spec, &run_convert},
};

void print_group_help(const std::string& program) {
  std::printf(
      "Usage: %s COMMAND [OPTIONS] [ARGS]\n\n"
      "Decode, validate, build and convert SFrame unwind sections (.sframe; reads versions 1, 2\n"
      "and 3, writes 3 by default and 2 on request).\n\n"
      "Commands:\n",
      program.c_str());
  for (const auto& c : commands)
    std::printf("  %-8s %s\n", c.spec->name.c_str(), c.spec->summary.c_str());
  std::printf(
      "\nOptions:\n  -h, --help  Show this help and exit.\n\n"
      "`%s COMMAND --help` documents a command.\n"
      "The JSON description format is in docs/sframe-json.md.\n",
      program.c_str());
}

}  // namespace

int sframe_main(const invocation& inv) {
  return run_group(inv, commands, print_group_help);
}

}  // namespace jitunwind::cli
