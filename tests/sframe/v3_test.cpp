// SFrame v3 specifics: exact bytes, FLEX only when needed (and refusable), what v2 cannot hold,
// outermost functions without FREs, and the unwinder following the v3 rules it can.
#include <jitunwind/sframe.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

// push rbp; mov rbp, rsp; ...; pop rbp; ret — at 0x1000.
function_desc fp_function() {
  const recipes::epilogue ep[] = {{9, 10}};
  return recipes::frame_pointer(abi::amd64, 0x1000, 10, 1, 4, ep).value();
}

// A stack-realigning (DRAP) prologue as gcc writes it and gas 2.46 encodes it (FLEX):
// CFA = r10 + 0, then CFA = *(rbp - 8) with rbp saved at *(rbp + 0).
function_desc drap_function(uint64_t start) {
  function_desc f;
  f.start = start;
  f.size = 40;
  frame_row r0 = entry_row(abi::amd64);
  frame_row r1 = r0;
  r1.pc_offset = 5;
  r1.cfa = cfa_base::reg;
  r1.cfa_reg = 10;
  r1.cfa_offset = 0;
  frame_row r2 = r0;
  r2.pc_offset = 12;
  r2.cfa = cfa_base::fp;
  r2.cfa_deref = true;
  r2.cfa_offset = -8;
  r2.fp = fp_rule::register_saved;
  r2.fp_reg = 6;
  r2.fp_offset = 0;
  frame_row r3 = r0;
  r3.pc_offset = 38;
  f.rows = {r0, r1, r2, r3};
  return f;
}

}  // namespace

TEST_CASE("exact bytes of a small AMD64 v3 section") {
  encoder_options o;
  o.section_address = 0x2000;
  auto bytes = encode(o, std::vector{fp_function()});
  REQUIRE(bytes.ok());
  const std::vector<uint8_t> expect = {
      // header: magic, version 3, flags SORTED|PCREL (no FRAME_POINTER in v3), AMD64, RA -8
      0xe2, 0xde, 0x03, 0x05, 0x03, 0x00, 0xf8, 0x00, 0x01, 0x00, 0x00, 0x00,  // 1 FDE
      0x04, 0x00, 0x00, 0x00,                                                  // 4 FREs
      0x13, 0x00, 0x00, 0x00,  // 19 bytes: the 5-byte attribute record + 14 bytes of FREs
      0x00, 0x00, 0x00, 0x00,  // index at 0
      0x10, 0x00, 0x00, 0x00,  // FRE sub-section at 16
      // index entry: start = 0x1000 - (0x2000 + 28) = -0x101c (64 bits), size 10, record at 0
      0xe4, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00,
      // attribute record: 4 FREs, info addr1 PCINC, info2 DEFAULT, rep 0
      0x04, 0x00, 0x00, 0x00, 0x00,
      // FREs as in v2
      0x00, 0x03, 0x08, 0x01, 0x05, 0x10, 0xf0, 0x04, 0x04, 0x10, 0xf0, 0x09, 0x03, 0x08};
  CHECK(*bytes == expect);
}

TEST_CASE("a FLEX FDE only for the function that needs one, with gas's words") {
  encoder_options o;
  o.section_address = 0x10000;
  const function_desc plain = fp_function();
  const function_desc drap = drap_function(0x2000);
  auto bytes = encode(o, std::vector{plain, drap});
  REQUIRE(bytes.ok());
  auto d = decode(*bytes, o.section_address);
  REQUIRE(d.ok());
  REQUIRE(d->functions.size() == 2);
  CHECK(d->layout[0].fde_type == 0);
  CHECK(d->layout[1].fde_type == 1);
  CHECK(d->functions[0] == plain);
  CHECK(d->functions[1] == drap);
  CHECK(d->nonconforming.empty());
  // The CFA = *(rbp - 8), FP = *(rbp + 0) row: CFA pair, RA padding, FP pair, 1-byte words —
  // the bytes gas 2.46 writes for it (cfi-sframe-x86_64-esc-expr-1).
  const auto& l = d->layout[1];
  const uint8_t* fres = bytes->data() + 28 + d->info.fre_off;
  const std::vector<uint8_t> want_row2 = {0x0c, 0x0a, 0x33, 0xf8, 0x00, 0x33, 0x00};
  // Row 0 (start, info, 0x39 0x08) = 4 bytes; row 1 (start, info, 0x51 0x00) = 4 bytes.
  CHECK(std::vector<uint8_t>(fres + l.fre_offset + 8, fres + l.fre_offset + 15) == want_row2);
  CHECK(std::vector<uint8_t>(fres + l.fre_offset, fres + l.fre_offset + 8) ==
        std::vector<uint8_t>{0x00, 0x04, 0x39, 0x08, 0x05, 0x04, 0x51, 0x00});
}

