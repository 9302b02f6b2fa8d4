// Row layout for the BPF walker: gaps, PCMASK expansion, overlaps, strict JIT windows.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <jitunwind/frame.h>

#include "jitwalk/rows.hpp"
#include "walker.h"

using namespace jitwalk;

namespace {

unwind_function fn(uint64_t start, uint32_t size, std::vector<unwind_row> rows, uint32_t rep = 0,
                   table_source src = table_source::sframe) {
  unwind_function f;
  f.start = start;
  f.size = size;
  f.rows = std::move(rows);
  f.pcmask_rep = rep;
  f.source = src;
  return f;
}

unwind_row sp(uint32_t at, int32_t off) {
  return {at, rule::cfa_sp, off, false, 0};
}
unwind_row fp(uint32_t at, int32_t off, int32_t saved) {
  return {at, rule::cfa_fp, off, true, saved};
}

}  // namespace

TEST_CASE("functions are laid out with gaps, merged rows and a bias") {
  std::vector<unwind_function> fns = {
      fn(0x2000, 0x10, {sp(0, 8), sp(4, 16), sp(12, 8)}),
      fn(0x1000, 0x20, {sp(0, 8), fp(1, 16, -16)}),
      fn(0x2010, 0x8, {sp(0, 8)}),  // adjacent: its first row equals the previous last row
  };
  auto r = flatten(fns, 0x400000);
  REQUIRE(r.ok());
  CHECK(r->start == 0x401000);
  CHECK(r->end == 0x402018);
  CHECK(r->functions == 3);
  // 0x401000 sp+8, 0x401001 fp+16, 0x401020 gap, 0x402000 sp+8, +4 sp+16, +12 sp+8 (merged on)
  REQUIRE(r->rows.size() == 6);
  CHECK(r->rows[2].kind == JW_ROW_GAP);
  CHECK(r->rows[2].pc_off == 0x20);
  CHECK(lookup_row(*r, 0x401010)->kind == JW_ROW_CFA_FP);
  CHECK(lookup_row(*r, 0x401010)->fp_off == -16);
  CHECK(lookup_row(*r, 0x401800)->kind == JW_ROW_GAP);
  CHECK(lookup_row(*r, 0x402014)->cfa_off == 8);
  CHECK(lookup_row(*r, 0x402018) == nullptr);
  CHECK(lookup_row(*r, 0x400fff) == nullptr);
}

TEST_CASE("PCMASK functions are expanded block by block") {
  // A PLT-like array: 4 entries of 16 bytes, SP+8 then SP+16 from offset 11 of each entry.
  auto r = flatten({fn(0x1000, 64, {sp(0, 8), sp(11, 16)}, 16)}, 0);
  REQUIRE(r.ok());
  REQUIRE(r->rows.size() == 8);
  for (uint64_t e = 0; e < 4; ++e) {
    CHECK(lookup_row(*r, 0x1000 + 16 * e + 10)->cfa_off == 8);
    CHECK(lookup_row(*r, 0x1000 + 16 * e + 11)->cfa_off == 16);
    CHECK(lookup_row(*r, 0x1000 + 16 * e + 15)->cfa_off == 16);
  }
}

TEST_CASE("overlapping functions: dropped leniently, rejected strictly") {
  std::vector<unwind_function> fns = {fn(0x1000, 0x20, {sp(0, 8)}), fn(0x1010, 0x20, {sp(0, 16)})};
  auto lenient = flatten(fns, 0);
  REQUIRE(lenient.ok());
  CHECK(lenient->dropped == 1);
  flatten_limits strict;
  strict.strict = true;
  auto r = flatten(fns, 0, strict);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == jitunwind::errc::malformed);
  CHECK_THAT(r.error().message(), Catch::Contains("overlaps"));
}

TEST_CASE("a JIT window's functions must lie inside its text") {
  flatten_limits lim;
  lim.lo = 0x1000;
  lim.hi = 0x1100;
  lim.strict = true;
  auto r = flatten({fn(0x10f0, 0x20, {sp(0, 8)})}, 0, lim);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("outside the covered text"));
  CHECK(flatten({fn(0x10e0, 0x20, {sp(0, 8)})}, 0, lim).ok());
}

