// The read protocol over a scripted memory source: torn copies are re-read and never returned,
// hostile headers are refused with errors that say what is wrong.
#include <catch2/catch.hpp>

#include <jitunwind/frame.h>
#include <jitunwind/registry_abi.h>
#include <jitunwind/sframe.h>

#include "remote/registry_protocol.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::remote;
using namespace jitunwind::remote::detail;

namespace {

// A fake address space: a header at 0x1000 and entries at 0x10000. A hook runs before each
// read so tests can change memory between the reader's copies, like a concurrent writer.
class scripted_memory final : public memory_source {
 public:
  jitunwind_registry_header header{};
  std::vector<jitunwind_registry_entry> entries;
  /// Entries laid out with a 64-byte stride, as writers before the SFrame version field did.
  bool stride_64 = false;
  std::function<void(unsigned call)> before_read;
  mutable unsigned calls = 0;

  result<void> read(uint64_t address, void* out, size_t size) const override {
    if (before_read) const_cast<scripted_memory*>(this)->before_read(calls);
    ++calls;
    std::vector<uint8_t> space;
    uint64_t base;
    if (address >= 0x10000) {
      base = 0x10000;
      const size_t stride = stride_64 ? 64 : sizeof(jitunwind_registry_entry);
      space.resize(entries.size() * stride);
      for (size_t i = 0; i < entries.size(); ++i)
        std::memcpy(space.data() + i * stride, &entries[i], stride);
    } else {
      base = 0x1000;
      space.resize(sizeof(header));
      std::memcpy(space.data(), &header, sizeof(header));
    }
    if (address < base || address - base + size > space.size()) {
      return error(errc::out_of_range, "unmapped");
    }
    std::memcpy(out, space.data() + (address - base), size);
    return ok_result();
  }
  pid_t pid() const override { return 42; }

  void setup(size_t n) {
    std::memcpy(header.magic, JITUNWIND_REGISTRY_MAGIC, 8);
    header.version = 1;
    header.header_size = 64;
    header.entry_size = stride_64 ? 64 : sizeof(jitunwind_registry_entry);
    header.capacity = 16;
    header.entries = 0x10000;
    header.slot_count = n;
    entries.assign(n, jitunwind_registry_entry{});
    for (size_t i = 0; i < n; ++i) {
      auto& e = entries[i];
      e.seq = 2;
      e.window_id = i;
      e.generation = 10 + i;
      e.text_start = 0x400000 + i * 0x1000;
      e.text_size = 0x1000;
      e.state = JITUNWIND_WINDOW_LIVE;
      e.abi = 3;
      e.sframe_version = 3;
    }
  }
};

result<registry_snapshot> read_all(const scripted_memory& m, unsigned attempts = 5) {
  registry_snapshot s;
  read_options o;
  o.max_attempts = attempts;
  read_scratch scratch;
  if (auto r = read_registry_at(m, 0x1000, "/x/lib.so", o, s, scratch); !r) {
    return std::move(r).error();
  }
  return s;
}

// The single window of a one-entry registry, its SFrame said to be `size` bytes at `address`.
remote::window_record sframe_window(scripted_memory& m, uint64_t address, uint64_t size) {
  m.setup(1);
  auto s = read_all(m);
  REQUIRE(s.ok());
  remote::window_record w = s->windows[0];
  w.sframe_address = address;
  w.sframe_size = size;
  return w;
}

}  // namespace

TEST_CASE("stable entries are read with three bulk copies") {
  scripted_memory m;
  m.setup(4);
  auto s = read_all(m);
  REQUIRE(s.ok());
  CHECK(s->windows.size() == 4);
  CHECK(m.calls == 4);  // header + three copies of the array
  CHECK(s->torn_retries == 0);
  CHECK(s->windows[2].entry_address == 0x10000 + 2 * sizeof(jitunwind_registry_entry));
  CHECK(s->windows[2].sframe_version == 3);
}

