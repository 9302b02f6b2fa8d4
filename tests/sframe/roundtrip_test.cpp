// Encoder ↔ decoder ↔ table round trips over seeded random frame descriptions, plus exact
// layout checks (widths, flags, byte order) that a symmetric encoder/decoder bug could hide.
#include <jitunwind/sframe.h>

#include "sframe/gen.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

const abi all_abis[] = {abi::amd64, abi::aarch64_le, abi::aarch64_be};

std::vector<uint8_t> must_encode(const encoder_options& o, const std::vector<function_desc>& fs) {
  auto bytes = encode(o, fs);
  INFO((bytes.ok() ? std::string() : bytes.error().message()));
  REQUIRE(bytes.ok());
  return std::move(*bytes);
}

void check_lookups(const table& t, const std::vector<function_desc>& fs, test::frame_gen& g) {
  for (const auto& f : fs) {
    // The first byte, the last byte, every row start, and random PCs inside; plus just outside.
    std::vector<uint64_t> pcs = {f.start, f.start + f.size - 1, f.start - 1, f.start + f.size};
    for (const auto& r : f.rows) pcs.push_back(f.start + r.pc_offset);
    for (int k = 0; k < 4; ++k) pcs.push_back(f.start + g.pick(0, f.size - 1));
    for (uint64_t pc : pcs) {
      size_t idx = 0;
      const frame_row* expect = test::model_find(fs, pc, &idx);
      const auto got = t.find(pc);
      INFO("pc 0x" << std::hex << pc);
      REQUIRE(got.has_value() == (expect != nullptr));
      lookup_result in_place;
      REQUIRE(t.find(pc, in_place) == got.has_value());
      if (got) CHECK(in_place.row == got->row);
      if (expect) {
        CHECK(got->row == *expect);
        CHECK(got->function_index == idx);
        CHECK(got->function_start == fs[idx].start);
        CHECK(got->function_size == fs[idx].size);
      }
    }
  }
}

}  // namespace

TEST_CASE("random functions round-trip through encode, decode and lookup on every ABI") {
  for (uint8_t version : {version_2, version_3})
    for (abi a : all_abis) {
      size_t functions = 0;
      for (bool pcrel : {true, false}) {
        // v3 sections also get the rows only v3 can hold (FLEX FDEs), signal frames, B keys.
        test::frame_gen g(a, 1000 + static_cast<int>(a) * 10 + pcrel + version * 100,
                          version == version_3);
        for (int section = 0; section < 30; ++section) {
          encoder_options o;
          o.target = a;
          o.version = version;
          o.pcrel = pcrel;
          const uint64_t text = 0x7f0000000000ull + g.pick(0, 1 << 20) * 16ull;
          o.section_address = text + (g.chance(50) ? 0x100000 : -0x200000ll);
          const auto fs = g.functions(text, g.pick(1, 60));
          functions += fs.size();
          const auto bytes = must_encode(o, fs);
          auto d = decode(bytes, o.section_address);
          INFO(to_string(a) << " v" << int(version) << " section " << section);
          REQUIRE(d.ok());
          CHECK(d->functions == fs);
          CHECK(d->nonconforming.empty());
          CHECK(d->info.version == version);
          for (size_t i = 0; i < fs.size(); ++i) {
            bool flex = false;
            for (const auto& r : fs[i].rows) flex |= !default_expressible(a, r);
            CHECK(d->layout[i].fde_type == (flex ? 1 : 0));  // FLEX only when needed
          }
          CHECK(d->info.target == a);
          CHECK(d->info.num_fdes == fs.size());
          CHECK((d->info.flags & flag_fde_sorted) != 0);
          CHECK(((d->info.flags & flag_fde_func_start_pcrel) != 0) == pcrel);
          auto info = check(bytes, o.section_address);
          REQUIRE(info.ok());
          CHECK(*info == d->info);
          auto t = table::create(bytes, o.section_address);
          REQUIRE(t.ok());
          CHECK(t->pc_range().first == fs.front().start);
          CHECK(t->pc_range().second == fs.back().start + fs.back().size);
          check_lookups(*t, fs, g);
        }
      }
      CHECK(functions > 1500);
    }
}

