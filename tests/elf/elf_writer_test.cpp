// The private ELF writer: images it produces are read back by our ELF reader and by the real
// tools (GNU readelf, llvm-readobj-22, eu-elflint), in both byte orders; bad layouts are refused.
#include <jitunwind/toolkit/elf_writer.hpp>
#include <jitunwind/toolkit/elf_reader.hpp>

#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <elf.h>

#include <sstream>

using namespace jitunwind;
using namespace jitunwind::toolkit;
namespace t = jitunwind::test;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

/// A typical image: code, a read-only table on the next page, symbols, segments.
elf_writer make_image(bool big_endian, uint16_t machine) {
  elf_writer::options o;
  o.big_endian = big_endian;
  o.machine = machine;
  elf_writer w(o);
  elf_writer::section text;
  text.name = ".text";
  text.flags = SHF_ALLOC | SHF_EXECINSTR;
  text.address = 0x7f0000401010;
  text.align = 16;
  text.data = pattern(0x123, 1);
  w.add_section(text);
  elf_writer::section sf;
  sf.name = ".sframe";
  sf.type = elf_writer::sht_gnu_sframe;
  sf.flags = SHF_ALLOC;
  sf.address = 0x7f0000402000;
  sf.align = 8;
  sf.data = pattern(52, 9);
  w.add_section(sf);
  w.add_symbol({"global_fn", ".text", 0x7f0000401010, 0x100, STT_FUNC, STB_GLOBAL});
  w.add_symbol({"local_fn", ".text", 0x7f0000401110, 0x23, STT_FUNC, STB_LOCAL});
  w.add_segment({PT_LOAD, PF_R | PF_X, {".text"}, 0});
  w.add_segment({PT_LOAD, PF_R, {".sframe"}, 0});
  w.add_segment({elf_writer::pt_gnu_sframe, PF_R, {".sframe"}, 0});
  return w;
}

void check_with_our_reader(const std::vector<uint8_t>& bytes, bool big_endian, uint16_t machine) {
  auto img = elf_image::parse(bytes);
  REQUIRE(img.ok());
  CHECK(img->big_endian() == big_endian);
  CHECK(img->machine() == machine);
  CHECK(img->type() == ET_DYN);
  const elf_section* text = img->find_section(".text");
  const elf_section* sf = img->find_section(".sframe");
  REQUIRE(text);
  REQUIRE(sf);
  CHECK(text->addr == 0x7f0000401010);
  CHECK(text->size == 0x123);
  CHECK(sf->type == elf_writer::sht_gnu_sframe);
  auto data = img->section_data(*sf);
  REQUIRE(data.ok());
  CHECK(std::vector<uint8_t>(data->begin(), data->end()) == pattern(52, 9));
  auto text_data = img->section_data(*text);
  REQUIRE(text_data.ok());
  CHECK(std::vector<uint8_t>(text_data->begin(), text_data->end()) == pattern(0x123, 1));

  REQUIRE(img->segments().size() == 3);
  for (const auto& seg : img->segments()) {
    INFO("segment " << seg.index);
    CHECK(seg.offset % 0x1000 == seg.vaddr % 0x1000);  // what the loader requires
  }
  const elf_segment* gs = img->find_segment(elf_pt_gnu_sframe);
  REQUIRE(gs);
  CHECK(gs->vaddr == sf->addr);
  CHECK(gs->offset == sf->offset);
  CHECK(gs->filesz == sf->size);
  CHECK(img->vaddr_to_offset(0x7f0000401020) == text->offset + 0x10);

  const elf_section* symtab = img->find_section(".symtab");
  REQUIRE(symtab);
  CHECK(symtab->info == 2);  // one null + one local precede the globals
  auto syms = img->symbols(*symtab);
  REQUIRE(syms.ok());
  REQUIRE(syms->size() == 3);
  CHECK((*syms)[1].name == "local_fn");
  CHECK((*syms)[1].bind == STB_LOCAL);
  CHECK((*syms)[2].name == "global_fn");
  CHECK((*syms)[2].value == 0x7f0000401010);
  CHECK((*syms)[2].size == 0x100);
  CHECK((*syms)[2].type == STT_FUNC);
  CHECK((*syms)[2].shndx == text->index);
}

}  // namespace

