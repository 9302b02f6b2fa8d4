// Differential tests against binutils 2.40: gcc -Wa,--gsframe writes SFrame v1 (objects and,
// through ld, linked executables with a PCMASK FDE for the PLT); our decoder must read them as
// `objdump --sframe` does, and the function starts must match the symbol table.
#include <jitunwind/sframe.h>

#include <jitunwind/toolkit/elf_reader.hpp>
#include "sframe/object_sframe.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>

using namespace jitunwind;
using namespace jitunwind::sframe;
namespace t = jitunwind::test;

namespace {

struct objdump_row {
  uint64_t start = 0;
  bool fp_base = false;
  int64_t cfa = 0;
  std::optional<int64_t> fp, ra;  // nothing = "u"
};
struct objdump_fde {
  uint64_t pc = 0, size = 0;
  bool pcmask = false;
  std::vector<objdump_row> rows;
};
struct objdump_sframe {
  int version = 0;
  int flags = 0;
  uint64_t num_fdes = 0, num_fres = 0;
  std::vector<objdump_fde> fdes;
};

objdump_sframe objdump(const std::string& path) {
  auto r = t::run({"objdump", "--sframe", path});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  objdump_sframe out;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    unsigned long long pc = 0, size = 0;
    std::istringstream fields(l);
    std::string startpc, cfa, fp, ra;
    if (l.find("Version:") != std::string::npos) {
      out.version = l.find("SFRAME_VERSION_1") != std::string::npos ? 1 : 2;
    } else if (l.find("Flags:") != std::string::npos) {
      if (l.find("SFRAME_F_FDE_SORTED") != std::string::npos) out.flags |= 1;
      if (l.find("SFRAME_F_FRAME_POINTER") != std::string::npos) out.flags |= 2;
    } else if (l.find("Num FDEs:") != std::string::npos) {
      out.num_fdes = std::stoull(l.substr(l.find(':') + 1));
    } else if (l.find("Num FREs:") != std::string::npos) {
      out.num_fres = std::stoull(l.substr(l.find(':') + 1));
    } else if (std::sscanf(l.c_str(), " func idx [%*u]: pc = 0x%llx, size = %llu bytes", &pc,
                           &size) == 2) {
      out.fdes.push_back({pc, size, false, {}});
    } else if (l.find("STARTPC[m]") != std::string::npos) {
      out.fdes.back().pcmask = true;
    } else if ((fields >> startpc >> cfa >> fp >> ra) && startpc.size() == 16 &&
               startpc.find_first_not_of("0123456789abcdef") == std::string::npos) {
      // "<16 hex digits>  sp+16  c-16  u": CFA base+offset, FP and RA as u or c<offset>.
      objdump_row row;
      row.start = std::stoull(startpc, nullptr, 16);
      row.fp_base = cfa.rfind("fp", 0) == 0;
      REQUIRE((row.fp_base || cfa.rfind("sp", 0) == 0));
      row.cfa = std::stoll(cfa.substr(2));
      if (fp != "u") row.fp = std::stoll(fp.substr(1));
      if (ra != "u") row.ra = std::stoll(ra.substr(1));
      out.fdes.back().rows.push_back(row);
    }
  }
  return out;
}

void compare(const decoded_section& d, const objdump_sframe& od, bool linked) {
  CHECK(od.version == d.info.version);
  CHECK(od.flags == (d.info.flags & 3));
  CHECK(od.num_fdes == d.info.num_fdes);
  CHECK(od.num_fres == d.info.num_fres);
  REQUIRE(od.fdes.size() == d.functions.size());
  for (size_t i = 0; i < d.functions.size(); ++i) {
    INFO("FDE " << i);
    const auto& f = d.functions[i];
    const auto& of = od.fdes[i];
    // objdump 2.40 does not apply relocations: in objects every pc reads 0.
    if (linked) CHECK(of.pc == f.start);
    CHECK(of.size == f.size);
    CHECK(of.pcmask == (f.pcmask_rep != 0));
    REQUIRE(of.rows.size() == f.rows.size());
    for (size_t j = 0; j < f.rows.size(); ++j) {
      INFO("FRE " << j);
      const auto& r = f.rows[j];
      const auto& orow = of.rows[j];
      // PCMASK rows print the offset in the repeated block; others the address.
      CHECK((of.pcmask ? orow.start : orow.start - of.pc) == r.pc_offset);
      CHECK(orow.fp_base == (r.cfa == cfa_base::fp));
      CHECK(orow.cfa == r.cfa_offset);
      CHECK(!orow.ra.has_value());  // AMD64: RA fixed at CFA-8 by the header
      CHECK(r.ra == ra_rule::saved);
      CHECK(r.ra_offset == -8);
      CHECK(orow.fp.has_value() == (r.fp == fp_rule::saved));
      if (orow.fp) CHECK(*orow.fp == r.fp_offset);
    }
  }
}