TEST_CASE("appending function by function gives the one-shot bytes") {
  for (uint8_t version : {version_2, version_3})
    for (abi a : all_abis) {
      test::frame_gen g(a, 77, version == version_3);
      encoder_options o;
      o.target = a;
      o.version = version;
      o.section_address = 0x400000;
      const auto fs = g.functions(0x500000, 300);
      auto enc = encoder::create(o);
      REQUIRE(enc.ok());
      for (size_t i = 0; i < fs.size(); ++i) {
        REQUIRE(enc->append(fs[i]).ok());
        if (i % 37 == 0) {
          // Every intermediate section is complete and decodes to the prefix.
          auto d = decode(enc->bytes(), o.section_address);
          REQUIRE(d.ok());
          CHECK(d->functions == std::vector<function_desc>(fs.begin(), fs.begin() + i + 1));
          CHECK(enc->bytes() == must_encode(o, {fs.begin(), fs.begin() + i + 1}));
        }
      }
      CHECK(enc->function_count() == fs.size());
      CHECK(enc->size() == enc->bytes().size());
      CHECK(enc->bytes() == must_encode(o, fs));
      // One-shot encoding sorts its input.
      auto shuffled = fs;
      std::reverse(shuffled.begin(), shuffled.end());
      CHECK(must_encode(o, shuffled) == enc->bytes());
    }
}

TEST_CASE("a cleared encoder encodes its next functions like a new one") {
  for (uint8_t version : {version_2, version_3})
    for (abi a : all_abis) {
      test::frame_gen g(a, 91, version == version_3);
      encoder_options o;
      o.target = a;
      o.version = version;
      o.section_address = 0x400000;
      // Functions of the first use: everything must go, the shape cache and the "all functions
      // keep the frame pointer" flag included.
      const auto first = g.functions(0x500000, 120);
      const auto second = g.functions(0x900000, 40);
      auto enc = encoder::create(o);
      REQUIRE(enc.ok());
      for (const auto& f : first) REQUIRE(enc->append(f).ok());
      enc->clear();
      CHECK(enc->function_count() == 0);
      CHECK(enc->bytes() == must_encode(o, {}));
      REQUIRE(enc->relocate(0x800000).ok());
      o.section_address = 0x800000;
      for (const auto& f : second) REQUIRE(enc->append(f).ok());
      CHECK(enc->bytes() == must_encode(o, second));
      // The function appended last, appended again first: its shape (cached before the clear,
      // with FRE bytes that are gone) must be encoded afresh.
      enc->clear();
      REQUIRE(enc->append(second.back()).ok());
      CHECK(enc->bytes() == must_encode(o, {second.back()}));
    }
}

TEST_CASE("relocate moves the section and keeps the functions") {
  test::frame_gen g(abi::amd64, 5);
  const auto fs = g.functions(0x10000000, 50);
  for (uint8_t version : {version_2, version_3})
    for (bool pcrel : {true, false}) {
      const size_t fde_size = version == version_3 ? 16 : 20;
      const size_t field_size = version == version_3 ? 8 : 4;
      encoder_options o;
      o.version = version;
      o.pcrel = pcrel;
      o.section_address = 0x10000000 - 0x1000;
      auto enc = encoder::create(o);
      REQUIRE(enc.ok());
      for (const auto& f : fs) REQUIRE(enc->append(f).ok());
      const auto before = enc->bytes();
      REQUIRE(enc->relocate(0x10000000ull + 0x7fff0000ull).ok());
      CHECK(enc->options().section_address == 0x10000000ull + 0x7fff0000ull);
      const auto after = enc->bytes();
      REQUIRE(before.size() == after.size());
      auto d = decode(after, 0x10000000ull + 0x7fff0000ull);
      REQUIRE(d.ok());
      CHECK(d->functions == fs);
      // Only the FDE start fields changed.
      for (size_t i = 0; i < before.size(); ++i) {
        const bool start_field =
            i >= 28 && i < 28 + fde_size * fs.size() && (i - 28) % fde_size < field_size;
        if (!start_field) CHECK(before[i] == after[i]);
      }
      auto far = enc->relocate(0x10000000 + 0x100000000ull);
      if (version == version_2) {
        // Out of a 32-bit field's reach: refused, encoder unchanged.
        REQUIRE(!far.ok());
        CHECK(far.error().code() == errc::out_of_range);
        CHECK(enc->bytes() == after);
      } else {
        // v3 start offsets are 64-bit: anywhere is in reach.
        REQUIRE(far.ok());
        auto d_far = decode(enc->bytes(), 0x10000000 + 0x100000000ull);
        REQUIRE(d_far.ok());
        CHECK(d_far->functions == fs);
      }
      // And back.
      REQUIRE(enc->relocate(o.section_address).ok());
      CHECK(enc->bytes() == before);
    }
}