TEST_CASE("ELF writer images read back by our reader, readelf and llvm-readobj") {
  if (!t::tool_available("readelf") || !t::tool_available("llvm-readobj-22")) return;
  struct variant {
    bool big_endian;
    uint16_t machine;
    const char* readelf_data;
  };
  for (const variant v :
       {variant{false, EM_X86_64, "little endian"}, variant{true, EM_AARCH64, "big endian"}}) {
    INFO("big endian: " << v.big_endian);
    auto image = make_image(v.big_endian, v.machine).write();
    REQUIRE(image.ok());
    check_with_our_reader(*image, v.big_endian, v.machine);

    t::temp_dir dir;
    const std::string path = dir / "image.so";
    REQUIRE(t::write_file(path, std::string(image->begin(), image->end())));
    auto re = t::run({"readelf", "-W", "-h", "-S", "-l", "-s", path});
    CHECK(re.exit_code == 0);
    CHECK(re.err.empty());  // readelf prints every inconsistency it finds as a warning
    CHECK(re.out.find(v.readelf_data) != std::string::npos);
    CHECK(re.out.find("GNU_SFRAME") != std::string::npos);
    CHECK(re.out.find("global_fn") != std::string::npos);
    // Section-to-segment mapping: .text alone in the first segment, .sframe in the others.
    CHECK(re.out.find("00     .text \n") != std::string::npos);
    CHECK(re.out.find("01     .sframe \n") != std::string::npos);
    CHECK(re.out.find("02     .sframe \n") != std::string::npos);

    auto lo = t::run({"llvm-readobj-22", "--file-headers", "--sections", "--program-headers",
                      "--symbols", path});
    CHECK(lo.exit_code == 0);
    CHECK(lo.err.empty());
    CHECK(lo.out.find("SHT_GNU_SFRAME") != std::string::npos);
  }
}

TEST_CASE("ELF writer images pass eu-elflint except for types elfutils 0.188 predates") {
  if (!t::tool_available("eu-elflint")) return;
  auto image = make_image(false, EM_X86_64).write();
  REQUIRE(image.ok());
  t::temp_dir dir;
  const std::string path = dir / "image.so";
  REQUIRE(t::write_file(path, std::string(image->begin(), image->end())));
  auto r = t::run({"eu-elflint", path});
  // elfutils 0.188 (Debian 12) knows neither SHT_GNU_SFRAME nor PT_GNU_SFRAME (both newer);
  // every other check must pass.
  std::istringstream lines(r.out + r.err);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    const bool known =
        line.find("unknown program header entry type 0x6474e554") != std::string::npos ||
        line.find("has unsupported type 1879048180") != std::string::npos;
    CHECK(known);
  }

  // The same image without the two new types is clean.
  elf_writer::options o;
  elf_writer w(o);
  elf_writer::section text;
  text.name = ".text";
  text.flags = SHF_ALLOC | SHF_EXECINSTR;
  text.address = 0x401000;
  text.align = 16;
  text.data = pattern(64, 3);
  w.add_section(text);
  elf_writer::section ro;
  ro.name = ".rodata";
  ro.flags = SHF_ALLOC;
  ro.address = 0x402000;
  ro.align = 8;
  ro.data = pattern(16, 4);
  w.add_section(ro);
  w.add_symbol({"fn", ".text", 0x401000, 64});
  w.add_segment({PT_LOAD, PF_R | PF_X, {".text"}, 0});
  w.add_segment({PT_LOAD, PF_R, {".rodata"}, 0});
  auto plain = w.write();
  REQUIRE(plain.ok());
  REQUIRE(t::write_file(path, std::string(plain->begin(), plain->end())));
  auto clean = t::run({"eu-elflint", path});
  CHECK(clean.exit_code == 0);
  CHECK(clean.out + clean.err == "No errors\n");
}

