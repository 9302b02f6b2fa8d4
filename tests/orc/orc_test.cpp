// jitunwind::orc end to end: examples/orc-jit compiles a frame-pointer-less call chain with
// LLVM's LLJIT; the plugin publishes it from the .eh_frame LLVM wrote. The real tools must see
// through it: jitwalk (profile: samples reach main with the JIT functions named; verify: 100 %
// exact against libgcc's unwind of LLVM's own registered CFI), `jitunwind unwind check` (no
// mismatch at any instruction), perf --call-graph dwarf + perf inject --jit, gdb bt.
#include "jitwalk/jitwalk_support.hpp"
#include "support/gdb.hpp"
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <regex>
#include <thread>

namespace t = jitunwind::test;

namespace {

bool have_orc_jit() {
#ifdef HAVE_ORC_JIT
  return true;
#else
  const char* why = "orc-jit not built: jitunwind::orc needs LLVM 22's development files";
  if (t::privileged_tests_required()) FAIL(why);  // CI installs llvm-22-dev
  WARN(why);
  return false;
#endif
}

std::string orc_jit() {
  return t::binary_path("examples/orc-jit/orc-jit");
}

// level_D;...;level_0;spin as folded-stack frames, outermost first.
std::string chain(int depth) {
  std::string s;
  for (int i = depth; i >= 0; --i) s += ";level_" + std::to_string(i);
  return s + ";spin";
}

}  // namespace

TEST_CASE("orc-jit: the plugin publishes every function and retires them on removal") {
  if (!have_orc_jit()) return;
  t::temp_dir dir;
  auto r = t::run({"env", "JITUNWIND_DIR=" + dir.path(), orc_jit(), "--depth", "5", "--unload"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("7 functions published, 0 left out"));
  CHECK_THAT(r.out, Catch::Contains("module removed, 1 windows retired"));
  // The perf map names every function.
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("pid (\\d+)")));
  const std::string map = t::read_file(dir / ("perf-" + m[1].str() + ".map"));
  for (const char* f : {" spin\n", " level_0\n", " level_5\n"}) CHECK_THAT(map, Catch::Contains(f));
}

TEST_CASE("orc-jit: gdb bt names the ORC frames down to main") {
  if (!have_orc_jit() || !t::tool_available("gdb")) return;
  t::temp_dir dir;  // for its perf map
  const auto r = t::gdb_backtrace("orcjit_hook", {orc_jit(), "--depth", "4"},
                                  {"set environment JITUNWIND_DIR=" + dir.path()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto names = t::backtrace_names(r.out);
  const std::vector<std::string> want = {"orcjit_hook", "spin",    "level_0", "level_1",
                                         "level_2",     "level_3", "level_4", "main"};
  REQUIRE(names.size() >= want.size());
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 8) == want);
}

TEST_CASE("orc-jit: perf --call-graph dwarf and perf inject --jit reach main") {
  if (!have_orc_jit() || !t::may_run_privileged("perf record") || !t::tool_available("perf"))
    return;
  t::temp_dir dir;
  auto argv = t::perf_record(dir / "perf.data", {"-F", "1000", "--call-graph", "dwarf,16384"},
                             {orc_jit(), "--depth", "6", "--seconds", "0.5"});
  argv.insert(argv.begin(), {"env", "JITDUMPDIR=" + dir.path(), "JITUNWIND_PUBLISH=jitdump"});
  const auto rec = t::run(argv);
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  CHECK_THAT(rec.err, !Catch::Contains("perf will lose"));
  const auto inject =
      t::run({"perf", "inject", "--jit", "-i", dir / "perf.data", "-o", dir / "perf.jit.data"});
  REQUIRE(inject.exit_code == 0);
  const auto script = t::run({"perf", "script", "-i", dir / "perf.jit.data", "-F", "ip,sym"});
  REQUIRE(script.exit_code == 0);
  size_t in_spin = 0, full = 0;
  for (const auto& s : t::perf_script_chains(script.out)) {
    if (s.empty() || s.front() != "spin") continue;
    ++in_spin;
    std::vector<std::string> want = {"spin"};
    for (int i = 0; i <= 6; ++i) want.push_back("level_" + std::to_string(i));
    want.push_back("main");
    if (s.size() >= want.size() && std::equal(want.begin(), want.end(), s.begin())) ++full;
  }
  INFO(in_spin << " samples in spin, " << full << " with the whole chain to main");
  REQUIRE(in_spin >= 50);  // of ~500: perf's DWARF unwinding in perf script is slow
  CHECK(full * 100 >= in_spin * 99);
}

