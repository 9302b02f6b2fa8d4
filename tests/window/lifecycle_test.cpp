// The code lifecycle of real runtimes (issue 18): sub-page publishing in the alias layouts,
// patching, per-function retire, releasable handles, address reuse off, described windows by
// the thousand. The tools' view of the same (perf, jitwalk) is in lifecycle_tools_test.cpp.
#include <jitunwind/registry_abi.h>
#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include "gdbjit/gdbjit.hpp"
#include "registry/registry_writer.hpp"
#include "support/process.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

session_options options_with(publisher_set publishers,
                             address_reuse reuse = address_reuse::automatic) {
  session_options o;
  o.publishers = publishers;
  o.reuse = reuse;
  return o;
}

session_options options_with(publisher one, address_reuse reuse = address_reuse::automatic) {
  return options_with(static_cast<publisher_set>(one), reuse);
}

struct mapping_line {
  uint64_t lo = 0, hi = 0;
  std::string perms, path;
};

std::vector<mapping_line> self_maps() {
  std::vector<mapping_line> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    mapping_line m;
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3)
      continue;
    m.lo = lo;
    m.hi = hi;
    m.perms = perms;
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
    out.push_back(m);
  }
  return out;
}

const mapping_line* mapping_of(const std::vector<mapping_line>& maps, uint64_t address) {
  for (const auto& m : maps)
    if (address >= m.lo && address < m.hi) return &m;
  return nullptr;
}

// x86-64: mov eax, imm32; ret
void emit_return_constant(std::span<uint8_t> out, uint32_t value) {
  const uint8_t code[] = {0xb8, 0, 0, 0, 0, 0xc3};
  std::memcpy(out.data(), code, sizeof code);
  std::memcpy(out.data() + 1, &value, 4);
}

int call(uint64_t address) {
  return reinterpret_cast<int (*)()>(address)();
}

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

// Under ASan freed heap blocks wait in its quarantine (256 MiB) and its allocator maps memory of
// its own, so RSS and the mapping count say nothing about the SDK there: the ASan stage runs
// the churn and the tests below
// that measure RSS for memory errors only.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool under_asan = true;
#else
constexpr bool under_asan = false;
#endif

TEST_CASE("sub-page publishing: 1000 functions of 48 bytes published one by one fit in 64 KiB") {
  // shared_alias packs functions whatever the publishing rhythm; page_flip starts each publish
  // on a fresh page (16 functions in 64 KiB).
  for (const code_layout layout : {code_layout::shared_alias, code_layout::memfd_alias}) {
    INFO("layout " << to_string(layout));
    auto s = session::create(options_with(publisher::registry));
    REQUIRE(s.ok());
    auto w = (*s)->create_owned_window({.code_capacity = 64 * 1024, .layout = layout});
    REQUIRE(w.ok());
    std::vector<uint64_t> addresses;
    for (uint32_t i = 0; i < 1000; ++i) {
      auto space = (*w)->allocate(48);
      REQUIRE(space.ok());
      emit_return_constant(space->writable, i);
      REQUIRE((*w)->append("f" + std::to_string(i), *recipes::leaf(abi::amd64, space->address, 48))
                  .ok());
      REQUIRE((*w)->publish().ok());
      addresses.push_back(space->address);
      REQUIRE(call(space->address) == static_cast<int>(i));  // runnable at once
    }
    const uint64_t span = addresses.back() + 48 - addresses.front();
    CHECK(span == 48000);
    CHECK(span <= 64 * 1024 + 4096);
    for (uint32_t i = 0; i < 1000; i += 97) CHECK(call(addresses[i]) == static_cast<int>(i));
    // W^X: no mapping of the process is writable and executable.
    const auto maps = self_maps();
    for (const auto& m : maps) CHECK_FALSE((m.perms[1] == 'w' && m.perms[2] == 'x'));
    const mapping_line* code = mapping_of(maps, addresses.front());
    REQUIRE(code != nullptr);
    CHECK(code->perms.substr(0, 3) == "r-x");
    // What perf sees: shared anonymous memory is "/dev/zero (deleted)", which perf treats as
    // anonymous (so its perf map applies); a memfd is a file to perf.
    if (layout == code_layout::shared_alias)
      CHECK(code->path == "/dev/zero (deleted)");
    else
      CHECK_THAT(code->path, Catch::StartsWith("/memfd:jitunwind-code"));
    auto d = sframe::decode((*w)->published_sframe(),
                            reinterpret_cast<uint64_t>((*w)->published_sframe().data()));
    REQUIRE(d.ok());
    CHECK(d->functions.size() == 1000);
  }
  // The page-per-publish layout, for comparison: every publish moves to a fresh page.
  auto s = session::create(options_with(0));
  auto w = (*s)->create_owned_window({.code_capacity = 64 * 1024});
  REQUIRE(w.ok());
  size_t fitted = 0;
  for (;; ++fitted) {
    auto space = (*w)->allocate(48);
    if (!space) break;
    emit_return_constant(space->writable, 1);
    REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, space->address, 48)).ok());
    REQUIRE((*w)->publish().ok());
  }
  CHECK(fitted == 16);
}

