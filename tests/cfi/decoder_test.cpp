// The CFI decoder: our own encoder's output decodes to the rows and saved registers it was given
// (random programs), every pointer encoding and augmentation reads correctly from hand-built
// entries, rules SFrame cannot express leave the function out with the reason, and hostile
// bytes (truncations, mutations) never crash it.
#include <jitunwind/cfi.h>

#include "cfi/tool_rows.hpp"
#include "sframe/gen.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <random>

using namespace jitunwind;

namespace {

// The changes that matter: a register whose rule does not change is dropped, as the decoder
// reports only changes (entry rule: unchanged).
std::vector<saved_register> effective(const std::vector<saved_register>& in) {
  std::map<uint16_t, saved_register> now;
  std::vector<saved_register> out;
  for (const saved_register& s : in) {
    saved_register prev{0, s.dwarf_reg, saved_rule::unchanged, 0};
    if (auto it = now.find(s.dwarf_reg); it != now.end()) prev = it->second;
    saved_register cmp = s;
    cmp.pc_offset = 0;
    prev.pc_offset = 0;
    if (cmp == prev) continue;
    now[s.dwarf_reg] = cmp;
    // Several changes at one offset: the last one holds.
    auto same = std::find_if(out.begin(), out.end(), [&](const saved_register& o) {
      return o.pc_offset == s.pc_offset && o.dwarf_reg == s.dwarf_reg;
    });
    if (same != out.end()) {
      *same = s;
    } else {
      out.push_back(s);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const saved_register& a, const saved_register& b) {
    return a.pc_offset != b.pc_offset ? a.pc_offset < b.pc_offset : a.dwarf_reg < b.dwarf_reg;
  });
  return out;
}

std::vector<saved_register> random_saves(test::frame_gen& g, abi a, uint32_t size) {
  static const uint16_t amd64_regs[] = {3, 12, 13, 14, 15};
  static const uint16_t aarch64_regs[] = {19, 20, 23, 28, 72, 79};
  std::vector<saved_register> out;
  const unsigned n = g.pick(0, 6);
  std::vector<uint32_t> pcs;
  for (unsigned i = 0; i < n; ++i) pcs.push_back(g.pick(0, size - 1));
  std::sort(pcs.begin(), pcs.end());
  for (uint32_t pc : pcs) {
    saved_register s;
    s.pc_offset = pc;
    s.dwarf_reg = a == abi::amd64 ? amd64_regs[g.pick(0, 4)] : aarch64_regs[g.pick(0, 5)];
    const unsigned k = g.pick(0, 9);
    if (k < 6) {
      s.rule = saved_rule::at_cfa;
      s.cfa_offset = -8 * static_cast<int32_t>(g.pick(1, g.chance(10) ? 5000 : 20));
      if (g.chance(5)) s.cfa_offset = 8 * static_cast<int32_t>(g.pick(1, 4));  // _sf form
    } else {
      s.rule = k < 9 ? saved_rule::unchanged : saved_rule::undefined;
    }
    // One entry per register and offset, sorted by register at one offset.
    bool dup = false;
    for (const auto& o : out) dup |= o.pc_offset == pc && o.dwarf_reg == s.dwarf_reg;
    if (!dup) out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const saved_register& x, const saved_register& y) {
    return x.pc_offset != y.pc_offset ? x.pc_offset < y.pc_offset : x.dwarf_reg < y.dwarf_reg;
  });
  return out;
}

// A little assembler for hand-built CIEs and FDEs.
struct cfi_bytes {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void uleb(uint64_t v) {
    do {
      uint8_t x = v & 0x7f;
      v >>= 7;
      b.push_back(v ? (x | 0x80) : x);
    } while (v);
  }
  void sleb(int64_t v) {
    bool more = true;
    while (more) {
      uint8_t x = v & 0x7f;
      v >>= 7;
      more = !((v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40)));
      b.push_back(more ? (x | 0x80) : x);
    }
  }
  void str(const char* s) {
    while (*s) b.push_back(static_cast<uint8_t>(*s++));
    b.push_back(0);
  }
  // Starts an entry (32-bit length patched by end()); returns its offset.
  size_t begin() {
    const size_t at = b.size();
    u(0, 4);
    return at;
  }
  void end(size_t at) {
    const uint64_t len = b.size() - at - 4;
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(len >> (8 * i));
  }
};

