// JIT names: time-ordered lookups across address reuse, incremental perf map and jitdump reads.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "jitwalk/jit_names.hpp"
#include "jitwalk/late_names.hpp"
#include "jitwalk/name_report.hpp"
#include "support/process.hpp"

using namespace jitwalk;
namespace jt = jitunwind::test;

namespace {

void put32(std::string& s, uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}
void put64(std::string& s, uint64_t v) {
  s.append(reinterpret_cast<const char*>(&v), 8);
}

std::string jitdump_header() {
  std::string h;
  put32(h, 0x4A695444);
  put32(h, 1);
  put32(h, 40);
  put32(h, 62);
  put32(h, 0);
  put32(h, 1234);
  put64(h, 1);
  put64(h, 0);
  return h;
}

std::string code_load(uint64_t ts, uint64_t addr, uint64_t size, uint64_t index, const char* name) {
  std::string body;
  put32(body, 1234);
  put32(body, 1234);
  put64(body, addr);
  put64(body, addr);
  put64(body, size);
  put64(body, index);
  body.append(name, std::strlen(name) + 1);
  body.append(size, '\xcc');  // the code bytes
  std::string r;
  put32(r, 0);
  put32(r, static_cast<uint32_t>(16 + body.size()));
  put64(r, ts);
  return r + body;
}

std::string code_move(uint64_t ts, uint64_t from, uint64_t to, uint64_t size, uint64_t index) {
  std::string body;
  put32(body, 1234);
  put32(body, 1234);
  put64(body, to);
  put64(body, from);
  put64(body, to);
  put64(body, size);
  put64(body, index);
  std::string r;
  put32(r, 1);
  put32(r, static_cast<uint32_t>(16 + body.size()));
  put64(r, ts);
  return r + body;
}

}  // namespace

TEST_CASE("JIT names follow address reuse by time") {
  jit_names n;
  n.add({0x1000, 0x100, "gen1:f", 100, jit_names::origin::event});
  n.add({0x1000, 0x80, "gen2:g", 200, jit_names::origin::event});
  n.add({0x1080, 0x80, "gen2:h", 200, jit_names::origin::event});
  CHECK(n.find(0x1010)->name == "gen2:g");
  CHECK(n.find(0x1090)->name == "gen2:h");
  CHECK(n.find(0x1090, 150)->name == "gen1:f");  // a frame from before the reuse
  CHECK(n.find(0x1010, 100) == nullptr);         // nothing published before t=100
  CHECK(n.find(0x1100) == nullptr);
  // Perf map lines only answer where nothing timed does; the last line wins.
  n.add({0x5000, 0x10, "old", 0, jit_names::origin::perfmap});
  size_t used = 0;
  CHECK(n.parse_perf_map("5000 10 newer\n6000 8 other\n7000 8 partial", used) == 2);
  CHECK(n.find(0x5008)->name == "newer");
  CHECK(n.find(0x1010)->name == "gen2:g");
  CHECK(used == std::strlen("5000 10 newer\n6000 8 other\n"));  // the partial line waits
}

