// `jitunwind windows list/watch` against running runtimes: toy-jit (names and ranges checked
// against its perf map and /proc/PID/maps, independent of the registry), jitwalk's test JIT
// with corrupt windows, and toy-jit recompiling into new windows for watch.
#include "cli/cli_support.hpp"
#include "support/background.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;
using json = nlohmann::json;

namespace {

// Runs `windows watch ARGS` in a shell and sends it Ctrl-C once it is running: once `ready`
// ("out" or "err") has something in it. A fixed sleep is not enough: until its handler is
// installed, a background command of sh ignores SIGINT, and the watch would never end.
run_result interrupt_watch(const std::string& args, const char* ready) {
  temp_dir dir;
  const std::string out = dir / "out", err = dir / "err";
  const std::string file = std::string(ready) == "out" ? out : err;
  return run_shell("'" + tool_path() + "' windows watch " + args + " > '" + out + "' 2> '" + err +
                       "' & p=$!; i=0; until [ -s '" + file +
                       "' ] || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; kill -INT $p; "
                       "wait $p; rc=$?; cat '" +
                       err + "' >&2; exit $rc",
                   std::chrono::seconds(90));
}


// `windows list --json` once the process lists a window that `ready` accepts (10 s at most).
json list_when(pid_t pid, const std::function<bool(const json&)>& ready,
               std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"windows", "list", "--json", "-p", std::to_string(pid)};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto r = run_tool(args);
    if (r.exit_code <= 1 && !r.out.empty()) {
      json doc = json::parse(r.out);
      doc["exit_code"] = r.exit_code;
      if (ready(doc)) return doc;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      INFO(r.out << r.err);
      FAIL("the process did not publish what the test waits for");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// START -> (SIZE, name) of the perf map's complete lines (later lines win, as in perf). The
// runtimes write it into runtime_dir() (JITUNWIND_DIR), where the tool must find it by itself.
std::map<uint64_t, std::pair<uint64_t, std::string>> perf_map(pid_t pid) {
  std::map<uint64_t, std::pair<uint64_t, std::string>> out;
  std::ifstream in(runtime_dir() + "/perf-" + std::to_string(pid) + ".map");
  std::string line;
  while (std::getline(in, line) && !in.eof()) {
    std::istringstream f(line);
    std::string start, size, name;
    f >> start >> size >> std::ws;
    std::getline(f, name);
    out[std::stoull(start, nullptr, 16)] = {std::stoull(size, nullptr, 16), name};
  }
  return out;
}

// Whether [start, start + size) lies in one executable mapping of the process.
bool in_executable_mapping(pid_t pid, uint64_t start, uint64_t size) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream f(line);
    std::string range, perms;
    f >> range >> perms;
    const uint64_t lo = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uint64_t hi = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (perms.size() > 2 && perms[2] == 'x' && start >= lo && start + size <= hi) return true;
  }
  return false;
}

const std::string programs = std::string(JITUNWIND_SOURCE_DIR) + "/examples/toy-jit/programs/";

}  // namespace

#ifdef TOY_JIT
TEST_CASE("windows list: toy-interp and toy-jit --sframe-version=2 say their SFrame version") {
  for (const bool interp : {true, false}) {
    const std::vector<std::string> command =
        interp ? std::vector<std::string>{TOY_INTERP, programs + "spin.toy", "100000000"}
               : std::vector<std::string>{TOY_JIT, "--sframe-version=2", programs + "spin.toy",
                                          "100000000"};
    background target(command);
    REQUIRE(target.pid() > 0);
    const json doc = list_when(
        target.pid(), [](const json& d) { return d["summary"]["functions"].get<int>() >= 1; }, {});
    INFO(doc.dump(2));
    CHECK(doc["exit_code"] == 0);
    REQUIRE(!doc["windows"].empty());
    for (const json& w : doc["windows"]) {
      CHECK(w["usable"] == true);
      CHECK(w["sframe_version"] == (interp ? 3 : 2));
    }
  }
}