TEST_CASE("row limits are enforced") {
  std::vector<unwind_row> rows;
  for (uint32_t i = 0; i < 100; ++i) rows.push_back(sp(i, i % 2 ? 16 : 8));
  flatten_limits lim;
  lim.max_rows = 50;
  auto r = flatten({fn(0x1000, 100, rows)}, 0, lim);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == jitunwind::errc::limit_exceeded);
}

TEST_CASE("frame model rows map to walker rules") {
  using namespace jitunwind;
  const recipes::epilogue eps[] = {{10, 11}};
  auto f = recipes::frame_pointer(abi::amd64, 0x5000, 11, 1, 4, eps);
  REQUIRE(f.ok());
  auto u = from_frame_model(f.value(), table_source::jit);
  REQUIRE(u.ok());
  REQUIRE(u->rows.size() == 4);
  CHECK(u->rows[0] == unwind_row{0, rule::cfa_sp, 8, false, 0});
  CHECK(u->rows[1] == unwind_row{1, rule::cfa_sp, 16, true, -16});
  CHECK(u->rows[2] == unwind_row{4, rule::cfa_fp, 16, true, -16});
  CHECK(u->rows[3] == unwind_row{10, rule::cfa_sp, 8, false, 0});
  // An outermost row and an AArch64-only rule.
  function_desc g;
  g.start = 0x6000;
  g.size = 8;
  g.rows = {outermost_row(0)};
  auto o = from_frame_model(g, table_source::sframe);
  REQUIRE(o.ok());
  CHECK(o->rows[0].kind == rule::outermost);
  g.rows = {entry_row(abi::aarch64_le)};
  auto a = from_frame_model(g, table_source::sframe);
  REQUIRE(a.ok());
  CHECK(a->rows[0].kind == rule::gap);
}

TEST_CASE("eh_frame rows are tagged for statistics") {
  auto r = flatten({fn(0x1000, 0x10, {sp(0, 8)}, 0, table_source::eh_frame),
                    fn(0x1010, 0x10, {sp(0, 8)}, 0, table_source::sframe)},
                   0);
  REQUIRE(r.ok());
  REQUIRE(r->rows.size() == 2);
  CHECK((r->rows[0].flags & JW_ROW_FROM_EH_FRAME) != 0);
  CHECK((r->rows[1].flags & JW_ROW_FROM_EH_FRAME) == 0);
}

TEST_CASE("SFrame v3 rules become the rows the BPF walk can follow, or end it") {
  using namespace jitunwind;
  function_desc f;
  f.start = 0x1000;
  f.size = 64;
  frame_row r0 = entry_row(abi::amd64);
  frame_row r1 = r0;  // DRAP: CFA = r10 + 0: needs r10
  r1.pc_offset = 4;
  r1.cfa = cfa_base::reg;
  r1.cfa_reg = 10;
  r1.cfa_offset = 0;
  frame_row r2 = r0;  // CFA = *(rbp - 8), FP = *(rbp + 0)
  r2.pc_offset = 8;
  r2.cfa = cfa_base::fp;
  r2.cfa_deref = true;
  r2.cfa_offset = -8;
  r2.fp = fp_rule::register_saved;
  r2.fp_reg = 6;
  frame_row r3 = r0;  // RA at CFA - 16
  r3.pc_offset = 12;
  r3.cfa_offset = 24;
  r3.ra_offset = -16;
  frame_row r4 = r0;  // RA in rbx
  r4.pc_offset = 16;
  r4.ra = ra_rule::register_value;
  r4.ra_reg = 3;
  r4.ra_offset = 0;
  f.rows = {r0, r1, r2, r3, r4};
  auto u = from_frame_model(f, table_source::jit);
  REQUIRE(u.ok());
  REQUIRE(u->rows.size() == 5);
  CHECK(u->rows[1].kind == rule::unsupported);
  CHECK(u->rows[2].kind == rule::cfa_fp);
  CHECK(u->rows[2].cfa_deref);
  CHECK(u->rows[2].fp_saved);
  CHECK(u->rows[2].fp_from == fp_base::fp);
  CHECK(u->rows[3].ra_off == -16);
  CHECK(u->rows[4].kind == rule::unsupported);
  auto flat = flatten({*u}, 0);
  REQUIRE(flat.ok());
  const jw_row* b = lookup_row(*flat, 0x1004);
  REQUIRE(b != nullptr);
  CHECK(b->kind == JW_ROW_UNSUPPORTED);
  b = lookup_row(*flat, 0x1009);
  CHECK(b->kind == JW_ROW_CFA_FP);
  CHECK(b->flags == (JW_ROW_CFA_DEREF | JW_ROW_FP_SAVED | JW_ROW_FP_AT_FP));
  CHECK(b->cfa_off == -8);
  CHECK(b->fp_off == 0);
  b = lookup_row(*flat, 0x100c);
  CHECK(b->flags == JW_ROW_RA_OFF);
  CHECK(b->ra_off == -16);
  // A v3 function without rows is an outermost frame.
  function_desc outer;
  outer.start = 0x2000;
  outer.size = 8;
  auto o = from_frame_model(outer, table_source::sframe);
  REQUIRE(o.ok());
  REQUIRE(o->rows.size() == 1);
  CHECK(o->rows[0].kind == rule::outermost);
}