TEST_CASE("write_update brings double-buffered sections up to date like a full write") {
  // Two buffers at different addresses, written alternately as a window republishes them.
  for (uint8_t version : {version_2, version_3})
    for (abi a : all_abis) {
      for (bool pcrel : {true, false}) {
        test::frame_gen g(a, 31 + static_cast<int>(a) + pcrel, version == version_3);
        const auto fs = g.functions(0x20000000, 200);
        encoder_options o;
        o.target = a;
        o.version = version;
        o.pcrel = pcrel;
        o.section_address = 0x1ff00000;
        auto enc = encoder::create(o);
        REQUIRE(enc.ok());
        const uint64_t address[2] = {0x1ff00000, 0x1ff80000};
        std::vector<uint8_t> buffer[2] = {std::vector<uint8_t>(1 << 16, 0xee),
                                          std::vector<uint8_t>(1 << 16, 0xee)};
        size_t written[2] = {0, 0};
        size_t next = 0;
        int target = 0;
        while (next < fs.size()) {
          const size_t batch = g.pick(0, 9);  // 0: republish without new functions
          for (size_t k = 0; k < batch && next < fs.size(); ++k)
            REQUIRE(enc->append(fs[next++]).ok());
          INFO(to_string(a) << " pcrel " << pcrel << " functions " << next << " buffer " << target);
          REQUIRE(enc->write_update(buffer[target], address[target], written[target]).ok());
          written[target] = enc->function_count();
          CHECK(enc->options().section_address == o.section_address);
          // Byte-identical to a full write at that address.
          auto full = *encoder::create(o);
          for (size_t i = 0; i < next; ++i) REQUIRE(full.append(fs[i]).ok());
          REQUIRE(full.relocate(address[target]).ok());
          const auto expect = full.bytes();
          REQUIRE(enc->size() == expect.size());
          CHECK(std::equal(expect.begin(), expect.end(), buffer[target].begin()));
          auto d = decode(std::span<const uint8_t>(buffer[target].data(), expect.size()),
                          address[target]);
          REQUIRE(d.ok());
          CHECK(d->functions == std::vector<function_desc>(fs.begin(), fs.begin() + next));
          target ^= 1;
        }
      }
    }
}