TEST_CASE("perf maps and jitdump files are read incrementally") {
  jt::temp_dir dir;
  const std::string map = dir / "perf-1.map", dump = dir / "jit-1234.dump";
  REQUIRE(jt::write_file(map, "1000 20 a\n2000 20 b"));
  jit_names n;
  CHECK(n.load_perf_map(map) == 1);
  REQUIRE(jt::write_file(map, "1000 20 a\n2000 20 b\n3000 20 c\n"));
  CHECK(n.load_perf_map(map) == 2);  // b, now complete, and c; a is not read twice
  CHECK(n.size() == 3);

  std::string file = jitdump_header() + code_load(10, 0x7000, 32, 1, "jit:one");
  std::string second =
      code_load(20, 0x8000, 16, 2, "jit:two") + code_move(30, 0x7000, 0x9000, 32, 1);
  REQUIRE(jt::write_file(dump, file + second.substr(0, 20)));  // a record still being written
  auto r = n.load_jitdump(dump);
  REQUIRE(r.ok());
  CHECK(r.value() == 1);
  REQUIRE(jt::write_file(dump, file + second));
  r = n.load_jitdump(dump);
  REQUIRE(r.ok());
  CHECK(r.value() == 2);
  CHECK(n.find(0x7010)->name == "jit:one");
  CHECK(n.find(0x8004)->name == "jit:two");
  CHECK(n.find(0x9004)->name == "jit:one");  // moved
  CHECK(n.find(0x9004, 25) == nullptr);      // not there before the move

  REQUIRE(jt::write_file(dump, "not a jitdump at all, but long enough to have a header"));
  jit_names other;
  auto bad = other.load_jitdump(dump);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("jit-1234.dump") && Catch::Contains("JiTD"));
}

TEST_CASE("perf maps the target replaces, truncates or turns into a FIFO or a link") {
  jt::temp_dir dir;
  const std::string map = dir / "perf-2.map";
  jit_names n;
  jitunwind::toolkit::memory_budget budget(1 << 20);
  n.set_limits(&budget, 4096, ::geteuid());
  REQUIRE(jt::write_file(map, "1000 20 a\n2000 20 b\n"));
  CHECK(n.load_perf_map(map) == 2);
  CHECK(budget.used() > 0);
  // Truncated and rewritten shorter: read again from the start (the old lines stay older).
  REQUIRE(jt::write_file(map, "3000 20 c\n"));
  CHECK(n.load_perf_map(map) == 1);
  CHECK(n.find(0x3004)->name == "c");
  // Replaced by another file (rename): read from its start.
  REQUIRE(jt::write_file(dir / "next", "4000 20 d\n5000 20 e\n"));
  REQUIRE(::rename((dir / "next").c_str(), map.c_str()) == 0);
  CHECK(n.load_perf_map(map) == 2);
  // A FIFO and a link are not read (and do not block).
  ::unlink(map.c_str());
  REQUIRE(::mkfifo(map.c_str(), 0600) == 0);
  CHECK(n.load_perf_map(map) == 0);
  ::unlink(map.c_str());
  REQUIRE(::symlink("/dev/zero", map.c_str()) == 0);
  CHECK(n.load_perf_map(map) == 0);
  ::unlink(map.c_str());
  // Read up to the cap (4096 bytes here), whatever the file's size.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "a000 10 name\n";
  REQUIRE(jt::write_file(map, many));
  CHECK(n.load_perf_map(map) == 4096 / 13);
  // Names beyond the budget are dropped, not kept.
  jit_names small;
  jitunwind::toolkit::memory_budget tiny(1000);
  small.set_limits(&tiny, 1 << 20, std::nullopt);
  for (uint64_t i = 0; i < 100; ++i)
    small.add({0x1000 + i * 16, 16, "f" + std::to_string(i), i, jit_names::origin::event});
  CHECK(small.dropped() > 0);
  CHECK(small.size() + small.dropped() == 100);
  CHECK(tiny.used() <= 1000);
}

TEST_CASE("names stacked over one address cost each lookup a bounded time") {
  jit_names n;
  // A perf map whose every line covers the whole address space from a rising start, and as
  // many lines for one start: before the bound, each lookup looked at all of them.
  std::string map;
  char line[64];
  for (int i = 0; i < 20000; ++i) {
    std::snprintf(line, sizeof line, "%x ffffffffffff f\n", 0x1000 + 16 * i);
    map += line;
  }
  for (int i = 0; i < 20000; ++i) map += "100000 ffffffffffff same" + std::to_string(i) + "\n";
  size_t used = 0;
  REQUIRE(n.parse_perf_map(map, used) == 40000);
  for (uint64_t pc = 0x200000; pc < 0x200000 + 1000 * 64; pc += 64) {
    const auto* e = n.find(pc);
    REQUIRE(e != nullptr);
    CHECK(e->name == "same19999");  // the newest line of the nearest start
  }
  CHECK(n.examined() <= 1000 * jit_names::max_examined);
  // Timed names at one start (an address reused many times): the newest before the time.
  for (uint64_t t = 1; t <= 20000; ++t)
    n.add({0x7000, 16, "gen" + std::to_string(t), t, jit_names::origin::event});
  CHECK(n.find(0x7004)->name == "gen20000");
  CHECK(n.find(0x7004, 20000)->name == "gen19999");
}