TEST_CASE("shared_alias: a forked child runs the code but has no writable alias") {
  auto s = session::create(options_with(0));
  auto w = (*s)->create_owned_window({.code_capacity = 4096, .layout = code_layout::shared_alias});
  REQUIRE(w.ok());
  auto space = (*w)->allocate(6);
  REQUIRE(space.ok());
  emit_return_constant(space->writable, 41);
  REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, space->address, 6)).ok());
  REQUIRE((*w)->publish().ok());
  const uint64_t alias = reinterpret_cast<uint64_t>(space->writable.data());
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const auto maps = self_maps();
    const bool ran = call(space->address) == 41;
    _exit(ran && mapping_of(maps, alias) == nullptr ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("patch: published code changes in every layout, W^X kept") {
  for (const code_layout layout :
       {code_layout::page_flip, code_layout::memfd_alias, code_layout::shared_alias}) {
    INFO("layout " << to_string(layout));
    auto s = session::create(options_with(publisher::registry));
    auto w = (*s)->create_owned_window({.code_capacity = 8192, .layout = layout});
    REQUIRE(w.ok());
    auto a = (*w)->allocate(6);
    auto b = (*w)->allocate(6);
    REQUIRE((a.ok() && b.ok()));
    emit_return_constant(a->writable, 1);
    emit_return_constant(b->writable, 2);
    REQUIRE((*w)->append("a", *recipes::leaf(abi::amd64, a->address, 6)).ok());
    REQUIRE((*w)->append("b", *recipes::leaf(abi::amd64, b->address, 6)).ok());
    REQUIRE((*w)->publish().ok());
    const auto before =
        std::vector<uint8_t>((*w)->published_sframe().begin(), (*w)->published_sframe().end());
    REQUIRE(call(a->address) == 1);
    // The immediate of `mov eax, imm32`: 4 bytes inside one aligned 8-byte word (a is 16-byte
    // aligned): the atomic case of the alias layouts.
    const uint32_t value = 1234567;
    uint8_t imm[4];
    std::memcpy(imm, &value, 4);
    REQUIRE((*w)->patch(a->address + 1, imm).ok());
    CHECK(call(a->address) == 1234567);
    CHECK(call(b->address) == 2);
    // A whole new body (6 bytes across no word boundary, then across one).
    const uint8_t body[6] = {0xb8, 9, 0, 0, 0, 0xc3};
    REQUIRE((*w)->patch(b->address, body).ok());
    CHECK(call(b->address) == 9);
    const auto maps = self_maps();
    CHECK(mapping_of(maps, a->address)->perms.substr(0, 3) == "r-x");
    for (const auto& m : maps) CHECK_FALSE((m.perms[1] == 'w' && m.perms[2] == 'x'));
    // Rows and SFrame are untouched; no new publication.
    CHECK(std::vector<uint8_t>((*w)->published_sframe().begin(), (*w)->published_sframe().end()) ==
          before);
    // Not published yet: patched in place too.
    auto c = (*w)->allocate(6);
    emit_return_constant(c->writable, 3);
    REQUIRE((*w)->append("c", *recipes::leaf(abi::amd64, c->address, 6)).ok());
    const uint8_t four[4] = {4, 0, 0, 0};
    REQUIRE((*w)->patch(c->address + 1, four).ok());
    REQUIRE((*w)->publish().ok());
    CHECK(call(c->address) == 4);
    // Refused: outside every function, straddling two, empty.
    auto outside = (*w)->patch(a->address + 6, four);
    CHECK(outside.error().code() == errc::invalid_argument);
    CHECK_THAT(outside.error().message(), Catch::Contains("not inside one appended function"));
    CHECK_FALSE((*w)->patch(a->address + 4, body).ok());
    CHECK_FALSE((*w)->patch(a->address, std::span<const uint8_t>()).ok());
    REQUIRE((*w)->retire(std::chrono::milliseconds(0)).ok());
    CHECK((*w)->patch(a->address + 1, imm).error().code() == errc::bad_state);
  }
}

TEST_CASE("patch is refused on described windows") {
  auto s = session::create(options_with(0));
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const auto start = reinterpret_cast<uint64_t>(code);
  auto w = (*s)->describe_window({.text_start = start, .text_size = 4096});
  REQUIRE(w.ok());
  REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, start, 16)).ok());
  const uint8_t one[1] = {0x90};
  auto r = (*w)->patch(start, one);
  CHECK(r.error().code() == errc::invalid_argument);
  s->reset();
  munmap(code, 4096);
}