TEST_CASE("an entry that changes between the copies is re-read, never returned torn") {
  scripted_memory m;
  m.setup(3);
  // A writer updates entry 1 after the reader's first copy: counter odd while the body copy is
  // taken, then even (new contents) afterwards.
  m.before_read = [&](unsigned call) {
    auto& e = m.entries[1];
    if (call == 2) {  // body copy: half-written
      e.seq = 3;
      e.text_start = 0xdead0000;
    } else if (call == 3) {  // after-copy: finished
      e.seq = 4;
      e.generation = 99;
    }
  };
  auto s = read_all(m);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 3);
  CHECK(s->torn_retries >= 1);
  CHECK(s->windows[1].generation == 99);  // the re-read copy, complete
  CHECK(s->windows[1].text_start == 0xdead0000);
  CHECK(s->windows[1].sequence == 4);
  CHECK(s->windows[0].generation == 10);
}

TEST_CASE("an entry that never settles is skipped after the attempts, the others are read") {
  scripted_memory m;
  m.setup(2);
  m.before_read = [&](unsigned) { m.entries[0].seq += 1; };  // always moving
  auto s = read_all(m, 7);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 1);
  CHECK(s->windows[0].slot == 1);
  REQUIRE(s->skipped.size() == 1);
  CHECK(s->skipped[0].slot == 0);
  CHECK(s->skipped[0].registry_address == 0x1000);
  CHECK(s->skipped[0].reason == "kept changing (or stayed locked) for 7 attempts");
}

TEST_CASE("thousands of entries stuck mid-update cost a bounded number of re-reads") {
  scripted_memory m;
  m.setup(2000);
  m.header.capacity = 4096;
  for (size_t i = 0; i + 1 < m.entries.size(); ++i) m.entries[i].seq = 7;  // locked forever
  auto s = read_all(m, 5);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 1);  // the last, stable one
  CHECK(s->windows[0].slot == 1999);
  // The first 256 listed, one more entry counting the other 1743.
  REQUIRE(s->skipped.size() == 257);
  CHECK(s->skipped.back().entries == 1743);
  // 8 x 5 attempts of 3 copies each, plus the header and the three bulk copies.
  CHECK(m.calls <= 4 + 8 * 5 * 3 + 1999);
  CHECK_THAT(s->skipped[255].reason, Catch::Contains("spent on other entries"));
}

TEST_CASE("retired entries are reported retired, free ones not at all") {
  scripted_memory m;
  m.setup(3);
  m.entries[0].state = JITUNWIND_WINDOW_RETIRED;
  m.entries[1].state = JITUNWIND_WINDOW_FREE;
  auto s = read_all(m);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 2);
  CHECK(s->windows[0].state == window_state::retired);
  CHECK(s->windows[1].slot == 2);
}

