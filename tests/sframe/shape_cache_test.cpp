// The encoder reuses the FRE bytes (and skips the row checks) of a function whose rows,
// repetition size and FRE address width equal the previous one's. These tests check that this
// shortcut changes neither the bytes nor any error.
#include <jitunwind/sframe.h>

#include "common/same_rows.hpp"
#include "sframe/gen.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <new>
#include <random>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

const abi all_abis[] = {abi::amd64, abi::aarch64_le, abi::aarch64_be};

// The FRE bytes of function `i` of a section (from the decoder's layout).
std::vector<uint8_t> fre_bytes(const std::vector<uint8_t>& section, const decoded_section& d,
                               size_t i) {
  const size_t base = 28 + d.info.fre_off;  // v2 header, then the FRE sub-section
  const fde_layout& l = d.layout[i];
  return {section.begin() + static_cast<ptrdiff_t>(base + l.fre_offset),
          section.begin() + static_cast<ptrdiff_t>(base + l.fre_offset + l.fre_bytes)};
}

}  // namespace

TEST_CASE("functions sharing their rows encode exactly as when each is encoded alone") {
  for (abi a : all_abis) {
    for (bool strict : {true, false}) {
      test::frame_gen g(a, 4242 + static_cast<int>(a));
      encoder_options o;
      o.target = a;
      o.strict = strict;
      o.section_address = 0x7f0000000000ull;
      // A few templates, each repeated in runs: same size, another size with the same FRE
      // address width, another width (the cache must miss), interleaved with other shapes.
      std::vector<function_desc> fs;
      uint64_t at = 0x7f0000100000ull;
      for (int t = 0; t < 40; ++t) {
        const function_desc tmpl = g.function(0);
        const int run = static_cast<int>(g.pick(1, 6));
        for (int k = 0; k < run; ++k) {
          function_desc f = tmpl;
          f.start = at;
          const uint32_t limit = f.pcmask_rep ? f.pcmask_rep : f.size;
          if (f.pcmask_rep == 0 && k % 3 == 1) f.size = limit + g.pick(0, 40);       // same width?
          if (f.pcmask_rep == 0 && k % 3 == 2) f.size = limit + g.pick(200, 70000);  // wider
          fs.push_back(f);
          at += f.size + g.pick(0, 64);
        }
      }
      auto enc = encoder::create(o);
      REQUIRE(enc.ok());
      for (const auto& f : fs) REQUIRE(enc->append(f).ok());
      const auto bytes = enc->bytes();
      auto d = decode(bytes, o.section_address);
      REQUIRE(d.ok());
      REQUIRE(d->functions == fs);
      for (size_t i = 0; i < fs.size(); ++i) {
        auto alone = encoder::create(o);
        REQUIRE(alone.ok());
        REQUIRE(alone->append(fs[i]).ok());
        const auto one = alone->bytes();
        auto d1 = decode(one, o.section_address);
        REQUIRE(d1.ok());
        INFO(to_string(a) << " strict " << strict << " function " << i);
        CHECK(fre_bytes(bytes, *d, i) == fre_bytes(one, *d1, 0));
        CHECK(d->layout[i].info == d1->layout[0].info);
        CHECK(d->layout[i].rep_size == d1->layout[0].rep_size);
      }
      // The header's FRAME_POINTER flag too.
      CHECK(((d->info.flags & flag_frame_pointer) != 0) ==
            ((encode(o, fs)->at(3) & flag_frame_pointer) != 0));
    }
  }
}

