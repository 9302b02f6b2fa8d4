// Hostile input: every header/FDE/FRE field set to boundary values, and many thousands of seeded
// random mutations of valid sections. Each must give a clean error or a valid decode — never a
// crash, a hang or (under the ASan/UBSan stage) undefined behaviour.
#include <jitunwind/sframe.h>

#include "sframe/gen.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

constexpr uint64_t section_address = 0x600000;

// Everything a consumer would do with the bytes, with consistency checks between the APIs.
// Returns true if the section was accepted.
bool exercise(const std::vector<uint8_t>& bytes) {
  auto d = decode(bytes, section_address);
  auto c = check(bytes, section_address);
  auto t = table::create(bytes, section_address);
  REQUIRE(d.ok() == c.ok());
  if (!d.ok()) {
    const auto& e = d.error();
    CHECK((e.code() == errc::malformed || e.code() == errc::unsupported));
    CHECK(e.message().rfind("sframe: ", 0) == 0);
    CHECK(e.message() == c.error().message());
    CHECK(!t.ok());
    return false;
  }
  CHECK(*c == d->info);
  CHECK(d->functions.size() == d->info.num_fdes);
  CHECK(d->layout.size() == d->functions.size());
  size_t rows = 0;
  for (const auto& f : d->functions) rows += f.rows.size();
  CHECK(rows == d->info.num_fres);
  if (t.ok()) {
    // Lookups at and around every function agree with the decoded model.
    for (const auto& f : d->functions) {
      for (uint64_t pc : {f.start, f.start + f.size / 2, f.start + f.size - 1, f.start + f.size}) {
        auto got = t->find(pc);
        size_t index = 0;
        const frame_row* want = test::model_find(d->functions, pc, &index, true);
        // v3: a DEFAULT FDE without FREs is an outermost frame; before v3, and a FLEX one,
        // says nothing.
        if (want != nullptr && d->functions[index].rows.empty() &&
            (d->info.version < version_3 || d->layout[index].fde_type != 0))
          want = nullptr;
        REQUIRE(got.has_value() == (want != nullptr));
        if (want) CHECK(got->row == *want);
      }
    }
  }
  // Whatever decodes re-encodes (format rules only) to the same functions, when it can.
  encoder_options o;
  o.target = d->info.target;
  o.version = d->info.version == version_1 ? version_2 : d->info.version;
  o.section_address = section_address;
  o.strict = false;
  o.pcrel = (d->info.flags & flag_fde_func_start_pcrel) != 0;
  if (auto again = encode(o, d->functions); again.ok()) {
    auto d2 = decode(*again, section_address);
    REQUIRE(d2.ok());
    auto sorted = d->functions;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& x, const auto& y) { return x.start < y.start; });
    // Outermost rows keep only their position; everything else must survive.
    CHECK(d2->functions == sorted);
  }
  return true;
}

std::vector<uint8_t> valid_section(abi a, uint64_t seed, size_t n, uint8_t version = version_2) {
  test::frame_gen g(a, seed, version == version_3);
  encoder_options o;
  o.target = a;
  o.version = version;
  o.section_address = section_address;
  return encode(o, g.functions(section_address + 0x10000, n)).value();
}

// A hand-made v1 section like binutils 2.40 writes (17-byte FDEs, section-relative starts): a
// PLT0-like PCINC function and a PCMASK PLT.
std::vector<uint8_t> v1_section() {
  const uint8_t bytes[] = {
      0xe2, 0xde, 0x01, 0x01, 0x03, 0x00, 0xf8, 0x00,        // v1, SORTED, AMD64, RA -8
      0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,        // 2 FDEs, 4 FREs
      0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,        // 12 bytes of FREs, FDEs at 0
      0x22, 0x00, 0x00, 0x00,                                // FREs at 34
      0x00, 0x10, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,        // start +0x1000, size 16
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,  // FREs at 0, 2 FREs, addr1 PCINC
      0x10, 0x10, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00,        // start +0x1010, size 48
      0x06, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x10,  // FREs at 6, 2 FREs, PCMASK
      0x00, 0x03, 0x10, 0x06, 0x03, 0x18,                    // sp+16 / @6 sp+24
      0x00, 0x03, 0x08, 0x0b, 0x03, 0x10,                    // sp+8 / @11 sp+16
  };
  return {std::begin(bytes), std::end(bytes)};
}

}  // namespace