TEST_CASE("jitdump code indexes are charged with their names") {
  // The name copy kept for a later CODE_MOVE costs as much as the name itself.
  jitunwind::toolkit::memory_budget names_only(1 << 20), with_index(1 << 20);
  jit_names plain, dumped;
  plain.set_limits(&names_only, 1 << 20, std::nullopt);
  dumped.set_limits(&with_index, 1 << 20, std::nullopt);
  std::string dump = jitdump_header();
  for (uint64_t i = 0; i < 200; ++i) {
    const std::string name = "jit:f" + std::to_string(i);
    dump += code_load(10 + i, 0x10000 + 64 * i, 32, i, name.c_str());
    plain.add({0x10000 + 64 * i, 32, name, 10 + i, jit_names::origin::jitdump});
  }
  size_t done = 0;
  REQUIRE(dumped.parse_jitdump(dump, done).ok());
  CHECK(with_index.used() == 2 * names_only.used());
  // A budget they do not fit: names dropped, the index not kept for them either.
  jitunwind::toolkit::memory_budget tiny(4096);
  jit_names small;
  small.set_limits(&tiny, 1 << 20, std::nullopt);
  done = 0;
  REQUIRE(small.parse_jitdump(dump, done).ok());
  CHECK(small.dropped() > 0);
  CHECK(tiny.used() <= 4096);
}
namespace {

uint64_t monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool append(int fd, const std::string& bytes) {
  return ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

// A profile frame as the aggregator interns an unnamed one, and its pending record.
uint32_t raw_frame(profile_data& p, late_names& late, symbolizer& sym, uint64_t pc, uint64_t seen) {
  frame_desc d = sym.user_frame(pc, false);
  uint32_t id = p.intern(to_profile_frame(d, pc, false));
  late_names::pending_frame f;
  f.tgid = static_cast<uint32_t>(getpid());
  f.pc = pc;
  f.when.before = seen;
  f.first = d;
  late.add(id, f);
  return id;
}

// A page of anonymous memory playing JIT code, and the symbolizer, profile and late names of a
// test that samples it (the symbolizer has read the mappings once the page is there).
struct jit_page {
  jit_page() {
    REQUIRE(code != MAP_FAILED);
    sym.refresh();
  }
  ~jit_page() { ::munmap(code, code_size); }
  jit_page(const jit_page&) = delete;
  jit_page& operator=(const jit_page&) = delete;

  const size_t code_size = 4096;
  void* const code = ::mmap(nullptr, code_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const uint64_t base = reinterpret_cast<uint64_t>(code);
  symbolizer sym{getpid()};
  profile_data p;
  late_names late;
};

}  // namespace

TEST_CASE("late names: frames unnamed when seen are named from the jitdump written later") {
  // This process plays the runtime: anonymous memory for its "JIT code" and a jitdump it keeps
  // mapped (how jitwalk, like perf, finds it), written after the frames were sampled.
  jt::temp_dir dir;
  const std::string dump = dir / ("jit-" + std::to_string(getpid()) + ".dump");
  const int fd = ::open(dump.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(append(fd, jitdump_header()));
  void* marker = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  REQUIRE(marker != MAP_FAILED);
  const size_t code_size = 4 * 4096;
  void* code = ::mmap(nullptr, code_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  const uint64_t base = reinterpret_cast<uint64_t>(code);

  symbolizer sym(getpid());
  sym.refresh();
  const uint64_t t_code = monotonic_now();  // "hot" was loaded before the samples
  profile_data p;
  late_names late;
  const uint64_t seen = monotonic_now() + 1;
  uint32_t native = p.intern({"main", frame_kind::native, 0x401000, "/bin/prog"});
  uint32_t a = raw_frame(p, late, sym, base + 0x10, seen);
  uint32_t b = raw_frame(p, late, sym, base + 0x20, seen);
  uint32_t c = raw_frame(p, late, sym, base + 0x2000, seen);  // never named
  uint32_t u = raw_frame(p, late, sym, 0x10, seen);           // outside every mapping
  CHECK(p.frames()[a].name == format("[unknown 0x%llx]", (unsigned long long)(base + 0x10)));
  p.add("prog", {a, native}, 3);
  p.add("prog", {b, native}, 2);
  p.add("prog", {c, native}, 1);
  p.add("prog", {u, native}, 1);

  // Written after the samples (a stdio buffer flushed at exit): "hot", loaded before the
  // samples, and "later", loaded at the same address after them (address reuse).
  REQUIRE(append(fd, code_load(t_code, base, 0x40, 1, "hot") +
                         code_load(seen + 1000000, base, 0x40, 2, "later")));

  SECTION("named and grouped") {
    const late_summary ls = late.resolve(
        p, [&](uint32_t) -> symbolizer& { return sym; }, true, false);
    CHECK(ls.pending == 4);
    CHECK(ls.named == 2);
    CHECK(ls.grouped == 2);
    const auto folded = folded_text(p);
    INFO(folded);
    CHECK_THAT(folded, Catch::Contains("prog;main;hot 5\n"));
    CHECK_THAT(folded, !Catch::Contains("later"));
    const std::string group = format("[anon:0x%llx-0x%llx]", (unsigned long long)base,
                                     (unsigned long long)(base + code_size));
    CHECK_THAT(folded, Catch::Contains("prog;main;" + group + " 1\n"));
    CHECK_THAT(folded, Catch::Contains("prog;main;[unknown] 1\n"));
    CHECK(p.total() == 7);
    // The two "hot" frames are one frame at each address; the stacks merge by names only in
    // the writers; the name report counts them by source.
    const name_counts nc = count_names(p);
    CHECK(nc.leaf_by_source[static_cast<size_t>(name_source::jitdump)] == 5);
    CHECK(nc.leaf_unnamed_anon == 2);
  }
  SECTION("--early-names --raw-addresses: today's frames") {
    late.resolve(
        p, [&](uint32_t) -> symbolizer& { return sym; }, false, true);
    const auto folded = folded_text(p);
    CHECK_THAT(folded, !Catch::Contains("hot"));
    CHECK_THAT(folded,
               Catch::Contains(format("[unknown 0x%llx]", (unsigned long long)(base + 0x2000))));
  }
  ::munmap(code, code_size);
  ::munmap(marker, 4096);
  ::close(fd);
}

TEST_CASE_METHOD(jit_page, "late names: a frame walked at a publication is named only by a publication") {
  // An SDK runtime's frame carries the generation it was walked at. By the end of the profile
  // its address may hold newer code: neither that code's event nor a name without a generation
  // (jitdump, perf map) may name it; a publication at or before its generation does.
  auto pending = [&](uint64_t pc, uint64_t generation) {
    uint32_t id = raw_frame(p, late, sym, pc, UINT64_MAX);
    late_names::pending_frame f;
    f.tgid = static_cast<uint32_t>(getpid());
    f.pc = pc;
    f.when.generation = generation;
    f.first = sym.user_frame(pc, false);
    late = late_names{};  // raw_frame's record replaced by one with the generation
    return std::make_pair(id, f);
  };
  auto [replaced_id, replaced] = pending(base + 0x10, 5);
  auto [kept_id, kept] = pending(base + 0x80, 5);
  late.add(replaced_id, replaced);
  late.add(kept_id, kept);
  p.add("prog", {replaced_id}, 2);
  p.add("prog", {kept_id}, 3);
  using origin = jit_names::origin;
  // base+0x10: only newer code (generation 6) and a name without a generation.
  REQUIRE(sym.names().add({base, 0x40, "newer", 1, origin::event, 0, 6}));
  REQUIRE(sym.names().add({base, 0x40, "from_jitdump", 2, origin::jitdump, 0, 0}));
  // base+0x80: the code published at generation 4, replaced at 7.
  REQUIRE(sym.names().add({base + 0x80, 0x40, "v4", 3, origin::event, 0, 4}));
  REQUIRE(sym.names().add({base + 0x80, 0x40, "v7", 4, origin::event, 0, 7}));
  const late_summary ls = late.resolve(
      p, [&](uint32_t) -> symbolizer& { return sym; }, true, false);
  CHECK(ls.named == 1);
  CHECK(ls.grouped == 1);
  const auto folded = folded_text(p);
  INFO(folded);
  CHECK_THAT(folded, Catch::Contains("prog;v4 3\n"));
  CHECK_THAT(folded, !Catch::Contains("newer"));
  CHECK_THAT(folded, !Catch::Contains("from_jitdump"));
  CHECK_THAT(folded, !Catch::Contains("v7"));
}
TEST_CASE_METHOD(jit_page, "late names: without code_add events, frames walked at a publication take perf map names") {
  // JITUNWIND_PUBLISH=registry,perfmap: the rows jitwalk walks with carry generations, the
  // names (perf map lines written at the exit) do not. Such a frame is named as it would have
  // been when first seen (the perf map's line), like the frames walked before the rows loaded.
  const uint32_t walked_at_a_generation = raw_frame(p, late, sym, base + 0x10, UINT64_MAX);
  const uint32_t walked_before_the_rows = raw_frame(p, late, sym, base + 0x50, UINT64_MAX);
  late_names::pending_frame f;
  f.tgid = static_cast<uint32_t>(getpid());
  f.pc = base + 0x10;
  f.when.window_id = 1;
  f.when.generation = 1;
  f.first = sym.user_frame(f.pc, false);
  late = late_names{};
  late.add(walked_at_a_generation, f);
  f.pc = base + 0x50;
  f.when = {};
  late.add(walked_before_the_rows, f);
  p.add("prog", {walked_at_a_generation}, 2);
  p.add("prog", {walked_before_the_rows}, 3);
  REQUIRE(sym.names().add({base, 0x40, "compute", 1, jit_names::origin::perfmap, 0, 0}));
  REQUIRE(sym.names().add({base + 0x40, 0x40, "level", 2, jit_names::origin::perfmap, 0, 0}));
  const late_summary ls = late.resolve(
      p, [&](uint32_t) -> symbolizer& { return sym; }, true, false);
  CHECK(ls.named == 2);
  const auto folded = folded_text(p);
  INFO(folded);
  CHECK_THAT(folded, Catch::Contains("prog;compute 2\n"));
  CHECK_THAT(folded, Catch::Contains("prog;level 3\n"));
  // Once the process's names carry generations, the rule of the test above holds again: the
  // perf map line no longer names a frame walked at a generation.
  REQUIRE(sym.names().add({base + 0x800, 0x40, "published", 3, jit_names::origin::event, 1, 1}));
  profile_data q;
  late_names again;
  const uint32_t id = raw_frame(q, again, sym, base + 0x10, UINT64_MAX);
  f.pc = base + 0x10;
  f.when.window_id = 1;
  f.when.generation = 1;
  again = late_names{};
  again.add(id, f);
  q.add("prog", {id}, 2);
  CHECK(again.resolve(q, [&](uint32_t) -> symbolizer& { return sym; }, true, false).named == 0);
  CHECK_THAT(folded_text(q), !Catch::Contains("compute"));
}


TEST_CASE("unnamed code is grouped by mapping name") {
  CHECK(mapping_group_name("", 0x7f00, 0x8f00) == "[anon:0x7f00-0x8f00]");
  CHECK(mapping_group_name("[anon:v8]", 0x7f00, 0x8f00) == "[anon:v8]");
  CHECK(mapping_group_name("/memfd:jit-code (deleted)", 0x7f00, 0x8f00) == "[memfd:jit-code]");
  CHECK(mapping_group_name("/dev/zero (deleted)", 0x7f00, 0x8f00) == "[anon:0x7f00-0x8f00]");
  CHECK(mapping_group_name("/srv/data.bin", 0x7f00, 0x8f00) == "[/srv/data.bin]");
  CHECK(mapping_group_name("", 0, 0) == "[unknown]");
}

TEST_CASE("name-source report: sources, shares and the likely reason") {
  profile_data p;
  profile_frame jit{"JS:*f", frame_kind::jit, 0x7000, "[jit]"};
  jit.source = name_source::perf_map;
  profile_frame unnamed{"[anon:0x7000-0x8000]", frame_kind::unknown, 0x7000, ""};
  profile_frame main_f{"main", frame_kind::native, 0x401000, "/usr/bin/node"};
  main_f.source = name_source::elf;
  const uint32_t j = p.intern(jit), x = p.intern(unnamed), m = p.intern(main_f);
  p.add("node", {x, j, m}, 6);  // leaf unnamed, caller named
  p.add("node", {j, m}, 4);
  const name_counts c = count_names(p);
  CHECK(c.samples == 10);
  CHECK(c.leaf_unnamed_anon == 6);
  CHECK(c.leaf_by_source[static_cast<size_t>(name_source::perf_map)] == 4);
  CHECK(c.jit_frames == 16);
  CHECK(c.jit_frames_by_source[static_cast<size_t>(name_source::none)] == 6);

  process_names none;
  none.pid = 42;
  none.comm = "node";
  none.files.push_back({"/tmp/perf-42.map", "perf map", false, 0, 0, ""});
  auto text = [](const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  };
  std::string r = text(name_report_lines(c, none, true));
  INFO(r);
  CHECK_THAT(r, Catch::Contains("no perf map, jitdump or registry found"));
  CHECK_THAT(r, Catch::Contains("40.0% perf map"));
  CHECK_THAT(r, Catch::Contains("60.0% unnamed"));
  CHECK_THAT(r, Catch::Contains("start node with --perf-basic-prof"));
  CHECK_THAT(r, Catch::Contains("/tmp/perf-42.map: not found"));  // -v: per file

  process_names killed = none;
  killed.files = {{"/tmp/jit-42.dump", "jitdump", true, 4096, 12, ""}};
  killed.ended_by_signal = "SIGINT";
  r = text(name_report_lines(c, killed, false));
  CHECK_THAT(r, Catch::Contains("jitdump /tmp/jit-42.dump (12 names)"));
  CHECK_THAT(r, Catch::Contains("names may be missing: jitwalk ended the command with SIGINT"));
  CHECK_THAT(r, !Catch::Contains("bytes read"));  // per-file detail only with -v

  process_names attached = killed;  // -p: the process still runs, nothing was signalled
  attached.ended_by_signal.clear();
  attached.still_running = true;
  CHECK_THAT(text(name_report_lines(c, attached, false)),
             Catch::Contains("pid 42 still runs") && !Catch::Contains("names may be missing"));

  process_names lua = none;
  lua.comm = "luajit";
  CHECK_THAT(text(name_report_lines(c, lua, false)), Catch::Contains("require(\"jitunwind\")"));
}

#endif