TEST_CASE("a function shaped like the previous one still gets every error") {
  for (bool strict : {true, false}) {
    encoder_options o;
    o.target = abi::amd64;
    o.version = version_2;  // with 32-bit start offsets that can be out of reach
    o.strict = strict;
    o.section_address = 0x7f0000000000ull;
    const recipes::epilogue ep{20, 22};
    auto first = recipes::frame_pointer(abi::amd64, 0x7f0000001000ull, 22, 1, 4, std::span(&ep, 1));
    REQUIRE(first.ok());
    auto enc = encoder::create(o);
    REQUIRE(enc.ok());
    REQUIRE(enc->append(*first).ok());
    const auto before = enc->bytes();
    // A fresh encoder has no cached shape: same message expected where the error does not
    // depend on the previous function.
    const auto fresh_error = [&](const function_desc& f) {
      auto e = encoder::create(o);
      REQUIRE(e.ok());
      auto r = e->append(f);
      REQUIRE(!r.ok());
      return r.error().message();
    };
    const auto expect_error = [&](const function_desc& f, const char* what) {
      INFO(what << " strict " << strict);
      auto r = enc->append(f);
      REQUIRE(!r.ok());
      CHECK(r.error().message() == fresh_error(f));
      CHECK(enc->bytes() == before);  // nothing appended
    };
    function_desc f = *first;
    f.start = 0x7f0000002000ull;
    f.size = 20;  // the last row (the epilogue's, at offset 20) is now past the end
    expect_error(f, "last row at the end");
    f.size = 0;
    expect_error(f, "size 0");
    f = *first;
    f.start = std::numeric_limits<uint64_t>::max() - 10;
    expect_error(f, "wraps");
    f = *first;
    f.pcmask_rep = 40;  // larger than the function (strict), another shape anyway
    if (strict) expect_error(f, "repetition larger than the function");
    // Order and reach are checked for every function.
    f = *first;
    f.start = first->start + 10;
    {
      auto r = enc->append(f);
      REQUIRE(!r.ok());
      CHECK(r.error().message().find("starts before the end of the previous one") !=
            std::string::npos);
      CHECK(enc->bytes() == before);
    }
    f.start = o.section_address + (uint64_t{1} << 32);
    {
      auto r = enc->append(f);
      REQUIRE(!r.ok());
      CHECK(r.error().code() == errc::out_of_range);
      CHECK(enc->bytes() == before);
    }
    // And then the same shape is still accepted and encoded as the first one.
    f.start = 0x7f0000003000ull;
    REQUIRE(enc->append(f).ok());
    auto d = decode(enc->bytes(), o.section_address);
    REQUIRE(d.ok());
    REQUIRE(d->functions.size() == 2);
    CHECK(d->functions[1].rows == first->rows);
  }
}

TEST_CASE("functions without rows in a row (non-strict) encode like the first") {
  // Found by fuzz_sframe_decode: the second of two row-less functions took the shape cache
  // with zero bytes to copy from an empty buffer.
  for (abi a : all_abis) {
    encoder_options o;
    o.target = a;
    o.strict = false;
    o.section_address = 0x400000;
    std::vector<function_desc> fs(3);
    for (size_t i = 0; i < fs.size(); ++i) {
      fs[i].start = 0x401000 + 0x100 * i;
      fs[i].size = 0x40;
    }
    auto bytes = encode(o, fs);
    REQUIRE(bytes.ok());
    auto d = decode(*bytes, o.section_address);
    REQUIRE(d.ok());
    CHECK(d->functions == fs);
  }
}

TEST_CASE("a function that differs from the previous one only in a middle row gets its own FREs") {
  // The cache compares the last rows first (they usually differ); equal ends must not hide a
  // difference between them.
  for (abi a : all_abis) {
    test::frame_gen g(a, 777 + static_cast<int>(a));
    encoder_options o;
    o.target = a;
    o.strict = false;
    o.section_address = 0x7f0000000000ull;
    std::vector<function_desc> fs;
    uint64_t at = 0x7f0000100000ull;
    while (fs.size() < 40) {
      function_desc f = g.function(0);
      if (f.rows.size() < 3) continue;
      f.start = at;
      fs.push_back(f);
      at += f.size + 16;
      function_desc twin = f;
      twin.start = at;
      twin.rows[twin.rows.size() / 2].cfa_offset += 16;
      fs.push_back(twin);
      at += twin.size + 16;
    }
    auto enc = encoder::create(o);
    REQUIRE(enc.ok());
    for (const auto& f : fs) REQUIRE(enc->append(f).ok());
    auto d = decode(enc->bytes(), o.section_address);
    REQUIRE(d.ok());
    INFO(to_string(a));
    CHECK(d->functions == fs);
  }
}

