#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include "support/process.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace jitunwind;

namespace {

// An open window's section keeps room for more FDEs in front of its FREs (window.md): the same
// section without that room, as `sframe::encoder::write` lays it out. Checks that the room is
// at least as large as the FDE sub-section.
std::vector<uint8_t> without_room(std::span<const uint8_t> s) {
  REQUIRE(s.size() >= 28);
  const auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, s.data() + at, 4);
    return v;
  };
  const size_t fde_size = s[2] >= 3 ? 16 : 20;
  const size_t fdes = u32(8), fre_len = u32(16), fdeoff = u32(20), freoff = u32(24);
  REQUIRE(fdeoff == 0);
  REQUIRE(freoff >= fdes * fde_size);
  REQUIRE(28 + freoff + fre_len == s.size());
  std::vector<uint8_t> out(s.begin(), s.begin() + 28 + static_cast<ptrdiff_t>(fdes * fde_size));
  const uint32_t packed = static_cast<uint32_t>(fdes * fde_size);
  std::memcpy(out.data() + 24, &packed, 4);
  out.insert(out.end(), s.begin() + 28 + static_cast<ptrdiff_t>(freoff), s.end());
  return out;
}

session_options quiet_options() {
  session_options o;
  o.publishers = 0;  // windows alone; publishers are tested in their own folders
  return o;
}

// Permissions ("r-xp") of the mapping containing `address`, from /proc/self/maps.
std::string perms_of(uint64_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &lo, &hi, perms) == 3 && address >= lo &&
        address < hi)
      return perms;
  }
  return "?";
}

// x86-64: mov eax, imm32; ret
void emit_return_constant(std::span<uint8_t> out, uint32_t value) {
  const uint8_t code[] = {0xb8, 0, 0, 0, 0, 0xc3};
  std::memcpy(out.data(), code, sizeof code);
  std::memcpy(out.data() + 1, &value, 4);
}

}  // namespace

TEST_CASE("owned window: write, publish, run, decode") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 64 * 1024});
  REQUIRE(w.ok());
  window& win = **w;
  CHECK(win.owned());
  CHECK(win.state() == window_state::open);

  auto space = win.allocate(6);
  REQUIRE(space.ok());
  emit_return_constant(space->writable, 42);
  CHECK(perms_of(space->address).substr(0, 3) == "rw-");  // writable, not executable
  auto leaf = recipes::leaf(abi::amd64, space->address, 6);
  REQUIRE(leaf.ok());
  REQUIRE(win.append("answer", *leaf).ok());
  CHECK(win.published_sframe().empty());
  REQUIRE(win.publish().ok());
  CHECK(perms_of(space->address).substr(0, 3) == "r-x");  // executable, not writable

  auto fn = reinterpret_cast<int (*)()>(space->address);
  CHECK(fn() == 42);

  auto sf = win.published_sframe();
  REQUIRE_FALSE(sf.empty());
  auto decoded = sframe::decode(sf, reinterpret_cast<uint64_t>(sf.data()));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->functions.size() == 1);
  CHECK(decoded->functions[0] == *leaf);
  // The SFrame lives within reach of 32-bit FDE offsets.
  const int64_t distance = static_cast<int64_t>(reinterpret_cast<uint64_t>(sf.data())) -
                           static_cast<int64_t>(space->address);
  CHECK(std::llabs(distance) < (int64_t{1} << 31));

  // New code after a publish lands on a fresh page: published pages stay RX.
  auto next = win.allocate(6);
  REQUIRE(next.ok());
  CHECK(next->address / 4096 != space->address / 4096);
  emit_return_constant(next->writable, 7);
  REQUIRE(win.append("seven", *recipes::leaf(abi::amd64, next->address, 6)).ok());
  REQUIRE(win.publish().ok());
  CHECK(reinterpret_cast<int (*)()>(next->address)() == 7);
  CHECK(fn() == 42);
  auto both = sframe::decode(win.published_sframe(),
                             reinterpret_cast<uint64_t>(win.published_sframe().data()));
  REQUIRE(both.ok());
  CHECK(both->functions.size() == 2);
  REQUIRE(win.functions().size() == 2);
  CHECK(win.functions()[1].name == "seven");
}

