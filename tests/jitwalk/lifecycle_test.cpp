// Acceptance (issue 18): runtimes that recompile into reused windows and recycled memory,
// profiled 20 times in a row: every sample is named by the code live at that moment, and
// jitwalk verify stays exact. Targets: tests/window/recompile_jit (each version's name says
// which native function it calls, so a misnamed frame shows) and toy-jit's recompile.toy (a
// JIT frame named after another function makes a call the program never makes).
#include <catch2/catch.hpp>

#if !defined(JITWALK_TESTS_DISABLED)
#include <chrono>
#include <cstdio>
#include <set>

#include "jitwalk_support.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

std::string recompile_jit() {
  return jt::binary_path("tests/window/recompile_jit");
}

std::vector<std::string> split_frames(const std::string& stack) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= stack.size()) {
    const size_t semi = stack.find(';', at);
    out.push_back(stack.substr(at, semi == std::string::npos ? std::string::npos : semi - at));
    if (semi == std::string::npos) break;
    at = semi + 1;
  }
  return out;
}

struct naming_count {
  uint64_t checked = 0;   // samples with a JIT frame whose name can be checked
  uint64_t misnamed = 0;  // ... named after other code
  uint64_t unnamed = 0;   // JIT-looking frames without a name
  std::vector<std::string> examples;
};

// recompile_jit: a frame "work_v<k>_s<r>" must call "spin<r>" (when its callee is a spin).
void count_recompile_jit(const std::map<std::string, uint64_t>& folded, naming_count& c) {
  for (const auto& [stack, n] : folded) {
    const auto frames = split_frames(stack);
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      const std::string& f = frames[i];
      const std::string& callee = frames[i + 1];
      // Unnamed code: one frame per mapping ("[anon:...]", "[memfd:...]") or per address.
      const bool unnamed =
          f.rfind("[unknown", 0) == 0 || f.rfind("[anon:", 0) == 0 || f.rfind("[memfd:", 0) == 0;
      if (unnamed && callee.rfind("spin", 0) == 0) c.unnamed += n;
      if (f.rfind("work_v", 0) != 0 || callee.rfind("spin", 0) != 0) continue;
      c.checked += n;
      const char want = f.back();
      if (callee.size() != 5 || callee[4] != want) {
        c.misnamed += n;
        if (c.examples.size() < 5) c.examples.push_back(stack);
      }
    }
  }
}

// toy-jit recompile.toy: main -> outer -> middle (-> middle)* -> leaf.
void count_toy_jit(const std::map<std::string, uint64_t>& folded, naming_count& c) {
  static const std::set<std::pair<std::string, std::string>> calls = {{"toy:main", "toy:outer"},
                                                                      {"toy:outer", "toy:middle"},
                                                                      {"toy:middle", "toy:middle"},
                                                                      {"toy:middle", "toy:leaf"}};
  for (const auto& [stack, n] : folded) {
    const auto frames = split_frames(stack);
    bool checked = false, wrong = false;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      if (frames[i].rfind("toy:", 0) != 0 || frames[i + 1].rfind("toy:", 0) != 0) continue;
      checked = true;
      if (!calls.count({frames[i], frames[i + 1]})) wrong = true;
    }
    if (!checked) continue;
    c.checked += n;
    if (wrong) {
      c.misnamed += n;
      if (c.examples.size() < 5) c.examples.push_back(stack);
    }
  }
}

std::map<std::string, uint64_t> profile(const std::vector<std::string>& command,
                                        const std::vector<std::string>& options, std::string& log) {
  jt::temp_dir dir;
  std::vector<std::string> argv = {jitwalk(),  "profile",         "-q", "-F", "997",
                                   "--folded", dir / "out.folded"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  const auto r = jt::run(argv, {}, std::chrono::seconds(120));
  log = r.out + r.err;
  REQUIRE(r.exit_code == 0);
  return parse_folded(jt::read_file(dir / "out.folded"));
}

// Each run's addresses are reused: versions go where the previous one was. `--ms` is CPU time:
// the same number of samples however busy the machine.
std::vector<std::string> recompile_jit_command(int run) {
  return {"env",
          "JITUNWIND_ADDRESS_REUSE=allowed",
          recompile_jit(),
          "--versions",
          "8",
          "--ms",
          "60",
          "--mode",
          run % 2 == 0 ? "reuse" : "recycle",
          "--publish",
          "registry,usdt-events"};
}

}  // namespace

