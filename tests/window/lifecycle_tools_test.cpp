// The lifecycle as perf sees it (docs/window.md, "Reused addresses"): recompiled code unwound by
// perf --call-graph dwarf + perf inject --jit, named by the perf map, with the session's
// default address reuse (off while a file publisher perf reads is on); 1000 sub-page functions
// named from the perf map; a patched call site checked by `jitunwind unwind check`.
// Programs: tests/window/recompile_jit, examples/toy-jit (recompile.toy).
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

using namespace jitunwind::test;

namespace {

std::string recompile_jit() {
  return binary_path("tests/window/recompile_jit");
}

int pid_from(const std::string& out) {
  const int pid = printed_pid(out);
  REQUIRE(pid > 0);
  return pid;
}

// Files perf and the runtime leave in /tmp for `pid` (perf reads maps only from /tmp, and its
// DWARF unwinder finds injected objects only there).
struct tmp_files {
  int pid = 0;
  ~tmp_files() {
    if (pid == 0) return;
    ::unlink(("/tmp/perf-" + std::to_string(pid) + ".map").c_str());
    ::unlink(("/tmp/jit-" + std::to_string(pid) + ".dump").c_str());
    const std::string prefix = "jitted-" + std::to_string(pid) + "-";
    for (const auto& e : std::filesystem::directory_iterator("/tmp"))
      if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path());
  }
};

struct dwarf_result {
  size_t samples = 0, reach_main = 0, misnamed = 0;
};

// perf record --call-graph dwarf + perf inject --jit of `command`; counts the samples that have a
// frame for which `is_code` holds after the first version (`counted`), and how many of them
// reach main.
template <class Counted>
dwarf_result perf_dwarf(const std::vector<std::string>& command, Counted counted,
                        tmp_files& files) {
  temp_dir dir;
  // The shell prints the pid the command then runs with (exec), for the cleanup.
  std::string line = "echo pid $$; exec env JITUNWIND_DIR=/tmp";
  for (const std::string& a : command) line += " '" + a + "'";
  const std::vector<std::string> argv =
      perf_record(dir / "perf.data", {"--call-graph", dwarf_call_graph(16384)}, {"sh", "-c", line});
  const run_result rec = run(argv);
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  files.pid = pid_from(rec.out);
  const run_result inj =
      run({"perf", "inject", "--jit", "-i", dir / "perf.data", "-o", dir / "perf.jit.data"});
  INFO(inj.out << inj.err);
  REQUIRE(inj.exit_code == 0);
  const run_result script = run({"perf", "script", "-i", dir / "perf.jit.data", "-F", "ip,sym"}, {},
                                std::chrono::seconds(300));
  REQUIRE(script.exit_code == 0);
  dwarf_result r;
  for (const auto& chain : perf_script_chains(script.out)) {
    size_t outermost = SIZE_MAX;
    bool wrong = false;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (counted(chain, i, wrong)) outermost = i;
    }
    if (outermost == SIZE_MAX) continue;
    ++r.samples;
    r.misnamed += wrong;
    for (size_t i = outermost + 1; i < chain.size(); ++i)
      if (chain[i] == "main") {
        ++r.reach_main;
        break;
      }
  }
  return r;
}

}  // namespace

TEST_CASE("perf --call-graph dwarf + inject --jit reaches main through recompiled code") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  // recompile_jit: every version after the first; the session's default address reuse (off:
  // jitdump is on), then allowed (the same addresses again and again).
  for (const std::string reuse : {"auto", "allowed"}) {
    tmp_files files;
    const auto r = perf_dwarf(
        {recompile_jit(), "--versions", "6", "--ms", "250", "--mode", "reuse", "--address-reuse",
         reuse, "--publish", "jitdump"},
        [](const std::vector<std::string>& c, size_t i, bool& wrong) {
          if (c[i].rfind("work_v", 0) != 0 || c[i].rfind("work_v0_", 0) == 0) return false;
          if (i > 0 && c[i - 1].rfind("spin", 0) == 0 && c[i - 1].back() != c[i].back())
            wrong = true;
          return true;
        },
        files);
    INFO("address reuse " << reuse << ": " << r.samples << " samples of recompiled code, "
                          << r.reach_main << " reach main, " << r.misnamed << " misnamed");
    CHECK(r.samples >= 300);
    CHECK(r.reach_main * 100 >= r.samples * 99);
    CHECK(r.misnamed == 0);
  }
  // toy-jit recompiling every function every 50 000 calls into 4 KiB windows: recursion, code
  // of several versions on the stack at once. 500 000 rounds are ~50 ms of CPU in JIT code
  // (~200 samples; 1500 rounds gave ~20, too few to judge) and ~300 recompilations (perf script
  // reads one object per load).
  if (::access(binary_path("examples/toy-jit/toy-jit").c_str(), X_OK) != 0) {
    WARN("toy-jit not built (JITUNWIND_BUILD_EXAMPLES=OFF): its part is skipped");
    return;
  }
  tmp_files files;
  const auto t = perf_dwarf(
      {binary_path("examples/toy-jit/toy-jit"), "--frame-pointers=off", "--publish=jitdump",
       "--recompile-every=50000", "--windows=4096",
       source_path("examples/toy-jit/programs/recompile.toy"), "500000"},
      [](const std::vector<std::string>& c, size_t i, bool&) { return c[i].rfind("toy:", 0) == 0; },
      files);
  INFO("toy-jit: " << t.samples << " samples with toy frames, " << t.reach_main << " reach main");
  CHECK(t.samples >= 100);
  CHECK(t.reach_main * 100 >= t.samples * 99);
}