TEST_CASE("hostile headers and entries are refused") {
  scripted_memory m;
  m.setup(2);
  SECTION("version") {
    m.header.version = 7;
    CHECK(read_all(m).error().code() == errc::unsupported);
  }
  SECTION("entry size") {
    m.header.entry_size = 48;
    CHECK(read_all(m).error().message().find("entry_size 48") != std::string::npos);
  }
  SECTION("slot count above capacity") {
    m.header.slot_count = 17;
    CHECK(read_all(m).error().message().find("slot_count 17 above capacity 16") !=
          std::string::npos);
  }
  SECTION("capacity above the reader's limit") {
    m.header.capacity = 0x7fffffff;
    m.header.slot_count = 0x7ffffff0;
    CHECK(read_all(m).error().code() == errc::malformed);
  }
  SECTION("entry array larger than the reader copies (found by fuzz_registry_reader)") {
    // Within capacity and entry_size limits one by one, but 3.9 GB together: refused before any
    // allocation.
    m.header.entry_size = 4096;
    m.header.capacity = 0xe8800;
    m.header.slot_count = 0xe8800;
    auto r = read_all(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::limit_exceeded);
    CHECK(r.error().message().find("above the limit") != std::string::npos);
  }
  SECTION("state: that entry is skipped with the reason, the other one read") {
    m.entries[1].state = 9;
    auto r = read_all(m);
    REQUIRE(r.ok());
    REQUIRE(r->windows.size() == 1);
    REQUIRE(r->skipped.size() == 1);
    CHECK(r->skipped[0].slot == 1);
    CHECK(r->skipped[0].reason == "state 9 is not free/live/retired");
  }
  SECTION("abi") {
    m.entries[0].abi = 0;
    auto r = read_all(m);
    REQUIRE(r.ok());
    REQUIRE(r->skipped.size() == 1);
    CHECK(r->skipped[0].reason == "window 0: ABI 0 is not 1, 2 or 3");
    CHECK(r->windows.at(0).slot == 1);
  }
  SECTION("ranges that wrap") {
    m.entries[0].text_start = ~uint64_t{0} - 10;
    auto r = read_all(m);
    REQUIRE(r.ok());
    REQUIRE(r->skipped.size() == 1);
    CHECK(r->skipped[0].reason == "window 0: text or SFrame range wraps");
  }
  SECTION("entry array unreadable") {
    m.header.slot_count = 5;  // more than the fake memory holds
    auto r = read_all(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::out_of_range);
    CHECK(r.error().message().find("reading 5 entries at 0x10000") != std::string::npos);
  }
}

TEST_CASE("a snapshot keeps at most max_windows windows and says where it stopped") {
  scripted_memory m;
  m.setup(10);
  m.entries[1].state = JITUNWIND_WINDOW_FREE;  // free slots do not count
  registry_snapshot s;
  read_options o;
  o.max_windows = 4;
  read_scratch scratch;
  REQUIRE(read_registry_at(m, 0x1000, "/x/lib.so", o, s, scratch).ok());
  REQUIRE(s.windows.size() == 4);
  CHECK(s.windows.back().slot == 4);
  REQUIRE(s.skipped.size() == 1);
  CHECK(s.skipped[0].slot == 5);
  CHECK(s.skipped[0].reason == "this window and the later ones not read: more than 4 windows");
  CHECK(s.skipped[0].entries == 5);
}

TEST_CASE("a registry of bad entries lists the first 256 and counts the others") {
  scripted_memory m;
  m.setup(1000);
  m.header.capacity = 1000;
  for (size_t i = 0; i < 999; ++i) m.entries[i].state = 9;
  auto s = read_all(m);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 1);  // the good one, after them
  CHECK(s->windows[0].slot == 999);
  REQUIRE(s->skipped.size() == 257);
  CHECK(s->skipped[255].reason == "state 9 is not free/live/retired");
  CHECK(s->skipped[256].slot == 256);
  CHECK(s->skipped[256].reason ==
        "this entry and the later ones skipped too: 743 entries not listed (only the first 256 "
        "are)");
  CHECK(s->skipped[256].entries == 743);
}

TEST_CASE("SFrame bytes are accepted only if the entry did not change") {
  scripted_memory m;
  remote::window_record w = sframe_window(m, 0x10000, 16);  // the entry itself as "SFrame bytes"
  auto ok = read_sframe_checked(m, w, {});
  REQUIRE(ok.ok());
  CHECK(ok->size() == 16);
  m.entries[0].seq = 4;
  auto changed = read_sframe_checked(m, w, {});
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.error().code() == errc::bad_state);
  w.sframe_size = uint64_t{1} << 40;
  CHECK(read_sframe_checked(m, w, {}).error().code() == errc::limit_exceeded);
}