TEST_CASE("orc-jit: jitunwind unwind check finds no mismatch at any JIT instruction") {
  if (!have_orc_jit() || !t::may_run_privileged("ptrace single-stepping")) return;
  // Stepping LLVM's compilation would take minutes: attach once the code is published.
  t::temp_dir dir;
  const std::string out = dir / "orc.out";
  const auto bg =
      t::run_shell("(JITUNWIND_DIR=" + dir.path() + " " + orc_jit() +
                   " --depth 6 --spin 2000 --calls 3 --wait 3 >" + out + " 2>&1 &) ; sleep 0.2");
  REQUIRE(bg.exit_code == 0);
  std::smatch m;
  std::string text;
  for (int i = 0; i < 100 && !std::regex_search(text, m, std::regex("pid (\\d+)")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = t::read_file(out);
  }
  REQUIRE(!m.empty());
  const auto r = t::run({t::binary_path("tools/jitunwind/jitunwind"), "unwind", "check", "-n",
                         "100000", "--pid", m[1].str()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("in 8 functions"));
  CHECK_THAT(r.out, Catch::Contains("mismatches:        0 at 0 distinct addresses"));
  std::smatch n;
  REQUIRE(std::regex_search(r.out, n, std::regex("in JIT code: +(\\d+) instructions")));
  CHECK(std::stoul(n[1]) >= 30000);  // the 3 calls, every instruction
}

#ifdef HAVE_JITWALK
TEST_CASE("orc-jit: jitwalk profile unwinds through the ORC frames to main with names") {
  if (!have_orc_jit() || !t::may_run_privileged("jitwalk profile")) return;
  t::temp_dir dir;
  // --sync-tables: the runtime waits at each publication until jitwalk has loaded the window's
  // rows, so no JIT sample falls back to frame pointers for want of them, however late jitwalk
  // runs. A fixed amount of work (--calls, ~1.5 s of CPU here), not a duration: as many samples
  // however busy the machine is. The perf map goes to the test's directory (jitwalk names the
  // code from the SDK's events).
  const auto r = t::run(
      {jitwalk_test::jitwalk(), "profile", "-F", "499", "--sync-tables", "--folded", dir / "f.txt",
       "--", "env", "JITUNWIND_DIR=" + dir.path(), orc_jit(), "--depth", "8", "--calls", "7000"},
      {}, std::chrono::seconds(300));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto folded = jitwalk_test::parse_folded(t::read_file(dir / "f.txt"));
  uint64_t in_jit = 0, to_main = 0;
  const std::string full = ";main" + chain(8);
  for (const auto& [stack, count] : folded) {
    if (stack.find(";spin") == std::string::npos && stack.find(";level_") == std::string::npos)
      continue;
    in_jit += count;
    // The whole chain (with spin's native callees after it), or, for a sample taken in a
    // level_N while it calls the next one, the chain from main down to that frame.
    const auto at = stack.find(";main;");
    if (stack.find(full) != std::string::npos ||
        (at != std::string::npos && full.rfind(stack.substr(at), 0) == 0))
      to_main += count;
  }
  INFO(t::read_file(dir / "f.txt").substr(0, 3000));
  REQUIRE(in_jit >= 200);  // of ~700
  CHECK(to_main * 100 >= in_jit * 99);
}

TEST_CASE("orc-jit: jitwalk verify is 100 % exact against libgcc unwinding LLVM CFI") {
  if (!have_orc_jit() || !t::may_run_privileged("jitwalk verify")) return;
  t::temp_dir dir;  // for its perf map (jitwalk names the code from the SDK's events)
  t::run_result r;
  const auto j = jitwalk_test::verify({"env", "JITUNWIND_DIR=" + dir.path(), orc_jit(), "--depth",
                                       "10", "--spin", "20000", "--seconds", "3"},
                                      &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const int n = j["checkpoints"].get<int>();
  CHECK(n > 1000);
  CHECK(j["exact"] == n);
  CHECK(j["complete"] == n);
  CHECK(j["max_truth"] == 12);  // orcjit_hook's caller spin, level_0 .. level_10
  CHECK(j["stale_uses"] == 0);
}
#endif

// ---- libjitunwind_preload.so on an LLJIT driver that knows nothing of jitunwind ----

namespace {

std::string plain() {
  return t::binary_path("examples/orc-jit/orc-jit-plain");
}
std::string preload() {
  return t::binary_path("preload/libjitunwind_preload.so");
}

std::string libgcc_frames(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("libgcc unwinds (\\d+) JIT frames")) ? m[1].str()
                                                                                   : "none";
}

// The perf map the preloaded run `r` (which printed "pid N") wrote into `dir`.
std::string perf_map_of(const t::run_result& r, const t::temp_dir& dir) {
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex("pid (\\d+)"))) return "";
  return t::read_file(dir / ("perf-" + m[1].str() + ".map"));
}

size_t unnamed_lines(const std::string& map) {
  size_t lines = 0;
  for (size_t at = 0; (at = map.find(" jit:0x", at)) != std::string::npos; ++at) ++lines;
  return lines;
}

}  // namespace

