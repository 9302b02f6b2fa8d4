// jitwalk where runtimes are deployed (issue 31): a runtime in its own PID and mount namespace
// with a private /tmp (as in a container), a supervisor that ignores SIGINT and SIGTERM, a
// 16-worker pre-forking server, and a frameless leaf a frame-pointer walk skips the caller of.
// Root-only (BPF, unshare, mount); node cases are skipped with a printed reason without node
// (or perf) unless JITUNWIND_REQUIRE_BPF=1. Every runtime here writes its perf map into a private
// /tmp: a tmpfs of its namespace, or a directory of the test bound over /tmp.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <set>
#include <thread>

#include <jitunwind/toolkit/proc_stat.hpp>
#include "jitwalk/aggregate.hpp"
#include "jitwalk_support.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

[[maybe_unused]] std::string toy_jit() {
  return jt::binary_path("examples/toy-jit/toy-jit");
}
[[maybe_unused]] std::string spin_toy() {
  return jt::source_path("examples/toy-jit/programs/spin.toy");
}

// Shell commands that mount WHAT ("-t tmpfs tmpfs", "--bind tmp") on /tmp in a new mount
// namespace. A checkout under /tmp (a clone made there to run CI) would vanish under it, with the
// programs and scripts the namespace runs: then WHAT goes on /mnt first, the source and build
// trees are bound into it at their own paths, and the whole is moved onto /tmp. The namespace's
// mounts are private (unshare's default): the host never sees the trees inside the test's dir.
[[maybe_unused]] std::string mount_on_tmp(const std::string& what) {
  std::vector<std::string> keep;
  for (const std::string& tree : {jt::source_path("."), jt::binary_path(".")}) {
    char real[PATH_MAX];
    if (::realpath(tree.c_str(), real) == nullptr) continue;
    const std::string p = real;
    const bool inside_kept = std::any_of(keep.begin(), keep.end(), [&](const std::string& k) {
      return p == k || p.rfind(k + "/", 0) == 0;
    });
    if (p.rfind("/tmp/", 0) == 0 && !inside_kept) keep.push_back(p);
  }
  if (keep.empty()) return "mount " + what + " /tmp";
  std::string s = "mount " + what + " /mnt";
  for (const std::string& p : keep) {
    const std::string at = "/mnt" + p.substr(4);
    s += " && mkdir -p " + at + " && mount --bind " + p + " " + at;
  }
  return s + " && mount --move /mnt /tmp";
}

// "unshare ... sh -c 'mount a tmpfs on /tmp && INSIDE'": a new PID and mount namespace whose
// /tmp is its own (what a container runtime sets up); INSIDE runs as PID 1 there (or forks).
[[maybe_unused]] std::string in_container(const std::string& inside) {
  return "unshare --pid --fork --mount --mount-proc sh -c '" + mount_on_tmp("-t tmpfs tmpfs") +
         " && " + inside + "'";
}

// The live children of `pid` (by the parent PID in /proc/*/stat).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  auto ls = jt::run_shell("ls /proc");
  std::istringstream in(ls.out);
  std::string name;
  while (in >> name) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto st = jitunwind::toolkit::read_proc_stat(std::stoi(name));
    if (st && st->ppid == pid && !st->ended()) out.push_back(st->pid);
  }
  return out;
}