TEST_CASE("the hand-made v1 section decodes like binutils reads it") {
  auto d = decode(v1_section(), section_address);
  REQUIRE(d.ok());
  CHECK(d->info.version == version_1);
  REQUIRE(d->functions.size() == 2);
  CHECK(d->functions[0].start == section_address + 0x1000);
  CHECK(d->functions[1].start == section_address + 0x1010);
  CHECK(d->functions[1].pcmask_rep == 16);
  const auto bytes = v1_section();  // the table reads these bytes: they must outlive it
  auto t = table::create(bytes, section_address);
  REQUIRE(t.ok());
  auto r = t->find(section_address + 0x1010 + 16 * 2 + 12);  // third PLT entry, after push
  REQUIRE(r.has_value());
  CHECK(r->row.cfa_offset == 16);
  CHECK(exercise(v1_section()));
}

TEST_CASE("errors name the structure, its index and the values") {
  auto bytes = valid_section(abi::amd64, 3, 4);
  REQUIRE(exercise(bytes));
  const uint32_t fre_len = bytes[16] | bytes[17] << 8;
  SECTION("first FRE offset past the FRE sub-section") {
    auto b = bytes;
    b[28 + 20 + 8] = 0x00;
    b[28 + 20 + 9] = 0x10;  // FDE 1: start_fre_off = 4096
    auto r = decode(b, section_address);
    REQUIRE(!r.ok());
    CHECK(r.error().message() == "sframe: FDE 1: first FRE offset 4096 past FRE sub-section (len " +
                                     std::to_string(fre_len) + ")");
  }
  SECTION("bad magic, version, ABI, flags") {
    auto b = bytes;
    b[0] = 0;
    CHECK(decode(b, 0).error().message().find("bad magic") != std::string::npos);
    b = bytes;
    b[2] = 4;
    CHECK(decode(b, 0).error().code() == errc::unsupported);
    b = bytes;
    b[4] = 5;
    CHECK(decode(b, 0).error().code() == errc::unsupported);
    b = bytes;
    b[3] |= 0x40;
    CHECK(decode(b, 0).error().message() ==
          "sframe: header flags 0x45 have bits 0x40 undefined in version 2");
    // FRAME_POINTER is a v2 flag; in v3 it is undefined.
    auto v3 = valid_section(abi::amd64, 3, 4, version_3);
    v3[3] |= flag_frame_pointer;
    CHECK(decode(v3, 0).error().message() ==
          "sframe: header flags 0x07 have bits 0x02 undefined in version 3");
  }
  SECTION("FDEs out of order in a section flagged sorted") {
    // Section-relative starts, so swapping two FDEs keeps their addresses.
    test::frame_gen g(abi::amd64, 4);
    encoder_options o;
    o.version = version_2;
    o.pcrel = false;
    o.section_address = section_address;
    auto b = encode(o, g.functions(section_address + 0x100, 3)).value();
    std::swap_ranges(b.begin() + 28, b.begin() + 48, b.begin() + 48);
    auto r = decode(b, section_address);
    REQUIRE(!r.ok());
    CHECK(r.error().message().find("sframe: FDE 1: function [0x") == 0);
    CHECK(r.error().message().find("does not come after FDE 0") != std::string::npos);
    // Without the flag the section decodes (gas writes unsorted sections in objects) but
    // cannot be used for lookups.
    b[3] &= ~flag_fde_sorted;
    CHECK(decode(b, section_address).ok());
    auto t = table::create(b, section_address);
    REQUIRE(!t.ok());
    CHECK(t.error().code() == errc::unsupported);
  }
}