// jw_ends_with_call (walker.h): the walker's check of a frameless leaf's return address and the
// symbolizer's PC - 1 rule. The bytes are real encodings (as gas assembles them), placed so that
// the instruction ends at the address.
TEST_CASE("a return address is recognised by the call instruction before it") {
  auto ends = [](std::vector<uint8_t> insn) {
    std::vector<uint8_t> b(8, 0x90);  // nops before it
    std::copy(insn.begin(), insn.end(), b.end() - static_cast<long>(insn.size()));
    return jw_ends_with_call(b.data()) != 0;
  };
  CHECK(ends({0xe8, 0x10, 0x20, 0x30, 0x40}));              // call rel32
  CHECK(ends({0xff, 0xd0}));                                // call *%rax
  CHECK(ends({0x41, 0xff, 0xd3}));                          // call *%r11
  CHECK(ends({0xff, 0x10}));                                // call *(%rax)
  CHECK(ends({0xff, 0x14, 0x24}));                          // call *(%rsp)
  CHECK(ends({0xff, 0x50, 0x08}));                          // call *0x8(%rax)
  CHECK(ends({0x41, 0xff, 0x55, 0x18}));                    // call *0x18(%r13)
  CHECK(ends({0xff, 0x54, 0x24, 0x08}));                    // call *0x8(%rsp)
  CHECK(ends({0xff, 0x15, 0x00, 0x10, 0x00, 0x00}));        // call *0x1000(%rip)
  CHECK(ends({0x41, 0xff, 0x95, 0x00, 0x01, 0x00, 0x00}));  // call *0x100(%r13)
  CHECK(ends({0xff, 0x94, 0x24, 0x00, 0x01, 0x00, 0x00}));  // call *0x100(%rsp)
  CHECK(ends({0xff, 0x14, 0x25, 0x00, 0x10, 0x00, 0x00}));  // call *0x1000 (absolute)
  // Not calls: a jump (FF /4), a push (FF /6), plain code, BEAM's pushed continuation after
  // a `mov`, a call that ends one byte early.
  CHECK_FALSE(ends({0xff, 0xe0}));                          // jmp *%rax
  CHECK_FALSE(ends({0xff, 0x70, 0x08}));                    // push 0x8(%rax)
  CHECK_FALSE(ends({0x48, 0x89, 0xe5}));                    // mov %rsp,%rbp
  CHECK_FALSE(ends({0x48, 0x83, 0xc4, 0x08, 0xc3}));        // add $8,%rsp; ret
  CHECK_FALSE(ends({0xe8, 0x10, 0x20, 0x30, 0x40, 0x90}));  // call, then a nop
}

#endif