TEST_CASE("preload: each registered .eh_frame is published and the host registration still works") {
  if (!have_orc_jit()) return;
  t::temp_dir dir;
  const auto bare = t::run({plain(), "--depth", "5", "--seconds", "0.1"});
  REQUIRE(bare.exit_code == 0);
  const auto r = t::run({"env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(), plain(),
                         "--depth", "5", "--seconds", "0.1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());  // nothing went wrong, nothing to say
  // libgcc's unwinder still sees the JIT frames: __register_frame went through.
  CHECK(libgcc_frames(r.out) == libgcc_frames(bare.out));
  CHECK(libgcc_frames(r.out) != "none");
  CHECK(unnamed_lines(perf_map_of(r, dir)) == 7);  // spin, level_0 .. level_5
}

TEST_CASE("preload: code still waiting for names at its end is in the perf map all the same") {
  if (!have_orc_jit()) return;
  t::temp_dir dir;
  // The wait outlasts the run: the registration is still pending when LLJIT deregisters it
  // (--exit 0) or when the process exits with the JIT alive (--exit 1). Its samples are in
  // perf.data all the same, so perf report needs its lines.
  const std::string exit_early = GENERATE("0", "1");
  const auto r = t::run({"env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(),
                         "JITUNWIND_PRELOAD_NAME_WAIT_MS=10000", plain(), "--depth", "5",
                         "--seconds", "0.1", "--exit", exit_early});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(unnamed_lines(perf_map_of(r, dir)) == 7);  // spin, level_0 .. level_5
}

TEST_CASE("preload: asking for the gdb publisher is refused with a message, the rest goes on") {
  if (!have_orc_jit()) return;
  t::temp_dir dir;
  const auto r = t::run({"env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(),
                         "JITUNWIND_PUBLISH=registry,perfmap,gdb", plain(), "--depth", "5",
                         "--seconds", "0.1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("the gdb publisher is not available under the preload"));
  CHECK(unnamed_lines(perf_map_of(r, dir)) > 0);
}

TEST_CASE("preload: functions are named from the GDB JIT interface, and gdb still reads LLVM's") {
  if (!have_orc_jit()) return;
  t::temp_dir dir;
  // LLVM registers the .eh_frame first and its debug object just after: the preload waits for
  // the names (JITUNWIND_PRELOAD_NAME_WAIT_MS, 50 ms by default; 2 s here for a busy machine).
  const auto r = t::run({"env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(),
                         "JITUNWIND_PRELOAD_NAME_WAIT_MS=2000", plain(), "--depth", "5",
                         "--seconds", "0.1", "--gdb", "1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const std::string map = perf_map_of(r, dir);
  INFO(map);
  for (const char* f : {" spin\n", " level_0\n", " level_3\n", " level_5\n"})
    CHECK_THAT(map, Catch::Contains(f));
  CHECK(map.find(" jit:0x") == std::string::npos);

  // The preload never stands between gdb and LLVM's own registrations.
  if (!t::tool_available("gdb")) return;
  const auto g = t::gdb_backtrace(
      "orcjit_hook", {plain(), "--depth", "3", "--gdb", "1"},
      {"set environment LD_PRELOAD=" + preload(), "set environment JITUNWIND_DIR=" + dir.path()});
  INFO(g.out << g.err);
  REQUIRE(g.exit_code == 0);
  const auto names = t::backtrace_names(g.out);
  const std::vector<std::string> want = {"orcjit_hook", "spin",    "level_0", "level_1",
                                         "level_2",     "level_3", "main"};
  REQUIRE(names.size() >= want.size());
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 7) == want);
}

#ifdef HAVE_PRELOAD
TEST_CASE("preload: concurrent registrations and fork while registering never break the host") {
  t::temp_dir dir;
  const std::string host = t::binary_path("tests/orc/preload-host");
  for (const char* mode : {"threads", "fork"}) {
    // Without the preload first: what the host does on its own must work.
    const auto bare = t::run({host, mode}, {}, std::chrono::seconds(60));
    INFO(mode << ": " << bare.out << bare.err);
    REQUIRE(bare.exit_code == 0);
    // A deadlock shows as the timeout.
    const auto r =
        t::run({"env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(), host, mode}, {},
               std::chrono::seconds(60));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    // Nothing went wrong; the one thing worth saying is that the host puts code where it had
    // code before, which the perf map cannot tell apart (the preload's first message).
    if (!r.err.empty()) {
      CHECK_THAT(r.err, Catch::Contains("perf map lines cannot be withdrawn"));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  }
  // The registrations were published (the host has no GDB JIT descriptor: no wait for names).
  size_t maps = 0, lines = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().filename().string().rfind("perf-", 0) != 0) continue;
    ++maps;
    const std::string map = t::read_file(e.path());
    for (size_t at = 0; (at = map.find(" jit:0x", at)) != std::string::npos; ++at) ++lines;
  }
  CHECK(maps == 2);         // one per host process; fork children publish nothing
  CHECK(lines >= 4 * 200);  // threads: at least one line per registered function
}
#endif

#ifdef HAVE_JITWALK
TEST_CASE("preload: jitwalk unwinds an unmodified LLJIT program's FP-less frames to main, named") {
  if (!have_orc_jit() || !t::may_run_privileged("jitwalk profile")) return;
  t::temp_dir dir;
  // The preload publishes USDT events by default, and --sync-tables holds the program at each
  // publication until jitwalk has loaded the window's rows: no JIT sample falls back to frame
  // pointers for want of them, however late jitwalk runs (before, ~90 samples at 499 Hz did
  // when the window came at jitwalk's next registry poll). A fixed amount of work (--calls,
  // ~1.5 s of CPU here), not a duration. The perf map goes to the test's directory.
  const auto r =
      t::run({jitwalk_test::jitwalk(), "profile", "-F", "499", "--sync-tables", "--folded",
              dir / "f.txt", "--", "env", "LD_PRELOAD=" + preload(), "JITUNWIND_DIR=" + dir.path(),
              plain(), "--depth", "8", "--calls", "6500", "--gdb", "1"},
             {}, std::chrono::seconds(300));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto folded = jitwalk_test::parse_folded(t::read_file(dir / "f.txt"));
  uint64_t in_jit = 0, to_main = 0;
  // Named from the GDB JIT interface (LLVM's debugger support is on: --gdb 1).
  const std::regex deep_chain(
      ";main;level_8;level_7;level_6;level_5;level_4;level_3;level_2;"
      "level_1;level_0;spin");
  for (const auto& [stack, count] : folded) {
    if (stack.find(";spin") == std::string::npos && stack.find(";level_") == std::string::npos)
      continue;
    in_jit += count;
    if (std::regex_search(stack, deep_chain)) to_main += count;
  }
  INFO(t::read_file(dir / "f.txt").substr(0, 3000));
  REQUIRE(in_jit >= 200);  // of ~700
  CHECK(to_main * 100 >= in_jit * 99);
}
#endif