// An AMD64 .eh_frame CIE with augmentation `aug` (data bytes given) and the usual entry rules.
size_t amd64_cie(cfi_bytes& c, const char* aug, const std::vector<uint8_t>& aug_data,
                 uint8_t version = 1) {
  const size_t at = c.begin();
  c.u(0, 4);
  c.u8(version);
  c.str(aug);
  c.uleb(1);
  c.sleb(-8);
  if (version == 1) {
    c.u8(16);
  } else {
    c.uleb(16);
  }
  if (aug[0] == 'z') {
    c.uleb(aug_data.size());
    for (uint8_t x : aug_data) c.u8(x);
  }
  c.u8(0x0c);  // def_cfa rsp+8
  c.uleb(7);
  c.uleb(8);
  c.u8(0x80 | 16);  // offset rip, cfa-8
  c.uleb(1);
  c.end(at);
  return at;
}

cfi::decoded_cfi decode_ok(const std::vector<uint8_t>& bytes, const cfi::decoder_options& o) {
  auto d = cfi::decode(bytes, o);
  INFO((d ? std::string() : d.error().message()));
  REQUIRE(d.ok());
  return std::move(d).value();
}

}  // namespace

TEST_CASE("random programs: decode(encode(f)) gives f's rows and saved registers back") {
  for (abi a : {abi::amd64, abi::aarch64_le}) {
    for (auto enc : {cfi::address_encoding::pcrel_sdata4, cfi::address_encoding::absolute}) {
      test::frame_gen g(a, 1234 + static_cast<int>(a) * 7 + static_cast<int>(enc));
      std::vector<function_desc> fs;
      uint64_t at = 0x7f0000400000;
      for (int i = 0; i < 400; ++i) {
        function_desc f = g.function(at);
        if (f.pcmask_rep != 0) continue;  // PCMASK functions become one FDE per block
        f.saved_registers = random_saves(g, a, f.size);
        REQUIRE(validate(a, f).ok());
        at = f.start + f.size + g.pick(0, 32);
        fs.push_back(std::move(f));
      }
      cfi::encoder_options eo;
      eo.target = a;
      eo.encoding = enc;
      eo.eh_frame_address = 0x7f0000300000;
      eo.terminator = true;
      auto s = cfi::encode(eo, fs);
      REQUIRE(s.ok());
      cfi::decoder_options o;
      o.target = a;
      o.section_address = eo.eh_frame_address;
      const auto d = decode_ok(s->eh_frame, o);
      CHECK(d.left_out.empty());
      CHECK(d.nonconforming.empty());
      CHECK(d.cie_count == 1);
      CHECK(d.fde_count == fs.size());
      CHECK(d.section_size == s->eh_frame.size());
      REQUIRE(d.functions.size() == fs.size());
      for (size_t i = 0; i < fs.size(); ++i) {
        INFO("abi " << to_string(a) << " function " << i);
        CHECK(d.functions[i].start == fs[i].start);
        CHECK(d.functions[i].size == fs[i].size);
        CHECK(d.functions[i].rows == test::merged(fs[i].rows));
        CHECK(d.functions[i].saved_registers == effective(fs[i].saved_registers));
      }
    }
  }
}