TEST_CASE(
    "retire_function: the function's rows leave the SFrame and the registry at the next publish") {
  auto s = session::create(options_with(publisher::registry));
  auto w = (*s)->create_owned_window({.code_capacity = 8192, .layout = code_layout::shared_alias});
  REQUIRE(w.ok());
  window& win = **w;
  std::vector<function_desc> fns;
  for (uint32_t i = 0; i < 4; ++i) {
    auto space = win.allocate(32);
    REQUIRE(space.ok());
    emit_return_constant(space->writable, i);
    frame_builder b(abi::amd64);
    b.stack_alloc(1, 8).stack_free(5, 8);  // not a real body: rows only
    fns.push_back(*b.finish(space->address, 32));
    REQUIRE(win.append("f" + std::to_string(i), fns.back()).ok());
  }
  REQUIRE(win.publish().ok());
  const uint64_t before = win.published_generation();

  REQUIRE(win.retire_function(fns[1].start).ok());
  CHECK(win.functions().size() == 3);
  // Not visible before the publish.
  CHECK(win.published_generation() == before);
  REQUIRE(win.publish().ok());
  CHECK(win.published_generation() > before);
  auto d = sframe::decode(win.published_sframe(),
                          reinterpret_cast<uint64_t>(win.published_sframe().data()));
  REQUIRE(d.ok());
  CHECK(d->functions == std::vector<function_desc>{fns[0], fns[2], fns[3]});
  // The registry entry carries the new section and generation.
  bool found = false;
  for (const auto& r : detail::registry().read_local()) {
    if (r.window.window_id != win.id()) continue;
    found = true;
    CHECK(r.generation == win.published_generation());
    CHECK(r.window.sframe_size == win.published_sframe().size());
  }
  CHECK(found);
  // Its code stays (a thread may still return into it) and its space is not reused.
  CHECK(call(fns[1].start) == 1);
  auto next = win.allocate(16);
  REQUIRE(next.ok());
  CHECK(next->address > fns[3].start);

  // A pending function retired before any publish never reaches the consumers.
  emit_return_constant(next->writable, 7);
  REQUIRE(win.append("pending", *recipes::leaf(abi::amd64, next->address, 16)).ok());
  REQUIRE(win.retire_function(next->address).ok());
  REQUIRE(win.publish().ok());
  d = sframe::decode(win.published_sframe(),
                     reinterpret_cast<uint64_t>(win.published_sframe().data()));
  REQUIRE(d.ok());
  CHECK(d->functions.size() == 3);
  // Every function retired: an empty section.
  for (const auto& f : {fns[0], fns[2], fns[3]}) REQUIRE(win.retire_function(f.start).ok());
  REQUIRE(win.publish().ok());
  d = sframe::decode(win.published_sframe(),
                     reinterpret_cast<uint64_t>(win.published_sframe().data()));
  REQUIRE(d.ok());
  CHECK(d->functions.empty());
  CHECK(win.functions().empty());

  auto unknown = win.retire_function(fns[0].start);
  CHECK(unknown.error().code() == errc::invalid_argument);
  CHECK_THAT(unknown.error().message(), Catch::Contains("no function of the window starts at"));
  REQUIRE(win.seal().ok());
  REQUIRE(win.retire(std::chrono::milliseconds(0)).ok());
  CHECK(win.retire_function(fns[0].start).error().code() == errc::bad_state);
}