TEST_CASE("dual-mapped owned window never changes protections") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 8192, .layout = code_layout::memfd_alias});
  REQUIRE(w.ok());
  auto a = (*w)->allocate(6);
  REQUIRE(a.ok());
  CHECK(reinterpret_cast<uint64_t>(a->writable.data()) != a->address);
  emit_return_constant(a->writable, 5);
  REQUIRE((*w)->append("five", *recipes::leaf(abi::amd64, a->address, 6)).ok());
  REQUIRE((*w)->publish().ok());
  CHECK(reinterpret_cast<int (*)()>(a->address)() == 5);
  auto b = (*w)->allocate(6);
  REQUIRE(b.ok());
  CHECK(b->address == a->address + 16);  // no page skip needed with an RW alias
}

TEST_CASE("appends are checked and nothing partial is published") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 4096});
  REQUIRE(w.ok());
  window& win = **w;
  auto a = win.allocate(64);
  REQUIRE(a.ok());
  REQUIRE(win.append("f", *recipes::leaf(abi::amd64, a->address + 16, 16)).ok());

  SECTION("out of order") {
    auto r = win.append("g", *recipes::leaf(abi::amd64, a->address, 8));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("address order"));
  }
  SECTION("overlapping") {
    auto r = win.append("g", *recipes::leaf(abi::amd64, a->address + 24, 8));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
  }
  SECTION("outside the allocated code") {
    auto r = win.append("g", *recipes::leaf(abi::amd64, a->address + 60, 8));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("outside"));
  }
  SECTION("control characters in the name") {
    auto r = win.append("bad\nname", *recipes::leaf(abi::amd64, a->address + 32, 8));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("control character 0x0a"));
  }
  SECTION("invalid rows") {
    function_desc f = *recipes::leaf(abi::amd64, a->address + 32, 8);
    f.rows[0].cfa_offset = 12;
    auto r = win.append("g", f);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("'g'"));
  }
  REQUIRE(win.publish().ok());
  auto d = sframe::decode(win.published_sframe(),
                          reinterpret_cast<uint64_t>(win.published_sframe().data()));
  REQUIRE(d.ok());
  CHECK(d->functions.size() == 1);  // only "f"
}

TEST_CASE("SFrame capacity is enforced") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 1 << 20, .sframe_capacity = 4096});
  REQUIRE(w.ok());
  auto a = (*w)->allocate(1 << 19);
  REQUIRE(a.ok());
  bool full = false;
  for (uint64_t i = 0; i < 4096 && !full; ++i) {
    auto r =
        (*w)->append("f" + std::to_string(i), *recipes::leaf(abi::amd64, a->address + i * 16, 16));
    if (!r) {
      CHECK(r.error().code() == errc::limit_exceeded);
      full = true;
    }
  }
  CHECK(full);
  REQUIRE((*w)->publish().ok());
  CHECK((*w)->published_sframe().size() <= 4096);
}

TEST_CASE("retire, grace period, reuse counts the reuse and publishes a new generation") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 4096});
  REQUIRE(w.ok());
  window& win = **w;
  auto a = win.allocate(6);
  emit_return_constant(a->writable, 1);
  REQUIRE(win.append("one", *recipes::leaf(abi::amd64, a->address, 6)).ok());
  REQUIRE(win.seal().ok());
  CHECK(win.state() == window_state::sealed);
  CHECK_FALSE(win.append("x", *recipes::leaf(abi::amd64, a->address + 8, 4)).ok());
  CHECK(win.reuse_count() == 0);
  const uint64_t first_generation = win.published_generation();
  CHECK(first_generation != 0);

  int calls = 0;
  REQUIRE(win.retire(std::chrono::milliseconds(0),
                     [&](window&) {
                       ++calls;
                       return true;  // keep for reuse
                     })
              .ok());
  CHECK(win.state() == window_state::retired);
  CHECK_FALSE(win.reuse().ok());  // grace period not polled yet
  CHECK((*s)->poll() == 1);
  CHECK(calls == 1);
  CHECK((*s)->poll() == 0);
  REQUIRE(win.reuse().ok());
  CHECK(win.state() == window_state::open);
  CHECK(win.reuse_count() == 1);
  CHECK(win.published_generation() == 0);
  CHECK(win.functions().empty());
  auto b = win.allocate(6);
  REQUIRE(b.ok());
  CHECK(b->address == a->address);  // same range
  CHECK(perms_of(b->address).substr(0, 3) == "rw-");
  emit_return_constant(b->writable, 2);
  REQUIRE(win.append("two", *recipes::leaf(abi::amd64, b->address, 6)).ok());
  REQUIRE(win.publish().ok());
  CHECK(win.published_generation() > first_generation);
  CHECK(reinterpret_cast<int (*)()>(b->address)() == 2);

  REQUIRE(win.retire(std::chrono::milliseconds(0)).ok());
  CHECK((*s)->poll() == 1);
  CHECK(win.state() == window_state::freed);
  CHECK_FALSE(win.publish().ok());
}

