// The publisher status area (docs/registry-abi.md, "Publisher status"): what a session writes
// is read back from outside with the remote reader, texts cut at character boundaries, and a
// hostile area or record is reported, never trusted.
#include <catch2/catch.hpp>

#include <jitunwind/registry_abi.h>
#include <jitunwind/remote.h>
#include <jitunwind/window.h>

#include "registry/registry_writer.hpp"
#include "registry/status_board.hpp"
#include "remote/registry_protocol.hpp"
#include "support/process.hpp"

#include <unistd.h>

#include <cstring>
#include <vector>

using namespace jitunwind;

namespace {

// The records of session `session` in this process, read as another process would.
std::vector<remote::publisher_record> own_records(uint64_t session = 0) {
  auto reader = remote::registry_reader::at_address(
      getpid(), reinterpret_cast<uint64_t>(&detail::registry_header()));
  REQUIRE(reader.ok());
  auto snap = reader->read_publishers();
  REQUIRE(snap.ok());
  CHECK(snap->skipped.empty());
  std::vector<remote::publisher_record> out;
  for (auto& p : snap->publishers)
    if (session == 0 || p.session == session) out.push_back(p);
  return out;
}

// A registry header at 0x1000 pointing to a status area at 0x2000 (bytes of the test's making).
class status_memory final : public remote::detail::memory_source {
 public:
  jitunwind_registry_header header{};
  std::vector<uint8_t> area;

  status_memory() {
    std::memcpy(header.magic, JITUNWIND_REGISTRY_MAGIC, 8);
    header.version = JITUNWIND_REGISTRY_VERSION;
    header.header_size = sizeof(header);
    header.entry_size = sizeof(jitunwind_registry_entry);
    header.capacity = 16;
    header.status = 0x2000;
    jitunwind_registry_status_header h{};
    std::memcpy(h.magic, JITUNWIND_REGISTRY_STATUS_MAGIC, 8);
    h.header_size = sizeof(h);
    h.record_size = sizeof(jitunwind_registry_status_record);
    h.capacity = 4;
    h.record_count = 2;
    area.resize(sizeof(h) + 4 * sizeof(jitunwind_registry_status_record));
    std::memcpy(area.data(), &h, sizeof(h));
    for (uint32_t i = 0; i < 2; ++i) {
      jitunwind_registry_status_record r{};
      r.seq = 4;
      r.session = 1;
      r.publisher = i == 0 ? 4 : 8;
      r.state = 1;
      r.message_size = 5;
      std::memcpy(r.message, "hello", 5);
      put(i, r);
    }
  }
  void put(uint32_t i, const jitunwind_registry_status_record& r) {
    std::memcpy(area.data() + sizeof(jitunwind_registry_status_header) + i * sizeof(r), &r,
                sizeof(r));
  }
  jitunwind_registry_status_header& status_header() {
    return *reinterpret_cast<jitunwind_registry_status_header*>(area.data());
  }
  result<void> read(uint64_t address, void* out, size_t size) const override {
    if (address >= 0x1000 && address + size <= 0x1000 + sizeof(header)) {
      std::memcpy(out, reinterpret_cast<const uint8_t*>(&header) + (address - 0x1000), size);
      return ok_result();
    }
    if (address >= 0x2000 && address + size <= 0x2000 + area.size()) {
      std::memcpy(out, area.data() + (address - 0x2000), size);
      return ok_result();
    }
    return error(errc::out_of_range, "unmapped");
  }
  pid_t pid() const override { return 7; }

  remote::publisher_snapshot read_status() const {
    remote::publisher_snapshot s;
    REQUIRE(remote::detail::read_publishers_at(*this, 0x1000, "lib.so", 3, s).ok());
    return s;
  }
};

}  // namespace