TEST_CASE("the shape cache's row comparison is memberwise == whatever the padding holds") {
  std::mt19937_64 rng(99);
  // Rows built in place over random bytes, so their padding holds garbage (a copy might not
  // carry the padding along, so the rows are compared where they were built).
  alignas(frame_row) unsigned char buffers[2][sizeof(frame_row)];
  const auto row_over_garbage = [&](int which, const frame_row& fields) -> const frame_row& {
    for (auto& b : buffers[which]) b = static_cast<unsigned char>(rng());
    auto* r = new (buffers[which]) frame_row;  // sets the fields, leaves the padding alone
    r->pc_offset = fields.pc_offset;
    r->cfa = fields.cfa;
    r->cfa_reg = fields.cfa_reg;
    r->cfa_deref = fields.cfa_deref;
    r->cfa_offset = fields.cfa_offset;
    r->ra = fields.ra;
    r->ra_reg = fields.ra_reg;
    r->ra_offset = fields.ra_offset;
    r->fp = fields.fp;
    r->fp_reg = fields.fp_reg;
    r->fp_offset = fields.fp_offset;
    r->ra_mangled = fields.ra_mangled;
    return *r;
  };
  for (int i = 0; i < 20000; ++i) {
    frame_row a;
    a.pc_offset = static_cast<uint32_t>(rng() % 4);
    a.cfa = static_cast<cfa_base>(rng() % 2);
    a.cfa_offset = static_cast<int32_t>(rng() % 3) * 8;
    a.ra = static_cast<ra_rule>(rng() % 3);
    a.ra_offset = -8 * static_cast<int32_t>(rng() % 2);
    a.fp = static_cast<fp_rule>(rng() % 3);
    a.fp_offset = -16 * static_cast<int32_t>(rng() % 2);
    a.ra_mangled = rng() % 2 == 0;
    a.cfa_reg = static_cast<uint8_t>(rng() % 2 ? 0 : rng());
    a.cfa_deref = rng() % 4 == 0;
    a.ra_reg = static_cast<uint8_t>(rng() % 2 ? 0 : rng());
    a.fp_reg = static_cast<uint8_t>(rng() % 2 ? 0 : rng());
    frame_row b = a;
    // Change one field (or none) so that equal and unequal pairs both occur often.
    switch (rng() % 13) {
      case 0:
        b.pc_offset ^= 1u << (rng() % 32);
        break;
      case 1:
        b.cfa = b.cfa == cfa_base::sp ? cfa_base::fp : cfa_base::sp;
        break;
      case 2:
        b.cfa_offset ^= 1 << (rng() % 31);
        break;
      case 3:
        b.ra = static_cast<ra_rule>((static_cast<int>(b.ra) + 1) % 3);
        break;
      case 4:
        b.ra_offset ^= 1 << (rng() % 31);
        break;
      case 5:
        b.fp = static_cast<fp_rule>((static_cast<int>(b.fp) + 1) % 3);
        break;
      case 6:
        b.fp_offset ^= 1 << (rng() % 31);
        break;
      case 7:
        b.ra_mangled = !b.ra_mangled;
        break;
      case 8:
        b.cfa_reg ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 9:
        b.cfa_deref = !b.cfa_deref;
        break;
      case 10:
        b.ra_reg ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 11:
        b.fp_reg ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      default:
        break;
    }
    const frame_row& x = row_over_garbage(0, a);
    const frame_row& y = row_over_garbage(1, b);
    INFO("pair " << i);
    REQUIRE(jitunwind::detail::same_row(x, y) == (a == b));
  }
}