TEST_CASE("described windows get SFrame within reach") {
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  const size_t len = 1 << 16;
  void* code = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const auto start = reinterpret_cast<uint64_t>(code);
  auto w = (*s)->describe_window({.text_start = start, .text_size = len});
  REQUIRE(w.ok());
  CHECK_FALSE((*w)->owned());
  CHECK_FALSE((*w)->allocate(16).ok());
  REQUIRE((*w)->append("a", *recipes::leaf(abi::amd64, start, 32)).ok());
  REQUIRE((*w)->append("b", *recipes::leaf(abi::amd64, start + 32, 32)).ok());
  REQUIRE((*w)->publish().ok());
  const auto sf = reinterpret_cast<uint64_t>((*w)->published_sframe().data());
  CHECK((sf > start ? sf - start : start - sf) < (uint64_t{1} << 31));

  auto overlap = (*s)->describe_window({.text_start = start + 4096, .text_size = 4096});
  REQUIRE_FALSE(overlap.ok());
  CHECK(overlap.error().code() == errc::already_exists);
  auto huge = (*s)->describe_window({.text_start = start, .text_size = size_t{3} << 30});
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().code() == errc::out_of_range);
  auto empty = (*s)->describe_window({.text_start = start, .text_size = 0});
  CHECK_FALSE(empty.ok());
  s->reset();
  munmap(code, len);
}

TEST_CASE("every republished section equals a fresh encoding of all functions") {
  // Publishes only add to the buffer not in use (sframe::encoder::write_update): after any mix
  // of batch sizes, empty publishes and a reuse, each published section must be exactly what
  // encoding the window's functions from scratch at that address gives.
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  const size_t len = 1 << 16;
  void* code = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const auto start = reinterpret_cast<uint64_t>(code);
  auto w = (*s)->describe_window({.text_start = start, .text_size = len});
  REQUIRE(w.ok());
  window& win = **w;
  const int batches[] = {1, 3, 0, 7, 1, 1, 12, 0, 2, 30, 5};
  for (int round = 0; round < 2; ++round) {
    std::vector<function_desc> appended;
    std::vector<std::string> names;
    uint64_t at = start;
    for (int batch : batches) {
      for (int k = 0; k < batch; ++k) {
        const uint32_t size = 24 + 8 * static_cast<uint32_t>(appended.size() % 5);
        const recipes::epilogue ep{size - 1, size};
        auto f = recipes::frame_pointer(abi::amd64, at, size, 1, 4, std::span(&ep, 1));
        REQUIRE(f.ok());
        names.push_back("f" + std::to_string(appended.size()) + std::string(20, 'x'));
        REQUIRE(win.append(names.back(), *f).ok());
        appended.push_back(*f);
        at += size + 8 * (appended.size() % 3);
      }
      if (!appended.empty() && batch == 2)
        REQUIRE(win.name_range("part", *recipes::leaf(abi::amd64, appended.back().start, 4)).ok());
      REQUIRE(win.publish().ok());
      const auto published = win.published_sframe();
      if (appended.empty()) continue;
      sframe::encoder_options o;
      o.section_address = reinterpret_cast<uint64_t>(published.data());
      auto expect = sframe::encode(o, appended);
      REQUIRE(expect.ok());
      INFO("round " << round << ", " << appended.size() << " functions");
      CHECK(without_room(published) == *expect);
      // Readers that honour the sub-section offsets see the same functions.
      auto d = sframe::decode(published, o.section_address);
      REQUIRE(d.ok());
      CHECK(d->functions == appended);
    }
    const auto listed = win.functions();
    REQUIRE(listed.size() >= appended.size());
    size_t named = 0;
    for (const auto& f : listed) {
      if (f.name == "part") continue;
      REQUIRE(named < appended.size());
      CHECK(f.name == names[named]);
      CHECK(f.start == appended[named].start);
      CHECK(f.size == appended[named].size);
      ++named;
    }
    CHECK(named == appended.size());
    // Sealed, the section has no room left between its FDEs and FREs: exactly `write`'s bytes.
    REQUIRE(win.seal().ok());
    {
      const auto sealed = win.published_sframe();
      sframe::encoder_options o;
      o.section_address = reinterpret_cast<uint64_t>(sealed.data());
      auto expect = sframe::encode(o, appended);
      REQUIRE(expect.ok());
      CHECK(std::vector<uint8_t>(sealed.begin(), sealed.end()) == *expect);
    }
    // Same range again, new generation: the buffers start over.
    REQUIRE(win.retire(std::chrono::milliseconds(0), [](window&) { return true; }).ok());
    CHECK((*s)->poll() == 1);
    REQUIRE(win.reuse().ok());
  }
  s->reset();
  munmap(code, len);
}

