// Issue 22 against `jitwalk profile -p`: the hostile shapes of a profiled process, jitwalk
// bounded in time and memory, saying what it skipped, and still profiling the good code (the
// test JIT's windows, its native frames). Needs root (BPF); then the soak: a target that churns
// everything a profiler reads, profiled for JITUNWIND_SOAK_SECONDS (default 60).
#ifndef HOSTILE_TESTS_DISABLED
#include "hostile_support.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <regex>

using namespace jitunwind::test;
using namespace jitunwind::test::hostile;

namespace {

// The same bound as for the CLI: jitwalk's own floor (the BPF maps it maps, libbpf, the
// kernel's BTF) is about 60 MiB resident.
constexpr uint64_t jitwalk_limit = address_space_limit;

struct profile_run {
  bounded_result r;
  std::string folded;
};

// `jitwalk profile -p PID -d SECONDS --folded F` under the bounds (jitwalk's CPU time: what
// the setup, the hostile object and the profile of that duration may take).
profile_run profile(const target& t, double seconds, std::vector<std::string> extra = {}) {
  temp_dir out;
  std::vector<std::string> argv = {jitwalk(),  "profile",    "-p", t.pid_text(),
                                   "-F",       "199",        "-d", std::to_string(seconds),
                                   "--folded", out / "f.txt"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  profile_run p;
  p.r = bounded(argv, jitwalk_limit, seconds + seconds_per_object, seconds + blocked_seconds);
  p.folded = read_file(out / "f.txt");
  return p;
}

// The "N samples" of jitwalk's summary line.
uint64_t summary_samples(const std::string& err) {
  std::smatch m;
  static const std::regex line("jitwalk: ([0-9]+) samples of pid");
  if (!std::regex_search(err, m, line)) return ~uint64_t{0};
  return std::stoull(m[1]);
}

}  // namespace

TEST_CASE("1 SIGBUS: jitwalk profiles a target that truncates the object it runs") {
  if (!may_run_privileged("jitwalk profile")) return;
  temp_dir dir;
  const std::string obj = dir / "libtruncated.so";
  target t({"--map-elf", "truncate-later:" + obj});
  t.wait_ready();  // printed once the target watches the object for a reader's open
  auto p = profile(t, 3);
  CHECK(p.r.exit_code == 0);
  // Its tables were cut after jitwalk opened it: jitwalk says so when it reads them, and its
  // code is sampled under its file name.
  INFO(p.folded.substr(0, 2000));
  CHECK_THAT(p.r.err, Catch::Contains(obj) && Catch::Contains("changed while it was read"));
  CHECK(folded_count(p.folded, "libtruncated.so+0x") > 0);
  // The target cuts it at most 2 s after the open (30 s allowed: its thread may run late).
  for (int i = 0; i < 1500 && t.err().find("truncated") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_THAT(t.err(), Catch::Contains("truncated after another process opened it"));
  CHECK(folded_count(p.folded, "jit:rec") > 0);  // the good JIT code, named and unwound
  CHECK(folded_count(p.folded) == summary_samples(p.r.err));
}

TEST_CASE("2 perf map: jitwalk neither blocks on a FIFO nor reads /dev/zero or 20 GiB") {
  if (!may_run_privileged("jitwalk profile")) return;
  for (const std::string kind : {"fifo", "zero-link", "sparse"}) {
    INFO(kind);
    target t({"--perf-map-kind", kind});
    t.wait_ready();
    auto p = profile(t, 2);
    // The sparse file is read up to --max-file: a limit cut the input (exit status 3).
    CHECK(p.r.exit_code == (kind == "sparse" ? 3 : 0));
    CHECK_THAT(p.r.err, Catch::Contains("perf map /tmp/perf-" + t.pid_text() + ".map"));
    CHECK_THAT(p.r.err, Catch::Contains("JIT windows: 2 loaded"));
    CHECK(folded_count(p.folded, ";main;") > 0);
  }
}

TEST_CASE("3 ELF amplification: jitwalk skips the objects whose tables overlap, profiles on") {
  if (!may_run_privileged("jitwalk profile")) return;
  temp_dir dir;
  const std::string names = dir / "shared-names.so", tables = dir / "symbol-tables.so";
  target t({"--map-elf", "shared-names:" + names, "--map-elf", "symbol-tables:" + tables});
  t.wait_ready();
  auto p = profile(t, 2);
  // The names cap is a limit: the object's tables are left out, said, and the run exits 3.
  CHECK(p.r.exit_code == 3);
  CHECK_THAT(p.r.err, Catch::Contains(": names add up to more than 4 times their string table") &&
                          Catch::Contains("warning: " + names + " (its symbols and tables) left out: "));
  CHECK_THAT(p.r.err, Catch::Contains("JIT windows: 2 loaded"));
  CHECK(folded_count(p.folded, "jit:rec") > 0);
}

TEST_CASE("4 and 5 registry: windows over an untouched region, bad slots, and the good ones load") {
  if (!may_run_privileged("jitwalk profile")) return;
  target t(
      {"--bad-slots", "--many-windows", "64", "--window-sframe-size", std::to_string(64 << 20)});
  t.wait_ready();
  auto p = profile(t, 3);
  CHECK(p.r.exit_code == 0);
  CHECK_THAT(p.r.err, Catch::Contains("entry 16 skipped: kept changing (or stayed locked)"));
  CHECK_THAT(p.r.err, Catch::Contains("entry 17 skipped: state 9 is not free/live/retired"));
  CHECK_THAT(p.r.err, Catch::Contains("JIT windows: 2 loaded, 64 rejected"));
  CHECK(folded_count(p.folded, "jit:rec") > 0);
}

TEST_CASE("4 registry memory: jitwalk profiles a target claiming a million windows") {
  if (!may_run_privileged("jitwalk profile")) return;
  target t({"--many-windows", "1000000"});
  t.wait_ready();
  auto p = profile(t, 2);
  CHECK(p.r.exit_code == 0);
  CHECK_THAT(p.r.err, Catch::Contains("this window and the later ones not read: more than 65536 "
                                      "windows"));
  CHECK_THAT(p.r.err, Catch::Contains("JIT windows: 2 loaded"));
  CHECK(folded_count(p.folded, "jit:rec") > 0);
}

TEST_CASE("6 a command name with a newline and escape sequences is shown escaped") {
  if (!may_run_privileged("jitwalk profile")) return;
  target t({"--comm", "ev\x1b[2J\nil"});
  t.wait_ready();
  auto p = profile(t, 1);
  CHECK(p.r.exit_code == 0);
  CHECK_THAT(p.r.err, Catch::Contains("(ev\\x1b[2J\\nil)"));
  CHECK(p.r.err.find('\x1b') == std::string::npos);
}

TEST_CASE("7 outputs: jitwalk never writes through a planted link") {
  if (!may_run_privileged("jitwalk profile")) return;
  temp_dir dir;
  const std::string victim = dir / "victim";
  REQUIRE(write_file(victim, "root's file"));
  for (const char* option : {"--folded", "--svg", "--pprof"}) {
    INFO(option);
    const std::string out = dir / (std::string("out") + option);
    REQUIRE(::symlink(victim.c_str(), out.c_str()) == 0);
    auto r =
        bounded({jitwalk(), "profile", option, out, "-d", "1", "--", "/bin/true"}, jitwalk_limit);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(out + ": is a symbolic link"));
    CHECK(read_file(victim) == "root's file");
    ::unlink(out.c_str());
    REQUIRE(::link(victim.c_str(), out.c_str()) == 0);  // fs.protected_hardlinks=0
    auto h = bounded({jitwalk(), "profile", option, out, "-d", "1", "--", "/bin/sleep", "5"},
                     jitwalk_limit, 2 * seconds_per_object);
    CHECK(h.exit_code == 0);
    CHECK(read_file(victim) == "root's file");
    ::unlink(out.c_str());
  }
}

TEST_CASE("soak: a target that churns its perf map, objects and registry, profiled on end") {
  if (!may_run_privileged("jitwalk profile")) return;
  const char* env = std::getenv("JITUNWIND_SOAK_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 60;
  target t({"--churn", "--recycle-every", "10"}, seconds + 30, "recycle");
  t.wait_ready();
  auto p = profile(t, seconds);
  CHECK(p.r.exit_code == 0);
  const uint64_t samples = summary_samples(p.r.err);
  INFO(p.r.err);
  CHECK(samples > 0);
  CHECK(folded_count(p.folded) == samples);  // every sample in the output, once
  CHECK(folded_count(p.folded, "jit:rec") > 0);
  CHECK_THAT(p.r.err, Catch::Contains("registry entries skipped"));
  WARN("soak: " << seconds << " s, " << samples << " samples, peak RSS " << p.r.max_rss_kib
                << " KiB");
}
#endif  // HOSTILE_TESTS_DISABLED