TEST_CASE("what a version or setting cannot hold is refused with the function and row") {
  const function_desc drap = drap_function(0x2000);
  encoder_options no_flex;
  no_flex.allow_flex = false;
  auto r = encode(no_flex, std::vector{drap});
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK(r.error().message() ==
        "function at 0x2000: row 1 (offset 5): the CFA is based on a register other than SP and "
        "FP: needs a flexible (FLEX) FDE, which this encoder is set to refuse (allow_flex = "
        "false)");
  // Functions that need no FLEX still go through.
  CHECK(encode(no_flex, std::vector{fp_function()}).ok());

  encoder_options v2;
  v2.version = version_2;
  r = encode(v2, std::vector{drap});
  REQUIRE(!r.ok());
  CHECK(r.error().message() ==
        "function at 0x2000: row 1 (offset 5): the CFA is based on a register other than SP and "
        "FP: SFrame v2 cannot express it (write version 3)");
  function_desc sig = fp_function();
  sig.signal_frame = true;
  r = encode(v2, std::vector{sig});
  REQUIRE(!r.ok());
  CHECK(r.error().message().find("signal frame: SFrame v2 has no signal-frame bit") !=
        std::string::npos);
  CHECK(encode({}, std::vector{sig}).ok());

  // v3 counts a function's FREs in 16 bits.
  function_desc many;
  many.start = 0x100000;
  many.size = 70000;
  for (uint32_t i = 0; i < 65536; ++i) {
    frame_row row = entry_row(abi::amd64);
    row.pc_offset = i;
    row.cfa_offset = 8 + 8 * static_cast<int32_t>(i % 2);
    many.rows.push_back(row);
  }
  r = encode({}, std::vector{many});
  REQUIRE(!r.ok());
  CHECK(r.error().message() ==
        "function at 0x100000 has 65536 rows; SFrame v3 stores at most 65535 per function");
  CHECK(encode(v2, std::vector{many}).ok());
  many.rows.pop_back();
  CHECK(encode({}, std::vector{many}).ok());

  // Options that make no sense.
  encoder_options bad;
  bad.version = 1;
  CHECK(!encoder::create(bad).ok());
  bad.version = version_3;
  bad.frame_pointer = true;
  CHECK(encoder::create(bad).error().message() ==
        "sframe encoder: the FRAME_POINTER flag does not exist in SFrame v3");
  bad = {};
  bad.target = abi::s390x;
  CHECK(!encoder::create(bad).ok());
}

TEST_CASE("a v3 function without rows is an outermost frame, before v3 it says nothing") {
  function_desc entry;
  entry.start = 0x3000;
  entry.size = 16;
  entry.signal_frame = true;
  for (uint8_t version : {version_2, version_3}) {
    encoder_options o;
    o.version = version;
    o.strict = false;
    entry.signal_frame = version == version_3;
    auto bytes = encode(o, std::vector{entry});
    REQUIRE(bytes.ok());
    auto t = table::create(*bytes, 0);
    REQUIRE(t.ok());
    auto hit = t->find(0x3008);
    INFO("v" << int(version));
    CHECK(hit.has_value() == (version == version_3));
    if (hit) {
      CHECK(hit->row == outermost_row(0));
      CHECK(hit->signal_frame);
    }
    auto d = decode(*bytes, 0);
    REQUIRE(d.ok());
    CHECK(d->functions[0].rows.empty());
  }
}

namespace {

struct fake_stack {
  std::map<uint64_t, uint64_t> words;
  static bool read(void* user, uint64_t address, void* out, size_t len) {
    auto* self = static_cast<fake_stack*>(user);
    auto it = self->words.find(address);
    if (len != 8 || it == self->words.end()) return false;
    std::memcpy(out, &it->second, 8);
    return true;
  }
  memory_reader reader() { return {&fake_stack::read, this}; }
};

}  // namespace

