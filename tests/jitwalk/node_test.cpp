// jitwalk on Node.js (V8), a runtime nobody here wrote, next to perf on the same runs: names from
// V8's jitdump (--perf-prof, written through a stdio buffer, so most names arrive after the
// code ran: late names) and full chains with a perf map (--perf-basic-prof). Root-only (BPF);
// each case runs node for about 3-4 s (the file ~20 s with perf). Skipped with a printed reason
// without node or perf, unless JITUNWIND_REQUIRE_BPF=1.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <sstream>

#include "jitwalk/aggregate.hpp"
#include "jitwalk_support.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

std::string node_hot_js() {
  return jt::source_path("tests/jitwalk/targets/node_hot.js");
}

// Samples whose leaf (last folded frame) has a name: not a group or address of unnamed code
// ("[anon:...]", "[unknown...]", "[memfd:...]") and not "object+0x...".
std::pair<uint64_t, uint64_t> named_leaves(const std::map<std::string, uint64_t>& folded) {
  uint64_t named = 0, all = 0;
  for (const auto& [stack, count] : folded) {
    const size_t semi = stack.rfind(';');
    const std::string leaf = stack.substr(semi == std::string::npos ? 0 : semi + 1);
    all += count;
    if (!leaf.empty() && leaf[0] != '[' && leaf.find("+0x") == std::string::npos) named += count;
  }
  return {named, all};
}

// Samples whose root (first frame after the process name) is a process or thread entry.
std::pair<uint64_t, uint64_t> full_chains(const std::map<std::string, uint64_t>& folded) {
  uint64_t full = 0, all = 0;
  for (const auto& [stack, count] : folded) {
    const size_t a = stack.find(';');
    const size_t b = a == std::string::npos ? a : stack.find(';', a + 1);
    all += count;
    if (a != std::string::npos && jitwalk::is_entry_function(stack.substr(a + 1, b - a - 1)))
      full += count;
  }
  return {full, all};
}

bool node_and_perf() {
  return jt::tool_available("node") && jt::tool_available("perf");
}

}  // namespace

TEST_CASE("node --perf-prof: late names from the jitdump, as perf inject --jit names them") {
  if (!jt::may_run_privileged("jitwalk profile") || !node_and_perf()) return;
  jt::temp_dir dir;
  // The workload keeps three hot functions busy for 3 s of CPU and exits by itself: V8 writes
  // its jitdump through a stdio buffer flushed at exit (a node ended by SIGINT or SIGTERM loses
  // the names still buffered, docs/jitwalk.md "V8 / Node.js"). Sampled to its end: a fixed
  // amount of work, as many samples however busy the machine is (which only stretches it).
  auto r = jt::run_shell("cd " + dir.path() + " && " + jitwalk_test::jitwalk() +
                             " profile -F 499 --folded j.folded -- node --perf-prof " +
                             node_hot_js() + " 3",
                         std::chrono::seconds(300));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("command: exited with status 0"));
  CHECK_THAT(r.err, Catch::Contains("names for pid") && Catch::Contains("jitdump"));
  const auto folded = parse_folded(jt::read_file(dir / "j.folded"));
  const auto [named, all] = named_leaves(folded);
  REQUIRE(all >= 1000);  // 3 s of CPU at 499 Hz
  CHECK(named * 100 >= all * 95);
  bool hot = false;
  for (const auto& [stack, count] : folded)
    if (stack.find("JS:*leafA") != std::string::npos) hot = true;
  CHECK(hot);

  // Ended at -d instead (30 s of CPU asked): V8's buffered jitdump tail is lost with the
  // SIGINT, and the summary says that names may be missing — once V8 has created its jitdump
  // (on a loaded machine node may not have got that far in 4 s: then that is only printed).
  auto ended = jt::run_shell("cd " + dir.path() + " && " + jitwalk_test::jitwalk() +
                                 " profile -F 99 -d 4 -- node --perf-prof " + node_hot_js() + " 30",
                             std::chrono::seconds(60));
  INFO(ended.err);
  REQUIRE(ended.exit_code == 0);
  CHECK_THAT(ended.err, Catch::Contains("command: ended by jitwalk (SIGINT) at the end of -d 4"));
  if (ended.err.find("names for pid") != std::string::npos &&
      ended.err.find(".dump (") != std::string::npos) {
    CHECK_THAT(ended.err, Catch::Contains(
                              "note: names may be missing: jitwalk ended the command with SIGINT"));
  } else {
    WARN("node had not mapped its jitdump when -d 4 ended it (a loaded machine)");
  }

  // perf on the same kind of run: record, inject the jitdump's code, count named user leaves.
  auto p = jt::run_shell("cd " + dir.path() +
                             " && perf record -q -k 1 -e cpu-clock -F 499 -o p.data -- node "
                             "--perf-prof " +
                             node_hot_js() +
                             " 3 >/dev/null && perf inject --jit -i p.data -o pj.data && perf "
                             "script -i pj.data -F ip,sym",
                         std::chrono::seconds(300));
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  uint64_t perf_named = 0, perf_all = 0;
  for (const auto& s : perf_samples(p.out, false)) {
    if (s.empty()) continue;  // a kernel sample (no user frame without -g)
    ++perf_all;
    if (s[0] != "[unknown]") ++perf_named;
  }
  REQUIRE(perf_all > 500);
  WARN(jitunwind::toolkit::format(
      "named leaves: jitwalk %.1f%% of %llu, perf inject --jit %.1f%% of %llu", 100.0 * named / all,
      (unsigned long long)all, 100.0 * perf_named / perf_all, (unsigned long long)perf_all));
  // Within 5 points of what perf names on the same kind of run.
  CHECK(100.0 * named / all >= 100.0 * perf_named / perf_all - 5);
}