TEST_CASE("every header, FDE and FRE field at boundary values") {
  struct input {
    const char* name;
    std::vector<uint8_t> bytes;
    size_t fde_size;
  };
  std::vector<input> inputs = {
      {"amd64 v2", valid_section(abi::amd64, 11, 6), 20},
      {"aarch64 be v2", valid_section(abi::aarch64_be, 12, 6), 20},
      {"aarch64 le v2", valid_section(abi::aarch64_le, 13, 6), 20},
      {"amd64 v1", v1_section(), 17},
      {"amd64 v3", valid_section(abi::amd64, 14, 6, version_3), 16},
      {"aarch64 be v3", valid_section(abi::aarch64_be, 15, 6, version_3), 16},
      {"amd64 v3 FLEX", valid_section(abi::amd64, 16, 12, version_3), 16},
  };
  const uint8_t byte_values[] = {0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0xfe, 0xff};
  size_t accepted = 0, rejected = 0;
  for (const auto& in : inputs) {
    INFO(in.name);
    REQUIRE(exercise(in.bytes));
    // Every single byte.
    for (size_t i = 0; i < in.bytes.size(); ++i) {
      for (uint8_t v : byte_values) {
        auto b = in.bytes;
        if (b[i] == v) continue;
        b[i] = v;
        INFO("byte " << i << " = " << int(v));
        (exercise(b) ? accepted : rejected)++;
      }
    }
    // Every 32-bit header and FDE field, in the section's byte order.
    const bool big = in.bytes[0] == 0xde;
    const auto& h = in.bytes;
    const size_t fdes = big ? size_t{h[8]} << 24 | h[9] << 16 | h[10] << 8 | h[11]
                            : size_t{h[11]} << 24 | h[10] << 16 | h[9] << 8 | h[8];
    REQUIRE(fdes > 1);
    std::vector<size_t> fields = {8, 12, 16, 20, 24};
    for (size_t f = 0; f < fdes; ++f)
      for (size_t k : {0, 4, 8, 12}) fields.push_back(28 + f * in.fde_size + k);
    const uint32_t word_values[] = {0,
                                    1,
                                    2,
                                    0x7f,
                                    0xff,
                                    0x100,
                                    0xffff,
                                    0x10000,
                                    0x7fffffff,
                                    0x80000000,
                                    0xfffffffe,
                                    0xffffffff,
                                    static_cast<uint32_t>(in.bytes.size()),
                                    static_cast<uint32_t>(in.bytes.size() + 1)};
    for (size_t at : fields) {
      for (uint32_t v : word_values) {
        auto b = in.bytes;
        for (int k = 0; k < 4; ++k)
          b[at + k] = static_cast<uint8_t>(v >> (big ? 24 - 8 * k : 8 * k));
        INFO("field at " << at << " = " << v);
        (exercise(b) ? accepted : rejected)++;
      }
    }
    // Every truncation and some extension.
    for (size_t len = 0; len < in.bytes.size(); ++len) {
      std::vector<uint8_t> b(in.bytes.begin(), in.bytes.begin() + len);
      CHECK(!exercise(b));
    }
    auto longer = in.bytes;
    longer.resize(longer.size() + 64, 0xaa);
    CHECK(exercise(longer));  // trailing bytes (e.g. segment padding) are allowed
  }
  CHECK(accepted > 0);
  CHECK(rejected > accepted);
}

TEST_CASE("random mutations of valid sections") {
  std::mt19937_64 rng(20240601);
  std::vector<std::vector<uint8_t>> seeds;
  for (abi a : {abi::amd64, abi::aarch64_le, abi::aarch64_be})
    for (uint64_t s = 0; s < 4; ++s) {
      seeds.push_back(valid_section(a, 100 + s, 1 + s * 5));
      seeds.push_back(valid_section(a, 200 + s, 1 + s * 5, version_3));
    }
  seeds.push_back(v1_section());
  size_t accepted = 0;
  const int iterations = 20000;
  for (int it = 0; it < iterations; ++it) {
    auto b = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % b.size();
      switch (rng() % 6) {
        case 0:
          b[pos] = static_cast<uint8_t>(rng());
          break;
        case 1:
          b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 2:
          b[pos] = (rng() & 1) ? 0xff : 0x00;
          break;
        case 3:
          b.resize(pos + 1);
          break;
        case 4:
          b.insert(b.begin() + static_cast<long>(pos), static_cast<uint8_t>(rng()));
          break;
        default:
          b[pos] = static_cast<uint8_t>(b[pos] + 1);
          break;
      }
    }
    INFO("iteration " << it);
    accepted += exercise(b);
  }
  // Mutations inside offsets and row values stay valid; the test must see both outcomes.
  CHECK(accepted > 100);
  CHECK(accepted < static_cast<size_t>(iterations));
}