TEST_CASE(
    "acceptance: recompiling runtimes profiled 20 times, every sample named by the code live "
    "then") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  naming_count jit, toy;
  for (int run = 0; run < 20; ++run) {
    std::string log;
    // jitwalk execs `env`: its pid is the runtime's.
    const auto folded = profile(recompile_jit_command(run), {}, log);
    INFO("run " << run << "\n" << log);
    const uint64_t before = jit.checked;
    count_recompile_jit(folded, jit);
    CHECK(jit.checked - before >= 50);
#ifdef JITWALK_HAVE_EXAMPLES
    jt::temp_dir dir;
    const auto toy_folded =
        profile({"env", "JITUNWIND_ADDRESS_REUSE=allowed", "JITUNWIND_DIR=" + dir.path(),
                 jt::binary_path("examples/toy-jit/toy-jit"), "--frame-pointers=off",
                 "--recompile-every=40", "--windows=4096",
                 jt::source_path("examples/toy-jit/programs/recompile.toy"), "2000"},
                {}, log);
    // A run publishes ~1500 windows in ~0.1 s of CPU: how many of its ~90 samples are walked
    // with their window's rows (two toy frames, checked) depends on how soon jitwalk loads each
    // one (22 to 55 at load 15, 9 at load 30). Every run checks some; the 20 runs at least 200.
    const uint64_t toy_before = toy.checked;
    count_toy_jit(toy_folded, toy);
    CHECK(toy.checked > toy_before);
#endif
  }
#ifdef JITWALK_HAVE_EXAMPLES
  CHECK(toy.checked >= 200);
#endif
  std::string examples;
  for (const auto& e : jit.examples) examples += "  " + e + "\n";
  for (const auto& e : toy.examples) examples += "  " + e + "\n";
  INFO("recompile_jit: " << jit.checked << " samples checked, " << jit.misnamed << " misnamed, "
                         << jit.unnamed << " unnamed; toy-jit: " << toy.checked << " checked, "
                         << toy.misnamed << " misnamed\n"
                         << examples);
  CHECK(jit.misnamed == 0);
  CHECK(toy.misnamed == 0);
  CHECK(jit.unnamed * 100 <= jit.checked);
}

TEST_CASE("acceptance: jitwalk verify of recompiling runtimes, 20 times: exact, names right") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  for (int run = 0; run < 20; ++run) {
    jt::run_result r;
    auto command = recompile_jit_command(run);
    command.insert(command.end(), {"--checkpoint", "20"});
    auto j = verify(command, &r);
    INFO("run " << run << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const int n = j["checkpoints"].get<int>();
    CHECK(n >= 20);
    CHECK(j["exact"] == n);
    CHECK(j["stale_uses"] == 0);
    CHECK(j["misnamed"] == 0);
    CHECK(j["named_frames"].get<int>() >= n);
#ifdef JITWALK_HAVE_EXAMPLES
    jt::temp_dir dir;
    auto t = verify({"env", "JITUNWIND_ADDRESS_REUSE=allowed", "JITUNWIND_DIR=" + dir.path(),
                     jt::binary_path("examples/toy-jit/toy-jit"), "--frame-pointers=off",
                     "--shadow-stack", "--recompile-every=2", "--windows=4096",
                     jt::source_path("examples/toy-jit/programs/verify.toy"), "2"},
                    &r);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(t["exact"] == t["checkpoints"]);
    CHECK(t["misnamed"] == 0);
    CHECK(t["windows_freed"].get<int>() >= 10);
#endif
  }
}

TEST_CASE("sub-page publishing: 1000 functions of 48 bytes, unwound by jitwalk") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  std::string log;
  const auto folded = profile({recompile_jit(), "--small", "1000", "--ms", "1500", "--layout",
                               "shared-alias", "--publish", "registry,usdt-events"},
                              {}, log);
  INFO(log);
  uint64_t in_small = 0, reach_main = 0;
  std::set<std::string> names;
  for (const auto& [stack, n] : folded) {
    const auto frames = split_frames(stack);
    for (size_t i = 0; i < frames.size(); ++i) {
      if (frames[i].rfind("small_", 0) != 0) continue;
      in_small += n;
      names.insert(frames[i]);
      if (i >= 2 && frames[i - 1] == "drive" && frames[i - 2] == "main") reach_main += n;
      break;
    }
  }
  CHECK(in_small >= 500);
  CHECK(names.size() >= 200);  // many distinct functions named
  CHECK(reach_main * 100 >= in_small * 99);
}
#endif