TEST_CASE("freed windows' SFrame buffers serve the next window and hold only its functions") {
  // A freed described window's buffers (pages already faulted in) go to the next described
  // window of the same SFrame capacity within reach; whatever they held before must not leak
  // into the new window's sections.
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  const size_t len = 1 << 16;
  void* code = mmap(nullptr, 4 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const auto base = reinterpret_cast<uint64_t>(code);
  std::vector<const uint8_t*> seen;  // buffers in effect in the default-capacity rounds
  // The default capacity (48 bytes per 64 of code, + 64), rounded up to 64 bytes.
  const size_t default_each = (len / 64 * 48 + 64 + 63) / 64 * 64;
  for (int round = 0; round < 6; ++round) {
    const uint64_t start = base + static_cast<uint64_t>(round % 4) * len;
    // Round 3 asks for another capacity: it must get buffers of that size, not recycled ones.
    const size_t capacity = round == 3 ? 3 * 4096 : 0;
    auto w =
        (*s)->describe_window({.text_start = start, .text_size = len, .sframe_capacity = capacity});
    REQUIRE(w.ok());
    window& win = **w;
    // Fewer functions every round: stale bytes of a longer section would show.
    std::vector<function_desc> appended;
    const int count = 60 - 9 * round;
    uint64_t at = start;
    for (int k = 0; k < count; ++k) {
      const uint32_t size = 24 + 8 * static_cast<uint32_t>((k + round) % 4);
      const recipes::epilogue ep{size - 1, size};
      auto f = recipes::frame_pointer(abi::amd64, at, size, 1, 4, std::span(&ep, 1));
      REQUIRE(f.ok());
      REQUIRE(win.append("r" + std::to_string(round) + "f" + std::to_string(k), *f).ok());
      appended.push_back(*f);
      at += size;
      if (k % 7 == 6) REQUIRE(win.publish().ok());
    }
    REQUIRE(win.publish().ok());
    const auto published = win.published_sframe();
    sframe::encoder_options o;
    o.section_address = reinterpret_cast<uint64_t>(published.data());
    auto expect = sframe::encode(o, appended);
    REQUIRE(expect.ok());
    INFO("round " << round);
    CHECK(without_room(published) == *expect);
    auto d = sframe::decode(published, o.section_address);
    REQUIRE(d.ok());
    CHECK(d->functions == appended);
    // The function list (names, records and the encoder are recycled from the freed window
    // too) holds this round's functions only.
    const auto listed = win.functions();
    REQUIRE(listed.size() == appended.size());
    for (size_t k = 0; k < listed.size(); ++k) {
      CHECK(listed[k].name == "r" + std::to_string(round) + "f" + std::to_string(k));
      CHECK(listed[k].start == appended[k].start);
      CHECK(listed[k].size == appended[k].size);
    }
    // Either of a recycled mapping's two buffers may be the one in effect.
    const size_t each = capacity != 0 ? capacity : default_each;
    const auto recycled = [&](const uint8_t* p) {
      for (const uint8_t* q : seen)
        if (p == q || p == q + each || p + each == q) return true;
      return false;
    };
    if (round == 1 || round == 2 || round == 4 || round == 5) CHECK(recycled(published.data()));
    if (round == 3) {
      // Not inside a default-capacity buffer (which the session still holds as a spare).
      for (const uint8_t* q : seen)
        CHECK_FALSE((published.data() + default_each > q && published.data() < q + default_each));
    }
    if (round != 3) seen.push_back(published.data());
    REQUIRE(win.retire(std::chrono::milliseconds(0)).ok());
    CHECK((*s)->poll() == 1);
    CHECK(win.state() == window_state::freed);
  }
  s->reset();
  munmap(code, 4 * len);
}

TEST_CASE("freed owned windows' memory serves the next owned window, wiped") {
  // A freed owned window's mapping (pages already faulted in) goes to the next owned window of
  // the same capacities: same range, writable and not executable, the old code overwritten with
  // int3, and nothing of the old window's functions or SFrame left.
  for (const code_layout layout :
       {code_layout::page_flip, code_layout::memfd_alias, code_layout::shared_alias}) {
    INFO("layout " << to_string(layout));
    auto s = session::create(quiet_options());
    REQUIRE(s.ok());
    const owned_window_options opts{.code_capacity = 8192, .layout = layout};
    auto first = (*s)->create_owned_window(opts);
    REQUIRE(first.ok());
    const uint64_t range = (*first)->text_start();
    for (uint32_t k = 0; k < 3; ++k) {
      auto a = (*first)->allocate(6);
      REQUIRE(a.ok());
      emit_return_constant(a->writable, 10 + k);
      REQUIRE((*first)
                  ->append("old" + std::to_string(k), *recipes::leaf(abi::amd64, a->address, 6))
                  .ok());
    }
    REQUIRE((*first)->publish().ok());
    CHECK(reinterpret_cast<int (*)()>(range)() == 10);
    REQUIRE((*first)->retire(std::chrono::milliseconds(0)).ok());
    REQUIRE((*s)->poll() == 1);

    // Another capacity gets its own memory; the spare is kept for a matching window.
    auto other = (*s)->create_owned_window({.code_capacity = 3 * 4096, .layout = layout});
    REQUIRE(other.ok());
    CHECK((*other)->text_start() != range);

    auto second = (*s)->create_owned_window(opts);
    REQUIRE(second.ok());
    CHECK((*second)->text_start() == range);
    CHECK((*second)->functions().empty());
    CHECK((*second)->published_sframe().empty());
    if (layout == code_layout::page_flip) CHECK(perms_of(range).substr(0, 3) == "rw-");
    auto b = (*second)->allocate(6);
    REQUIRE(b.ok());
    CHECK(b->address == range);
    // Everything the old window allocated (3 functions, 16-byte aligned) is int3 now.
    const uint8_t* old = b->writable.data();  // the RW view (the code itself with page_flip)
    CHECK(std::all_of(old, old + 38, [](uint8_t c) { return c == 0xcc; }));
    emit_return_constant(b->writable, 77);
    REQUIRE((*second)->append("new", *recipes::leaf(abi::amd64, b->address, 6)).ok());
    REQUIRE((*second)->publish().ok());
    CHECK(reinterpret_cast<int (*)()>(range)() == 77);
    const auto published = (*second)->published_sframe();
    auto d = sframe::decode(published, reinterpret_cast<uint64_t>(published.data()));
    REQUIRE(d.ok());
    REQUIRE(d->functions.size() == 1);
    CHECK(d->functions[0].start == range);
    const auto names = (*second)->functions();
    REQUIRE(names.size() == 1);
    CHECK(names[0].name == "new");
  }
}

TEST_CASE("publisher lists and the environment") {
  auto all = parse_publishers("all");
  REQUIRE(all.ok());
  CHECK(contains(*all, publisher::kernel));
  auto some = parse_publishers("perfmap, jitdump");
  REQUIRE(some.ok());
  CHECK(*some == (publisher::perfmap | publisher::jitdump));
  CHECK(*parse_publishers("none") == 0);
  CHECK(*parse_publishers("default") == default_publishers);
  auto bad = parse_publishers("perfmap,ftrace");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("'ftrace'"));
  auto empty_item = parse_publishers("perfmap,,jitdump");
  REQUIRE_FALSE(empty_item.ok());
  CHECK_THAT(empty_item.error().message(), Catch::Contains("empty publisher name"));
  for (const char* empty : {"", " ", "perfmap,"}) {
    INFO("'" << empty << "'");
    auto r = parse_publishers(empty);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("empty publisher"));
  }
  auto none_and = parse_publishers("none,perfmap");
  REQUIRE_FALSE(none_and.ok());
  CHECK_THAT(none_and.error().message(), Catch::Contains("'none' cannot be combined"));

  setenv("JITUNWIND_PUBLISH", "perfmap", 1);
  setenv("JITUNWIND_DIR", "/tmp/somewhere", 1);
  auto o = session_options::from_env();
  REQUIRE(o.ok());
  CHECK(o->publishers == static_cast<uint32_t>(publisher::perfmap));
  CHECK(o->perfmap_dir == "/tmp/somewhere");
  CHECK(o->jitdump_dir == "/tmp/somewhere");
  setenv("JITUNWIND_PUBLISH", "nonsense", 1);
  auto e = session_options::from_env();
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message(), Catch::Contains("JITUNWIND_PUBLISH"));
  unsetenv("JITUNWIND_PUBLISH");
  unsetenv("JITUNWIND_DIR");

  // Empty counts as unset; a kernel interface opts in unless the list is explicit; off/none
  // are no interface.
  setenv("JITUNWIND_PUBLISH", "", 1);
  CHECK(session_options::from_env()->publishers == default_publishers);
  setenv("JITUNWIND_KERNEL_SFRAME", "prctl:79,80", 1);
  CHECK(session_options::from_env()->publishers == (default_publishers | publisher::kernel));
  setenv("JITUNWIND_PUBLISH", "perfmap", 1);
  CHECK(session_options::from_env()->publishers == static_cast<uint32_t>(publisher::perfmap));
  unsetenv("JITUNWIND_PUBLISH");
  for (const char* off : {"off", "none"}) {
    setenv("JITUNWIND_KERNEL_SFRAME", off, 1);
    auto ko = session_options::from_env();
    REQUIRE(ko.ok());
    CHECK(ko->publishers == default_publishers);
    CHECK(ko->kernel_sframe.empty());
  }
  unsetenv("JITUNWIND_KERNEL_SFRAME");

  session_options unknown_bits;
  unknown_bits.publishers = 0xffffffff;
  auto ub = session::create(unknown_bits);
  REQUIRE_FALSE(ub.ok());
  CHECK_THAT(ub.error().message(), Catch::Contains("unknown publisher bits 0xffffffc0"));

  // The kernel publisher without an interface fails on its own (never guessed); the session
  // and the other publishers go on.
  session_options k;
  k.publishers = publisher::kernel | publisher::perfmap;
  jitunwind::test::temp_dir dir;
  k.perfmap_dir = dir.path();
  auto ks = session::create(k);
  REQUIRE(ks.ok());
  for (const publisher_status& st : (*ks)->status()) {
    if (st.which == publisher::kernel) {
      CHECK(st.state == publisher_state::failed);
      CHECK_THAT(st.message, Catch::Contains("never guessed"));
    } else if (st.which == publisher::perfmap) {
      CHECK(st.state == publisher_state::active);
    }
  }
}

