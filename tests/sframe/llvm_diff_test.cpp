// Differential tests against LLVM 22: sections written by `llvm-mc-22 --gsframe` decode to what
// `llvm-readobj-22 --sframe` prints, and sections written by our encoder are read back by
// llvm-readobj-22 exactly as we meant them.
#include <jitunwind/sframe.h>

#include "sframe/elf_writer.hpp"
#include "sframe/gen.hpp"
#include "sframe/object_sframe.hpp"
#include "sframe/readobj_parse.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind;
using namespace jitunwind::sframe;
namespace t = jitunwind::test;

namespace {

t::readobj_sframe readobj(const std::string& path) {
  auto r = t::run({"llvm-readobj-22", "--sframe", path});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.err.find("warning") == std::string::npos);
  return t::parse_readobj_sframe(r.out);
}

// Our decode of a section vs llvm-readobj's reading of the same bytes. `start_of(i, ro_start)`
// turns readobj's FDE start into an absolute address comparable with ours.
template <class StartOf>
void compare(const decoded_section& d, const t::readobj_sframe& ro, StartOf start_of) {
  CHECK(ro.version == d.info.version);
  CHECK(ro.flags == d.info.flags);
  CHECK(ro.abi == static_cast<int>(d.info.target));
  CHECK(ro.fixed_fp == d.info.cfa_fixed_fp_offset);
  CHECK(ro.fixed_ra == d.info.cfa_fixed_ra_offset);
  CHECK(ro.num_fdes == d.info.num_fdes);
  CHECK(ro.num_fres == d.info.num_fres);
  CHECK(ro.fre_len == d.info.fre_len);
  CHECK(ro.fde_off == d.info.fde_off);
  CHECK(ro.fre_off == d.info.fre_off);
  REQUIRE(ro.fdes.size() == d.functions.size());
  const bool amd64 = d.info.target == abi::amd64;
  for (size_t i = 0; i < d.functions.size(); ++i) {
    INFO("FDE " << i);
    const auto& f = d.functions[i];
    const auto& l = d.layout[i];
    const auto& rf = ro.fdes[i];
    CHECK(start_of(i, rf.start) == f.start);
    CHECK(rf.size == f.size);
    CHECK(rf.fre_offset == l.fre_offset);
    CHECK(rf.info_raw == l.info);
    CHECK(rf.fre_type == (l.fre_address_size == 1 ? 0 : l.fre_address_size == 2 ? 1 : 2));
    CHECK(rf.fde_type == (l.pcmask ? 1 : 0));
    CHECK(rf.rep_size == l.rep_size);
    REQUIRE(rf.num_fres == f.rows.size());
    REQUIRE(rf.fres.size() == f.rows.size());
    for (size_t j = 0; j < f.rows.size(); ++j) {
      INFO("FRE " << j);
      const frame_row& r = f.rows[j];
      const auto& rr = rf.fres[j];
      // For PCMASK FDEs readobj prints the offset inside the repeated block.
      CHECK((l.pcmask ? rr.start : rr.start - rf.start) == r.pc_offset);
      CHECK(rr.ra_signed == r.ra_mangled);
      CHECK(rr.offset_size_code == ((l.fre_infos[j] >> 5) & 3));
      CHECK(rr.base_reg == (l.fre_infos[j] & 1));
      if (r.ra == ra_rule::undefined) continue;
      CHECK(rr.base_reg == (r.cfa == cfa_base::sp ? 1 : 0));
      CHECK(rr.cfa == r.cfa_offset);
      if (amd64) {
        CHECK(rr.ra == std::optional<int64_t>(-8));  // readobj shows the header's fixed offset
        CHECK(r.ra_offset == -8);
      } else if (r.ra == ra_rule::saved) {
        CHECK(rr.ra == std::optional<int64_t>(r.ra_offset));
      } else {
        CHECK(!rr.ra.has_value());
      }
      if (r.fp == fp_rule::saved) {
        CHECK(rr.fp == std::optional<int64_t>(r.fp_offset));
      } else {
        CHECK(!rr.fp.has_value());
      }
    }
  }
}

struct llvm_case {
  const char* triple;
  const char* source;
  abi target;
  uint16_t machine;
};

const llvm_case llvm_cases[] = {
    {"x86_64", "tests/sframe/asm/x86_64_shapes.s", abi::amd64, 62},
    {"aarch64", "tests/sframe/asm/aarch64_shapes.s", abi::aarch64_le, 183},
    {"aarch64_be", "tests/sframe/asm/aarch64_shapes.s", abi::aarch64_be, 183},
};

// Which FDE in the assembly has which shape (functions appear in source order).
void check_shapes(const llvm_case& c, const decoded_section& d) {
  auto width_of = [&](size_t i) { return d.layout.at(i).fre_address_size; };
  auto max_offset_code = [&](size_t i) {
    int code = 0;
    for (uint8_t info : d.layout.at(i).fre_infos) code = std::max(code, (info >> 5) & 3);
    return code;
  };
  if (c.target == abi::amd64) {
    REQUIRE(d.functions.size() == 8);
    CHECK(max_offset_code(2) == 1);          // frame_2byte
    CHECK(max_offset_code(3) == 2);          // frame_4byte
    CHECK(width_of(4) == 2);                 // long_300
    CHECK(width_of(5) == 4);                 // long_70000
    CHECK(d.functions[0].rows.size() == 6);  // fp_frame: remember/restore_state epilogue
    CHECK(d.functions[0].rows[4].cfa == cfa_base::fp);
  } else {
    REQUIRE(d.functions.size() == 7);
    CHECK(max_offset_code(2) == 1);  // frame_2byte
    CHECK(max_offset_code(3) == 2);  // frame_4byte
    CHECK(width_of(5) == 2);         // long_400
    CHECK(width_of(6) == 4);         // long_68000
    CHECK(d.functions[0].rows[0].ra == ra_rule::in_register);
    CHECK(d.functions[1].rows[1].ra == ra_rule::saved);
    CHECK(d.functions[1].rows[1].fp == fp_rule::saved);
    CHECK(d.functions[4].rows[2].cfa == cfa_base::fp);  // fp_based
  }
}

}  // namespace