TEST_CASE("write_update with room for FDEs appends in place and decodes like a full write") {
  // A window's open section: room for `room` FDEs in front of the FREs; publishes add behind
  // what is there, and a larger room means a whole write.
  for (uint8_t version : {version_2, version_3})
    for (abi a : all_abis) {
      for (bool pcrel : {true, false}) {
        test::frame_gen g(a, 57 + static_cast<int>(a) + pcrel, version == version_3);
        const auto fs = g.functions(0x20000000, 150);
        encoder_options o;
        o.target = a;
        o.version = version;
        o.pcrel = pcrel;
        o.section_address = 0x1ff00000;
        auto enc = encoder::create(o);
        REQUIRE(enc.ok());
        std::vector<uint8_t> buffer(1 << 16, 0xee);
        size_t written = 0, room = 0, next = 0;
        while (next < fs.size()) {
          const size_t batch = g.pick(0, 9);
          for (size_t k = 0; k < batch && next < fs.size(); ++k)
            REQUIRE(enc->append(fs[next++]).ok());
          if (room < next) {
            room = std::max<size_t>(2 * next, 8);
            written = 0;
          }
          INFO(to_string(a) << " pcrel " << pcrel << " functions " << next << " room " << room);
          REQUIRE(enc->write_update(buffer, o.section_address, written, room).ok());
          written = next;
          const size_t size = enc->size_with_room(room);
          auto d = decode(std::span<const uint8_t>(buffer.data(), size), o.section_address);
          REQUIRE(d.ok());
          CHECK(d->functions == std::vector<function_desc>(fs.begin(), fs.begin() + next));
          // With the room taken out: write's bytes.
          const std::vector<uint8_t> expect = enc->bytes();
          const size_t fde_size = version == version_3 ? 16 : 20;
          const size_t fdes = next * fde_size;
          CHECK(std::equal(buffer.begin() + 28, buffer.begin() + 28 + static_cast<ptrdiff_t>(fdes),
                           expect.begin() + 28));
          CHECK(std::equal(buffer.begin() + 28 + static_cast<ptrdiff_t>(room * fde_size),
                           buffer.begin() + static_cast<ptrdiff_t>(size),
                           expect.begin() + 28 + static_cast<ptrdiff_t>(fdes)));
        }
        // Room for too few FDEs is refused.
        if (next > 0)
          CHECK(enc->write_update(buffer, o.section_address, 0, next - 1).error().code() ==
                errc::invalid_argument);
      }
    }
}

TEST_CASE("write_update refuses what it cannot do and leaves the buffer alone") {
  test::frame_gen g(abi::amd64, 8);
  const auto fs = g.functions(0x10000000, 20);
  encoder_options o;
  o.version = version_2;  // v2: 32-bit start offsets can be out of reach
  o.section_address = 0x10000000 - 0x1000;
  auto enc = encoder::create(o);
  REQUIRE(enc.ok());
  for (size_t i = 0; i < 10; ++i) REQUIRE(enc->append(fs[i]).ok());
  std::vector<uint8_t> buf(enc->size());
  REQUIRE(enc->write_update(buf, o.section_address, 0).ok());
  CHECK(buf == enc->bytes());
  // Too small.
  std::vector<uint8_t> small(enc->size() - 1, 0x5a);
  auto r = enc->write_update(small, o.section_address, 0);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK(small == std::vector<uint8_t>(enc->size() - 1, 0x5a));
  // More functions claimed than the encoder has.
  r = enc->write_update(buf, o.section_address, 11);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  // New functions out of reach of the given address: refused, buffer unchanged.
  for (size_t i = 10; i < 20; ++i) REQUIRE(enc->append(fs[i]).ok());
  std::vector<uint8_t> big(enc->size(), 0x5a);
  std::copy(buf.begin(), buf.end(), big.begin());
  const auto before = big;
  r = enc->write_update(big, o.section_address + 0x100000000ull, 10);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::out_of_range);
  CHECK(big == before);
  REQUIRE(enc->write_update(big, o.section_address, 10).ok());
  CHECK(big == enc->bytes());
}