[[maybe_unused]] bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A process tree started in the background by a shell (its first process's PID printed), killed
// with SIGKILL when the test ends: for a container, its PID 1, which takes the namespace along.
struct background {
  pid_t pid = -1;
  explicit background(const std::string& command) {
    auto r = jt::run_shell(command + " >/dev/null 2>&1 & echo $!");
    pid = std::atoi(r.out.c_str());
  }
  ~background() {
    for (pid_t c : children_of(pid)) ::kill(c, SIGKILL);
    if (pid > 0) ::kill(pid, SIGKILL);
  }
};

double number_after(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

}  // namespace

// toy-jit is built only with the example runtimes (not in the sanitizer stage).
#ifdef JITWALK_HAVE_EXAMPLES
TEST_CASE("namespaces: -p names toy-jit in its own PID and mount namespace from its private /tmp") {
  if (!jt::may_run_privileged("jitwalk profile") || !jt::tool_available("unshare")) return;
  // No USDT events: names come only from the perf map and jitdump in the namespace's /tmp
  // (perf-1.map: toy-jit is PID 1 there); the registry still gives the tables.
  background ns(in_container("exec " + toy_jit() +
                             " --frame-pointers=off --publish=registry,perfmap,jitdump " +
                             spin_toy() + " 0"));
  REQUIRE(ns.pid > 0);
  pid_t pid = -1;
  for (int i = 0; i < 600 && pid < 0; ++i) {
    for (pid_t c : children_of(ns.pid))
      if (exists(jitunwind::toolkit::format("/proc/%d/root/tmp/perf-1.map", c))) pid = c;
    if (pid < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(pid > 0);
  CHECK_FALSE(exists(jitunwind::toolkit::format("/tmp/perf-%d.map", pid)));  // not jitwalk's /tmp

  jt::temp_dir dir;
  auto r = jt::run({jitwalk_test::jitwalk(), "profile", "-F", "499", "-d", "2", "-p",
                    std::to_string(pid), "--folded", dir / "f.folded"},
                   {}, std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("perf map /tmp/perf-1.map (") &&
                        Catch::Contains("jitdump /tmp/jit-1.dump (") &&
                        Catch::Contains("files looked up in the mount namespace of pid " +
                                        std::to_string(pid)) &&
                        Catch::Contains("pid 1 there"));
  // Every JIT frame named (the issue measured 0 %): toy:level, toy:compute, ...
  CHECK(number_after(r.err, R"(JIT/anonymous frames \(every depth, by sample\): ([0-9.]+)%)") >=
        99);
  const auto folded = parse_folded(jt::read_file(dir / "f.folded"));
  uint64_t level = 0;
  for (const auto& [stack, n] : folded)
    if (stack.find(";toy:level;") != std::string::npos) level += n;
  CHECK(level * 2 >= total(folded));
  CHECK(total(folded) >= 50);
}

TEST_CASE("namespaces: a command's tree in a container, two toy-jits named from their own maps") {
  if (!jt::may_run_privileged("jitwalk profile") || !jt::tool_available("unshare")) return;
  // jitwalk -- unshare -> sh (PID 1 there) -> two toy-jits (PID 2 and 3 there), each with its
  // own perf map in the namespace's /tmp; no USDT events (names only from the files).
  const std::string toy =
      toy_jit() + " --frame-pointers=off --publish=registry,perfmap " + spin_toy() + " 0";
  jt::temp_dir dir;
  auto r = jt::run(
      {jitwalk_test::jitwalk(), "profile", "-F", "499", "-d", "3", "--grace", "0.5", "--folded",
       dir / "f.folded", "--", "sh", "-c", in_container("{ " + toy + " & " + toy + " & wait; }")},
      {}, std::chrono::seconds(90));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // One report per toy-jit, each with its own map (its PID in the namespace: 2, 3, ...).
  const std::regex report(
      R"(names for pid (\d+) \(toy-jit, (\d+) samples\): perf map /tmp/perf-(\d)\.map \((\d+) names\)[^\n]*files looked up in the mount namespace of pid \1 \(mnt:\[\d+\]\), pid \3 there)");
  std::set<std::string> ns_pids;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), report);
       it != std::sregex_iterator(); ++it) {
    ns_pids.insert((*it)[3]);
    CHECK(std::stoi((*it)[4]) > 0);
  }
  CHECK(ns_pids.size() == 2);
  // Both processes' JIT frames named: toy:level under each label.
  const auto folded = parse_folded(jt::read_file(dir / "f.folded"));
  std::map<std::string, uint64_t> level;
  for (const auto& [stack, n] : folded)
    if (stack.find(";toy:level;") != std::string::npos)
      level[stack.substr(0, stack.find(';'))] += n;
  CHECK(level.size() == 2);
  // The tree is gone: the namespace's PID 1 (sh, which ignores signals from outside) killed.
  CHECK_THAT(r.err, Catch::Contains("of the command's tree ended by jitwalk"));
}