TEST_CASE("frame_builder saved registers survive remember/restore_state and reach the FDE") {
  frame_builder b(abi::amd64);
  b.stack_alloc(1, 8).save_register(1, 3, -16);   // push rbx
  b.stack_alloc(3, 8).save_register(3, 12, -24);  // push r12
  b.remember_state();
  b.stack_free(10, 8).restore_register(10, 12);  // pop r12
  b.stack_free(11, 8).restore_register(11, 3);   // pop rbx
  b.restore_state(12);                           // ret; body resumes
  auto f = b.finish(0x1000, 20);
  REQUIRE(f.ok());
  const std::vector<saved_register> want = {
      {1, 3, saved_rule::at_cfa, -16},    {3, 12, saved_rule::at_cfa, -24},
      {10, 12, saved_rule::unchanged, 0}, {11, 3, saved_rule::unchanged, 0},
      {12, 3, saved_rule::at_cfa, -16},   {12, 12, saved_rule::at_cfa, -24}};
  CHECK(f->saved_registers == want);
  CHECK_FALSE(frame_builder(abi::amd64).save_register(0, 6, -16).ok());  // rbp: use offset()
  CHECK_FALSE(frame_builder(abi::amd64).save_register(0, 3, -12).ok());  // not a slot
  function_desc bad = *f;
  std::swap(bad.saved_registers[0], bad.saved_registers[1]);
  CHECK_FALSE(validate(abi::amd64, bad).ok());

  auto s = cfi::encode({}, std::span<const function_desc>(&*f, 1));
  REQUIRE(s.ok());
  const auto d = decode_ok(s->eh_frame, {});
  REQUIRE(d.functions.size() == 1);
  CHECK(d.functions[0] == *f);
}

TEST_CASE("every DW_EH_PE pointer encoding of the FDE address reads back") {
  struct form {
    uint8_t code;
    int width;  // 0: LEB128
    bool is_signed;
  };
  const form forms[] = {{0x00, 8, false}, {0x01, 0, false}, {0x02, 2, false},
                        {0x03, 4, false}, {0x04, 8, false}, {0x09, 0, true},
                        {0x0a, 2, true},  {0x0b, 4, true},  {0x0c, 8, true}};
  const uint64_t section = 0x10000, text = 0x8000, data = 0x20000;
  for (const form& fm : forms) {
    for (uint8_t app : {0x00, 0x10, 0x20, 0x30}) {
      const uint8_t enc = fm.code | app;
      INFO("encoding 0x" << std::hex << int(enc));
      cfi_bytes c;
      amd64_cie(c, "zR", {enc});
      const size_t fde = c.begin();
      c.u(fde + 4, 4);  // CIE pointer back to offset 0
      const uint64_t field = section + c.b.size();
      // Pick a start the form can hold relative to the base.
      const uint64_t base = app == 0x10 ? field : app == 0x20 ? text : app == 0x30 ? data : 0;
      const int64_t delta = fm.is_signed && app != 0 ? -0x20 : 0x40;
      const uint64_t start = base + static_cast<uint64_t>(delta);
      if (fm.width == 0) {
        if (fm.is_signed) {
          c.sleb(delta);
        } else {
          c.uleb(static_cast<uint64_t>(delta));
        }
      } else {
        c.u(static_cast<uint64_t>(delta), fm.width);
      }
      if (fm.width == 0) {
        c.uleb(0x30);  // range in the same format
      } else {
        c.u(0x30, fm.width);
      }
      c.uleb(0);       // augmentation data length
      c.u8(0x40 | 1);  // advance 1
      c.u8(0x0e);      // def_cfa_offset 16
      c.uleb(16);
      c.end(fde);
      cfi::decoder_options o;
      o.section_address = section;
      o.text_address = text;
      o.data_address = data;
      const auto d = decode_ok(c.b, o);
      REQUIRE(d.functions.size() == 1);
      CHECK(d.functions[0].start == start);
      CHECK(d.functions[0].size == 0x30);
      REQUIRE(d.functions[0].rows.size() == 2);
      CHECK(d.functions[0].rows[1].cfa_offset == 16);

      if (app == 0x20 || app == 0x30) {  // without the base: left out, named
        o.text_address.reset();
        o.data_address.reset();
        const auto e = decode_ok(c.b, o);
        CHECK(e.functions.empty());
        REQUIRE(e.left_out.size() == 1);
        CHECK(e.left_out[0].code == errc::unsupported);
        CHECK_THAT(e.left_out[0].reason, Catch::Contains("relative pointer without"));
      }
    }
  }
}