TEST_CASE("FRE address and offset widths are the smallest that fit") {
  struct width_case {
    uint32_t size;
    uint8_t address_bytes;
  };
  for (auto c : {width_case{1, 1}, width_case{256, 1}, width_case{257, 2}, width_case{65536, 2},
                 width_case{65537, 4}}) {
    function_desc f;
    f.start = 0x1000;
    f.size = c.size;
    f.rows = {entry_row(abi::amd64)};
    auto bytes = encode({}, std::vector{f});
    REQUIRE(bytes.ok());
    auto d = decode(*bytes, 0);
    REQUIRE(d.ok());
    INFO("size " << c.size);
    CHECK(d->layout[0].fre_address_size == c.address_bytes);
  }
  struct offset_case {
    int32_t cfa;
    int32_t fp;
    uint8_t code;  // fre_info bits 5-6
  };
  for (auto c :
       {offset_case{120, -16, 0}, offset_case{128, -16, 1}, offset_case{16, -136, 1},
        offset_case{32760, -16, 1}, offset_case{32768, -16, 2}, offset_case{16, -32776, 2}}) {
    function_desc f;
    f.start = 0x1000;
    f.size = 10;
    frame_row r;
    r.cfa = cfa_base::fp;
    r.cfa_offset = c.cfa;
    r.fp = fp_rule::saved;
    r.fp_offset = c.fp;
    f.rows = {r};
    auto bytes = encode({}, std::vector{f});
    INFO("cfa " << c.cfa << " fp " << c.fp);
    REQUIRE(bytes.ok());
    auto d = decode(*bytes, 0);
    REQUIRE(d.ok());
    CHECK(((d->layout[0].fre_infos[0] >> 5) & 3) == c.code);
    CHECK(d->functions[0] == f);
  }
}

TEST_CASE("exact bytes of a small AMD64 section") {
  // push rbp; mov rbp, rsp; ...; pop rbp; ret — at 0x1000, section at 0x2000, PCREL.
  const recipes::epilogue ep[] = {{9, 10}};
  auto f = recipes::frame_pointer(abi::amd64, 0x1000, 10, 1, 4, ep);
  REQUIRE(f.ok());
  encoder_options o;
  o.version = version_2;
  o.section_address = 0x2000;
  auto bytes = encode(o, std::vector{*f});
  REQUIRE(bytes.ok());
  const std::vector<uint8_t> expect = {
      // header: magic, version 2, flags SORTED|FRAME_POINTER|PCREL, AMD64, fixed FP 0, RA -8
      0xe2, 0xde, 0x02, 0x07, 0x03, 0x00, 0xf8, 0x00, 0x01, 0x00, 0x00, 0x00,  // 1 FDE
      0x04, 0x00, 0x00, 0x00,                                                  // 4 FREs
      0x0e, 0x00, 0x00, 0x00,  // 14 bytes of FREs (3 + 4 + 4 + 3)
      0x00, 0x00, 0x00, 0x00,  // FDE offset 0
      0x14, 0x00, 0x00, 0x00,  // FRE offset 20
      // FDE: start = 0x1000 - (0x2000 + 28) = -0x101c
      0xe4, 0xef, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x00,  // size 10
      0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,  // FRE offset 0, 4 FREs
      0x00, 0x00, 0x00, 0x00,                          // info: addr1 PCINC; rep 0; padding
      // FREs: start, info (SP=1 | count << 1 | size << 5), offsets
      0x00, 0x03, 0x08,        // 0: CFA = SP + 8
      0x01, 0x05, 0x10, 0xf0,  // 1: CFA = SP + 16, FP at CFA - 16
      0x04, 0x04, 0x10, 0xf0,  // 4: CFA = FP + 16, FP at CFA - 16
      0x09, 0x03, 0x08,        // 9: CFA = SP + 8
  };
  CHECK(*bytes == expect);
}