#endif

TEST_CASE("namespaces: node --perf-basic-prof in a container, started as a command") {
  if (!jt::may_run_privileged("jitwalk profile") || !jt::tool_available("unshare") ||
      !jt::tool_available("node"))
    return;
  jt::temp_dir dir;
  auto r = jt::run({jitwalk_test::jitwalk(), "profile", "-F", "499", "--folded", dir / "f.folded",
                    "--", "sh", "-c",
                    // In the test's directory, which node keeps as its working directory under
                    // the tmpfs (V8 writes an isolate-*.log there).
                    "cd " + dir.path() + " && exec " +
                        in_container("exec node --perf-basic-prof " +
                                     jt::source_path("tests/jitwalk/targets/node_hot.js") + " 1")},
                   {}, std::chrono::seconds(90));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err,
             Catch::Contains("perf map /tmp/perf-1.map (") && Catch::Contains("pid 1 there"));
  // node's samples: named from the map in its namespace (the issue measured 0.1 %).
  const auto folded = parse_folded(jt::read_file(dir / "f.folded"));
  uint64_t node = 0, hot = 0;
  for (const auto& [stack, n] : folded) {
    if (stack.rfind("node-", 0) != 0) continue;
    node += n;
    if (stack.find("JS:*leaf") != std::string::npos ||
        stack.find("JS:^leaf") != std::string::npos || stack.find("JS:~leaf") != std::string::npos)
      hot += n;
  }
  REQUIRE(node >= 100);
  CHECK(hot * 2 >= node);
  CHECK(number_after(r.err, R"(JIT/anonymous frames \(every depth, by sample\): ([0-9.]+)%)") >=
        95);
}

TEST_CASE(
    "profile -d ends a command's whole tree: a supervisor and a runtime that ignore "
    "SIGINT/SIGTERM") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // The supervisor ignores SIGINT and SIGTERM and runs the runtime as its child, which ignores
  // them too (its spinning loop has the handlers); each writes its PID first. jitwalk's output
  // is read through a pipe: `cat` ends only when no process holds the pipe any more.
  const std::string runtime =
      "sh -c \"trap : INT TERM; echo \\$\\$ > " + (dir / "runtime.pid") + "; while :; do :; done\"";
  const std::string supervisor = "trap '' INT TERM; echo $$ > " + (dir / "supervisor.pid") + "; " +
                                 runtime + " & while :; do sleep 0.1; done";
  auto r = jt::run_shell(jitwalk_test::jitwalk() + " profile -F 199 -d 1.5 --grace 0.3 -- sh -c " +
                             "'" + std::regex_replace(supervisor, std::regex("'"), "'\\''") +
                             "' 2>" + (dir / "err") + " | cat; echo pipe-closed",
                         std::chrono::seconds(60));
  const std::string err = jt::read_file(dir / "err");
  INFO(err);
  REQUIRE_FALSE(r.timed_out);  // a process of the tree kept the pipe open
  CHECK_THAT(r.out, Catch::Contains("pipe-closed"));
  CHECK_THAT(err, Catch::Contains("command: ended by jitwalk (SIGKILL: still running after SIGINT "
                                  "and SIGTERM) at the end of -d 1.5"));
  const std::string runtime_pid =
      std::to_string(std::atoi(jt::read_file(dir / "runtime.pid").c_str()));
  REQUIRE(runtime_pid != "0");
  CHECK_THAT(err, Catch::Contains("of the command's tree ended by jitwalk:") &&
                      Catch::Contains("-" + runtime_pid +
                                      " (SIGKILL: still running after SIGINT and SIGTERM)"));
  for (const char* f : {"runtime.pid", "supervisor.pid"}) {
    const pid_t p = std::atoi(jt::read_file(dir / f).c_str());
    auto st = jitunwind::toolkit::read_proc_stat(p);
    CHECK((!st || st->ended()));
  }
}