TEST_CASE("windows list: toy-jit's windows and functions, as its perf map and maps say") {
  background jit({TOY_JIT, "--frame-pointers=off", programs + "spin.toy", "100000000"});
  REQUIRE(jit.pid() > 0);
  // The perf map is batched by default (up to 10 ms behind the registry, longer on a loaded
  // CPU): wait until it names every function the registry lists.
  const auto all_named = [](const json& d) {
    if (d["summary"]["functions"].get<int>() < 5) return false;
    for (const json& w : d["windows"])
      for (const json& f : w["functions"])
        if (!f["name"].is_string()) return false;
    return true;
  };
  const json doc = list_when(jit.pid(), all_named, {"--functions"});
  INFO(doc.dump(2));
  CHECK(doc["exit_code"] == 0);
  CHECK(doc["pid"] == jit.pid());
  REQUIRE(doc["registries"].size() == 1);
  CHECK(doc["registries"][0]["object"].get<std::string>().find("libjitunwind") !=
        std::string::npos);
  CHECK(doc["summary"]["unusable"] == 0);

  const auto names = perf_map(jit.pid());
  std::set<std::string> seen;
  for (const json& w : doc["windows"]) {
    CHECK(w["usable"] == true);
    CHECK(w["abi"] == "amd64");
    CHECK(w["sframe_version"] == 3);  // what an SDK session publishes by default
    CHECK(w["state"] == "live");
    const uint64_t text = w["text_start"], text_size = w["text_size"];
    CHECK(w["function_count"] == w["functions"].size());
    for (const json& f : w["functions"]) {
      const uint64_t start = f["start"], size = f["size"];
      CHECK(start >= text);
      CHECK(start + size <= text + text_size);
      CHECK(in_executable_mapping(jit.pid(), start, size));
      // The perf map (another publisher) has the same function, size and name.
      auto it = names.find(start);
      REQUIRE(it != names.end());
      CHECK(it->second.first == size);
      CHECK(f["name"] == it->second.second);
      seen.insert(f["name"].get<std::string>());
    }
  }
  for (const char* fn : {"toy:main", "toy:level", "toy:compute"}) CHECK(seen.count(fn) == 1);

  // The text form, with functions and with the full SFrame rows.
  auto text = run_tool({"windows", "list", "-p", std::to_string(jit.pid()), "--functions"});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("0 unusable") != std::string::npos);
  CHECK(text.out.find("(generation ") != std::string::npos);
  CHECK(text.out.find(" toy:main\n") != std::string::npos);
  auto rows = run_tool({"windows", "list", "-p", std::to_string(jit.pid()), "--rows"});
  CHECK(rows.exit_code == 0);
  CHECK(rows.out.find("Function 0 <toy:") != std::string::npos);
  CHECK(rows.out.find("CFA fixed RA offset:     -8") != std::string::npos);
}