TEST_CASE("augmentations P L S and the LSDA are read and unknown ones leave FDEs out") {
  cfi_bytes c;
  // zPLSR: personality (indirect pcrel sdata4), LSDA encoding, signal frame, FDE encoding.
  const size_t cie = amd64_cie(c, "zPLSR", {0x9b, 0x11, 0x22, 0x33, 0x44, 0x1b, 0x1b}, 3);
  const size_t fde = c.begin();
  c.u(fde + 4 - cie, 4);
  c.u(static_cast<uint32_t>(-static_cast<int32_t>(c.b.size())), 4);  // pcrel: start = 0
  c.u(0x10, 4);
  c.uleb(4);  // augmentation data: the LSDA pointer
  c.u(0xdeadbeef, 4);
  c.u8(0x41);  // advance 1; push rbp
  c.u8(0x0e);
  c.uleb(16);
  c.u8(0x86);  // offset rbp, cfa-16
  c.uleb(2);
  c.u8(0x83);  // offset rbx, cfa-24
  c.uleb(3);
  c.end(fde);
  const auto d = decode_ok(c.b, {});
  REQUIRE(d.functions.size() == 1);
  const function_desc& f = d.functions[0];
  CHECK(f.start == 0);
  REQUIRE(f.rows.size() == 2);
  CHECK(f.rows[1].fp == fp_rule::saved);
  CHECK(f.rows[1].fp_offset == -16);
  REQUIRE(f.saved_registers.size() == 1);
  CHECK(f.saved_registers[0] == saved_register{1, 3, saved_rule::at_cfa, -24});

  for (const char* aug : {"zX", "eh", "S"}) {
    INFO(aug);
    cfi_bytes u;
    amd64_cie(u, aug, {});
    const size_t e = u.begin();
    u.u(e + 4, 4);
    u.u(0x1000, 8);
    u.u(0x10, 8);
    u.end(e);
    const auto r = decode_ok(u.b, {});
    CHECK(r.functions.empty());
    REQUIRE(r.left_out.size() == 1);
    CHECK(r.left_out[0].code == errc::unsupported);
    CHECK_THAT(r.left_out[0].reason, Catch::Contains("augmentation"));
  }
}

TEST_CASE(".debug_frame: CIE versions 1 3 4 in 32- and 64-bit DWARF") {
  for (int version : {1, 3, 4}) {
    for (bool dwarf64 : {false, true}) {
      INFO("version " << version << " dwarf64 " << dwarf64);
      cfi_bytes c;
      auto begin = [&] {
        const size_t at = c.b.size();
        if (dwarf64) {
          c.u(0xffffffff, 4);
          c.u(0, 8);
        } else {
          c.u(0, 4);
        }
        return at;
      };
      auto end = [&](size_t at) {
        const size_t hdr = dwarf64 ? 12 : 4;
        const uint64_t len = c.b.size() - at - hdr;
        const size_t field = dwarf64 ? at + 4 : at;
        for (size_t i = 0; i < (dwarf64 ? 8u : 4u); ++i)
          c.b[field + i] = static_cast<uint8_t>(len >> (8 * i));
      };
      const size_t cie = begin();
      c.u(~uint64_t{0}, dwarf64 ? 8 : 4);
      c.u8(static_cast<uint8_t>(version));
      c.str("");
      if (version == 4) {
        c.u8(8);  // address size
        c.u8(0);  // segment selector size
      }
      c.uleb(1);
      c.sleb(-8);
      if (version == 1) {
        c.u8(16);
      } else {
        c.uleb(16);
      }
      c.u8(0x0c);
      c.uleb(7);
      c.uleb(8);
      c.u8(0x90);
      c.uleb(1);
      end(cie);
      const size_t fde = begin();
      c.u(cie, dwarf64 ? 8 : 4);
      c.u(0x401000, 8);
      c.u(0x20, 8);
      c.u8(0x44);  // advance 4
      c.u8(0x12);  // def_cfa_sf rsp, factored -2 -> +16
      c.uleb(7);
      c.sleb(-2);
      end(fde);
      cfi::decoder_options o;
      o.kind = cfi::section_kind::debug_frame;
      const auto d = decode_ok(c.b, o);
      REQUIRE(d.functions.size() == 1);
      CHECK(d.functions[0].start == 0x401000);
      REQUIRE(d.functions[0].rows.size() == 2);
      CHECK(d.functions[0].rows[1].pc_offset == 4);
      CHECK(d.functions[0].rows[1].cfa_offset == 16);
    }
  }
}

