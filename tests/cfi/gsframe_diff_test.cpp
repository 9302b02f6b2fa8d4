// Differential tests of the CFI -> SFrame conversion against the two independent converters on
// this machine: `llvm-mc-22 --gsframe` (LLVM's integrated assembler, SFrame v2; also what
// clang-22 -Wa,--gsframe uses) and gas 2.40 `--gsframe` (gcc -Wa,--gsframe, SFrame v1). An
// object assembled with --gsframe carries the assembler's own SFrame next to its .eh_frame:
// decoding the .eh_frame with cfi::decode must give, function by function, the rows of that
// SFrame, and leave out exactly the functions the assembler left out.
//
// The corpus is made of many real functions: random C programs from csmith compiled by gcc and
// clang-22 at -O0/-O2/-O3, with and without -fomit-frame-pointer, and with -mstackrealign,
// plus hand-written edge cases (tests/cfi/data/edge_cases.s). JITUNWIND_CSMITH_PROGRAMS sets
// how many csmith programs (default 3: about 20 s on this machine).
//
// gas 2.40 has two bugs our rows must not copy; a difference is accepted only in exactly their
// shape (and counted): after .cfi_restore_state it keeps the CFA base register of the
// epilogue (SP) where the remembered state had FP; a CFA based on another register (DRAP:
// r10) is written as SP-based.
#include <jitunwind/cfi.h>
#include <jitunwind/sframe.h>

#include "cfi/tool_rows.hpp"
#include <jitunwind/toolkit/object_layout.hpp>
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

using namespace jitunwind;
namespace t = jitunwind::test;

namespace {

struct object_tables {
  cfi::decoded_cfi cfi;
  sframe::decoded_section sframe;
};

// Both sections of an object, relocated against one layout of its sections.
object_tables load(const std::string& path) {
  using namespace jitunwind::toolkit;
  auto file = read_whole_file(path);
  REQUIRE(file.ok());
  auto img = elf_image::parse(*file);
  REQUIRE(img.ok());
  REQUIRE(img->type() == elf_et_rel);
  const object_layout layout = lay_out_sections(*img);
  const elf_section* eh = img->find_section(".eh_frame");
  const elf_section* sf = img->find_section(".sframe");
  REQUIRE(eh != nullptr);
  REQUIRE(sf != nullptr);
  auto eh_bytes = relocate_section(*img, *eh, layout);
  INFO(path << ": " << (eh_bytes ? "" : eh_bytes.error().message()));
  REQUIRE(eh_bytes.ok());
  auto sf_bytes = relocate_section(*img, *sf, layout);
  REQUIRE(sf_bytes.ok());
  // The relocated start fields hold S + A - P (relative to the field): what
  // FDE_FUNC_START_PCREL says. gas 2.40's v1 lacks the flag although its objects relocate the
  // same way (ld rewrites them section-relative); reading them as PC-relative gives the
  // addresses ld would give.
  REQUIRE(sf_bytes->bytes.size() > 4);
  sf_bytes->bytes[3] |= sframe::flag_fde_func_start_pcrel;
  cfi::decoder_options o;
  o.section_address = layout.address[eh->index];
  auto c = cfi::decode(eh_bytes->bytes, o);
  INFO(path << ": " << (c ? "" : c.error().message()));
  REQUIRE(c.ok());
  auto s = sframe::decode(sf_bytes->bytes, layout.address[sf->index]);
  INFO(path << ": " << (s ? "" : s.error().message()));
  REQUIRE(s.ok());
  return {std::move(*c), std::move(*s)};
}

struct tally {
  size_t objects = 0, functions = 0, rows = 0, left_out = 0;
  size_t gas_restore_state = 0, gas_cfa_register = 0;
};

// gas 2.40 after .cfi_restore_state: same offsets, every difference an FP-based row of ours
// that gas writes SP-based with the same offset.
bool gas_restore_state_bug(const std::vector<frame_row>& ours, const std::vector<frame_row>& gas) {
  if (ours.size() != gas.size()) return false;
  bool differs = false;
  for (size_t i = 0; i < ours.size(); ++i) {
    frame_row g = gas[i];
    if (g == ours[i]) continue;
    if (ours[i].cfa != cfa_base::fp || g.cfa != cfa_base::sp) return false;
    g.cfa = cfa_base::fp;
    if (!(g == ours[i])) return false;
    differs = true;
  }
  return differs;
}

void compare(const std::string& what, const object_tables& t, bool gas, tally& n) {
  INFO(what);
  ++n.objects;
  std::map<uint64_t, const function_desc*> tool;
  for (const function_desc& f : t.sframe.functions) {
    INFO("tool function at 0x" << std::hex << f.start);
    REQUIRE(tool.emplace(f.start, &f).second);
  }
  for (const function_desc& f : t.cfi.functions) {
    INFO("function at 0x" << std::hex << f.start);
    auto it = tool.find(f.start);
    REQUIRE(it != tool.end());  // we converted it: the assembler did too
    const function_desc& g = *it->second;
    CHECK(g.size == f.size);
    const auto ours = t::merged(f.rows);
    const auto theirs = t::merged(g.rows);
    if (ours != theirs) {
      REQUIRE(gas);
      REQUIRE(gas_restore_state_bug(ours, theirs));
      ++n.gas_restore_state;
    }
    ++n.functions;
    n.rows += ours.size();
    tool.erase(it);
  }
  for (const cfi::left_out_function& l : t.cfi.left_out) {
    INFO("left out at 0x" << std::hex << l.start << ": " << l.reason);
    CHECK(l.code == errc::unsupported);
    if (l.size == 0) continue;  // an empty FDE: neither assembler has an FDE for it
    ++n.left_out;
    auto it = tool.find(l.start);
    if (it == tool.end()) continue;  // the assembler left it out too
    // gas 2.40 writes a CFA based on another register as SP-based instead of leaving it out.
    REQUIRE(gas);
    REQUIRE(l.reason.find(": CFA = r") != std::string::npos);
    ++n.gas_cfa_register;
    tool.erase(it);
  }
  for (const auto& [start, f] : tool) {
    INFO("the assembler has a function at 0x" << std::hex << start << " we have no FDE for");
    CHECK(false);
  }
}

void build(const std::string& cmd) {
  auto r = t::run_shell(cmd + " 2>&1");
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
}

}  // namespace