TEST_CASE("sections from llvm-mc-22 --gsframe decode as llvm-readobj-22 reads them") {
  if (!t::tool_available("llvm-mc-22") || !t::tool_available("llvm-readobj-22")) return;
  t::temp_dir dir;
  for (const auto& c : llvm_cases) {
    INFO(c.triple);
    const std::string obj = dir / (std::string(c.triple) + ".o");
    auto as = t::run({"llvm-mc-22", "-triple=" + std::string(c.triple), "-filetype=obj",
                      "--gsframe", t::source_path(c.source), "-o", obj});
    INFO(as.err);
    REQUIRE(as.exit_code == 0);
    REQUIRE(as.err.find("warning") == std::string::npos);  // no function was dropped

    const auto o = t::load_object_sframe(obj);
    REQUIRE(o.relocatable);
    auto d = decode(o.bytes, o.address);
    INFO((d.ok() ? std::string() : d.error().message()));
    REQUIRE(d.ok());
    CHECK(d->info.target == c.target);
    CHECK(d->info.flags == flag_fde_func_start_pcrel);  // LLVM: PCREL, not sorted in objects
    // LLVM keeps "FP saved at CFA-16" after an epilogue's pop until a .cfi_restore: legal
    // SFrame (the slot is dead, not wrong), but below SP, which our validate() rejects.
    for (const auto& nc : d->nonconforming) {
      INFO("FDE " << nc.index << ": " << nc.reason);
      CHECK(nc.reason.find("below the stack pointer") != std::string::npos);
    }
    check_shapes(c, *d);
    // llvm-readobj prints an object's FDE start relative to the code section it is relocated
    // against; we laid that section out at a known address.
    compare(*d, readobj(obj), [&](size_t i, uint64_t ro_start) {
      return o.fde_section_base.at(d->layout[i].offset) + ro_start;
    });
  }
}

TEST_CASE("llvm-readobj-22 reads sections from our encoder as we meant them") {
  if (!t::tool_available("llvm-mc-22") || !t::tool_available("llvm-readobj-22")) return;
  t::temp_dir dir;
  for (const auto& c : llvm_cases) {
    INFO(c.triple);
    // The rows LLVM produced for the shapes, re-encoded by us at a linked-image address.
    const std::string obj = dir / (std::string(c.triple) + ".o");
    REQUIRE(t::run({"llvm-mc-22", "-triple=" + std::string(c.triple), "-filetype=obj", "--gsframe",
                    t::source_path(c.source), "-o", obj})
                .exit_code == 0);
    const auto o = t::load_object_sframe(obj);
    auto llvm = decode(o.bytes, o.address);
    REQUIRE(llvm.ok());
    for (bool pcrel : {true, false}) {
      encoder_options opt;
      opt.target = c.target;
      opt.version = version_2;  // LLVM 22 reads v2 only ("unsupported version number (3)")
      opt.section_address = 0x40000000;
      opt.pcrel = pcrel;
      opt.strict = false;  // LLVM keeps "FP saved" rows after epilogues, which validate rejects
      auto ours = encode(opt, llvm->functions);
      REQUIRE(ours.ok());
      const std::string elf = dir / (std::string(c.triple) + "-ours.elf");
      REQUIRE(t::write_file(elf, [&] {
        auto img = t::minimal_elf(c.machine, c.target == abi::aarch64_be, 2 /* ET_EXEC */,
                                  {{".sframe", 0x6ffffff4, 2, opt.section_address, *ours}});
        return std::string(img.begin(), img.end());
      }()));
      auto d = decode(*ours, opt.section_address);
      REQUIRE(d.ok());
      CHECK(d->functions == llvm->functions);
      compare(*d, readobj(elf), [](size_t, uint64_t ro_start) { return ro_start; });
    }
  }
}

TEST_CASE("our random sections read back by llvm-readobj-22 on every ABI") {
  if (!t::tool_available("llvm-readobj-22")) return;
  t::temp_dir dir;
  for (abi a : {abi::amd64, abi::aarch64_le, abi::aarch64_be}) {
    INFO(to_string(a));
    encoder_options opt;
    opt.target = a;
    opt.version = version_2;  // LLVM 22 reads v2 only
    opt.section_address = 0x7f0000000000;
    jitunwind::test::frame_gen g(a, 900 + static_cast<int>(a));
    const auto fs = g.functions(opt.section_address + 0x100000, 300);
    auto bytes = encode(opt, fs);
    REQUIRE(bytes.ok());
    const std::string elf = dir / "random.elf";
    auto img = t::minimal_elf(a == abi::amd64 ? 62 : 183, a == abi::aarch64_be, 2,
                              {{".sframe", 0x6ffffff4, 2, opt.section_address, *bytes}});
    REQUIRE(t::write_file(elf, std::string(img.begin(), img.end())));
    auto d = decode(*bytes, opt.section_address);
    REQUIRE(d.ok());
    CHECK(d->functions == fs);
    compare(*d, readobj(elf), [](size_t, uint64_t ro_start) { return ro_start; });
  }
}
