// The jitdump parser on hand-made hostile input: every inconsistency is an error naming the
// record, nothing is read out of bounds, a crash-truncated tail is tolerated.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"

#include <byteswap.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

using namespace jitunwind;
namespace jd = jitunwind::detail::jitdump;

namespace {

// Builds dumps field by field (little-endian, or byte-swapped).
struct dump_builder {
  bool swap = false;
  std::vector<uint8_t> b;

  dump_builder& u32(uint32_t v) {
    if (swap) v = bswap_32(v);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + 4);
    return *this;
  }
  dump_builder& u64(uint64_t v) {
    if (swap) v = bswap_64(v);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + 8);
    return *this;
  }
  void raw(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }
  dump_builder& header(uint32_t version = 1, uint32_t size = 40, uint64_t flags = 0) {
    u32(jd::magic);
    u32(version);
    u32(size);
    u32(62);
    u32(0);
    u32(1234);
    u64(99);
    u64(flags);
    return *this;
  }
  dump_builder& record(uint32_t id, uint32_t size, uint64_t ts = 100) {
    u32(id);
    u32(size);
    u64(ts);
    return *this;
  }
  dump_builder& load(const std::string& name, const std::string& code, uint64_t code_size) {
    record(jd::code_load, static_cast<uint32_t>(56 + name.size() + 1 + code.size()));
    u32(1);
    u32(2);
    u64(0x1000);
    u64(0x1000);
    u64(code_size);
    u64(7);
    raw(name);
    b.push_back(0);
    raw(code);
    return *this;
  }
  jitunwind::result<jd::parsed_dump> parse(const jd::parse_limits& l = {}) const {
    return jd::parse(b, l);
  }
};

void expect_malformed(const dump_builder& d, const std::string& needle) {
  auto r = d.parse();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::malformed);
  CHECK_THAT(r.error().message(), Catch::Contains(needle));
}

}  // namespace

TEST_CASE("header problems") {
  CHECK(jd::parse(std::vector<uint8_t>(10, 0)).error().code() == errc::malformed);
  dump_builder bad_magic;
  bad_magic.header();
  bad_magic.b[0] ^= 1;
  expect_malformed(bad_magic, "bad magic");
  CHECK(dump_builder().header(2).parse().error().code() == errc::unsupported);
  CHECK(dump_builder().header(1, 40, 2).parse().error().code() == errc::unsupported);
  CHECK(dump_builder().header(1, 40, 1).parse().ok());  // arch timestamps are a known flag
  expect_malformed(dump_builder().header(1, 39), "header size 39");
  expect_malformed(dump_builder().header(1, 4096), "header size 4096");
  // A larger header (a future version's extra fields) is skipped.
  dump_builder longer;
  longer.header(1, 48).u64(0);
  longer.record(jd::code_close, 16);
  auto r = longer.parse();
  REQUIRE(r.ok());
  REQUIRE(r->records.size() == 1);
  CHECK(r->records[0].file_offset == 48);
}

TEST_CASE("record sizes that cannot be right are errors, a cut-off tail is not") {
  expect_malformed(dump_builder().header().record(jd::code_close, 8), "size below");
  dump_builder cut;
  cut.header().load("f", "abcd", 4);
  cut.record(jd::code_load, 200).u64(0);  // promises 200 bytes, has 24
  auto r = cut.parse();
  REQUIRE(r.ok());
  CHECK(r->records.size() == 1);
  CHECK(r->truncated_tail == 24);
  dump_builder half_header;
  half_header.header().record(jd::code_close, 16);
  half_header.u32(3);
  auto h = half_header.parse();
  REQUIRE(h.ok());
  CHECK(h->records.size() == 1);
  CHECK(h->truncated_tail == 4);
}

TEST_CASE("CODE_LOAD bodies are checked") {
  dump_builder good;  // the parsed records point into its bytes
  auto ok = good.header().load("name", "\x90\xc3", 2).parse();
  REQUIRE(ok.ok());
  REQUIRE(ok->records.size() == 1);
  CHECK(ok->records[0].name == "name");
  CHECK(ok->records[0].code.size() == 2);
  CHECK(ok->records[0].code[1] == 0xc3);
  CHECK(ok->records[0].code_index == 7);
  expect_malformed(dump_builder().header().load("name", "xy", 100), "code size leaves no room");
  expect_malformed(dump_builder().header().load("name", "xy", ~0ull), "code size leaves no room");
  dump_builder no_nul;
  no_nul.header().load("name", "xy", 2);
  no_nul.b[40 + 56 + 4] = 'X';  // overwrite the name's NUL
  expect_malformed(no_nul, "not NUL-terminated");
  dump_builder short_body;
  short_body.header().record(jd::code_load, 16 + 20).u64(0).u64(0).u32(0);
  expect_malformed(short_body, "shorter than CODE_LOAD");
}

