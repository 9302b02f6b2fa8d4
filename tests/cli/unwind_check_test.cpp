// `jitunwind unwind check` against real runtimes: toy-jit (asmjit code with and without frame
// pointers, recompilation into new windows), toy-interp's trampolines, and jitwalk's test JIT,
// whose rows can be made wrong on purpose (--forget-epilogue) so that the check must fail.
// ptrace of one's own child needs no privilege.
#include "cli/cli_support.hpp"

#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;

namespace {

const std::string programs = std::string(JITUNWIND_SOURCE_DIR) + "/examples/toy-jit/programs/";

// The number after `label` in the summary ("  mismatches:        3 at 2 distinct ...").
long summary_number(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(label + ":\\s+(\\d+)"))) return -1;
  return std::stol(m[1]);
}

long distinct_bad(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("mismatches:\\s+\\d+ at (\\d+) distinct"))) return -1;
  return std::stol(m[1]);
}

// An environment variable set for the runs of one scope (the tool and what it starts inherit
// it); unset again at its end.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (value != nullptr) setenv(name, value, 1);
  }
  ~scoped_env() { unsetenv(name_); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
};

// The check's way of catching a publication on a machine whose debug registers do not trap
// (software breakpoints), taken on every machine: what the tests below run under.
constexpr const char* no_debug_registers = "JITUNWIND_DEBUG_REGISTERS";

void require_clean(const run_result& r, long min_jit_steps) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(summary_number(r.out, "mismatches") == 0);
  CHECK(summary_number(r.out, "in JIT code") >= min_jit_steps);
  CHECK(summary_number(r.out, "frames compared") > 0);
}

}  // namespace

#ifdef TOY_JIT
TEST_CASE("unwind check: toy-jit's rows hold at every instruction, with and without rbp") {
  for (const char* fp : {"--frame-pointers=off", "--frame-pointers=on"}) {
    INFO(fp);
    auto r = run_tool({"unwind", "check", "--", TOY_JIT, fp, programs + "fib.toy", "12"});
    require_clean(r, 5000);
    CHECK(r.out.find("the command exited with status 0") != std::string::npos);
    // fib(12) recurses 12 deep below main: every level's frame was compared.
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("deepest JIT stack seen: (\\d+)")));
    CHECK(std::stol(m[1]) >= 12);
  }
}

TEST_CASE("unwind check: every publisher set with the registry, without debug registers") {
  // The SDK's probe jitunwind_registry:change stops the thread after each registry change,
  // whatever else is published; its breakpoints outlive ld.so mapping the SDK's segments again.
  scoped_env off(no_debug_registers, "off");
  for (const char* set : {"registry", "registry,usdt-events", "registry,perfmap,jitdump", ""}) {
    INFO("JITUNWIND_PUBLISH=" << set << (*set ? "" : " (unset: the default)"));
    scoped_env publish("JITUNWIND_PUBLISH", *set != '\0' ? set : nullptr);
    auto r = run_tool(
        {"unwind", "check", "--", TOY_JIT, "--frame-pointers=off", programs + "fib.toy", "8"});
    require_clean(r, 1000);
    // fib(8) recurses 8 deep below main: every level's frame was compared.
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("deepest JIT stack seen: (\\d+)")));
    CHECK(std::stol(m[1]) >= 8);
    CHECK(r.out.find("caught at the SDK's probe jitunwind_registry:change") != std::string::npos);
    CHECK(r.out.find("the command exited with status 0") != std::string::npos);
  }
}