TEST_CASE("windows watch: toy-jit recompiling: windows published, updated, retired, freed") {
  // Each recompiled function is published into the current window, one 4 KiB page per publish
  // (W^X: published pages are not written again), so a 64 KiB window takes 16 publishes before
  // it is full and a new one opens; here a window fills in ~80 ms, ~5 ms per publish. Polls
  // every 5 ms see windows published, updated while they fill, retired and freed (~35 of each).
  // The margin matters: with windows filled in 8 ms a fast or loaded machine could fill a window
  // between two polls, and no update was seen.
  background jit({TOY_JIT, "--frame-pointers=off", "--windows=64k", "--recompile-every=1000000",
                  programs + "recompile.toy", "300000000"});
  REQUIRE(jit.pid() > 0);
  list_when(jit.pid(), [](const json& d) { return !d["windows"].empty(); });
  auto r = run_tool({"windows", "watch", "-p", std::to_string(jit.pid()), "--json", "--seconds",
                     "3", "--interval-ms", "5"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("time limit after") != std::string::npos);
  // What the events say of each window id must add up: a window is announced (present,
  // published, or first seen retired) before it is updated, retired or freed, each event carries
  // a newer generation than the last one known of it (or, for retired, the same), and freed
  // names the generation last announced.
  std::map<std::string, int> events;
  std::map<uint64_t, std::pair<uint64_t, std::string>> known;  // id -> (generation, state)
  double last = 0;
  bool first = true;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line);
    const std::string ev = e["event"];
    ++events[ev];
    INFO(line);
    if (first) CHECK(ev == "present");
    first = false;
    CHECK(e["time"].get<double>() >= last);
    last = e["time"];
    const uint64_t id = e["id"], generation = e["generation"];
    auto it = known.find(id);
    if (ev == "freed") {
      REQUIRE(it != known.end());
      CHECK(it->second.first == generation);
      known.erase(it);
      continue;
    }
    CHECK(e["usable"] == true);
    if (ev == "present" || ev == "published") {
      CHECK(it == known.end());
      if (ev == "published") CHECK(e["state"] == "live");
    } else if (ev == "updated") {
      REQUIRE(it != known.end());
      CHECK(it->second.first < generation);
      CHECK(it->second.second == "live");
      CHECK(e["state"] == "live");
    } else {
      REQUIRE(ev == "retired");
      CHECK(e["state"] == "retired");
      if (it != known.end()) CHECK(it->second.first <= generation);
    }
    known[id] = {generation, e["state"]};
  }
  CHECK(events["present"] >= 1);
  CHECK(events["published"] >= 3);
  CHECK(events["updated"] >= 1);
  CHECK(events["retired"] >= 1);
  CHECK(events["freed"] >= 3);
}
#endif

