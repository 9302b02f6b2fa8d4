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

const command_spec dump_spec{
    "dump",
    "FILE",
    "Decode and print an SFrame section (v1 or v2).",
    "FILE is an ELF object, executable or shared object, or with --raw a bare section. "
    "Relocatable objects have their FDE start relocations resolved (addresses then are "
    "section-relative, as in llvm-readobj). The text format shows the header and, for each "
    "function, its PC range and the CFA, return-address and frame-pointer rule of each row. "
    "The JSON format is the description schema of docs/sframe-json.md, which `sframe build` "
    "reads, plus \"flags\" and the section's \"version\".",
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
    "Prints `FILE: ok (N functions, M rows, SFrame vV)` for each valid FILE, or `FILE: ` followed "
    "by the "
    "first problem found (every count, offset and row is checked against the section; the "
    "decoder treats input as hostile).",
    {section_option, raw_option, address_option},
    1,
    SIZE_MAX,
    "jitunwind sframe check build/*.o\n"
    "jitunwind sframe check --raw window.sframe"};

const command_spec build_spec{
    "build",
    "",
    "Encode a JSON description (docs/sframe-json.md) into an SFrame v2 section.",
    "With --raw the output is the bare section; with --elf an ELF shared object (ET_DYN) whose "
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
      "field (clears FDE_FUNC_START_PCREL)."},
     from_eh_frame_option(),
     cfi_section_option()},
    0,
    0,
    "jitunwind sframe build --input examples/demo/jit-functions.json --elf jit.so\n"
    "jitunwind sframe build --from-eh-frame app.o --elf app-sframe.so\n"
    "jitunwind sframe build -i rows.json --raw window.sframe --address 0x7f0000100000"};

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
    size_t rows = 0;
    for (const auto& f : decoded->functions) rows += f.rows.size();
    std::printf("%s: ok (%s, %s, SFrame v%u)\n", path.c_str(),
                count_text(decoded->functions.size(), "function").c_str(),
                count_text(rows, "row").c_str(), decoded->info.version);
  }
  std::fflush(stdout);
  return status;
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
  if (auto a = args.value("address")) {
    if (!raw_out)
      return report(program, "--address applies to --raw only (the ELF layout decides it)",
                    exit_usage);
    address = parse_u64(*a);
    if (!address)
      return report(program, "--address: not a number: '" + detail::shortened(*a) + "'",
                    exit_usage);
  }

  auto text = read_text_input(*input);
  if (!text) return report(program, text.error().message(), exit_failure);
  auto d = parse_sframe_json(*text);
  if (!d) return report(program, *input + ": " + d.error().message(), exit_failure);

  sframe::encoder_options eo;
  eo.target = d->target;
  eo.pcrel = !args.flag("section-relative");
  if (d->flags) {
    const bool pcrel = (*d->flags & sframe::flag_fde_func_start_pcrel) != 0;
    if (args.flag("section-relative") && pcrel)
      return report(program,
                    *input + ": flags: FDE_FUNC_START_PCREL contradicts --section-relative",
                    exit_usage);
    eo.pcrel = pcrel;
    eo.frame_pointer = (*d->flags & sframe::flag_frame_pointer) != 0;
  }
  size_t rows = 0;
  for (const auto& f : d->functions) rows += f.rows.size();

  if (raw_out) {
    eo.section_address = address.value_or(0);
    auto bytes = sframe::encode(eo, d->functions);
    if (!bytes) return report(program, *input + ": " + bytes.error().message(), exit_failure);
    if (auto w = write_file(*raw_out, *bytes); !w)
      return report(program, w.error().message(), exit_failure);
    std::printf("wrote %s: SFrame v2 section for address 0x%llx, %zu bytes, %s, %s\n",
                raw_out->c_str(), static_cast<unsigned long long>(eo.section_address),
                bytes->size(), count_text(d->functions.size(), "function").c_str(),
                count_text(rows, "row").c_str());
    return exit_ok;
  }
  auto image = build_sframe_elf(*d, eo);
  if (!image) return report(program, *input + ": " + image.error().message(), exit_failure);
  if (auto w = write_file(*elf_out, image->bytes); !w)
    return report(program, w.error().message(), exit_failure);
  std::printf(
      "wrote %s: ELF %s (ET_DYN), .text [0x%llx, 0x%llx)%s, .sframe at 0x%llx (%zu "
      "bytes), %s, %s\n",
      elf_out->c_str(), to_string(d->target), static_cast<unsigned long long>(image->text_address),
      static_cast<unsigned long long>(image->text_address + image->text_size),
      image->text_zero_filled ? "" : " (SHT_NOBITS)",
      static_cast<unsigned long long>(image->sframe_address), image->sframe_size,
      count_text(d->functions.size(), "function").c_str(), count_text(rows, "row").c_str());
  return exit_ok;
}

const command commands[] = {
    {&dump_spec, &run_dump},
    {&check_spec, &run_check},
    {&build_spec, &run_build},
};

void print_group_help(const std::string& program) {
  std::printf(
      "Usage: %s COMMAND [OPTIONS] [ARGS]\n\n"
      "Decode, validate and build SFrame unwind sections (.sframe, versions 1 and 2).\n\n"
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