TEST_CASE("unwind check: publisher sets without the registry say what is missing") {
  for (const char* set : {"usdt-events", "perfmap"}) {
    INFO("JITUNWIND_PUBLISH=" << set);
    scoped_env publish("JITUNWIND_PUBLISH", set);
    auto r = run_tool({"unwind", "check", "--", TOY_JIT, programs + "fib.toy", "5"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("its jitunwind registry stayed empty: unwind check reads the JIT code and "
                     "its unwind rows from the registry, which the SDK fills only with the "
                     "publisher 'registry'; the target's environment has JITUNWIND_PUBLISH=" +
                     std::string(set) + " (include registry, e.g. JITUNWIND_PUBLISH=registry," +
                     set + ",") != std::string::npos);
    // What it did publish: a perf map names code but holds no unwind rows.
    const bool perf_map = r.err.find("it wrote names without unwind rows to its perf map " +
                                     runtime_dir() + "/perf-") != std::string::npos;
    CHECK(perf_map == (std::string(set) == "perfmap"));
  }
}

TEST_CASE("unwind check: toy-jit recompiling into new windows (retire, grace, reuse)") {
  auto r = run_tool({"unwind", "check", "--steps", "150000", "--", TOY_JIT, "--frame-pointers=off",
                     programs + "recompile.toy", "2000"});
  require_clean(r, 10000);
  CHECK(r.out.find("(step limit)") != std::string::npos);
}

TEST_CASE("unwind check: --skip-native runs toy-jit's native helpers at full speed") {
  // features.toy prints through native helpers: ~600 000 steps stepped through, ~100 000 with
  // the helpers run free; the JIT code is checked all the same.
  auto r = run_tool({"unwind", "check", "--skip-native", "--", TOY_JIT, "--frame-pointers=off",
                     programs + "features.toy"});
  require_clean(r, 1000);
  CHECK(summary_number(r.out, "native calls run") > 10);
  CHECK(summary_number(r.out, "single steps") < 300000);
}

TEST_CASE("unwind check: toy-interp's trampolines") {
  auto r = run_tool({"unwind", "check", "--", TOY_INTERP, programs + "fib.toy", "8"});
  require_clean(r, 100);
  // mutual.toy calls through many trampolines of one PCMASK FDE: each stub entered is a frame
  // (an entry is a call landing on a block's first instruction, not only the FDE's start).
  auto m = run_tool({"unwind", "check", "--", TOY_INTERP, programs + "mutual.toy", "30"});
  require_clean(m, 300);
  std::smatch deepest;
  REQUIRE(std::regex_search(m.out, deepest, std::regex("deepest JIT stack seen: (\\d+)")));
  CHECK(std::stol(deepest[1]) >= 30);
}
#endif

#ifdef JIT_TARGET
TEST_CASE("unwind check: rows missing an epilogue's stack adjustment are found") {
  const std::vector<std::string> target = {
      JIT_TARGET, "deep", "--depth", "6", "--iterations", "4", "--spin", "1", "--no-checkpoint"};
  std::vector<std::string> good = {"unwind", "check", "--"};
  good.insert(good.end(), target.begin(), target.end());
  require_clean(run_tool(good), 100);

  // The wrong rows read the return address from a stale slot of the caller's frame. What that
  // slot holds (whatever the stack had there, or 0 with --zero-locals, which made an earlier
  // checker report "the unwind stopped (zero_pc)" instead) must not change the report: the CFA
  // is wrong before anything is read through it.
  for (const bool zero_locals : {false, true}) {
    INFO("--zero-locals: " << zero_locals);
    std::vector<std::string> bad = {"unwind", "check", "--max-reports", "2", "--"};
    bad.insert(bad.end(), target.begin(), target.end());
    bad.push_back("--forget-epilogue");
    if (zero_locals) bad.push_back("--zero-locals");
    auto r = run_tool(bad);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    // Two epilogues, each wrong at its `pop rbp` and its `ret`: four addresses, nothing else.
    CHECK(distinct_bad(r.out) == 4);
    CHECK(summary_number(r.out, "mismatches") > 4);
    CHECK(r.out.find("('jit:rec'+0x") != std::string::npos);  // named from the perf map
    CHECK(r.out.find("the unwind stopped") == std::string::npos);
    CHECK(r.out.find("caller's stack pointer (CFA): expected") != std::string::npos);
    // In the row's own terms: at `pop rbp` the row still counts the 16 bytes `add rsp` freed.
    CHECK(r.out.find("published row: CFA = rsp + 32, RA at CFA - 8, rbp at CFA - 16; the true "
                     "CFA is rsp + 16") != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') < 40);  // --max-reports 2
  }
}

TEST_CASE("unwind check: --skip-native checks the same JIT instructions") {
  // jit_target's JIT code calls one native leaf per iteration: skipping it must not skip JIT
  // code, nor change any comparison.
  const std::vector<std::string> target = {"--", JIT_TARGET,       "deep", "--depth",
                                           "6",  "--iterations",   "4",    "--spin",
                                           "1",  "--no-checkpoint"};
  std::vector<std::string> stepped = {"unwind", "check"},
                           skipped = {"unwind", "check", "--skip-native"};
  stepped.insert(stepped.end(), target.begin(), target.end());
  skipped.insert(skipped.end(), target.begin(), target.end());
  auto a = run_tool(stepped);
  auto b = run_tool(skipped);
  require_clean(a, 100);
  require_clean(b, 100);
  CHECK(summary_number(b.out, "in JIT code") == summary_number(a.out, "in JIT code"));
  CHECK(summary_number(b.out, "frames compared") == summary_number(a.out, "frames compared"));
  CHECK(summary_number(b.out, "native calls run") == 4);
  CHECK(summary_number(a.out, "native calls run") == -1);  // not printed without the option
}

TEST_CASE("unwind check: windows whose SFrame cannot be used are named, the others checked") {
  // hostile: besides good windows, one with impossible counts, one with a row past its
  // function, one whose FDE lies outside its text, one whose SFrame size is absurd.
  auto r =
      run_tool({"unwind", "check", "--steps", "150000", "--max-reports", "0", "--", JIT_TARGET,
                "hostile", "--iterations", "3", "--depth", "4", "--spin", "1", "--no-checkpoint"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(summary_number(r.out, "unusable windows") == 4);
  for (const char* w : {"window 10 ", "window 11 ", "window 12 ", "window 13 "})
    CHECK(r.out.find(w) != std::string::npos);
  CHECK(r.out.find("past the end of the function") != std::string::npos);
  CHECK(r.out.find("outside its text") != std::string::npos);
  CHECK(r.err.find("4 windows whose SFrame data cannot be used") != std::string::npos);
  // The good windows published after the bad ones are still checked.
  CHECK(summary_number(r.out, "frames compared") > 0);
  CHECK(r.out.find("\nmismatch at") == std::string::npos);  // --max-reports 0
}

TEST_CASE("unwind check: the program's own SIGTRAPs are delivered, not taken") {
  auto r = run_tool({"unwind", "check", "--", JIT_TARGET, "deep", "--depth", "4", "--iterations",
                     "3", "--spin", "1", "--no-checkpoint", "--raise-sigtrap"});
  require_clean(r, 100);
  CHECK(r.out.find("jit_target: 2 SIGTRAPs handled") != std::string::npos);
  CHECK(r.out.find("the command exited with status 0") != std::string::npos);
}

#ifdef TOY_JIT
TEST_CASE("unwind check: a program that execs a runtime after its own registry was found") {
  // The first image's registry is watched at once (statically linked, initialized); after exec
  // the check must look again: toy-jit maps the SDK as a shared library.
  auto r = run_tool({"unwind", "check", "--wait", "20", "--", JIT_TARGET, "exec", TOY_JIT,
                     "--frame-pointers=off", programs + "fib.toy", "8"});
  require_clean(r, 1000);
  CHECK(r.out.find("the command exited with status 0") != std::string::npos);
}
#endif

TEST_CASE("unwind check: a main thread that leaves by pthread_exit") {
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  // While stepping: the check ends at its exit (a zombie main thread is not reported to a
  // tracer until the last thread ends), and the thread it created meanwhile does not keep
  // the one CPU that tracer and thread share while stepping.
  auto r = run_tool({"unwind", "check", "--", JIT_TARGET, "deep", "--depth", "4", "--iterations",
                     "3", "--spin", "1", "--no-checkpoint", "--pthread-exit"});
  require_clean(r, 100);
  CHECK(r.out.find("(the thread exited with status 0)") != std::string::npos);
  CHECK(r.out.find("jit_target: the last thread (on " + std::to_string(CPU_COUNT(&mine)) +
                   " CPUs) ends the process") != std::string::npos);
  CHECK(r.out.find("the command exited with status 0") != std::string::npos);

  // Before anything is published: the JIT code runs on the other thread, which starts once the
  // main thread is gone. Every thread of the command is traced while the check waits: the one
  // that enters the published code is followed and checked.
  auto other = run_tool({"unwind", "check", "--", JIT_TARGET, "deep", "--depth", "4",
                         "--iterations", "3", "--spin", "1", "--no-checkpoint", "--jit-thread"});
  require_clean(other, 100);
  CHECK(other.out.find("the first to enter JIT code (the command's main thread is ") !=
        std::string::npos);
  CHECK(other.out.find("the command exited with status 0") != std::string::npos);
}

TEST_CASE("unwind check: a multi-threaded JIT without debug registers") {
  scoped_env off(no_debug_registers, "off");
  // The JIT code is compiled, published and run on a second thread while the main thread waits
  // in pthread_join: that thread is followed (every thread of the command is traced while the
  // check waits, so the breakpoints are safe), from its first entry into the code.
  auto r = run_tool({"unwind", "check", "--skip-native", "--", JIT_TARGET, "deep", "--depth", "6",
                     "--iterations", "4", "--spin", "1", "--no-checkpoint", "--jit-worker"});
  require_clean(r, 100);
  CHECK(r.out.find("the first to enter JIT code (the command's main thread is ") !=
        std::string::npos);
  CHECK(r.out.find("the thread was stopped at its first entry into published code") !=
        std::string::npos);
  // Its native calls run at full speed with an int3 on the return address, the main thread
  // traced meanwhile.
  CHECK(summary_number(r.out, "native calls run") == 4);
  CHECK(summary_number(r.out, "native calls stepped") == -1);
  CHECK(summary_number(r.out, "other threads") == 1);
  CHECK(r.out.find("the command exited with status 0") != std::string::npos);
  // The main thread is gone before the JIT thread starts.
  auto gone = run_tool({"unwind", "check", "--", JIT_TARGET, "deep", "--depth", "4", "--iterations",
                        "3", "--spin", "1", "--no-checkpoint", "--jit-thread"});
  require_clean(gone, 100);
  CHECK(gone.out.find("the first to enter JIT code") != std::string::npos);
}

#ifdef THREADED_JIT
// The number of times the other threads met the return breakpoint ("they met it N times").
long others_met(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("they met it (\\d+) times"))) return -1;
  return std::stol(m[1]);
}

TEST_CASE("unwind check: --skip-native without debug registers, other threads at the same return") {
  scoped_env off(no_debug_registers, "off");
  // The main thread, the first to enter the JIT function, is checked. Each of its 24 calls of
  // the native function from JIT code runs at full speed with an int3 on the return address
  // while two other threads call the same function in a loop: the target returns from each call
  // only after another thread has passed that return address meanwhile, and from every fourth
  // only after a forked child (a copy of the int3) and a clone(CLONE_VM) child (sharing it)
  // have called the function too. A short-lived thread is made per cycle, signals are sent to
  // a caller. The target checks every result and signal (exit status 0).
  auto r = run_tool({"unwind", "check", "--skip-native", "--", THREADED_JIT, "24"});
  require_clean(r, 6 * 25);
  CHECK(r.out.find("threaded_jit: 24 rounds") != std::string::npos);
  CHECK(r.out.find("the command exited with status 0") != std::string::npos);
  // Not one call stepped: the first call and 24 rounds, all at full speed.
  CHECK(summary_number(r.out, "native calls run") == 25);
  CHECK(summary_number(r.out, "native calls stepped") == -1);
  // Two callers and the spawner at least; each round at least one of them stepped past.
  CHECK(summary_number(r.out, "other threads") >= 3);
  CHECK(others_met(r.out) >= 24);
}
#endif

TEST_CASE("unwind check: attaching to a running process, which goes on after the check") {
  // posix_spawn returns once the child has exec'd (attached before, the check would end at the
  // exec); what it has not published yet, the check waits for (--wait, 30 s by default).
  const char* argv[] = {JIT_TARGET,        "deep",      "--depth", "8",    "--spin", "1",
                        "--no-checkpoint", "--seconds", "6",       nullptr};
  pid_t child = -1;
  REQUIRE(posix_spawn(&child, JIT_TARGET, nullptr, nullptr, const_cast<char* const*>(argv),
                      environ) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let it publish and run
  auto r = run_tool({"unwind", "check", "--pid", std::to_string(child), "--seconds", "1"});
  require_clean(r, 100);
  CHECK(r.out.find("(time limit)") != std::string::npos);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("wait status 0x" << std::hex << status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif

#ifdef LATE_SDK
TEST_CASE("unwind check: an SDK that another thread loads late (dlopen) is found") {
  // The main thread maps no file itself: the worker maps the SDK (found at its mmap: every
  // thread is traced while the check waits) and publishes; the main thread runs the code, and
  // is the one checked, as the first to enter it: with watchpoints and with breakpoints on the
  // SDK's probe. Every one of the 200 calls is checked (5 instructions each).
  for (const char* debug_registers : {"", "off"}) {
    INFO("JITUNWIND_DEBUG_REGISTERS=" << debug_registers);
    scoped_env setting(no_debug_registers, *debug_registers != '\0' ? debug_registers : nullptr);
    auto r = run_tool({"unwind", "check", "--wait", "20", "--", LATE_SDK, LIBJITUNWIND, "200"});
    require_clean(r, 1000);
    CHECK(summary_number(r.out, "in JIT code") == 1000);
    CHECK(r.out.find("late_sdk: 200 calls, sum 1400") != std::string::npos);
    CHECK(r.out.find("the command exited with status 0") != std::string::npos);
  }
}
#endif

TEST_CASE("unwind check: usage errors and targets that publish nothing") {
  CHECK(run_tool({"unwind", "check"}).exit_code == 2);
  CHECK(run_tool({"unwind", "check", "--pid", "1", "--", "true"}).exit_code == 2);
  CHECK(run_tool({"unwind", "check", "--steps", "0", "--", "true"}).exit_code == 2);
  CHECK(run_tool({"unwind", "check", "--pid", "x"}).exit_code == 2);
  auto no_dashes = run_tool({"unwind", "check", "toy-jit", "--frame-pointers=off", "fib.toy"});
  CHECK(no_dashes.exit_code == 2);
  CHECK(no_dashes.err.find("unknown option '--frame-pointers' for 'check' (to pass options on to "
                           "'toy-jit', put '--' before it)") != std::string::npos);

  auto missing = run_tool({"unwind", "check", "--", "/nonexistent/runtime"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("cannot run '/nonexistent/runtime'") != std::string::npos);
  CHECK(missing.err.find("could not be started") != std::string::npos);

  auto nothing = run_tool({"unwind", "check", "--", "true"});
  CHECK(nothing.exit_code == 1);
  CHECK(nothing.err.find("before it published any JIT code") != std::string::npos);

  const auto start = std::chrono::steady_clock::now();
  auto slow = run_tool({"unwind", "check", "--wait", "1", "--", "sleep", "30"});
  CHECK(slow.exit_code == 1);
  CHECK(slow.err.find("no published JIT code within 1 s") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // killed
}