#if defined(JIT_TARGET) && defined(TOY_JIT)
TEST_CASE("windows watch: a process that loads the SDK later, and one that execs a runtime") {
  // A shell that becomes toy-jit a moment later: no registry at first, so watch waits.
  background later({"/bin/sh", "-c",
                    "sleep 3; exec '" + std::string(TOY_JIT) + "' --frame-pointers=off '" +
                        programs + "spin.toy' 0"});
  REQUIRE(later.pid() > 0);
  auto w = run_tool({"windows", "watch", "-p", std::to_string(later.pid()), "--seconds", "8"});
  INFO(w.out << w.err);
  CHECK(w.exit_code == 0);
  CHECK(w.err.find("waiting for the process to load the jitunwind SDK") != std::string::npos);
  // toy-jit's first window is there at the first poll after the exec, or published after it.
  CHECK(std::regex_search(w.out, std::regex(R"((present  |published) window 1 \(generation)")));

  // Waiting ends like watching does: Ctrl-C, the time limit, the output closed, the process
  // gone; exit 0 with the summary (nothing unusable was seen).
  background sleeper({"/bin/sleep", "30"});
  const std::string sleeping = std::to_string(sleeper.pid());
  const auto t0 = std::chrono::steady_clock::now();
  auto limit = run_tool({"windows", "watch", "-p", sleeping, "--seconds", "1"});
  CHECK(limit.exit_code == 0);
  CHECK(limit.err.find("time limit after") != std::string::npos);
  auto ctrl_c = interrupt_watch("-p " + sleeping, "err");  // "waiting for the process ..."
  INFO(ctrl_c.err);
  CHECK(ctrl_c.exit_code == 0);
  CHECK(ctrl_c.err.find("interrupted after") != std::string::npos);
  auto closed = run_shell("'" + tool_path() + "' windows watch -p " + sleeping + " | true",
                          std::chrono::seconds(20));
  INFO(closed.err);
  CHECK(closed.err.find("the output was closed") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  background short_sleep({"/bin/sleep", "3"}, /*reap_in_background=*/true);
  auto gone = run_tool({"windows", "watch", "-p", std::to_string(short_sleep.pid())});
  INFO(gone.err);
  CHECK(gone.exit_code == 0);
  CHECK(gone.err.find("the process exited after") != std::string::npos);
  CHECK(run_tool({"windows", "watch", "-p", std::to_string(short_sleep.pid())}).exit_code == 1);

  // jit_target sets up its own registry, publishes nothing, and execs PROGRAM MS later; the
  // watch starts on the registry that the exec makes disappear.
  const auto watch_exec_later = [](const char* ms, std::vector<std::string> program,
                                   std::vector<std::string> watch_options) {
    std::vector<std::string> argv{JIT_TARGET, "exec-later", ms};
    argv.insert(argv.end(), program.begin(), program.end());
    background target(argv, /*reap_in_background=*/true);
    REQUIRE(target.pid() > 0);
    list_when(target.pid(), [](const json& d) { return d["registries"].size() == 1; });
    std::vector<std::string> watch{"windows", "watch", "-p", std::to_string(target.pid())};
    watch.insert(watch.end(), watch_options.begin(), watch_options.end());
    return run_tool(watch);
  };
  // Into toy-jit: its registry (in libjitunwind) must be found.
  // 3 s: the watch must have taken its first look before the exec, however loaded the machine.
  auto e = watch_exec_later("3000", {TOY_JIT, "--frame-pointers=off", programs + "spin.toy", "0"},
                            {"--seconds", "8"});
  INFO(e.out << e.err);
  CHECK(e.exit_code == 0);
  CHECK(e.out.find("published window 1 (generation") != std::string::npos);
  CHECK(e.out.find("present") == std::string::npos);  // nothing was published before the exec

  // Into an image without the SDK: the watch waits (no failure) until the process ends.
  auto n = watch_exec_later("500", {"/bin/sleep", "2"}, {"--interval-ms", "5"});
  INFO(n.out << n.err);
  CHECK(n.exit_code == 0);
  CHECK(n.err.find("waiting for the process to load the jitunwind SDK") != std::string::npos);
  CHECK(n.err.find("the process exited after") != std::string::npos);
}
#endif

#ifdef TOY_JIT
TEST_CASE("windows list: functions whose batched perf map lines are not written yet are counted") {
  // A minute of flush latency: the window is in the registry long before its names reach the
  // file, as for the 10 ms of the default on a busy machine.
  background jit({"/usr/bin/env", "JITUNWIND_PUBLISH=registry,perfmap", "JITUNWIND_FLUSH_MS=60000",
                  TOY_JIT, "--frame-pointers=off", programs + "spin.toy", "100000000"});
  REQUIRE(jit.pid() > 0);
  list_when(jit.pid(), [](const json& d) { return d["summary"]["functions"].get<int>() >= 5; });
  auto r = run_tool({"windows", "list", "-p", std::to_string(jit.pid()), "--functions"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("note: 5 functions of live windows not in the perf map (yet)"));
  CHECK_THAT(r.out, !Catch::Contains("toy:main"));
  // Without --functions or --rows no names are read, and nothing is said.
  auto plain = run_tool({"windows", "list", "-p", std::to_string(jit.pid())});
  CHECK(plain.err.find("perf map") == std::string::npos);
}
#endif

#ifdef JIT_TARGET
TEST_CASE("windows list: windows whose SFrame a profiler cannot use are named, with why") {
  background target(
      {JIT_TARGET, "hostile", "--depth", "4", "--spin", "1", "--no-checkpoint", "--seconds", "20"});
  REQUIRE(target.pid() > 0);
  const json doc = list_when(target.pid(), [](const json& d) {
    for (const json& w : d["windows"])
      if (w["id"] == 13) return true;
    return false;
  });
  INFO(doc.dump(2));
  CHECK(doc["exit_code"] == 1);
  std::map<uint64_t, std::string> why;
  for (const json& w : doc["windows"])
    if (w["usable"] == false) why[w["id"]] = w["why"];
  CHECK(why.size() == 4);
  CHECK(why.count(10) == 1);
  CHECK(why[11].find("past the end of the function") != std::string::npos);
  CHECK(why[12].find("outside its text") != std::string::npos);
  CHECK(why.count(13) == 1);
  CHECK(doc["summary"]["unusable"] == 4);
  auto text = run_tool({"windows", "list", "-p", std::to_string(target.pid())});
  CHECK(text.exit_code == 1);
  CHECK(text.out.find("window 11 (generation") != std::string::npos);
  CHECK(text.out.find("UNUSABLE: ") != std::string::npos);
}

TEST_CASE("windows watch: ends with the process, and usage errors") {
  background target(
      {JIT_TARGET, "deep", "--depth", "4", "--spin", "1", "--no-checkpoint", "--seconds", "2"},
      /*reap_in_background=*/true);
  REQUIRE(target.pid() > 0);
  list_when(target.pid(), [](const json& d) { return !d["windows"].empty(); });
  // The target runs 2 s of CPU time, which a busy machine stretches to 10 s of wall time and
  // more: that the watch ended because the process exited is what is measured, not how soon.
  auto r = run_tool({"windows", "watch", "-p", std::to_string(target.pid())});
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("the process exited after") != std::string::npos);
  CHECK(r.out.find("present   window 1 (generation") != std::string::npos);
  CHECK(target.join() == 0);

  CHECK(run_tool({"windows", "list"}).exit_code == 2);
  CHECK(run_tool({"windows", "list", "-p", "1", "--rows", "--json"}).exit_code == 2);
  CHECK(run_tool({"windows", "list", "-p", "1", "--perf-map="}).exit_code == 2);
  CHECK(run_tool({"windows", "list", "-p", "x"}).exit_code == 2);
  CHECK(run_tool({"windows", "watch", "-p", "1", "--interval-ms", "0"}).exit_code == 2);
  CHECK(run_tool({"windows", "watch", "-p", "1", "--seconds", "x"}).exit_code == 2);
  // A process without the SDK, and one that does not exist (the reaped target).
  background sleeper({"/bin/sleep", "30"});
  auto none = run_tool({"windows", "list", "-p", std::to_string(sleeper.pid())});
  INFO(none.err);
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("jitunwind_registry") != std::string::npos);
  auto gone = run_tool({"windows", "list", "-p", std::to_string(target.pid())});
  CHECK(gone.exit_code == 1);
  CHECK(gone.err.find(std::to_string(target.pid())) != std::string::npos);
}
TEST_CASE("windows list/watch: a process whose main thread has ended is read through another") {
  // --jit-thread: the main thread leaves by pthread_exit at once (a zombie whose /proc files
  // show no memory); a second thread publishes and runs the JIT code.
  background target({JIT_TARGET, "deep", "--depth", "4", "--spin", "1", "--no-checkpoint",
                     "--seconds", "20", "--jit-thread"});
  REQUIRE(target.pid() > 0);
  const json doc = list_when(target.pid(), [](const json& d) { return d["windows"].size() >= 2; });
  CHECK(doc["exit_code"] == 0);
  CHECK(doc["pid"] == target.pid());
  auto w = run_tool({"windows", "watch", "-p", std::to_string(target.pid()), "--seconds", "1"});
  INFO(w.out << w.err);
  CHECK(w.exit_code == 0);
  CHECK(w.err.find("time limit after") != std::string::npos);  // not "the process exited"
  CHECK(w.out.find("present   window 1 (generation") != std::string::npos);
}

