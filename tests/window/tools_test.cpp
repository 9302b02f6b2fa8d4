// The session/window API end to end with the real tools: perf (perf map names with frame
// pointers; perf inject --jit with DWARF unwinding of FP-less code) and gdb. What kill -9 loses
// is tested in tests/perfmap/crash_test.cpp.
// The program is tests/jitdump/testjit --session: main -> jit_outer -> jit_inner -> native code
// in an owned window.
#include "support/gdb.hpp"
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

using namespace jitunwind::test;

namespace {

std::string testjit() {
  return binary_path("tests/jitdump/testjit");
}

int pid_from(const std::string& out) {
  const int pid = printed_pid(out);
  REQUIRE(pid > 0);
  return pid;
}

std::string file_starting_with(const std::string& dir, const std::string& prefix) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return e.path();
  return {};
}

}  // namespace

TEST_CASE("session: perf report names frame-pointer JIT code from the perf map") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  temp_dir dir;
  const std::string data = dir / "perf.data";
  const run_result rec =
      run({"perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", data, "--", testjit(),
           "--session", "--fp", "--perfmap", "/tmp", "--seconds", "1"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  const std::string map = "/tmp/perf-" + std::to_string(pid_from(rec.out)) + ".map";
  struct remove_map {
    std::string path;
    ~remove_map() { ::unlink(path.c_str()); }
  } cleanup{map};
  CHECK_THAT(read_file(map), Catch::Contains(" jit_outer\n") && Catch::Contains(" jit_inner\n"));
  const run_result script = run({"perf", "script", "-i", data, "-F", "ip,sym"});
  REQUIRE(script.exit_code == 0);
  const auto chains = perf_script_chains(script.out);
  const size_t inner = chains_starting_with(chains, "jit_inner");
  INFO("samples " << chains.size() << ", in jit_inner " << inner);
  CHECK(inner >= 20);
  CHECK(chains_with(chains, {"jit_inner", "jit_outer"}, "main") >= inner * 8 / 10);
}

TEST_CASE("session: perf inject --jit names and unwinds FP-less JIT code") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  temp_dir dir;
  const std::string data = dir / "perf.data", jitted = dir / "perf.jit.data";
  const run_result rec =
      run({"perf", "record", "-q", "-k", "1", "-e", "cpu-clock", "--call-graph", "dwarf", "-o",
           data, "--", testjit(), "--session", "--jitdump", dir.path(), "--seconds", "1"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  const run_result inj = run({"perf", "inject", "--jit", "-i", data, "-o", jitted});
  INFO(inj.out << inj.err);
  REQUIRE(inj.exit_code == 0);
  const run_result script = run({"perf", "script", "-i", jitted, "-F", "ip,sym"});
  REQUIRE(script.exit_code == 0);
  const auto chains = perf_script_chains(script.out);
  const size_t inner = chains_starting_with(chains, "jit_inner");
  const size_t full = chains_with(chains, {"jit_inner", "jit_outer"}, "main");
  INFO("samples " << chains.size() << ", in jit_inner " << inner << ", unwound to main " << full);
  CHECK(inner >= 20);
  CHECK(full >= inner * 8 / 10);
  CHECK(chains_with(chains, {"native_work", "jit_inner", "jit_outer"}, "main") >= 5);
}

TEST_CASE("session: gdb bt walks through FP-less JIT frames to main") {
  if (!tool_available("gdb")) return;
  const run_result r =
      gdb_backtrace("native_breakpoint", {testjit(), "--session", "--gdb", "--breakpoint"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE(names.size() >= 4);
  CHECK(names[0] == "native_breakpoint");
  CHECK(names[1] == "jit_inner");
  CHECK(names[2] == "jit_outer");
  CHECK(names[3] == "main");

  // Retiring the window unregisters the functions from gdb (the code may still run).
  const run_result gone = gdb_backtrace(
      "native_breakpoint", {testjit(), "--session", "--gdb", "--unregister", "--breakpoint"});
  INFO(gone.out);
  const std::vector<std::string> after = backtrace_names(gone.out);
  REQUIRE_FALSE(after.empty());
  CHECK(after[0] == "native_breakpoint");
  CHECK(std::find(after.begin(), after.end(), "jit_inner") == after.end());
}

TEST_CASE("session: gdb sees functions published one at a time, attached from the start or later") {
  if (!tool_available("gdb")) return;
  // From the start: gdb's breakpoint on __jit_debug_register_code is in place, so each publish
  // registers an object of its own, which gdb reads as it happens.
  const run_result r = gdb_backtrace(
      "native_breakpoint", {testjit(), "--session", "--gdb", "--publish-each", "--breakpoint"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE(names.size() >= 4);
  CHECK(names[1] == "jit_inner");
  CHECK(names[2] == "jit_outer");
  CHECK(names[3] == "main");

  // Attached later: both publishes went into the window's one growing object, which gdb reads
  // from the descriptor's list when it attaches.
  temp_dir dir;
  const run_result later = run_shell(
      testjit() + " --session --gdb --publish-each --seconds 120 > " + dir / "out" +
      " & p=$!; for i in $(seq 600); do grep -q '^jit_inner' " + dir / "out" +
      " && break; sleep 0.1; done; gdb -q -batch -nx -ex 'set debuginfod enabled off' -p $p"
      " -ex 'break native_breakpoint' -ex continue -ex bt; kill -9 $p");
  INFO(later.out << later.err);
  if (later.err.find("ptrace: Operation not permitted") != std::string::npos) {
    WARN("skipped: gdb may not attach here (" << later.err << ")");
    return;
  }
  const std::vector<std::string> attached = backtrace_names(later.out);
  REQUIRE(attached.size() >= 4);
  CHECK(attached[0] == "native_breakpoint");
  // native_breakpoint is called by native_work (from jit_inner) in this mode.
  const auto inner = std::find(attached.begin(), attached.end(), "jit_inner");
  REQUIRE(inner != attached.end());
  REQUIRE(inner + 2 < attached.end());
  CHECK(*(inner + 1) == "jit_outer");
  CHECK(*(inner + 2) == "main");
}

TEST_CASE("session: an unusable perf map directory fails that publisher only") {
  temp_dir dir;
  const run_result r = run({testjit(), "--session", "--perfmap", dir / "missing", "--jitdump",
                            dir.path(), "--seconds", "0.1"});
  INFO(r.out << r.err);
  // testjit refuses to run with a failed publisher and names it.
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("publisher perfmap") && Catch::Contains("missing"));
  // The jitdump publisher started regardless.
  CHECK_FALSE(file_starting_with(dir.path(), "jit-").empty());
}