// Function symbols of an ELF file: address -> name (our layout's addresses for objects).
std::map<uint64_t, std::string> function_symbols(const t::object_sframe& o) {
  auto img = toolkit::elf_image::parse(o.file).value();
  std::map<uint64_t, std::string> out;
  const auto* symtab = img.find_section(".symtab");
  REQUIRE(symtab != nullptr);
  const auto syms = img.symbols(*symtab);
  REQUIRE(syms.ok());
  for (const auto& s : *syms) {
    if (s.type != 2 || s.shndx == 0) continue;  // STT_FUNC, defined
    const uint64_t base = o.relocatable ? o.section_base.at(s.shndx) : 0;
    out[base + s.value] = s.name;
  }
  return out;
}

}  // namespace

TEST_CASE("gcc/binutils 2.40 v1 sections decode as objdump --sframe reads them") {
  if (!t::tool_available("gcc") || !t::tool_available("objdump")) return;
  t::temp_dir dir;
  const std::string src = t::source_path("tests/sframe/programs/shapes.c");
  for (const char* fp_flag : {"-fomit-frame-pointer", "-fno-omit-frame-pointer"}) {
    INFO(fp_flag);
    const std::string obj = dir / "shapes.o", exe = dir / "shapes";
    auto cc = t::run({"gcc", "-O2", fp_flag, "-Wa,--gsframe", "-c", src, "-o", obj});
    INFO(cc.err);
    REQUIRE(cc.exit_code == 0);
    auto ld = t::run({"gcc", "-O2", fp_flag, "-Wa,--gsframe", src, "-o", exe});
    REQUIRE(ld.exit_code == 0);

    {  // the object file
      const auto o = t::load_object_sframe(obj);
      auto d = decode(o.bytes, o.address);
      INFO((d.ok() ? std::string() : d.error().message()));
      REQUIRE(d.ok());
      CHECK(d->info.version == version_1);
      compare(*d, objdump(obj), false);
      // Relocated the way ld does it, every FDE starts at a function symbol.
      const auto syms = function_symbols(o);
      for (const auto& f : d->functions) CHECK(syms.count(f.start) == 1);
    }
    {  // the linked executable
      const auto o = t::load_object_sframe(exe);
      auto d = decode(o.bytes, o.address);
      INFO((d.ok() ? std::string() : d.error().message()));
      REQUIRE(d.ok());
      CHECK(d->info.version == version_1);
      CHECK((d->info.flags & flag_fde_sorted) != 0);
      compare(*d, objdump(exe), true);
      const auto syms = function_symbols(o);
      size_t named = 0, plt = 0;
      for (const auto& f : d->functions) {
        named += syms.count(f.start);
        plt += f.pcmask_rep == 16;
      }
      CHECK(plt == 1);                          // .plt entries: one PCMASK FDE
      CHECK(named + 2 >= d->functions.size());  // all but PLT0 and the PLT are symbols
      for (const char* name :
           {"leaf", "big_frame", "mid_frame", "vla", "long_function", "huge_function", "main"}) {
        bool found = false;
        for (const auto& f : d->functions) found |= syms.count(f.start) && syms.at(f.start) == name;
        CHECK(found);
      }
      // Usable for lookups as is (SORTED), and gas's rows include the shapes we asked for.
      auto tbl = table::create(o.bytes, o.address);
      REQUIRE(tbl.ok());
      int widths = 0, fp_cfa = 0, big_offsets = 0;
      for (size_t i = 0; i < d->functions.size(); ++i) {
        widths |= d->layout[i].fre_address_size;
        for (size_t j = 0; j < d->functions[i].rows.size(); ++j) {
          fp_cfa += d->functions[i].rows[j].cfa == cfa_base::fp;
          big_offsets |= 1 << ((d->layout[i].fre_infos[j] >> 5) & 3);
        }
      }
      CHECK(widths == (1 | 2 | 4));
      CHECK(fp_cfa > 0);
      // Without frame pointers the big frames are SP-based: 2- and 4-byte offsets.
      if (std::string(fp_flag) == "-fomit-frame-pointer") CHECK(big_offsets == (1 | 2 | 4));
    }
  }
}