TEST_CASE("retire_function in a sealed window, mixed with appends, matches a fresh encoding") {
  auto s = session::create(options_with(0));
  auto w =
      (*s)->create_owned_window({.code_capacity = 1 << 16, .layout = code_layout::shared_alias});
  REQUIRE(w.ok());
  window& win = **w;
  std::vector<function_desc> live;
  uint64_t seed = 7;
  const auto next = [&](uint32_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((seed >> 33) % n);
  };
  for (int round = 0; round < 200; ++round) {
    if (live.empty() || next(3) != 0) {
      auto space = win.allocate(16 + 16 * next(4));
      if (!space) break;
      const uint32_t size = static_cast<uint32_t>(space->writable.size());
      const recipes::epilogue ep{size - 1, size};
      auto f = recipes::frame_pointer(abi::amd64, space->address, size, 1, 4, std::span(&ep, 1));
      REQUIRE(f.ok());
      REQUIRE(win.append("f" + std::to_string(round), *f).ok());
      live.push_back(*f);
    } else {
      const size_t k = next(static_cast<uint32_t>(live.size()));
      REQUIRE(win.retire_function(live[k].start).ok());
      live.erase(live.begin() + static_cast<ptrdiff_t>(k));
    }
    if (next(4) == 0) REQUIRE(win.publish().ok());
    if (round == 150) REQUIRE(win.seal().ok());  // retire_function still works when sealed
  }
  REQUIRE(win.publish().ok());
  const auto published = win.published_sframe();
  sframe::encoder_options o;
  o.section_address = reinterpret_cast<uint64_t>(published.data());
  auto expect = sframe::encode(o, live);
  REQUIRE(expect.ok());
  auto d = sframe::decode(published, o.section_address);
  REQUIRE(d.ok());
  CHECK(d->functions == live);
  CHECK(win.functions().size() == live.size());
}

TEST_CASE("release ends window handles in every state it allows") {
  auto s = session::create(options_with(publisher::registry, address_reuse::allowed));
  auto make = [&] {
    auto w = (*s)->create_owned_window({.code_capacity = 4096});
    REQUIRE(w.ok());
    auto space = (*w)->allocate(6);
    emit_return_constant(space->writable, 1);
    REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, space->address, 6)).ok());
    REQUIRE((*w)->publish().ok());
    return *w;
  };
  window* open = make();
  CHECK((*s)->release(open).error().code() == errc::bad_state);

  window* freed = make();
  REQUIRE(freed->retire(std::chrono::milliseconds(0)).ok());
  CHECK((*s)->poll() == 1);
  REQUIRE((*s)->release(freed).ok());
  auto twice = (*s)->release(freed);
  CHECK(twice.error().code() == errc::invalid_argument);
  CHECK_THAT(twice.error().message(), Catch::Contains("released already"));

  // In its grace period: the handle goes once poll frees it; the callback cannot keep it.
  window* grace = make();
  int calls = 0;
  REQUIRE(grace
              ->retire(std::chrono::milliseconds(0),
                       [&](window&) {
                         ++calls;
                         return true;
                       })
              .ok());
  REQUIRE((*s)->release(grace).ok());
  CHECK((*s)->poll() == 1);
  CHECK(calls == 1);
  CHECK((*s)->release(grace).error().code() == errc::invalid_argument);

  // Kept for reuse: release frees it.
  window* kept = make();
  REQUIRE(kept->retire(std::chrono::milliseconds(0), [](window&) { return true; }).ok());
  CHECK((*s)->poll() == 1);
  CHECK(kept->state() == window_state::retired);
  REQUIRE((*s)->release(kept).ok());
  // Its registry slot is free again: only `open` is left.
  size_t entries = 0;
  for (const auto& r : detail::registry().read_local())
    if (r.window.window_id != 0 && r.state != detail::registry_state::free)
      entries += r.window.window_id == open->id() ? 1 : 0;
  CHECK(entries == 1);
  // A window of another session is not this session's to release.
  auto other = session::create(options_with(0));
  auto foreign = (*other)->create_owned_window({.code_capacity = 4096});
  REQUIRE(foreign.ok());
  CHECK((*s)->release(*foreign).error().code() == errc::invalid_argument);
}