TEST_CASE("CFA instructions: set_loc advance_loc1/2/4 *_sf val_offset and GNU forms") {
  cfi_bytes c;
  amd64_cie(c, "zR", {0x1b});
  const size_t fde = c.begin();
  c.u(fde + 4, 4);
  c.u(static_cast<uint32_t>(0x1000 - c.b.size()), 4);  // start 0x1000 (pcrel, section at 0)
  c.u(0x30000, 4);
  c.uleb(0);
  c.u8(0x02);  // advance_loc1 2
  c.u8(2);
  c.u8(0x13);  // def_cfa_offset_sf -2 -> 16
  c.sleb(-2);
  c.u8(0x03);  // advance_loc2 0x100 -> 0x102
  c.u(0x100, 2);
  c.u8(0x86);  // offset rbp, cfa-16
  c.uleb(2);
  c.u8(0x2f);  // GNU_negative_offset_extended r14, 2 -> saved at CFA+16 (-(2 * -8))
  c.uleb(14);
  c.uleb(2);
  c.u8(0x2e);  // GNU_args_size 16 (ignored)
  c.uleb(16);
  c.u8(0x04);  // advance_loc4 0x10000 -> 0x10102
  c.u(0x10000, 4);
  c.u8(0x11);  // offset_extended_sf r12, 3 -> CFA-24
  c.uleb(12);
  c.sleb(3);   // 3 * -8 = -24
  c.u8(0x01);  // set_loc 0x1000 + 0x20000 (pcrel sdata4)
  c.u(static_cast<uint32_t>(0x21000 - c.b.size()), 4);
  c.u8(0x14);  // val_offset r13: not a slot -> undefined for the debugger
  c.uleb(13);
  c.uleb(1);
  c.u8(0x08);  // same_value r12
  c.uleb(12);
  c.end(fde);
  const auto d = decode_ok(c.b, {});
  REQUIRE(d.functions.size() == 1);
  const function_desc& f = d.functions[0];
  REQUIRE(f.rows.size() == 3);
  CHECK(f.rows[1].pc_offset == 2);
  CHECK(f.rows[1].cfa_offset == 16);
  CHECK(f.rows[2].pc_offset == 0x102);
  CHECK(f.rows[2].fp_offset == -16);
  const std::vector<saved_register> want = {{0x102, 14, saved_rule::at_cfa, 16},
                                            {0x10102, 12, saved_rule::at_cfa, -24},
                                            {0x20000, 12, saved_rule::unchanged, 0},
                                            {0x20000, 13, saved_rule::undefined, 0}};
  CHECK(f.saved_registers == want);
}

TEST_CASE("rules SFrame cannot express leave the function out with where and why") {
  struct shape {
    std::vector<uint8_t> insns;
    const char* reason;
  };
  const shape shapes[] = {
      {{0x41, 0x0c, 10, 0}, "at +0x1: CFA = r10 + 0 (SFrame bases the CFA on SP or FP only)"},
      {{0x41, 0x0f, 3, 0x76, 0x78, 0x06}, "at +0x1: CFA = *(rbp - 8)"},
      {{0x41, 0x0f, 1, 0x30}, "CFA is a DWARF expression"},
      {{0x41, 0x09, 6, 0}, "frame pointer (rbp) in another register"},
      {{0x41, 0x16, 6, 1, 0x30}, "frame pointer (rbp) a DWARF expression value"},
      {{0x41, 0x07, 6}, "frame pointer (rbp) undefined"},
      {{0x41, 0x90, 2}, "AMD64 SFrame fixes the return address at CFA-8"},  // at CFA-16
      {{0x41, 0x2d}, "0x2d"},
      {{0x41, 0x3f}, "unknown CFA instruction 0x3f"},
      {{0x41, 0x0b}, "restore_state without remember_state"},
      {{0x41, 0x10, 3, 200}, "runs past"},
  };
  for (const shape& s : shapes) {
    INFO(s.reason);
    cfi_bytes c;
    amd64_cie(c, "zR", {0x00});  // absptr
    const size_t fde = c.begin();
    c.u(fde + 4, 4);
    c.u(0x5000, 8);
    c.u(0x10, 8);
    c.uleb(0);
    for (uint8_t x : s.insns) c.u8(x);
    c.end(fde);
    const auto d = decode_ok(c.b, {});
    CHECK(d.functions.empty());
    REQUIRE(d.left_out.size() == 1);
    CHECK(d.left_out[0].start == 0x5000);
    CHECK(d.left_out[0].size == 0x10);
    CHECK(d.left_out[0].fde_offset == fde);
    CHECK_THAT(d.left_out[0].reason, Catch::Contains(s.reason));
  }
  // The same rule after the function's end describes no code: the function converts.
  cfi_bytes c;
  amd64_cie(c, "zR", {0x00});
  const size_t fde = c.begin();
  c.u(fde + 4, 4);
  c.u(0x5000, 8);
  c.u(0x10, 8);
  c.uleb(0);
  for (uint8_t x : {0x50, 0x0c, 10, 0}) c.u8(x);  // advance 16 = the end
  c.end(fde);
  CHECK(decode_ok(c.b, {}).functions.size() == 1);
}