TEST_CASE("CODE_UNWINDING_INFO, CODE_MOVE and CODE_DEBUG_INFO bodies are checked") {
  dump_builder u;
  u.header().record(jd::code_unwinding_info, 16 + 24 + 16).u64(16).u64(4).u64(32);
  u.raw(std::string(16, 'e'));
  auto r = u.parse();
  REQUIRE(r.ok());
  CHECK(r->records[0].eh_frame.size() == 12);
  CHECK(r->records[0].eh_frame_hdr.size() == 4);
  CHECK(r->records[0].mapped_size == 32);
  dump_builder too_big;
  too_big.header().record(jd::code_unwinding_info, 16 + 24 + 8).u64(9).u64(0).u64(0).u64(0);
  expect_malformed(too_big, "larger than the record");
  dump_builder hdr_big;
  hdr_big.header().record(jd::code_unwinding_info, 16 + 24 + 8).u64(8).u64(9).u64(0).u64(0);
  expect_malformed(hdr_big, ".eh_frame_hdr larger");
  dump_builder move_short;
  move_short.header().record(jd::code_move, 16 + 40).u64(0).u64(0).u64(0).u64(0).u64(0);
  expect_malformed(move_short, "shorter than CODE_MOVE");
  dump_builder debug;
  debug.header().record(jd::code_debug_info, 16 + 16 + 17).u64(0x1000).u64(2);
  debug.raw(std::string(17, 'd'));
  expect_malformed(debug, "entry count");
  dump_builder unknown;
  unknown.header().record(77, 24).u64(5);
  auto k = unknown.parse();
  REQUIRE(k.ok());
  CHECK(k->records.size() == 1);
  CHECK(k->records[0].id == 77);
}

TEST_CASE("a dump written in the other byte order parses") {
  dump_builder be;
  be.swap = true;
  be.header().load("swapped", "\x01\x02\x03", 3).record(jd::code_close, 16, 5);
  auto r = be.parse();
  REQUIRE(r.ok());
  CHECK(r->header.byte_swapped);
  CHECK(r->header.pid == 1234);
  REQUIRE(r->records.size() == 2);
  CHECK(r->records[0].name == "swapped");
  CHECK(r->records[0].code_addr == 0x1000);
  CHECK(r->records[1].timestamp == 5);
}

TEST_CASE("record count limit") {
  dump_builder d;
  d.header();
  for (int i = 0; i < 5; ++i) d.record(jd::code_close, 16);
  jd::parse_limits l;
  l.max_records = 4;
  CHECK(d.parse(l).error().code() == errc::limit_exceeded);
  l.max_records = 5;
  CHECK(d.parse(l).ok());
}

TEST_CASE("random corruption never reads out of bounds") {
  // Under the sanitizer build and the libFuzzer target this is the real check; here it at
  // least exercises every error path on mutated versions of a valid dump.
  dump_builder base;
  base.header().load("some_function", std::string(40, '\x90'), 40);
  base.record(jd::code_unwinding_info, 16 + 24 + 24).u64(20).u64(8).u64(32);
  base.raw(std::string(24, 'u'));
  base.record(jd::code_move, 16 + 48).u64(1).u64(2).u64(3).u64(4).u64(5).u64(6);
  base.record(jd::code_close, 16);
  REQUIRE(base.parse().ok());
  std::mt19937 rng(7);
  size_t ok = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m = base.b;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
      m[rng() % m.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    auto r = jd::parse(m);
    if (!r.ok()) {
      ++errors;
      CHECK_FALSE(r.error().message().empty());
      continue;
    }
    ++ok;
    for (const auto& rec : r->records) {
      const auto in_buffer = [&](std::span<const uint8_t> s) {
        return s.empty() || (s.data() >= m.data() && s.data() + s.size() <= m.data() + m.size());
      };
      REQUIRE(in_buffer(rec.code));
      REQUIRE(in_buffer(rec.eh_frame));
      REQUIRE(in_buffer(rec.eh_frame_hdr));
      REQUIRE(rec.file_offset + rec.total_size <= m.size());
    }
  }
  CHECK(ok > 0);
  CHECK(errors > 0);
}