TEST_CASE("a session's publishers are readable from outside, warnings counted, freed at the end") {
  test::temp_dir dir;
  session_options o;
  o.publishers = publisher::registry | publisher::perfmap;
  o.perfmap_dir = dir.path();
  o.perfmap_durability = durability::sync;
  uint64_t number = 0;
  {
    auto s = session::create(o);
    REQUIRE(s.ok());
    std::vector<remote::publisher_record> mine;
    for (const auto& p : own_records())
      if (p.publisher == static_cast<uint32_t>(publisher::perfmap) &&
          p.message.find(dir.path()) != std::string::npos)
        mine.push_back(p);
    REQUIRE(mine.size() == 1);
    number = mine[0].session;
    CHECK(remote::publisher_state_name(mine[0].state) == "active");
    CHECK(mine[0].message == (*s)->status()[2].message);
    CHECK(mine[0].warnings == 0);
    const auto both = own_records(number);
    REQUIRE(both.size() == 2);  // registry and perfmap; the publishers not asked for have none
    CHECK(remote::publisher_name(both[0].publisher) == "registry");
    CHECK(remote::publisher_name(both[1].publisher) == "perfmap");

    // A name perf ignores (shorter than 3 bytes) is a warning of the perf map publisher.
    auto w = (*s)->create_owned_window({.code_capacity = 1 << 16});
    REQUIRE(w.ok());
    for (const char* name : {"ab", "cd"}) {
      auto a = (*w)->allocate(32);
      REQUIRE(a.ok());
      std::memset(a->writable.data(), 0xc3, 32);
      REQUIRE((*w)->append(name, *recipes::leaf(abi::amd64, a->address, 32)).ok());
    }
    REQUIRE((*w)->publish().ok());
    std::string said_inside;
    for (const publisher_status& st : (*s)->status())
      if (st.which == publisher::perfmap) said_inside = st.message;
    const auto after = own_records(number);
    REQUIRE(after.size() == 2);
    CHECK(after[1].warnings == 2);
    CHECK_THAT(after[1].last_warning, Catch::Contains("cd"));
    // Outside, the same words as session::status() inside.
    CHECK(said_inside == after[1].message + "; 2 warnings, the last: " + after[1].last_warning);
  }
  CHECK(own_records(number).empty());
}

TEST_CASE("status texts are cut at a UTF-8 character boundary") {
  using detail::cut_utf8;
  CHECK(cut_utf8("abc", 10) == "abc");
  CHECK(cut_utf8("abcdef", 3) == "abc");
  CHECK(cut_utf8("ab\xc3\xa9", 3) == "ab");               // é would be cut in two
  CHECK(cut_utf8("a\xe2\x82\xac", 3) == "a");             // so would €
  CHECK(cut_utf8("\x80\x80\x80\x80\x80", 2) == "\x80\x80");  // not UTF-8: cut where asked
}

TEST_CASE("a hostile status area or record is reported, the good records are read") {
  status_memory m;
  auto s = m.read_status();
  REQUIRE(s.publishers.size() == 2);
  CHECK(s.publishers[0].message == "hello");
  CHECK(s.publishers[1].publisher == 8);

  SECTION("a text size beyond its field skips that record only") {
    jitunwind_registry_status_record r{};
    r.seq = 2;
    r.session = 3;
    r.message_size = 217;
    m.put(1, r);
    s = m.read_status();
    CHECK(s.publishers.size() == 1);
    REQUIRE(s.skipped.size() == 1);
    CHECK_THAT(s.skipped[0], Catch::Contains("record 1: text sizes 217 and 0 beyond the fields"));
  }
  SECTION("a record that never settles is skipped after the attempts") {
    jitunwind_registry_status_record r{};
    r.seq = 5;
    r.session = 3;
    m.put(0, r);
    s = m.read_status();
    CHECK(s.publishers.size() == 1);
    REQUIRE(s.skipped.size() == 1);
    CHECK_THAT(s.skipped[0], Catch::Contains("record 0: kept changing"));
  }
  SECTION("impossible header values refuse the area, not the registry") {
    SECTION("magic") { m.area[0] = 'X'; }
    SECTION("count above capacity") { m.status_header().record_count = 5; }
    SECTION("huge capacity") { m.status_header().capacity = 1u << 30; }
    SECTION("record size") { m.status_header().record_size = 100; }
    SECTION("records beyond the mapped memory") {
      m.status_header().record_count = 4;
      m.area.resize(m.area.size() - 8);
    }
    s = m.read_status();
    CHECK(s.publishers.empty());
    REQUIRE(s.skipped.size() == 1);
    CHECK_THAT(s.skipped[0], Catch::StartsWith("pid 7: registry at 0x1000 in lib.so: status area "
                                               "at 0x2000: "));
  }
  SECTION("no area (an older writer): nothing, and nothing skipped") {
    m.header.status = 0;
    s = m.read_status();
    CHECK(s.publishers.empty());
    CHECK(s.skipped.empty());
  }
  SECTION("free records are left out") {
    jitunwind_registry_status_record r{};
    r.seq = 2;
    m.put(0, r);
    s = m.read_status();
    CHECK(s.publishers.size() == 1);
    CHECK(s.skipped.empty());
  }
}