TEST_CASE("csmith corpus: our rows from .eh_frame equal gas 2.40's and LLVM 22's --gsframe") {
  for (const char* tool : {"csmith", "gcc", "clang-22", "llvm-mc-22"})
    if (!t::tool_available(tool)) return;
  int programs = 3;
  if (const char* e = std::getenv("JITUNWIND_CSMITH_PROGRAMS")) programs = std::atoi(e);
  t::temp_dir dir;
  tally gcc_tally, clang_tally;
  const char* variants[] = {"-O0",
                            "-O2",
                            "-O3",
                            "-O2 -fomit-frame-pointer",
                            "-O0 -fno-omit-frame-pointer",
                            "-O3 -fno-omit-frame-pointer",
                            "-O2 -mstackrealign",
                            "-O0 -mstackrealign"};
  for (int seed = 1; seed <= programs; ++seed) {
    const std::string src = dir / ("p" + std::to_string(seed) + ".c");
    build("csmith --seed " + std::to_string(seed) + " --max-funcs 12 -o " + src);
    // Every compilation of this program, two at a time.
    std::string jobs;
    for (size_t k = 0; k < std::size(variants); ++k) {
      const std::string base = dir / ("p" + std::to_string(seed) + "-" + std::to_string(k));
      const std::string common =
          std::string(" -c -w -I/usr/include/csmith ") + variants[k] + " " + src;
      jobs += "gcc" + common + " -Wa,--gsframe -o " + base + "-gcc.o\n";
      jobs += "clang-22" + common + " -Wa,--gsframe -Wa,--allow-experimental-sframe -o " + base +
              "-clang.o\n";
    }
    build("printf '" + jobs + "' | xargs -P2 -I{} sh -c '{}'");
    for (size_t k = 0; k < std::size(variants); ++k) {
      const std::string base = dir / ("p" + std::to_string(seed) + "-" + std::to_string(k));
      compare(base + "-gcc.o (" + variants[k] + ")", load(base + "-gcc.o"), true, gcc_tally);
      compare(base + "-clang.o (" + variants[k] + ")", load(base + "-clang.o"), false, clang_tally);
    }
  }
  for (auto [name, n] : {std::pair<const char*, tally&>{"gcc/gas 2.40", gcc_tally},
                         {"clang-22/LLVM", clang_tally}}) {
    std::printf(
        "%s: %zu objects, %zu functions (%zu rows) equal, %zu left out by both; known "
        "gas 2.40 bugs: %zu restore_state, %zu CFA register\n",
        name, n.objects, n.functions, n.rows, n.left_out, n.gas_restore_state, n.gas_cfa_register);
    CHECK(n.functions > 100 * static_cast<size_t>(programs) / 3);
  }
}