TEST_CASE("AArch64 big-endian sections are the byte-swapped little-endian ones") {
  test::frame_gen g(abi::aarch64_le, 9);
  auto fs = g.functions(0x100000, 20);
  encoder_options le, be;
  le.target = abi::aarch64_le;
  be.target = abi::aarch64_be;
  le.section_address = be.section_address = 0x80000;
  const auto lb = must_encode(le, fs);
  const auto bb = must_encode(be, fs);
  REQUIRE(lb.size() == bb.size());
  CHECK(bb[0] == 0xde);
  CHECK(bb[1] == 0xe2);
  CHECK(bb[4] == 1);
  CHECK(lb[4] == 2);
  // Header words and FDE words swap; FRE bytes swap per field: compare via decode of both, and
  // the header counts read with the right byte order.
  for (size_t off = 8; off < 28; off += 4) {
    CHECK(lb[off] == bb[off + 3]);
    CHECK(lb[off + 1] == bb[off + 2]);
  }
  auto dl = decode(lb, 0x80000), db = decode(bb, 0x80000);
  REQUIRE(dl.ok());
  REQUIRE(db.ok());
  CHECK(dl->functions == fs);
  CHECK(db->functions == fs);
  // A big-endian magic with a little-endian ABI id is corrupt.
  auto bad = bb;
  bad[4] = 2;
  auto r = decode(bad, 0);
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::malformed);
}

TEST_CASE("PCMASK functions repeat their rows") {
  // 8 PLT-like stubs of 16 bytes: push (CFA+8 after byte 6), jmp.
  function_desc plt;
  plt.start = 0x3000;
  plt.size = 8 * 16;
  plt.pcmask_rep = 16;
  frame_row r1 = entry_row(abi::amd64);
  frame_row r2 = r1;
  r2.pc_offset = 6;
  r2.cfa_offset = 16;
  plt.rows = {r1, r2};
  auto bytes = encode({}, std::vector{plt});
  REQUIRE(bytes.ok());
  auto t = table::create(*bytes, 0);
  REQUIRE(t.ok());
  for (uint64_t pc = plt.start; pc < plt.start + plt.size; ++pc) {
    auto got = t->find(pc);
    REQUIRE(got.has_value());
    CHECK(got->row.cfa_offset == ((pc - plt.start) % 16 < 6 ? 8 : 16));
  }
  CHECK(!t->find(plt.start + plt.size).has_value());
  auto d = decode(*bytes, 0);
  REQUIRE(d.ok());
  CHECK(d->layout[0].pcmask);
  CHECK(d->layout[0].rep_size == 16);
  CHECK(d->functions[0] == plt);
}