TEST_CASE("windows list/watch: perf maps given by hand, odd names, a closed output") {
  background target(
      {JIT_TARGET, "deep", "--depth", "4", "--spin", "1", "--no-checkpoint", "--seconds", "20"});
  REQUIRE(target.pid() > 0);
  const json doc =
      list_when(target.pid(), [](const json& d) { return !d["windows"].empty(); }, {"--functions"});
  const uint64_t start = doc["windows"][0]["functions"][0]["start"];
  const std::string pid = std::to_string(target.pid());

  // A name that is not UTF-8 still gives valid JSON (the byte replaced), and the map given
  // with --perf-map wins over the process's own.
  temp_dir dir;
  char line[128];
  std::snprintf(line, sizeof line, "%llx 10 caf\xe9 \x01odd\n",
                static_cast<unsigned long long>(start));
  REQUIRE(write_file(dir / "odd.map", line));
  auto odd =
      run_tool({"windows", "list", "-p", pid, "--json", "-f", "--perf-map", dir / "odd.map"});
  INFO(odd.out << odd.err);
  REQUIRE(odd.exit_code == 0);
  const json parsed = json::parse(odd.out);
  CHECK(parsed["windows"][0]["functions"][0]["name"] == "caf\xef\xbf\xbd \x01odd");

  // A perf map given by hand must be a regular file that exists.
  auto missing = run_tool({"windows", "list", "-p", pid, "--perf-map", dir / "none.map"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("none.map") != std::string::npos);
  auto directory = run_tool({"windows", "list", "-p", pid, "--perf-map", dir.path()});
  CHECK(directory.exit_code == 1);
  CHECK(directory.err.find("not a regular file") != std::string::npos);

  // Nothing changes in this process after its first windows: a watch whose reader has gone
  // must end by itself, not wait for an event to write.
  const auto t0 = std::chrono::steady_clock::now();
  auto piped = run_shell("'" + tool_path() + "' windows watch -p " + pid + " | head -1",
                         std::chrono::seconds(15));
  INFO(piped.out << piped.err);
  CHECK(piped.exit_code == 0);
  CHECK(piped.out.find("present") != std::string::npos);
  CHECK(piped.err.find("the output was closed") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

  // Ctrl-C (SIGINT) with a long interval ends the watch at once.
  const auto t1 = std::chrono::steady_clock::now();
  auto interrupted = interrupt_watch("-p " + pid + " --interval-ms 60000", "out");  // "present"
  INFO(interrupted.err);
  CHECK(interrupted.exit_code == 0);
  CHECK(interrupted.err.find("interrupted after") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(10));
}
#endif

TEST_CASE("windows list: the publishers' states the process reports, warnings with the last one") {
  temp_dir dir;
  // The one-call on-ramp with code packed by the runtime and the jitdump on: the jitdump
  // publisher warns for every function perf inject will cut (tests/window/targets/perf_paths).
  background target({"/usr/bin/env", "JITUNWIND_DIR=" + dir.path(), "JITDUMPDIR=" + dir.path(),
                     "JITUNWIND_PUBLISH=registry,perfmap,jitdump", PERF_PATHS, "--path", "onecall",
                     "--shape", "packed", "--ms", "60000"});
  REQUIRE(target.pid() > 0);
  const auto warned = [](const json& d) {
    for (const json& p : d["publishers"])
      if (p["publisher"] == "jitdump" && p["warnings"].get<int>() >= 3) return true;
    return false;
  };
  const json doc = list_when(target.pid(), warned);
  INFO(doc.dump(2));
  CHECK(doc["publishers_skipped"].empty());
  std::map<std::string, json> by_name;
  for (const json& p : doc["publishers"]) by_name[p["publisher"]] = p;
  // The publishers asked for, nothing else; all in the on-ramp's one session.
  REQUIRE(by_name.size() == 3);
  for (const auto& [name, p] : by_name) {
    CHECK(p["state"] == "active");
    CHECK(p["session"] == doc["publishers"][0]["session"]);
  }
  CHECK_THAT(by_name["perfmap"]["message"].get<std::string>(), Catch::Contains(dir.path()));
  CHECK(by_name["perfmap"]["warnings"] == 0);
  // Four functions back to back: each of the last three lies where perf maps the one before.
  CHECK(by_name["jitdump"]["warnings"] == 3);
  CHECK_THAT(by_name["jitdump"]["last_warning"].get<std::string>(),
             Catch::Contains("perf --call-graph dwarf cannot unwind through"));
  // The C caller is told in C names (the on-ramp is the C API).
  CHECK_THAT(by_name["jitdump"]["last_warning"].get<std::string>(),
             Catch::Contains("jitunwind_perf_code_gap()"));

  auto text = run_tool({"windows", "list", "-p", std::to_string(target.pid())});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("  jitdump (session "));
  CHECK_THAT(text.out, Catch::Contains("): active, writing "));
  CHECK_THAT(text.out, Catch::Contains("; 3 warnings, the last: "));
}