TEST_CASE("an owned window of the largest code capacity gets a default SFrame capacity that fits") {
  // The default SFrame capacity grows with the code (48 bytes per 64); from ~341 MiB of code on
  // it would pass the 256 MiB SFrame limit, so it is clamped there.
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = size_t{1} << 30});
  REQUIRE(w.ok());
  CHECK((*w)->text_size() >= (size_t{1} << 30));
  auto too_big = (*s)->create_owned_window({.code_capacity = (size_t{1} << 30) + 4096});
  REQUIRE_FALSE(too_big.ok());
  CHECK_THAT(too_big.error().message(), Catch::Contains("max 1 GiB of code"));
}

TEST_CASE(
    "session: poll on other threads while windows are retired runs each grace callback once") {
  // session::poll is thread-safe and meant for any safepoint; a retire() in progress on another
  // thread must never let a poller see a half-set grace period (it once called an empty
  // callback, freed windows early and freed one window twice).
  auto s = session::create(quiet_options());
  REQUIRE(s.ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> pollers;
  for (int i = 0; i < 2; ++i) {
    pollers.emplace_back([&] {
      while (!stop.load()) (void)(*s)->poll();
    });
  }
  constexpr int windows = 1500;
  std::atomic<int> callbacks{0};
  for (int i = 0; i < windows; ++i) {
    auto w = (*s)->create_owned_window({.code_capacity = 4096});
    REQUIRE(w.ok());
    auto space = (*w)->allocate(16);
    REQUIRE(space.ok());
    auto rows = recipes::leaf(abi::amd64, space->address, 16);
    REQUIRE(rows.ok());
    REQUIRE((*w)->append("f", *rows).ok());
    REQUIRE((*w)->publish().ok());
    REQUIRE((*w)->retire(std::chrono::milliseconds(0),
                         [&](window&) {
                           callbacks.fetch_add(1);
                           return false;
                         })
                .ok());
  }
  // Whatever the pollers left, one more poll finishes (every deadline has passed).
  while (callbacks.load() < windows && (*s)->poll() != 0) {
  }
  stop.store(true);
  for (auto& t : pollers) t.join();
  (void)(*s)->poll();
  CHECK(callbacks.load() == windows);
}