TEST_CASE("SFrame memory gone: a change if the entry changed, a read error if it did not") {
  scripted_memory m;
  // Not mapped in the fake memory: the window's memory was freed.
  remote::window_record w = sframe_window(m, 0x20000, 16);
  auto unreadable = read_sframe_checked(m, w, {});
  REQUIRE_FALSE(unreadable.ok());
  CHECK(unreadable.error().code() == errc::out_of_range);
  CHECK(unreadable.error().message().find("reading SFrame") != std::string::npos);
  m.entries[0].seq = 4;  // the writer released the window before unmapping it
  auto changed = read_sframe_checked(m, w, {});
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.error().code() == errc::bad_state);
  CHECK(changed.error().message().find("changed while its SFrame was read") != std::string::npos);
}

TEST_CASE("64-byte entries of older writers are read, the SFrame version is then not said") {
  scripted_memory m;
  m.stride_64 = true;
  m.setup(3);
  auto s = read_all(m);
  REQUIRE(s.ok());
  REQUIRE(s->windows.size() == 3);
  CHECK(s->windows[1].entry_address == 0x10000 + 64);
  CHECK(s->windows[1].window_id == 1);
  CHECK(s->windows[1].sframe_version == 0);
  // An entry that says an SFrame version that does not exist is skipped, naming it; the
  // other one is read.
  scripted_memory bad;
  bad.setup(2);
  bad.entries[1].sframe_version = 7;
  auto r = read_all(bad);
  REQUIRE(r.ok());
  CHECK(r->windows.size() == 1);
  REQUIRE(r->skipped.size() == 1);
  CHECK(r->skipped[0].slot == 1);
  CHECK_THAT(r->skipped[0].reason, Catch::Contains("SFrame version 7 is not 0-3"));
}

namespace {

// An SFrame section at 0x100000 with `claimed` bytes behind it (all readable), the entry's
// counter at 0x10000; counts the bytes copied.
class sframe_memory final : public memory_source {
 public:
  std::vector<uint8_t> region;
  uint64_t seq = 2;
  mutable uint64_t copied = 0;
  result<void> read(uint64_t address, void* out, size_t size) const override {
    copied += size;
    if (address == 0x10000 && size == 8) {
      std::memcpy(out, &seq, 8);
      return ok_result();
    }
    if (address < 0x100000 || address - 0x100000 + size > region.size())
      return error(errc::out_of_range, "unmapped");
    std::memcpy(out, region.data() + (address - 0x100000), size);
    return ok_result();
  }
  pid_t pid() const override { return 42; }
};

}  // namespace

TEST_CASE("only_used_sframe copies what the SFrame header says is used, not what is claimed") {
  const std::vector<function_desc> leaf = {recipes::leaf(abi::amd64, 0x100400, 16).value()};
  sframe::encoder_options eo;
  eo.section_address = 0x100000;
  const std::vector<uint8_t> section = sframe::encode(eo, leaf).value();
  sframe_memory m;
  m.region = section;
  m.region.resize(64 << 20);  // the window claims 64 MiB
  remote::window_record w;
  w.sframe_address = 0x100000;
  w.sframe_size = m.region.size();
  w.entry_address = 0x10000;
  w.sequence = 2;
  read_options o;
  o.only_used_sframe = true;
  auto bytes = read_sframe_checked(m, w, o);
  REQUIRE(bytes.ok());
  CHECK(*bytes == section);
  CHECK(m.copied < 4096);
  CHECK(sframe::decode(*bytes, 0x100000).ok());
  // Bytes that are not SFrame: their header only, which the decoder refuses.
  std::fill(m.region.begin(), m.region.end(), 0);
  m.copied = 0;
  auto zeros = read_sframe_checked(m, w, o);
  REQUIRE(zeros.ok());
  CHECK(zeros->size() == 28);
  CHECK(m.copied < 4096);
  CHECK_FALSE(sframe::decode(*zeros, 0x100000).ok());
  // Without the option, every claimed byte is copied.
  m.copied = 0;
  auto all = read_sframe_checked(m, w, {});
  REQUIRE(all.ok());
  CHECK(all->size() == m.region.size());
}