TEST_CASE("address reuse off: freed code ranges are never handed out again") {
  SECTION("automatic resolves against the perf-read publishers") {
    jitunwind::test::temp_dir dir;  // for the perf maps (not /tmp's)
    session_options map_options = options_with(publisher::perfmap);
    map_options.perfmap_dir = dir.path();
    auto with_map = session::create(map_options);
    REQUIRE(with_map.ok());
    // A perf map publisher that could not start (unusable directory) does not count.
    CHECK((*with_map)->recycles_addresses() ==
          ((*with_map)->status()[2].state != publisher_state::active));
    auto without = session::create(options_with(publisher::registry));
    CHECK((*without)->recycles_addresses());
    map_options.reuse = address_reuse::allowed;
    auto allowed = session::create(map_options);
    CHECK((*allowed)->recycles_addresses());
    auto never = session::create(options_with(0, address_reuse::never));
    CHECK_FALSE((*never)->recycles_addresses());
  }
  for (const code_layout layout :
       {code_layout::page_flip, code_layout::memfd_alias, code_layout::shared_alias}) {
    INFO("layout " << to_string(layout));
    auto s = session::create(options_with(publisher::registry, address_reuse::never));
    std::set<uint64_t> ranges;
    const size_t rss_before = rss_bytes();
    for (int i = 0; i < 64; ++i) {
      auto w = (*s)->create_owned_window({.code_capacity = 64 * 1024, .layout = layout});
      REQUIRE(w.ok());
      CHECK(ranges.insert((*w)->text_start()).second);  // never seen before
      auto space = (*w)->allocate(32 * 1024);           // touch half the window
      REQUIRE(space.ok());
      std::memset(space->writable.data(), 0xc3, space->writable.size());
      REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, space->address, 1)).ok());
      REQUIRE((*w)->publish().ok());
      REQUIRE((*w)->retire(std::chrono::milliseconds(0), [](window&) { return true; }).ok());
      CHECK((*s)->poll() == 1);
      // The callback cannot keep it: reuse is refused, the window is freed.
      CHECK((*w)->state() == window_state::freed);
      CHECK((*w)->reuse().error().code() == errc::bad_state);
      REQUIRE((*s)->release(*w).ok());
    }
    // The old ranges stay reserved and inaccessible...
    const auto maps = self_maps();
    for (uint64_t r : ranges) {
      const mapping_line* m = mapping_of(maps, r);
      REQUIRE(m != nullptr);
      CHECK(m->perms.substr(0, 3) == "---");
    }
    // ...without memory: 64 windows of 32 KiB touched would be 2 MiB.
    if (!under_asan) CHECK(rss_bytes() < rss_before + 512 * 1024);
  }
}