TEST_CASE("usable_rows keeps the rows around a rule that cannot be expressed, as pieces") {
  // [0x5000, +0x30): rsp+8; at +4 CFA = r10 (a hole); at +0x10 back to rsp+16 (a piece); at
  // +0x20 CFA is a DWARF expression to the end (a hole).
  cfi_bytes c;
  amd64_cie(c, "zR", {0x00});
  const size_t fde = c.begin();
  c.u(fde + 4, 4);
  c.u(0x5000, 8);
  c.u(0x30, 8);
  c.uleb(0);
  for (uint8_t x : {0x44, 0x0c, 10, 0, 0x4c, 0x0c, 7, 16, 0x50, 0x0f, 1, 0x30}) c.u8(x);
  c.end(fde);
  // The default leaves the function out at its first hole, as before.
  const auto whole = decode_ok(c.b, {});
  CHECK(whole.functions.empty());
  REQUIRE(whole.left_out.size() == 1);
  CHECK_FALSE(whole.left_out[0].part);
  CHECK_THAT(whole.left_out[0].reason, Catch::Contains("at +0x4: CFA = r10 + 0"));

  cfi::decoder_options o;
  o.partial = cfi::partial_input::usable_rows;
  const auto d = decode_ok(c.b, o);
  REQUIRE(d.functions.size() == 2);
  CHECK(d.functions[0].start == 0x5000);
  CHECK(d.functions[0].size == 4);
  REQUIRE(d.functions[0].rows.size() == 1);
  CHECK(d.functions[0].rows[0].cfa_offset == 8);
  CHECK(d.functions[1].start == 0x5010);
  CHECK(d.functions[1].size == 0x10);
  REQUIRE(d.functions[1].rows.size() == 1);
  CHECK(d.functions[1].rows[0].pc_offset == 0);
  CHECK(d.functions[1].rows[0].cfa_offset == 16);
  CHECK(d.fde_offsets == std::vector<uint32_t>{uint32_t(fde), uint32_t(fde)});
  REQUIRE(d.left_out.size() == 2);
  CHECK(d.left_out[0].part);
  CHECK(d.left_out[0].start == 0x5004);
  CHECK(d.left_out[0].size == 0xc);
  CHECK_THAT(d.left_out[0].reason, Catch::Contains("at +0x4: CFA = r10 + 0"));
  CHECK(d.left_out[1].part);
  CHECK(d.left_out[1].start == 0x5020);
  CHECK(d.left_out[1].size == 0x10);
  CHECK_THAT(d.left_out[1].reason, Catch::Contains("at +0x20: CFA is a DWARF expression"));
  // A malformed program still leaves the whole function out.
  c.b.push_back(0x0b);  // restore_state without remember_state, inside the FDE
  c.end(fde);
  const auto bad = decode_ok(c.b, o);
  CHECK(bad.functions.empty());
  REQUIRE(bad.left_out.size() == 1);
  CHECK_FALSE(bad.left_out[0].part);
  // An entry that runs past the section: the FDEs before it are kept.
  cfi_bytes t = c;
  t.b.pop_back();
  t.end(fde);
  t.u(0x100, 4);  // a length past the end
  t.u(0, 4);
  CHECK_FALSE(cfi::decode(t.b, {}).ok());
  const auto cut = decode_ok(t.b, o);
  CHECK(cut.functions.size() == 2);
  CHECK_THAT(cut.left_out.back().reason, Catch::Contains("runs past the section"));
}