TEST_CASE("hand-written edge cases: what LLVM and gas leave out and where they differ") {
  if (!t::tool_available("llvm-mc-22")) return;
  t::temp_dir dir;
  const std::string src = std::string(JITUNWIND_SOURCE_DIR) + "/tests/cfi/data/edge_cases.s";
  build("llvm-mc-22 --gsframe -filetype=obj -triple x86_64-linux-gnu " + src + " -o " +
        dir / "llvm.o");
  build("as --gsframe " + src + " -o " + dir / "gas.o");
  const object_tables llvm = load(dir / "llvm.o");
  const object_tables gas = load(dir / "gas.o");

  // Ours, by start: converted (rows) or left out (reason).
  std::map<uint64_t, std::string> left;
  for (const auto& l : llvm.cfi.left_out) left[l.start] = l.reason;
  std::map<uint64_t, const function_desc*> in_llvm, in_gas;
  for (const auto& f : llvm.sframe.functions) in_llvm[f.start] = &f;
  for (const auto& f : gas.sframe.functions) in_gas[f.start] = &f;
  REQUIRE(llvm.cfi.functions.size() + left.size() == 10);

  // Both assemblers and we agree on: sig, rbx_saved, rem (rows equal) and on leaving out the
  // CFA expression (escape).
  for (const function_desc& f : llvm.cfi.functions) {
    INFO("function at 0x" << std::hex << f.start);
    REQUIRE(in_llvm.count(f.start) == 1);
  }
  CHECK_THAT(left.at(0x16), Catch::Contains("CFA = *(rbp - 8)"));
  CHECK(in_llvm.count(0x16) == 0);
  CHECK(in_gas.count(0x16) == 0);
  // CFA = r10 (DRAP): LLVM leaves it out like we do; gas 2.40 writes "sp+0" (wrong).
  CHECK_THAT(left.at(0x5), Catch::Contains("CFA = r10 + 0"));
  CHECK(in_llvm.count(0x5) == 0);
  REQUIRE(in_gas.count(0x5) == 1);
  CHECK(in_gas.at(0x5)->rows.back().cfa == cfa_base::sp);
  CHECK(in_gas.at(0x5)->rows.back().cfa_offset == 0);
  // LLVM 22 ignores .cfi_register/.cfi_val_offset/.cfi_undefined of rbp and keeps "FP
  // unchanged", which is not what the CFI says: we leave those out (as gas does for the
  // first two).
  CHECK_THAT(left.at(0x1b), Catch::Contains("frame pointer (rbp) in another register"));
  CHECK_THAT(left.at(0x21), Catch::Contains("frame pointer (rbp) CFA + offset"));
  CHECK_THAT(left.at(0x3), Catch::Contains("frame pointer (rbp) undefined"));
  for (uint64_t a : {0x1bull, 0x21ull, 0x3ull}) CHECK(in_llvm.count(a) == 1);
  CHECK(in_gas.count(0x1b) == 0);
  CHECK(in_gas.count(0x21) == 0);
  // .cfi_undefined rip: we write an outermost row; neither assembler marks it.
  const auto outer = std::find_if(llvm.cfi.functions.begin(), llvm.cfi.functions.end(),
                                  [](const function_desc& f) { return f.start == 0x19; });
  REQUIRE(outer != llvm.cfi.functions.end());
  CHECK(outer->rows.back().ra == ra_rule::undefined);
  CHECK(in_llvm.at(0x19)->rows.back().ra == ra_rule::saved);
  // .cfi_same_value rbp after a push: we say FP unchanged from there, both assemblers keep
  // "saved at CFA-16" (harmless: the slot still holds it).
  const auto same = std::find_if(llvm.cfi.functions.begin(), llvm.cfi.functions.end(),
                                 [](const function_desc& f) { return f.start == 0x1d; });
  REQUIRE(same != llvm.cfi.functions.end());
  CHECK(same->rows.at(2).pc_offset == 2);
  CHECK(same->rows.at(2).fp == fp_rule::unchanged);
  // rem: gas 2.40 does not restore the CFA register at .cfi_restore_state.
  const auto rem = std::find_if(llvm.cfi.functions.begin(), llvm.cfi.functions.end(),
                                [](const function_desc& f) { return f.start == 0x23; });
  REQUIRE(rem != llvm.cfi.functions.end());
  CHECK(t::merged(rem->rows) == t::merged(in_llvm.at(0x23)->rows));
  CHECK(gas_restore_state_bug(t::merged(rem->rows), t::merged(in_gas.at(0x23)->rows)));
  // rbx saved: kept for the .eh_frame publishers.
  const auto rbx = std::find_if(llvm.cfi.functions.begin(), llvm.cfi.functions.end(),
                                [](const function_desc& f) { return f.start == 0x13; });
  REQUIRE(rbx != llvm.cfi.functions.end());
  const std::vector<saved_register> want = {{1, 3, saved_rule::at_cfa, -16},
                                            {2, 3, saved_rule::unchanged, 0}};
  CHECK(rbx->saved_registers == want);
}