TEST_CASE("encoder refuses what it cannot encode") {
  encoder_options v2;
  v2.version = version_2;
  auto enc = encoder::create(v2);
  REQUIRE(enc.ok());
  auto leaf = recipes::leaf(abi::amd64, 0x1000, 16);
  REQUIRE(leaf.ok());
  REQUIRE(enc->append(*leaf).ok());
  SECTION("overlap and order") {
    auto overlap = *leaf;
    overlap.start = 0x100f;
    auto r = enc->append(overlap);
    REQUIRE(!r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    CHECK(r.error().message().find("0x100f") != std::string::npos);
    overlap.start = 0x800;
    CHECK(!enc->append(overlap).ok());
    CHECK(enc->function_count() == 1);
  }
  SECTION("reach") {
    auto far = *leaf;
    far.start = 0x1000 + 0x80000000ull;
    auto r = enc->append(far);
    REQUIRE(!r.ok());
    CHECK(r.error().code() == errc::out_of_range);
  }
  SECTION("ABI rules (strict) and format rules") {
    function_desc f = *leaf;
    f.start = 0x2000;
    f.rows[0].ra_offset = -12;  // not a multiple of 8
    auto r = enc->append(f);
    REQUIRE(!r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    f = *leaf;
    f.start = 0x2000;
    f.pcmask_rep = 300;
    f.size = 600;
    CHECK(!enc->append(f).ok());
    CHECK(enc->function_count() == 1);
  }
  SECTION("write needs room") {
    std::vector<uint8_t> small(enc->size() - 1);
    auto r = enc->write(small);
    REQUIRE(!r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
  }
  CHECK(!encoder::create(encoder_options{static_cast<abi>(9)}).ok());
}

TEST_CASE("non-strict encoding takes foreign rows that SFrame can express") {
  // LLVM's epilogue row: CFA = SP + 8 while FP is still "saved at CFA-16" (below SP).
  function_desc f;
  f.start = 0x1000;
  f.size = 10;
  frame_row r = entry_row(abi::amd64);
  r.fp = fp_rule::saved;
  r.fp_offset = -16;
  f.rows = {r};
  CHECK(!encode({}, std::vector{f}).ok());
  encoder_options loose;
  loose.strict = false;
  auto bytes = encode(loose, std::vector{f});
  REQUIRE(bytes.ok());
  auto d = decode(*bytes, 0);
  REQUIRE(d.ok());
  CHECK(d->functions[0] == f);
  REQUIRE(d->nonconforming.size() == 1);
  CHECK(d->nonconforming[0].index == 0);
  CHECK(d->nonconforming[0].reason.find("below the stack pointer") != std::string::npos);
  // Empty functions are fine, but two functions never share a start (readers binary-search).
  function_desc empty;
  empty.start = 0x2000;
  auto enc = encoder::create(loose);
  REQUIRE(enc.ok());
  REQUIRE(enc->append(empty).ok());
  CHECK(!enc->append(empty).ok());
  empty.start = 0x2001;
  CHECK(enc->append(empty).ok());
  CHECK(decode(enc->bytes(), 0).ok());
  // But not rows the AMD64 layout has no room for.
  f.rows[0].ra = ra_rule::in_register;
  f.rows[0].ra_offset = 0;
  CHECK(!encode(loose, std::vector{f}).ok());
}

TEST_CASE("FRAME_POINTER flag follows the functions unless forced") {
  const recipes::epilogue ep[] = {{20, 21}};
  auto fp = recipes::frame_pointer(abi::amd64, 0x1000, 21, 1, 4, ep);
  auto sp = recipes::sp_frame(abi::amd64, 0x2000, 21, 4, 24, ep);
  REQUIRE(fp.ok());
  REQUIRE(sp.ok());
  auto flags = [](const encoder_options& o, std::vector<function_desc> fs) {
    auto b = encode(o, fs);
    REQUIRE(b.ok());
    return (*b)[3];
  };
  encoder_options v2;
  v2.version = version_2;
  CHECK((flags(v2, {*fp}) & flag_frame_pointer) != 0);
  CHECK((flags(v2, {*fp, *sp}) & flag_frame_pointer) == 0);
  CHECK((flags(v2, {}) & flag_frame_pointer) == 0);
  // v3 has no such flag.
  CHECK((flags({}, {*fp}) & flag_frame_pointer) == 0);
  encoder_options forced = v2;
  forced.frame_pointer = true;
  CHECK((flags(forced, {*sp}) & flag_frame_pointer) != 0);
  forced.frame_pointer = false;
  CHECK((flags(forced, {*fp}) & flag_frame_pointer) == 0);
}

TEST_CASE("remove takes one function out: the section equals a fresh encoding of the others") {
  for (abi a : all_abis) {
    test::frame_gen g(a, 77 + static_cast<int>(a));
    const auto fs = g.functions(0x20000000, 120);
    encoder_options o;
    o.target = a;
    o.section_address = 0x1ff00000;
    o.frame_pointer = false;  // the automatic flag may stay unset after a removal (see remove)
    auto enc = encoder::create(o);
    REQUIRE(enc.ok());
    std::vector<function_desc> live;
    size_t next = 0;
    while (next < fs.size()) {
      if (!live.empty() && g.pick(0, 2) == 0) {
        const size_t k = g.pick(0, static_cast<uint32_t>(live.size() - 1));
        REQUIRE(enc->remove(live[k].start).ok());
        live.erase(live.begin() + static_cast<ptrdiff_t>(k));
      } else {
        REQUIRE(enc->append(fs[next]).ok());
        live.push_back(fs[next++]);
      }
      INFO(to_string(a) << ": " << live.size() << " functions");
      auto fresh = encode(o, live);
      REQUIRE(fresh.ok());
      CHECK(enc->bytes() == *fresh);
      CHECK(enc->function_count() == live.size());
    }
    auto missing = enc->remove(0x10);
    CHECK(missing.error().code() == errc::not_found);
  }
}