TEST_CASE("the lazy PLT's expression becomes a PCMASK function of 16-byte entries") {
  // A linker's .plt FDE: PLT0 pushes twice (CFA rsp+16 at 0, rsp+24 at +6), then from +0x10 to
  // the end (3 entries) the expression rsp + 8 + ((rip & 15) >= 11) * 8.
  const std::vector<uint8_t> plt_expression = {0x0f, 11,   0x77, 0x08, 0x80, 0x00,
                                               0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  auto plt_fde = [&](uint64_t start, const std::vector<uint8_t>& expression) {
    cfi_bytes c;
    amd64_cie(c, "zR", {0x00});
    const size_t fde = c.begin();
    c.u(fde + 4, 4);
    c.u(start, 8);
    c.u(0x40, 8);
    c.uleb(0);
    for (uint8_t x : {0x0e, 16, 0x46, 0x0e, 24, 0x4a}) c.u8(x);
    for (uint8_t x : expression) c.u8(x);
    c.end(fde);
    return c.b;
  };
  for (const auto partial : {cfi::partial_input::whole_functions, cfi::partial_input::usable_rows}) {
    cfi::decoder_options o;
    o.partial = partial;
    const auto d = decode_ok(plt_fde(0x1020, plt_expression), o);
    CHECK(d.left_out.empty());
    REQUIRE(d.functions.size() == 2);
    const function_desc& plt0 = d.functions[0];
    CHECK(plt0.start == 0x1020);
    CHECK(plt0.size == 0x10);
    CHECK(plt0.pcmask_rep == 0);
    REQUIRE(plt0.rows.size() == 2);
    CHECK(plt0.rows[0].cfa_offset == 16);
    CHECK(plt0.rows[1].pc_offset == 6);
    CHECK(plt0.rows[1].cfa_offset == 24);
    const function_desc& entries = d.functions[1];
    CHECK(entries.start == 0x1030);
    CHECK(entries.size == 0x30);
    CHECK(entries.pcmask_rep == 16);
    REQUIRE(entries.rows.size() == 2);
    CHECK(entries.rows[0].pc_offset == 0);
    CHECK(entries.rows[0].cfa == cfa_base::sp);
    CHECK(entries.rows[0].cfa_offset == 8);
    CHECK(entries.rows[1].pc_offset == 11);
    CHECK(entries.rows[1].cfa_offset == 16);
    CHECK(validate(abi::amd64, entries).ok());
  }
  // Entries not on 16-byte boundaries, or another expression: a DWARF expression as any other.
  std::vector<uint8_t> other = plt_expression;
  other[8] = 0x30;  // DW_OP_lit0: not a threshold
  for (const auto& bytes : {plt_fde(0x1028, plt_expression), plt_fde(0x1020, other)}) {
    const auto d = decode_ok(bytes, {});
    CHECK(d.functions.empty());
    REQUIRE(d.left_out.size() == 1);
    CHECK_THAT(d.left_out[0].reason, Catch::Contains("at +0x10: CFA is a DWARF expression"));
  }
}

TEST_CASE("overlapping empty and unreadable FDEs are reported and a zero length ends the section") {
  cfi_bytes c;
  amd64_cie(c, "zR", {0x00});
  for (auto [start, size] :
       {std::pair<uint64_t, uint64_t>{0x2000, 0x20}, {0x1000, 0x40}, {0x1020, 0x10}, {0x3000, 0}}) {
    const size_t fde = c.begin();
    c.u(fde + 4, 4);
    c.u(start, 8);
    c.u(size, 8);
    c.uleb(0);
    c.end(fde);
  }
  const size_t bad = c.begin();  // CIE pointer leading into the middle of an FDE
  c.u(bad + 4 - 30, 4);
  c.u(0, 8);
  c.end(bad);
  c.u(0, 4);           // terminator
  c.u(0xffffffff, 4);  // garbage after it is not read
  const auto d = decode_ok(c.b, {});
  REQUIRE(d.functions.size() == 2);
  CHECK(d.functions[0].start == 0x1000);
  CHECK(d.functions[1].start == 0x2000);
  REQUIRE(d.left_out.size() == 3);
  CHECK_THAT(d.left_out[0].reason, Catch::Contains("overlaps"));
  CHECK_THAT(d.left_out[1].reason, Catch::Contains("empty address range"));
  CHECK(d.left_out[2].code == errc::malformed);
  CHECK(d.section_size == c.b.size() - 4);

  // An entry whose length runs past the end cannot be walked: the whole section is malformed.
  cfi_bytes t;
  amd64_cie(t, "zR", {0x00});
  t.u(4096, 4);
  auto e = cfi::decode(t.b, {});
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code() == errc::malformed);
  CHECK_THAT(e.error().message(), Catch::Contains("length 4096 runs past the section"));
  cfi::decoder_options be;
  be.target = abi::aarch64_be;
  CHECK(cfi::decode(c.b, be).error().code() == errc::unsupported);
}