TEST_CASE("perf map names recompiled code right when addresses are not reused") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  // Samples in JIT code are named by the version that ran at the sample's time (the program
  // prints when each version starts, CLOCK_MONOTONIC like perf record -k 1).
  temp_dir dir;
  const run_result rec = run({"perf", "record", "-q", "-k", "1", "-e", "cpu-clock", "-o",
                              dir / "perf.data", "--", recompile_jit(), "--versions", "6", "--ms",
                              "250", "--mode", "reuse", "--publish", "perfmap"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  tmp_files files;
  files.pid = pid_from(rec.out);
  CHECK_THAT(rec.out, Catch::Contains("address reuse off"));
  struct version {
    double start;
    std::string name;
    uint64_t address;
  };
  std::vector<version> versions;
  static const std::regex line(R"((work_v\d+_s\d) at 0x([0-9a-f]+) .* from ([0-9.]+))");
  for (std::sregex_iterator it(rec.out.begin(), rec.out.end(), line), end; it != end; ++it)
    versions.push_back({std::stod((*it)[3]), (*it)[1], std::stoull((*it)[2], nullptr, 16)});
  REQUIRE(versions.size() == 6);
  const run_result script = run({"perf", "script", "-i", dir / "perf.data", "-F", "time,ip,sym"});
  REQUIRE(script.exit_code == 0);
  size_t right = 0, wrong = 0;
  static const std::regex sample(R"(^\s*(\d+\.\d+):\s+([0-9a-f]+) (\S+))");
  std::istringstream in(script.out);
  std::string text;
  while (std::getline(in, text)) {
    std::smatch m;
    if (!std::regex_search(text, m, sample)) continue;
    const uint64_t ip = std::stoull(m[2], nullptr, 16);
    // In the code of some version (each is under 64 bytes).
    if (std::none_of(versions.begin(), versions.end(),
                     [ip](const version& v) { return ip - v.address < 64; }))
      continue;
    const double t = std::stod(m[1]);
    const version* live = nullptr;
    for (const version& v : versions)
      if (v.start <= t) live = &v;
    if (live == nullptr) continue;
    (m[3] == live->name ? right : wrong) += 1;
  }
  INFO(right << " samples in JIT code named right, " << wrong << " after other code");
  CHECK(right >= 40);
  CHECK(wrong == 0);
}

TEST_CASE(
    "sub-page publishing: 1000 functions of 48 bytes named by perf report from the perf map") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  temp_dir dir;
  const run_result rec = run({"perf", "record", "-q", "-e", "cpu-clock", "-o", dir / "perf.data",
                              "--", recompile_jit(), "--small", "1000", "--ms", "1500", "--layout",
                              "shared-alias", "--publish", "registry,perfmap"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  tmp_files files;
  files.pid = pid_from(rec.out);
  // The code fits in 48000 bytes (<= 64 KiB + a page).
  std::smatch m;
  REQUIRE(std::regex_search(rec.out, m,
                            std::regex(R"(in \[0x([0-9a-f]+), 0x([0-9a-f]+)\): (\d+) bytes)")));
  const uint64_t lo = std::stoull(m[1], nullptr, 16), hi = std::stoull(m[2], nullptr, 16);
  CHECK(std::stoull(m[3]) <= 64 * 1024 + 4096);
  const run_result report = run({"perf", "report", "-i", dir / "perf.data", "--stdio", "--sort",
                                 "sym", "-F", "overhead,sym", "--percent-limit", "0"});
  REQUIRE(report.exit_code == 0);
  const run_result script = run({"perf", "script", "-i", dir / "perf.data", "-F", "ip,sym"});
  size_t in_jit = 0, named = 0;
  std::set<std::string> names;
  static const std::regex sample(R"(^\s*([0-9a-f]+) (\S+))");
  std::istringstream in(script.out);
  std::string text;
  while (std::getline(in, text)) {
    if (!std::regex_search(text, m, sample)) continue;
    const uint64_t ip = std::stoull(m[1], nullptr, 16);
    if (ip < lo || ip >= hi) continue;
    ++in_jit;
    if (m[2].str().rfind("small_", 0) == 0) {
      ++named;
      names.insert(m[2]);
    }
  }
  INFO(in_jit << " samples in the functions, " << named << " named, " << names.size()
              << " distinct names");
  CHECK(in_jit >= 300);
  CHECK(named == in_jit);
  CHECK(names.size() >= 100);
  CHECK_THAT(report.out, Catch::Contains("small_"));
}

TEST_CASE("a patched call site changes behaviour and stays unwindable (jitunwind unwind check)") {
  if (!may_run_privileged("jitunwind unwind check")) return;
  if (::access(binary_path("tools/jitunwind/jitunwind").c_str(), X_OK) != 0) {
    WARN("the jitunwind tool is not built (JITUNWIND_BUILD_TOOLS=OFF): skipped");
    return;
  }
  for (const std::string layout : {"shared-alias", "page-flip"}) {
    const run_result r =
        run({binary_path("tools/jitunwind/jitunwind"), "unwind", "check", "--", recompile_jit(),
             "--patch", "400", "--layout", layout, "--publish", "registry,usdt-events"});
    INFO(layout << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("spin0 ran 200 times, spin1 200 times"));
    CHECK_THAT(r.out, Catch::Contains("mismatches:        0 at 0 distinct addresses"));
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex(R"(frames compared:\s+(\d+))")));
    CHECK(std::stoull(m[1]) >= 400);
  }
  // The check can fail: a patch that changes the frame (rows then wrong) is caught.
  const run_result bad =
      run({binary_path("tools/jitunwind/jitunwind"), "unwind", "check", "--max-reports", "1", "--",
           recompile_jit(), "--patch", "400", "--patch-wrong-rows", "--layout", "shared-alias",
           "--publish", "registry,usdt-events"});
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.out, Catch::Contains("mismatch at pc"));
}
