// The private ELF reader against llvm-readelf-22 on real objects of every class and byte order,
// plus hostile input (truncation, random corruption) that must give clean errors.
#include <jitunwind/toolkit/elf_reader.hpp>

#include <jitunwind/frame.h>

#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <sstream>

using namespace jitunwind;
using namespace jitunwind::toolkit;
namespace t = jitunwind::test;

namespace {

struct readelf_section {
  unsigned index;
  std::string name;
  uint64_t addr, offset, size;
};

bool is_hex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Parses `llvm-readelf-22 -SW` output: "[Nr] Name Type Address Off Size ...".
std::vector<readelf_section> readelf_sections(const std::string& path) {
  auto r = t::run({"llvm-readelf-22", "-SW", path});
  REQUIRE(r.exit_code == 0);
  std::vector<readelf_section> out;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    const auto open = l.find('['), close = l.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string nr = l.substr(open + 1, close - open - 1);
    if (nr.find_first_not_of(" 0123456789") != std::string::npos || nr == " 0") continue;
    std::istringstream fields(l.substr(close + 1));
    std::string name, type, addr, off, size;
    if (!(fields >> name >> type >> addr >> off >> size) || !is_hex(addr) || !is_hex(off)) continue;
    out.push_back({static_cast<unsigned>(std::stoul(nr)), name, std::stoull(addr, nullptr, 16),
                   std::stoull(off, nullptr, 16), std::stoull(size, nullptr, 16)});
  }
  return out;
}

struct readelf_segment {
  std::string type;
  uint64_t offset, vaddr, filesz, memsz;
};

// Parses `llvm-readelf-22 -lW`: "Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align".
std::vector<readelf_segment> readelf_segments(const std::string& path) {
  auto r = t::run({"llvm-readelf-22", "-lW", path});
  REQUIRE(r.exit_code == 0);
  std::vector<readelf_segment> out;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::istringstream fields(l);
    std::string type, off, vaddr, paddr, filesz, memsz;
    if (!(fields >> type >> off >> vaddr >> paddr >> filesz >> memsz)) continue;
    if (off.rfind("0x", 0) != 0 || vaddr.rfind("0x", 0) != 0 || memsz.rfind("0x", 0) != 0) continue;
    out.push_back({type, std::stoull(off, nullptr, 16), std::stoull(vaddr, nullptr, 16),
                   std::stoull(filesz, nullptr, 16), std::stoull(memsz, nullptr, 16)});
  }
  return out;
}

void compare_with_readelf(const std::string& path) {
  INFO(path);
  auto bytes = read_whole_file(path);
  REQUIRE(bytes.ok());
  auto img = elf_image::parse(*bytes);
  REQUIRE(img.ok());
  const auto expect = readelf_sections(path);
  REQUIRE(!expect.empty());
  REQUIRE(img->sections().size() == expect.size() + 1);  // the parser skips the null section
  for (const auto& e : expect) {
    const auto& s = img->sections().at(e.index);
    INFO("section " << e.index << " " << e.name);
    CHECK(s.name == e.name);
    CHECK(s.addr == e.addr);
    CHECK(s.offset == e.offset);
    CHECK(s.size == e.size);
    const elf_section* found = img->find_section(e.name);
    REQUIRE(found != nullptr);
    CHECK(found->name == e.name);
    CHECK(img->section_data(s).ok());
  }
  const auto segs = readelf_segments(path);
  REQUIRE(img->segments().size() == segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    INFO("segment " << i << " " << segs[i].type);
    CHECK(img->segments()[i].offset == segs[i].offset);
    CHECK(img->segments()[i].vaddr == segs[i].vaddr);
    CHECK(img->segments()[i].filesz == segs[i].filesz);
    CHECK(img->segments()[i].memsz == segs[i].memsz);
    if (segs[i].type == "LOAD") CHECK(img->segments()[i].type == elf_pt_load);
  }
}