TEST_CASE("ELF writer: sections of one segment keep their spacing, NOBITS takes no file space") {
  elf_writer w({});
  elf_writer::section a;
  a.name = ".text";
  a.flags = SHF_ALLOC | SHF_EXECINSTR;
  a.address = 0x10000;
  a.data = pattern(0x10, 1);
  w.add_section(a);
  elf_writer::section b;
  b.name = ".rodata";
  b.flags = SHF_ALLOC;
  b.address = 0x10100;  // a gap of 0xf0 bytes inside the segment
  b.data = pattern(0x20, 2);
  w.add_section(b);
  elf_writer::section bss;
  bss.name = ".bss";
  bss.type = SHT_NOBITS;
  bss.flags = SHF_ALLOC | SHF_WRITE;
  bss.address = 0x10200;
  bss.nobits_size = 0x4000;
  w.add_section(bss);
  w.add_segment({PT_LOAD, PF_R | PF_X, {".text", ".rodata", ".bss"}, 0});
  auto image = w.write();
  REQUIRE(image.ok());
  auto img = elf_image::parse(*image);
  REQUIRE(img.ok());
  const auto* text = img->find_section(".text");
  const auto* ro = img->find_section(".rodata");
  REQUIRE(text);
  REQUIRE(ro);
  CHECK(ro->offset - text->offset == 0x100);
  REQUIRE(img->segments().size() == 1);
  const auto& seg = img->segments()[0];
  CHECK(seg.vaddr == 0x10000);
  CHECK(seg.filesz == 0x120);
  CHECK(seg.memsz == 0x4200);
  auto ro_data = img->section_data(*ro);
  REQUIRE(ro_data.ok());
  CHECK(std::vector<uint8_t>(ro_data->begin(), ro_data->end()) == pattern(0x20, 2));
}

TEST_CASE("ELF writer: relocatable image without segments (GDB JIT style)") {
  if (!t::tool_available("readelf")) return;
  elf_writer::options o;
  o.type = ET_REL;
  elf_writer w(o);
  elf_writer::section text;
  text.name = ".text";
  text.flags = SHF_ALLOC | SHF_EXECINSTR;
  text.align = 16;
  text.data = pattern(32, 5);
  w.add_section(text);
  w.add_symbol({"jit_fn", ".text", 0, 32});
  auto image = w.write();
  REQUIRE(image.ok());
  auto img = elf_image::parse(*image);
  REQUIRE(img.ok());
  CHECK(img->type() == ET_REL);
  CHECK(img->segments().empty());
  t::temp_dir dir;
  REQUIRE(t::write_file(dir / "jit.o", std::string(image->begin(), image->end())));
  auto re = t::run({"readelf", "-W", "-S", "-s", dir / "jit.o"});
  CHECK(re.exit_code == 0);
  CHECK(re.err.empty());
  CHECK(re.out.find("jit_fn") != std::string::npos);
  if (t::tool_available("eu-elflint")) {
    auto lint = t::run({"eu-elflint", dir / "jit.o"});
    CHECK(lint.out + lint.err == "No errors\n");
  }
}

TEST_CASE("ELF writer refuses inconsistent layouts with a message naming the culprit") {
  auto fails_with = [](const elf_writer& w, const std::string& needle) {
    auto r = w.write();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    INFO(r.error().message());
    CHECK(r.error().message().find(needle) != std::string::npos);
  };
  elf_writer::section s;
  s.name = ".text";
  s.flags = SHF_ALLOC;
  s.address = 0x1000;
  s.data = pattern(0x100, 0);

  elf_writer dup({});
  dup.add_section(s);
  dup.add_section(s);
  fails_with(dup, "duplicate section .text");

  elf_writer overlap({});
  overlap.add_section(s);
  elf_writer::section s2 = s;
  s2.name = ".data";
  s2.address = 0x10ff;
  overlap.add_section(s2);
  fails_with(overlap, "overlap");

  elf_writer sym({});
  sym.add_section(s);
  sym.add_symbol({"f", ".nothere", 0, 0});
  fails_with(sym, "symbol f: unknown section .nothere");

  elf_writer seg({});
  seg.add_section(s);
  seg.add_segment({PT_LOAD, PF_R, {".missing"}, 0});
  fails_with(seg, "segment 0: unknown section .missing");

  elf_writer misaligned({});
  elf_writer::section m = s;
  m.align = 16;
  m.address = 0x1008;
  misaligned.add_section(m);
  fails_with(misaligned, "not aligned");

  elf_writer generated({});
  elf_writer::section g = s;
  g.name = ".shstrtab";
  generated.add_section(g);
  fails_with(generated, "generated by the writer");
}