TEST_CASE("the unwinder follows the v3 rules it has registers for and names the others") {
  fake_stack mem;
  regs callee;
  callee.pc = 0x1010;
  callee.sp = 0x7000;
  callee.fp = 0x7100;
  callee.lr = 0x5555;
  // CFA = *(rbp - 8) = 0x7200; RA at CFA - 8; FP = *(rbp + 0).
  mem.words[0x70f8] = 0x7200;
  mem.words[0x71f8] = 0x4242;
  mem.words[0x7100] = 0x7300;
  frame_row drap = drap_function(0).rows[2];
  auto s = step(abi::amd64, drap, callee, false, mem.reader());
  REQUIRE(s.ok);
  CHECK(s.caller.sp == 0x7200);
  CHECK(s.caller.pc == 0x4242);
  CHECK(s.caller.fp == 0x7300);
  // The slot the CFA is loaded from is unreadable.
  mem.words.erase(0x70f8);
  s = step(abi::amd64, drap, callee, false, mem.reader());
  CHECK(s.reason == stop_reason::unreadable);

  // CFA from r10: the unwinder has no r10.
  frame_row r10 = drap_function(0).rows[1];
  s = step(abi::amd64, r10, callee, true, mem.reader());
  CHECK(!s.ok);
  CHECK(s.reason == stop_reason::unsupported_rule);
  // RA in rbx: the same.
  frame_row rbx = entry_row(abi::amd64);
  rbx.ra = ra_rule::register_value;
  rbx.ra_reg = 3;
  rbx.ra_offset = 0;
  CHECK(step(abi::amd64, rbx, callee, true, mem.reader()).reason == stop_reason::unsupported_rule);
  // AMD64 RA saved at CFA-16 (a FLEX FDE): followed.
  frame_row ra16 = entry_row(abi::amd64);
  ra16.cfa_offset = 24;
  ra16.ra_offset = -16;
  mem.words[0x7008] = 0x9999;
  s = step(abi::amd64, ra16, callee, false, mem.reader());
  REQUIRE(s.ok);
  CHECK(s.caller.pc == 0x9999);
  CHECK(s.caller.sp == 0x7018);
  // AArch64: RA as the value of x30 (the link register) in the innermost frame only.
  frame_row lr = entry_row(abi::aarch64_le);
  lr.cfa_offset = 16;
  lr.fp = fp_rule::saved;  // FP saved while RA is still in LR: FLEX only
  lr.fp_offset = -16;
  mem.words[0x7000] = 0x7400;
  s = step(abi::aarch64_le, lr, callee, true, mem.reader());
  REQUIRE(s.ok);
  CHECK(s.caller.pc == 0x5555);
  CHECK(s.caller.fp == 0x7400);
  CHECK(step(abi::aarch64_le, lr, callee, false, mem.reader()).reason == stop_reason::bad_rule);
  CHECK(std::string(to_string(stop_reason::unsupported_rule)) == "unsupported_rule");
}

TEST_CASE("a signal frame's caller is looked up at its exact PC") {
  // f (0x1000, 32 bytes) was interrupted at 0x1010 by a signal; the handler returned into the
  // trampoline (0x2000, signal frame) at its first byte. A return address lookup at pc - 1
  // would find neither the trampoline (0x1fff is before it) nor the right row of f.
  function_desc f;
  f.start = 0x1000;
  f.size = 32;
  frame_row a = entry_row(abi::amd64);
  frame_row b = a;
  b.pc_offset = 0x10;  // from 0x1010 on: CFA = SP + 32
  b.cfa_offset = 32;
  f.rows = {a, b};
  function_desc tramp;
  tramp.start = 0x2000;
  tramp.size = 16;
  tramp.signal_frame = true;
  frame_row t = entry_row(abi::amd64);
  t.cfa_offset = 64;  // stands for "the interrupted context is above"
  tramp.rows = {t};
  function_desc handler;
  handler.start = 0x3000;
  handler.size = 16;
  handler.rows = {entry_row(abi::amd64)};
  auto bytes = encode({}, std::vector{f, tramp, handler});
  REQUIRE(bytes.ok());
  auto tab = table::create(*bytes, 0);
  REQUIRE(tab.ok());
  unwinder u;
  REQUIRE(u.add(&*tab).ok());
  fake_stack mem;
  regs start;
  start.pc = 0x3004;  // in the handler: RA at SP
  start.sp = 0x8000;
  mem.words[0x8000] = 0x2000;           // the trampoline's first byte
  mem.words[0x8008 + 64 - 8] = 0x1010;  // what the trampoline's row says: f at 0x1010
  mem.words[0x8048 + 32 - 8] = 0;       // f's caller: 0 ends the walk
  auto tr = u.unwind(start, mem.reader(), 10);
  CHECK(tr.pcs == std::vector<uint64_t>{0x3004, 0x2000, 0x1010});
  CHECK(tr.reason == stop_reason::zero_pc);
}