TEST_CASE("node --perf-basic-prof: full chains within 5 points of perf -g on the same process") {
  if (!jt::may_run_privileged("jitwalk profile") || !node_and_perf()) return;
  jt::temp_dir dir;
  // jitwalk and perf attach to node, which then runs its hot loop for 3 s of CPU (it waits for
  // the file `go`) and exits: both sample the same work, all of it, however busy the machine is.
  // node's perf map is removed at the end.
  auto r = jt::run_shell(
      "cd " + dir.path() + " && { node --perf-basic-prof " + node_hot_js() +
          " 3 go >/dev/null & P=$!; " + jitwalk_test::jitwalk() +
          " profile -F 499 --folded j.folded -p $P 2>j.err & J=$!; "
          "for i in $(seq 600); do grep -q 'profiling pid' j.err && break; sleep 0.1; done; "
          "perf record -q -g -e cpu-clock -F 499 -p $P -o g.data & R=$!; "
          "for i in $(seq 600); do [ -s g.data ] && break; sleep 0.1; done; touch go; "
          "wait $J; echo jitwalk=$?; wait $R; wait $P; rm -f /tmp/perf-$P.map; } ; "
          "perf script -i g.data -F ip,sym",
      std::chrono::seconds(300));
  INFO(jt::read_file(dir / "j.err"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Catch::Contains("jitwalk=0"));
  const auto [full, all] = full_chains(parse_folded(jt::read_file(dir / "j.folded")));
  uint64_t perf_full = 0, perf_all = 0;
  for (const auto& s : perf_samples(r.out.substr(r.out.find("jitwalk=0") + 9), true)) {
    if (s.empty()) continue;
    ++perf_all;
    if (jitwalk::is_entry_function(s.back())) ++perf_full;
  }
  REQUIRE(all >= 1000);  // 3 s of CPU at 499 Hz
  REQUIRE(perf_all >= 1000);
  const double jw = 100.0 * full / all, pf = 100.0 * perf_full / perf_all;
  WARN(jitunwind::toolkit::format("full chains: jitwalk %.1f%% of %llu, perf -g %.1f%% of %llu", jw,
                                 (unsigned long long)all, pf, (unsigned long long)perf_all));
  CHECK(jw >= pf - 5);
}

#endif