TEST_CASE("profile --wait-exit waits for the command's whole tree to exit by itself") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // The command exits at once, leaving a child that finishes 1 s later by itself.
  auto r = jt::run({jitwalk_test::jitwalk(), "profile", "-F", "99", "-d", "0.3", "--wait-exit",
                    "--", "sh", "-c", "(sleep 1; echo done > " + (dir / "child") + ") & exit 0"},
                   {}, std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(jt::read_file(dir / "child") == "done\n");
  CHECK_THAT(r.err, !Catch::Contains("ended by jitwalk"));
}

TEST_CASE("a 16-worker node cluster: native rows shared, every worker walked with tables") {
  if (!jt::may_run_privileged("jitwalk profile") || !jt::tool_available("unshare") ||
      !jt::tool_available("node"))
    return;
  jt::temp_dir dir;
  REQUIRE(::mkdir((dir / "tmp").c_str(), 0755) == 0);
  // The primary forks 16 workers (fork + exec of node: 16 address spaces mapping one node
  // binary); each burns 200 ms of CPU time and exits, then the primary exits. Their perf maps
  // go to the test's directory, bound over /tmp in a mount namespace of their own.
  auto r = jt::run({jitwalk_test::jitwalk(), "profile", "-v", "-F", "499", "-d", "300", "--folded",
                    dir / "f.folded", "--", "unshare", "--mount", "sh", "-c",
                    "cd " + dir.path() + " && " + mount_on_tmp("--bind tmp") +
                        " && exec node --perf-basic-prof " +
                        jt::source_path("tests/jitwalk/targets/node_cluster.js") + " 16 200"},
                   {}, std::chrono::seconds(300));
  INFO(r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("command: exited with status 0"));
  CHECK_THAT(r.err, !Catch::Contains("row table full"));
  // One copy of node's rows: the workers' 3 executable parts of node (and their libraries)
  // share what the first process loaded.
  CHECK(number_after(r.err, R"(; (\d+) ranges shared the rows of an object another process)") >=
        16 * 3);
  // Every worker sampled, named from its own map and walked to the root through node's
  // .eh_frame (frame pointers alone stop in node's C++ frames).
  const auto folded = parse_folded(jt::read_file(dir / "f.folded"));
  std::map<std::string, std::pair<uint64_t, uint64_t>> per;  // label -> (root, all)
  for (const auto& [stack, n] : folded) {
    const size_t a = stack.find(';'), b = stack.find(';', a + 1);
    auto& [root, all] = per[stack.substr(0, a)];
    all += n;
    if (jitwalk::is_entry_function(stack.substr(a + 1, b - a - 1))) root += n;
  }
  // A worker may lose a few walks in node's start-up (frameless builtins of its embedded blob
  // have no .eh_frame): how many of its samples land there depends on how many it got in all
  // (48 to 132 here, by scheduling), so each worker may lose 5 % or 3 walks, the whole run 3 %.
  size_t workers = 0;
  uint64_t root = 0, all = 0;
  for (const auto& [label, counts] : per) {
    if (counts.second < 20) continue;  // the primary: little of its own
    ++workers;
    root += counts.first;
    all += counts.second;
    INFO(label << ": " << counts.first << " of " << counts.second << " walked to the root");
    CHECK(counts.second - counts.first <= std::max<uint64_t>(3, counts.second / 20));
  }
  CHECK(workers >= 16);
  CHECK(root * 100 >= all * 97);
  CHECK(number_after(r.err, R"(names of (\d+) more processes)") >= 0);
  CHECK_THAT(r.err, Catch::Contains("perf map /tmp/perf-"));
}