TEST_CASE("10 000 live described windows over one code block") {
  auto s = session::create(options_with(publisher::registry));
  REQUIRE(s.ok());
  constexpr size_t windows = 10000, each = 4096;
  void* block = mmap(nullptr, windows * each, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(block != MAP_FAILED);
  const auto base = reinterpret_cast<uint64_t>(block);
  std::vector<window*> live;
  for (size_t i = 0; i < windows; ++i) {
    const uint64_t start = base + i * each;
    auto w = (*s)->describe_window({.text_start = start, .text_size = each});
    INFO("window " << i);
    REQUIRE(w.ok());
    REQUIRE((*w)->append("f", *recipes::leaf(abi::amd64, start, 64)).ok());
    REQUIRE((*w)->publish().ok());
    const auto sf = reinterpret_cast<uint64_t>((*w)->published_sframe().data());
    REQUIRE((sf > start ? sf - start : start - sf) < (uint64_t{1} << 31));
    live.push_back(*w);
  }
  // Shared arenas: 10 000 windows' SFrame in a few mappings, not 20 000 pages.
  size_t sframe_mappings = 0;
  std::set<uint64_t> seen_maps;
  const auto maps = self_maps();
  for (window* w : live) {
    const mapping_line* m =
        mapping_of(maps, reinterpret_cast<uint64_t>(w->published_sframe().data()));
    REQUIRE(m != nullptr);
    if (seen_maps.insert(m->lo).second) ++sframe_mappings;
  }
  CHECK(sframe_mappings <= 8);
  // All retired and freed; a second round reuses the arenas' blocks.
  for (window* w : live) {
    REQUIRE(w->retire(std::chrono::milliseconds(0)).ok());
  }
  CHECK((*s)->poll() == windows);
  for (window* w : live) REQUIRE((*s)->release(w).ok());
  const size_t rss = rss_bytes();
  for (size_t i = 0; i < windows; ++i) {
    auto w = (*s)->describe_window({.text_start = base + i * each, .text_size = each});
    REQUIRE(w.ok());
  }
  if (!under_asan) CHECK(rss_bytes() < rss + 4 * 1024 * 1024);
  s->reset();
  munmap(block, windows * each);
}

TEST_CASE("described windows: errors say why") {
  auto s = session::create(options_with(0));
  void* code = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const auto start = reinterpret_cast<uint64_t>(code);
  // An SFrame capacity that cannot be within 2 GiB of anything.
  auto huge = (*s)->describe_window(
      {.text_start = start, .text_size = 4096, .sframe_capacity = size_t{1} << 31});
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().code() == errc::out_of_range);
  CHECK_THAT(huge.error().message(), Catch::Contains("within 2 GiB"));
  auto ok = (*s)->describe_window({.text_start = start, .text_size = 4096});
  REQUIRE(ok.ok());
  auto overlap = (*s)->describe_window({.text_start = start + 4000, .text_size = 4096});
  REQUIRE_FALSE(overlap.ok());
  CHECK(overlap.error().code() == errc::already_exists);
  CHECK_THAT(overlap.error().message(), Catch::Contains("overlaps window"));
  auto next_to = (*s)->describe_window({.text_start = start + 4096, .text_size = 4096});
  CHECK(next_to.ok());
  s->reset();
  munmap(code, 8192);
}

namespace {

size_t mapping_count() {
  return self_maps().size();
}

// create / allocate / append / publish / retire / poll (free) / release, `cycles` times; RSS and
// mappings after `warm` cycles and at the end.
struct churn_result {
  size_t rss_warm = 0, rss_end = 0, maps_warm = 0, maps_end = 0, pte_warm = 0, pte_end = 0;
  double seconds = 0;
};

// Page tables of this process (VmPTE in /proc/self/status), in KiB.
size_t page_table_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmPTE:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

churn_result churn(session& s, size_t cycles, size_t warm, code_layout layout) {
  churn_result r;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < cycles; ++i) {
    if (i == warm) {
      r.rss_warm = rss_bytes();
      r.maps_warm = mapping_count();
      r.pte_warm = page_table_kib();
    }
    auto w = s.create_owned_window({.code_capacity = 4096, .layout = layout});
    REQUIRE(w.ok());
    auto space = (*w)->allocate(16);
    REQUIRE(space.ok());
    emit_return_constant(space->writable, static_cast<uint32_t>(i));
    REQUIRE((*w)->append("churn", *recipes::leaf(abi::amd64, space->address, 16)).ok());
    REQUIRE((*w)->publish().ok());
    REQUIRE((*w)->retire(std::chrono::milliseconds(0)).ok());
    REQUIRE(s.poll() == 1);
    REQUIRE(s.release(*w).ok());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rss_end = rss_bytes();
  r.maps_end = mapping_count();
  r.pte_end = page_table_kib();
  return r;
}

size_t churn_cycles() {
  // CI runs the bounded form; JITUNWIND_CHURN_CYCLES=1000000 is the full one (docs/window.md
  // has the numbers of both).
  const char* v = std::getenv("JITUNWIND_CHURN_CYCLES");
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : (under_asan ? 15000 : 50000);
}

}  // namespace

