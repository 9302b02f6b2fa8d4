// The unwinder over hand-built stacks: every stop reason, both ABIs, and stacks built to loop.
#include <jitunwind/sframe.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

// A sparse fake address space of 64-bit words, stored in the target's byte order.
struct fake_memory {
  bool big = false;
  std::map<uint64_t, uint64_t> words;

  void put(uint64_t at, uint64_t v) { words[at] = v; }
  static bool read(void* user, uint64_t address, void* out, size_t len) {
    auto* m = static_cast<fake_memory*>(user);
    auto it = m->words.find(address);
    if (len != 8 || it == m->words.end()) return false;
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) {
      const int shift = m->big ? 56 - 8 * i : 8 * i;
      b[i] = static_cast<uint8_t>(it->second >> shift);
    }
    std::memcpy(out, b, 8);
    return true;
  }
  memory_reader reader() { return {&fake_memory::read, this}; }
};

function_desc outermost_fn(uint64_t start, uint32_t size) {
  function_desc f;
  f.start = start;
  f.size = size;
  f.rows = {outermost_row(0)};
  return f;
}

struct amd64_program {
  // R (outermost) calls A (frame pointer) calls B (sub rsp, 24) calls C (leaf).
  function_desc r = outermost_fn(0x1000, 0x40);
  function_desc a, b, c;
  std::vector<uint8_t> bytes;
  amd64_program() {
    const recipes::epilogue ep[] = {{0x3e, 0x3f}};
    a = recipes::frame_pointer(abi::amd64, 0x1040, 0x40, 1, 4, ep).value();
    b = recipes::sp_frame(abi::amd64, 0x1080, 0x40, 4, 24, ep).value();
    c = recipes::leaf(abi::amd64, 0x10c0, 0x10).value();
    encoder_options o;
    o.section_address = 0x2000;
    bytes = encode(o, std::vector{r, a, b, c}).value();
  }
};

}  // namespace

TEST_CASE("unwinds an AMD64 stack of FP, SP and leaf frames to the outermost frame") {
  amd64_program p;
  auto t = table::create(p.bytes, 0x2000);
  REQUIRE(t.ok());
  unwinder u(abi::amd64);
  REQUIRE(u.add(&*t).ok());

  const uint64_t ra_a = 0x1000 + 0x10, ra_b = 0x1040 + 0x20, ra_c = 0x1080 + 0x3e;  // ra_c: call
  fake_memory m;          // was B's last body instruction
  m.put(0x7ff8, ra_a);    // R: call A
  m.put(0x7ff0, 0x1234);  // A: push rbp (R's FP)
  m.put(0x7fe8, ra_b);    // A: call B          (A: rbp = 0x7ff0)
  m.put(0x7fc8, ra_c);    // B: sub rsp, 24; call C
  regs start{0x10c0 + 2, 0x7fc8, 0x7ff0, 0};
  auto tr = u.unwind(start, m.reader());
  CHECK(tr.pcs == std::vector<uint64_t>{start.pc, ra_c, ra_b, ra_a});
  CHECK(tr.reason == stop_reason::outermost);

  // The return address into B is at B's epilogue boundary: B's row at pc-1 (body, CFA = SP+32)
  // is the right one, the row at pc (after the epilogue's add rsp) would be wrong.
  auto body = u.find(ra_c - 1);
  REQUIRE(body.has_value());
  CHECK(body->row.cfa_offset == 32);

  SECTION("depth limit") {
    auto cut = u.unwind(start, m.reader(), 2);
    CHECK(cut.pcs.size() == 2);
    CHECK(cut.reason == stop_reason::depth_limit);
    CHECK(u.unwind(start, m.reader(), 0).pcs.empty());
  }
  SECTION("unreadable and zero return addresses") {
    m.words.erase(0x7fe8);
    CHECK(u.unwind(start, m.reader()).reason == stop_reason::unreadable);
    m.put(0x7fe8, 0);
    auto z = u.unwind(start, m.reader());
    CHECK(z.reason == stop_reason::zero_pc);
    CHECK(z.pcs.size() == 2);  // C's return address was read; B's is 0
  }
  SECTION("no table") {
    m.put(0x7fe8, 0x9999);
    auto z = u.unwind(start, m.reader());
    CHECK(z.reason == stop_reason::no_table);
    CHECK(z.pcs.back() == 0x9999);
  }
  SECTION("a saved FP that points at itself cannot make the walk loop") {
    // Corrupt stack: A's frame says the caller's FP is A's own frame, and the return address
    // leads back into A's body, so a naive walker would circle forever.
    m.put(0x7ff0, 0x7fe0);
    m.put(0x7ff8, ra_b);
    m.put(0x7fe8, ra_b);
    auto z = u.unwind(start, m.reader());
    CHECK(z.reason == stop_reason::no_progress);
    CHECK(z.pcs.size() < 8);
  }
}

TEST_CASE("a stack that really recurses stops at the depth cap") {
  // F calls itself forever: sub rsp, 8 (CFA = SP + 16), each frame's RA is F's call site.
  auto f = recipes::sp_frame(abi::amd64, 0x5000, 0x20, 4, 8, {}).value();
  auto bytes = encode({}, std::vector{f}).value();
  auto t = table::create(bytes, 0).value();
  unwinder u;
  REQUIRE(u.add(&t).ok());
  fake_memory m;
  const uint64_t call_ret = 0x5000 + 0x10;
  for (uint64_t sp = 0x10000; sp < 0x20000; sp += 16) m.put(sp + 8, call_ret);
  auto tr = u.unwind({0x5000 + 0x8, 0x10000, 0, 0}, m.reader(), 100);
  CHECK(tr.reason == stop_reason::depth_limit);
  CHECK(tr.pcs.size() == 100);
}

TEST_CASE("AArch64 steps: link register only in the innermost frame, PAC stripped, BE memory") {
  for (abi a : {abi::aarch64_le, abi::aarch64_be}) {
    INFO(to_string(a));
    fake_memory m;
    m.big = a == abi::aarch64_be;
    frame_row leaf = entry_row(a);  // CFA = SP, RA in x30
    const regs callee{0x4000, 0x8000, 0x8100, 0x4444};
    auto s = step(a, leaf, callee, true, m.reader());
    REQUIRE(s.ok);
    CHECK(s.caller.pc == 0x4444);
    // CFA = SP + 0: the only frame allowed not to move SP is an innermost leaf.
    CHECK(s.caller.sp == callee.sp);
    auto s2 = step(a, leaf, callee, false, m.reader());
    CHECK(!s2.ok);
    CHECK(s2.reason == stop_reason::bad_rule);

    // stp x29, x30, [sp, #-32]!; CFA = SP + 32, RA at CFA-24, FP at CFA-32, RA signed.
    frame_row framed;
    framed.cfa = cfa_base::sp;
    framed.cfa_offset = 32;
    framed.ra = ra_rule::saved;
    framed.ra_offset = -24;
    framed.fp = fp_rule::saved;
    framed.fp_offset = -32;
    framed.ra_mangled = true;
    m.put(0x8000 + 8, 0x002a000000401234ull);  // PAC bits above bit 47
    m.put(0x8000, 0x9000);
    auto s3 = step(a, framed, callee, false, m.reader());
    REQUIRE(s3.ok);
    CHECK(s3.caller.pc == 0x401234);
    CHECK(s3.caller.fp == 0x9000);
    CHECK(s3.caller.sp == 0x8020);
  }
}