TEST_CASE(
    "a frameless leaf's caller from the return address at SP: node --no-opt, next to perf -g") {
  if (!jt::may_run_privileged("jitwalk profile") || !jt::tool_available("unshare") ||
      !jt::tool_available("node"))
    return;
  jt::temp_dir dir;
  REQUIRE(::mkdir((dir / "tmp").c_str(), 0755) == 0);
  const std::string in_ns = "unshare --mount sh -c 'cd " + dir.path() + " && " +
                            mount_on_tmp("--bind tmp") +
                            " && exec node --no-opt --perf-basic-prof " +
                            jt::source_path("tests/jitwalk/targets/node_frameless.js") + " 1000'";
  auto r = jt::run_shell(
      jitwalk_test::jitwalk() + " profile -F 499 --folded " + (dir / "f.folded") + " -- " + in_ns,
      std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("frameless leaves' callers from the return address at the "
                                    "stack pointer"));
  // Samples in the Modulus builtin (rt_leaf's `%`): their caller must be rt_leaf.
  uint64_t leaf = 0, skipped = 0;
  for (const auto& [stack, n] : parse_folded(jt::read_file(dir / "f.folded"))) {
    const size_t last = stack.rfind(';');
    if (stack.find("Modulus", last) == std::string::npos) continue;
    const size_t from = stack.rfind(';', last - 1) + 1;
    const std::string parent = stack.substr(from, last - from);
    (parent.find("rt_leaf") != std::string::npos ? leaf : skipped) += n;
  }
  INFO("Modulus samples: caller rt_leaf " << leaf << ", another " << skipped);
  REQUIRE(leaf + skipped >= 20);
  CHECK(leaf * 100 >= (leaf + skipped) * 95);

  // perf -g on the same workload (frame pointers): the same samples skip rt_leaf. Printed for
  // comparison (docs/jitwalk.md records it), not asserted: it is perf's behaviour.
  if (!jt::tool_available("perf")) return;
  const std::string perf_ns = "unshare --mount sh -c 'cd " + dir.path() + " && " +
                              mount_on_tmp("--bind tmp") +
                              " && perf record -q -g -e cpu-clock -F 499 -o p.data -- node "
                              "--no-opt --perf-basic-prof " +
                              jt::source_path("tests/jitwalk/targets/node_frameless.js") +
                              " 1000 >/dev/null && perf script -i p.data -F ip,sym'";
  auto p = jt::run_shell(perf_ns, std::chrono::seconds(120));
  uint64_t perf_leaf = 0, perf_other = 0;
  for (const auto& sample : perf_samples(p.out, true)) {
    if (sample.size() >= 2 && sample[0].find("Modulus") != std::string::npos)
      (sample[1].find("rt_leaf") != std::string::npos ? perf_leaf : perf_other)++;
  }
  WARN(jitunwind::toolkit::format(
      "Modulus builtin samples whose caller is rt_leaf: jitwalk %llu of %llu, perf -g %llu of %llu",
      (unsigned long long)leaf, (unsigned long long)(leaf + skipped), (unsigned long long)perf_leaf,
      (unsigned long long)(perf_leaf + perf_other)));
}

TEST_CASE("a row table too small for the objects mapped grows instead of leaving them out") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // 1024 rows: libc alone has ~28 000. No frame pointers in the program: its walks reach main
  // only with the tables of every object loaded.
  auto r = jt::run(
      {jitwalk_test::jitwalk(), "profile", "-v", "-F", "199", "--rows", "1024", "--no-table-cache",
       "--", jt::binary_path("tests/jitwalk/jitwalk_native_target"), "1"},
      {}, std::chrono::seconds(60));
  INFO(r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("BPF row table full at 1024 rows: grown to"));
  CHECK_THAT(r.err, !Catch::Contains("row table full, not loaded"));
  CHECK(number_after(r.err, R"(unwound to the root: ([0-9.]+)%)") >= 95);
}

#endif