TEST_CASE("hostile bytes: every truncation and 20000 mutations decode or fail cleanly") {
  test::frame_gen g(abi::amd64, 99);
  std::vector<function_desc> fs;
  uint64_t at = 0x1000;
  for (int i = 0; i < 12; ++i) {
    function_desc f = g.function(at);
    f.pcmask_rep = 0;
    f.saved_registers = random_saves(g, abi::amd64, f.size);
    at = f.start + f.size;
    fs.push_back(f);
  }
  auto s = cfi::encode({}, fs);
  REQUIRE(s.ok());
  const std::vector<uint8_t>& bytes = s->eh_frame;
  size_t ok = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    auto d = cfi::decode(std::span<const uint8_t>(bytes.data(), n), {});
    if (d) {
      ++ok;
      for (const auto& f : d->functions) CHECK(f.size > 0);
    }
  }
  CHECK(ok > 0);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> m = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    cfi::decoder_options o;
    o.kind = (i & 1) ? cfi::section_kind::debug_frame : cfi::section_kind::eh_frame;
    auto d = cfi::decode(m, o);
    if (!d) continue;
    for (const function_desc& f : d->functions) {
      // What converts is usable: rows sorted from 0, inside the function.
      REQUIRE(!f.rows.empty());
      CHECK(f.rows.front().pc_offset == 0);
      CHECK(f.rows.back().pc_offset < f.size);
    }
  }
}

TEST_CASE("restore_popped_fp: the FP slot an epilogue's pop left is taken as restored") {
  // gcc -O2 -fno-omit-frame-pointer: push rbp; mov rbp, rsp; call; pop rbp; add eax, 1; ret,
  // whose CFI (like LLVM's) still says "rbp at CFA-16" after the pop, with CFA = rsp + 8.
  cfi_bytes c;
  amd64_cie(c, "zR", {0x00});
  const size_t fde = c.begin();
  c.u(fde + 4, 4);
  c.u(0x5000, 8);
  c.u(14, 8);
  c.uleb(0);
  for (uint8_t x : {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6, 0x46, 0x0c, 7, 8}) c.u8(x);
  c.end(fde);
  // As the CFI says (and gas's and LLVM's SFrame): a dead slot the frame model refuses.
  const auto as_is = decode_ok(c.b, {});
  REQUIRE(as_is.functions.size() == 1);
  CHECK(as_is.functions[0].rows.back().fp == fp_rule::saved);
  REQUIRE(as_is.nonconforming.size() == 1);
  CHECK_THAT(as_is.nonconforming[0].reason, Catch::Contains("below the stack pointer"));
  cfi::decoder_options o;
  o.restore_popped_fp = true;
  const auto restored = decode_ok(c.b, o);
  REQUIRE(restored.functions.size() == 1);
  const auto& rows = restored.functions[0].rows;
  REQUIRE(rows.size() == 4);
  CHECK(rows[1].fp == fp_rule::saved);  // the body keeps its saved FP
  CHECK(rows[2].fp == fp_rule::saved);
  CHECK(rows[3].fp == fp_rule::unchanged);
  CHECK(rows[3].cfa_offset == 8);
  CHECK(restored.nonconforming.empty());
  CHECK(validate(abi::amd64, restored.functions[0]).ok());
}