TEST_CASE("flat memory under unbounded churn: handles released, memory recycled") {
  const size_t cycles = churn_cycles();
  for (const address_reuse reuse : {address_reuse::allowed, address_reuse::never}) {
    INFO("address reuse " << to_string(reuse));
    auto s = session::create(
        options_with(publisher::registry | publisher::usdt_events | publisher::gdb, reuse));
    REQUIRE(s.ok());
    const churn_result r = churn(**s, cycles, 10000, code_layout::page_flip);
    std::printf(
        "churn (%s): %zu cycles in %.1f s; RSS %zu KiB after 10000, %zu KiB at the end; "
        "%zu mappings after 10000, %zu at the end; page tables %zu KiB, %zu KiB\n",
        to_string(reuse), cycles, r.seconds, r.rss_warm / 1024, r.rss_end / 1024, r.maps_warm,
        r.maps_end, r.pte_warm, r.pte_end);
    if (under_asan) {
      WARN("ASan build: RSS and mappings not checked (quarantine), memory errors only");
      continue;
    }
    CHECK(r.rss_end <= r.rss_warm + 1024 * 1024);
    // Reserved ranges border each other: the mapping count stays flat too.
    CHECK(r.maps_end <= r.maps_warm + 16);
  }
}

extern "C" detail::gdbjit::jit_descriptor __jit_debug_descriptor;

namespace {

// How many GDB JIT objects registered in this process hold `name` (in their string table).
size_t gdb_objects_naming(const std::string& name) {
  size_t n = 0;
  for (auto* e = __jit_debug_descriptor.first_entry; e != nullptr; e = e->next_entry) {
    const std::string_view bytes(reinterpret_cast<const char*>(e->symfile_addr),
                                 static_cast<size_t>(e->symfile_size));
    n += bytes.find(std::string(name) + '\0') != std::string_view::npos ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("retire_function takes the function's symbol out of the GDB JIT objects") {
  auto s = session::create(options_with(publisher::gdb | publisher::registry));
  REQUIRE(s.ok());
  REQUIRE((*s)->status()[4].state == publisher_state::active);
  auto w = (*s)->create_owned_window({.code_capacity = 8192, .layout = code_layout::shared_alias});
  REQUIRE(w.ok());
  std::vector<uint64_t> starts;
  for (int i = 0; i < 3; ++i) {
    auto space = (*w)->allocate(16);
    emit_return_constant(space->writable, 1);
    REQUIRE(
        (*w)->append("lc_gdb_f" + std::to_string(i), *recipes::leaf(abi::amd64, space->address, 16))
            .ok());
    starts.push_back(space->address);
  }
  REQUIRE((*w)->publish().ok());
  for (int i = 0; i < 3; ++i) CHECK(gdb_objects_naming("lc_gdb_f" + std::to_string(i)) == 1);
  REQUIRE((*w)->retire_function(starts[1]).ok());
  REQUIRE((*w)->publish().ok());
  CHECK(gdb_objects_naming("lc_gdb_f0") == 1);
  CHECK(gdb_objects_naming("lc_gdb_f1") == 0);
  CHECK(gdb_objects_naming("lc_gdb_f2") == 1);
  REQUIRE((*w)->retire(std::chrono::milliseconds(0)).ok());
  CHECK(gdb_objects_naming("lc_gdb_f0") == 0);
}