std::string assemble(const t::temp_dir& dir, const std::string& triple, const std::string& src,
                     const std::string& name) {
  t::write_file(dir / (name + ".s"), src);
  auto r = t::run({"llvm-mc-22", "-triple=" + triple, "-filetype=obj", dir / (name + ".s"), "-o",
                   dir / (name + ".o")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir / (name + ".o");
}

}  // namespace

TEST_CASE("ELF reader matches llvm-readelf on the test executable") {
  if (!t::tool_available("llvm-readelf-22")) return;
  // llvm-readelf's own /proc/self/exe is llvm-readelf: give it our real path.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  compare_with_readelf(self);
  auto bytes = read_whole_file(self);
  REQUIRE(bytes.ok());
  auto img = elf_image::parse(*bytes);
  REQUIRE(img.ok());
  CHECK(img->machine() ==
        (jitunwind::native_abi == jitunwind::abi::amd64 ? elf_em_x86_64 : elf_em_aarch64));
  CHECK(img->is_64bit());
  CHECK(!img->big_endian());
  REQUIRE(img->first_load_vaddr().has_value());
  // The entry point is inside a PT_LOAD and maps back to the .text bytes.
  const auto off = img->vaddr_to_offset(img->entry());
  REQUIRE(off.has_value());
  const elf_section* text = img->find_section(".text");
  REQUIRE(text != nullptr);
  CHECK(*off >= text->offset);
  CHECK(*off < text->offset + text->size);
  // Symbols: main is a function.
  const elf_section* symtab = img->find_section(".symtab");
  REQUIRE(symtab != nullptr);
  auto syms = img->symbols(*symtab);
  REQUIRE(syms.ok());
  bool found_main = false;
  for (const auto& s : *syms)
    if (s.name == "main" && s.type == 2) found_main = true;
  CHECK(found_main);
}

TEST_CASE("ELF reader handles ELF32/ELF64 in both byte orders") {
  if (!t::tool_available("llvm-mc-22") || !t::tool_available("llvm-readelf-22")) return;
  t::temp_dir dir;
  const std::string src =
      ".text\nf:\n nop\n nop\n.data\nd: .long f\n.section .note.x,\"a\"\n.long 1,2,3\n";
  struct target {
    const char* triple;
    bool is64, be;
    uint16_t machine;
  };
  for (const target& tg :
       {target{"x86_64", true, false, elf_em_x86_64},
        target{"aarch64_be", true, true, elf_em_aarch64}, target{"i386", false, false, elf_em_386},
        target{"mips", false, true, 8}}) {
    INFO(tg.triple);
    const std::string obj = assemble(dir, tg.triple, src, tg.triple);
    compare_with_readelf(obj);
    auto bytes = read_whole_file(obj);
    REQUIRE(bytes.ok());
    auto img = elf_image::parse(*bytes);
    REQUIRE(img.ok());
    CHECK(img->is_64bit() == tg.is64);
    CHECK(img->big_endian() == tg.be);
    CHECK(img->machine() == tg.machine);
    CHECK(img->type() == elf_et_rel);
    // .data holds one relocation against f (or .text).
    const elf_section* rel = nullptr;
    for (const auto& s : img->sections())
      if ((s.type == elf_sht_rela || s.type == elf_sht_rel) && s.name.find(".data") != s.name.npos)
        rel = &s;
    REQUIRE(rel != nullptr);
    auto relocs = img->relocations(*rel);
    REQUIRE(relocs.ok());
    REQUIRE(relocs->size() == 1);
    CHECK(relocs->front().offset == 0);
    auto syms = img->symbols(img->sections().at(rel->link));
    REQUIRE(syms.ok());
    REQUIRE(relocs->front().symbol < syms->size());
  }
}

TEST_CASE("ELF reader rejects hostile images cleanly") {
  // A small real executable (coreutils' true, ~40 KB): mutating a copy of this test binary
  // (megabytes with debug info) thousands of times would be slow under ASan.
  auto bytes = read_whole_file("/bin/true");
  REQUIRE(bytes.ok());
  const std::vector<uint8_t> good = std::move(*bytes);
  // Every truncation of the headers' region and a sample of later ones.
  for (size_t len = 0; len < good.size(); len += (len < 4096 ? 1 : 4093)) {
    auto img = elf_image::parse(std::span(good.data(), len));
    if (img.ok()) {
      for (const auto& s : img->sections()) (void)img->section_data(s);
    } else {
      CHECK(img.error().code() == errc::malformed);
      CHECK(img.error().message().rfind("elf: ", 0) == 0);
    }
  }
  // Random corruption of the ELF header, section headers and program headers.
  auto img = elf_image::parse(good);
  REQUIRE(img.ok());
  std::mt19937_64 rng(12345);
  std::vector<uint8_t> copy;
  size_t rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    copy = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the headers: ELF header, program headers, and the section header table at the end.
      size_t pos;
      switch (rng() % 3) {
        case 0:
          pos = rng() % 64;
          break;
        case 1:
          pos = 64 + rng() % (56 * 14);
          break;
        default:
          pos = copy.size() - 1 - rng() % std::min<size_t>(copy.size(), 64 * 40);
          break;
      }
      copy[pos] = static_cast<uint8_t>(rng());
    }
    auto r = elf_image::parse(copy);
    if (!r.ok()) {
      ++rejected;
      continue;
    }
    for (const auto& s : r->sections()) {
      auto d = r->section_data(s);
      if (s.type == elf_sht_symtab || s.type == elf_sht_dynsym) (void)r->symbols(s);
      if (s.type == elf_sht_rela || s.type == elf_sht_rel) (void)r->relocations(s);
      if (d.ok()) CHECK(d->data() + d->size() <= copy.data() + copy.size());
    }
    for (const auto& p : r->segments()) (void)r->segment_data(p);
  }
  CHECK(rejected > 0);
}

TEST_CASE("read_whole_file reports missing files") {
  auto r = read_whole_file("/nonexistent/jitunwind-test");
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::not_found);
  CHECK(r.error().message().find("/nonexistent/jitunwind-test") != std::string::npos);
}
