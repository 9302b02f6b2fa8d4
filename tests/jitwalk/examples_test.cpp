// Acceptance tests against the example runtimes (examples/toy-jit, examples/interpreter) and
// their ground truth (docs/ground-truth.md). Compiled in once the examples are part of the tree.
#include <catch2/catch.hpp>

#if !defined(JITWALK_TESTS_DISABLED) && defined(JITWALK_HAVE_EXAMPLES)
#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "jitwalk_support.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

std::string toy_jit() {
  return jt::binary_path("examples/toy-jit/toy-jit");
}
std::string toy_interp() {
  return jt::binary_path("examples/interpreter/toy-interp");
}
std::string program(const char* name) {
  return jt::source_path(std::string("examples/toy-jit/programs/") + name);
}

// Samples of a folded profile with a JIT frame, those whose JIT frames are all named, and those
// named wrongly. A frame is JIT code if it is named "toy:..." or is an unnamed address
// ("[unknown 0x...]") inside a function toy-jit compiled (`ranges`: start, size). spin.toy's
// calls go main -> level -> ... -> level -> compute | work_fp | work_nofp: named toy frames in
// any other order are misnamed (a name from other code at the address, or a wrong line).
struct jit_naming {
  uint64_t jit = 0, named = 0, misnamed = 0;
  std::string unnamed_example, misnamed_example;
};

jit_naming count_jit_naming(const std::map<std::string, uint64_t>& folded,
                            const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  const auto in_jit = [&](uint64_t pc) {
    for (const auto& [start, size] : ranges)
      if (pc >= start && pc <= start + size) return true;  // <=: a return address at the end
    return false;
  };
  // The toy frames of a stack, outermost first (a cut stack may start below toy:main).
  static const std::regex spin_calls(
      R"(^(toy:main;)?(toy:level;)*toy:(main|level|compute|work_fp|work_nofp);$)");
  jit_naming n;
  for (const auto& [stack, count] : folded) {
    bool jit = false, unnamed = false;
    // The toy frames, in chains split where a caller was taken from the return address at SP
    // (jitwalk::sp_mark): a leaf without rows yet may have a frame of its own, and then [SP] can
    // hold an earlier call's return address. Such a frame is named rightly for its address, but
    // the call it implies is a guess, not evidence about names.
    std::vector<std::string> toy_chains(1);
    std::istringstream frames(stack);
    for (std::string f; std::getline(frames, f, ';');) {
      // A frame found by a frame-pointer step is marked (jitwalk::fp_mark); its name is judged
      // like any other.
      if (const std::string_view mark = "_[fp]"; f.ends_with(mark))
        f.resize(f.size() - mark.size());
      bool from_sp = false;
      if (const std::string_view mark = "_[sp]"; f.ends_with(mark)) {
        f.resize(f.size() - mark.size());
        from_sp = true;
      }
      if (f.starts_with("toy:")) {
        jit = true;
        toy_chains.back() += f + ";";
      }
      if (from_sp && !toy_chains.back().empty()) toy_chains.emplace_back();
      unsigned long long pc = 0;
      if (std::sscanf(f.c_str(), "[unknown 0x%llx]", &pc) == 1 && in_jit(pc)) jit = unnamed = true;
    }
    if (!jit) continue;
    n.jit += count;
    if (!unnamed) n.named += count;
    if (unnamed && n.unnamed_example.empty()) n.unnamed_example = stack;
    const bool misnamed = std::any_of(toy_chains.begin(), toy_chains.end(), [](const auto& c) {
      return !c.empty() && !std::regex_match(c, spin_calls);
    });
    if (misnamed) {
      n.misnamed += count;
      if (n.misnamed_example.empty()) n.misnamed_example = stack;
    }
  }
  return n;
}

// Profiles toy-jit running spin.toy (one publish at start-up, then it only runs; a fixed amount
// of work, ~1.5 s of CPU, however loaded the machine) with `env` settings for the SDK; returns
// the JIT naming of its samples. toy-jit --dump-frames prints where its functions are (to
// jitwalk's standard error, which the child shares). jitwalk symbolizes new stacks every second
// while the process runs; frames still unnamed then are named again at the end (late names),
// unless `--early-names` is in `options`. Unnamed frames stay one per address
// (--raw-addresses), so that they can be told to be JIT code.
jit_naming profile_spin(const std::vector<std::string>& env,
                        const std::vector<std::string>& options = {}) {
  jt::temp_dir dir;
  std::vector<std::string> argv = {jitwalk(),     "profile",        "-F", "999", "--folded",
                                   dir / "f.txt", "--raw-addresses"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--", "env"});
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(),
              {toy_jit(), "--frame-pointers=on", "--dump-frames", program("spin.toy"), "160000"});
  auto r = jt::run(argv, {}, std::chrono::seconds(120));
  remove_tmp_files_of(r);  // the perf map toy-jit wrote in /tmp (jitwalk reads it there)
  INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  static const std::regex function_line(R"(^toy:\S+ at 0x([0-9a-f]+), (\d+) bytes)");
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    std::smatch m;
    if (std::regex_search(line, m, function_line))
      ranges.emplace_back(std::stoull(m[1].str(), nullptr, 16), std::stoull(m[2].str()));
  }
  REQUIRE(ranges.size() >= 4);
  const jit_naming n = count_jit_naming(parse_folded(jt::read_file(dir / "f.txt")), ranges);
  REQUIRE(n.jit > 500);
  return n;
}

// Every JIT sample is named (late names name what the first look could not), and rightly: the
// samples are counted, not a share of them, so one wrong or missing name fails.
void check_named_rightly(const jit_naming& n) {
  INFO(n.named << " of " << n.jit << " JIT samples named; unnamed e.g. " << n.unnamed_example
               << "; " << n.misnamed << " misnamed, e.g. " << n.misnamed_example);
  CHECK(n.named == n.jit);
  CHECK(n.misnamed == 0);
}

}  // namespace

TEST_CASE("acceptance: toy-jit without frame pointers, verify.toy, 100% exact, FP walk cut") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j =
      verify({toy_jit(), "--frame-pointers=off", "--shadow-stack", program("verify.toy"), "5"}, &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const int n = j["checkpoints"].get<int>();
  CHECK(n > 100);
  CHECK(j["exact"] == n);
  CHECK(j["complete"] == n);
  CHECK(j["max_truth"].get<int>() >= 100);
  CHECK(j["stale_uses"] == 0);
  // The kernel's frame-pointer walk on the same events: it gets the helper's caller at best
  // (the helper keeps a frame pointer), then the JIT code's RBP sends it astray.
  int lost_early = 0;
  for (const auto& [k, c] : j["fp_lost_at"].items()) {
    if (std::stoi(k) <= 1) lost_early += c.get<int>();
  }
  CHECK(lost_early + j["fp_exact"].get<int>() == n);
  CHECK(j["fp_exact"].get<int>() * 100 <= n);
}

TEST_CASE("acceptance: toy-jit with SFrame v2 windows (--sframe-version=2), 100% exact") {
  // The default run above publishes SFrame v3 windows; the same with v2 windows.
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify({toy_jit(), "--frame-pointers=off", "--shadow-stack", "--sframe-version=2",
                   program("verify.toy"), "3"},
                  &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const int n = j["checkpoints"].get<int>();
  CHECK(n > 50);
  CHECK(j["exact"] == n);
  CHECK(j["complete"] == n);
}

TEST_CASE("acceptance: interpreter trampolines (toy:<fn> frames), 100% exact") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify({toy_interp(), program("verify.toy"), "2"}, &r, {"--print-walks", "1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const int n = j["checkpoints"].get<int>();
  CHECK(n > 50);
  CHECK(j["exact"] == n);
  CHECK(j["max_truth"].get<int>() >= 100);
  CHECK_THAT(r.out, Catch::Contains(" toy:main  [table, jit]"));
}

TEST_CASE("acceptance: toy-jit recompiling into small windows retired and reused while verifying") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify({toy_jit(), "--frame-pointers=off", "--shadow-stack", "--recompile-every=2",
                   "--windows=4096", program("verify.toy"), "5"},
                  &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const int n = j["checkpoints"].get<int>();
  CHECK(n > 100);
  CHECK(j["exact"] == n);
  CHECK(j["stale_uses"] == 0);
  CHECK(j["windows_freed"].get<int>() >= 50);
  CHECK(j["windows_loaded"].get<int>() >= j["windows_freed"].get<int>());
}

TEST_CASE("acceptance: profile toy-jit: toy chains in folded stacks, SVG in Chromium, pprof") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // A fixed amount of work (~1 s of CPU here), not a duration: a profile at a fixed rate of
  // CPU time then has as many samples however loaded the machine is.
  auto r = jt::run({jitwalk(), "profile", "-F", "499", "--folded", dir / "f.txt", "--svg",
                    dir / "f.svg", "--pprof", dir / "p.pb.gz", "--", toy_jit(),
                    "--frame-pointers=off", program("spin.toy"), "150000"},
                   {}, std::chrono::seconds(300));
  remove_tmp_files_of(r);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  const uint64_t n = total(folded);
  // One sample per 1/499 s of the command's CPU time (cpu-clock counts the time it ran, however
  // long it waited): none lost. Not a fixed count: the work takes ~1 s of CPU here, more or
  // less on other machines.
  std::smatch cpu;
  static const std::regex cpu_line(R"(command: exited with status 0, ([0-9.]+) s CPU)");
  REQUIRE(std::regex_search(r.err, cpu, cpu_line));
  const double expected = std::stod(cpu[1].str()) * 499;
  CHECK(static_cast<double>(n) >= expected * 0.9);
  REQUIRE(n > 200);  // tens of samples in each of the shares below
  // spin.toy: main -> level x13 -> compute | work_fp -> native_fp | work_nofp -> native_nofp.
  std::string chain = ";main;toy:main";
  for (int i = 0; i < 13; ++i) chain += ";toy:level";
  uint64_t compute = 0, fp = 0, nofp = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.find(chain + ";toy:compute") != std::string::npos) compute += count;
    if (stack.find(chain + ";toy:work_fp;toylang_native_fp") != std::string::npos) fp += count;
    if (stack.find(chain + ";toy:work_nofp;toylang_native_nofp") != std::string::npos)
      nofp += count;
  }
  INFO(jt::read_file(dir / "f.txt").substr(0, 4000));
  CHECK(compute > n / 10);
  CHECK(fp > n / 20);
  CHECK(nofp > n / 20);
  CHECK((compute + fp + nofp) * 10 >= n * 9);

  if (jt::tool_available("protoc")) {
    CHECK_THAT(decode_pprof(dir / "p.pb.gz"), Catch::Contains("string_table: \"toy:compute\""));
  }
  if (jt::tool_available("chromium")) {
    CHECK(green_pixels(dir / "f.svg", dir / "f.png", "1200,700") > 50000);
  }
}
TEST_CASE(
    "acceptance: a live profiler names every JIT sample rightly with batched file publishers") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // toy-jit publishes its program once, then only runs: without a flusher thread batched
  // records would wait for the next publish or the exit; the thread writes them within 10 ms.
  SECTION("the default session") {
    const jit_naming n = profile_spin({"JITUNWIND_DURABILITY=batched"});
    check_named_rightly(n);
  }
  SECTION("the perf map as the only source of names (no code_add events, no jitdump)") {
    const jit_naming n =
        profile_spin({"JITUNWIND_DURABILITY=batched", "JITUNWIND_PUBLISH=registry,perfmap"});
    check_named_rightly(n);
  }
  SECTION("control: without the flusher thread the perf map is written only at the exit") {
    const jit_naming n =
        profile_spin({"JITUNWIND_DURABILITY=batched", "JITUNWIND_PUBLISH=registry,perfmap",
                      "JITUNWIND_FLUSH_THREAD=off"},
                     {"--early-names"});
    INFO(n.named << " of " << n.jit << " JIT samples named");
    CHECK(n.named * 2 < n.jit);
    CHECK(n.misnamed == 0);
  }
  SECTION("late names: a perf map written only at the exit still names the samples") {
    const jit_naming n =
        profile_spin({"JITUNWIND_DURABILITY=batched", "JITUNWIND_PUBLISH=registry,perfmap",
                      "JITUNWIND_FLUSH_THREAD=off"});
    check_named_rightly(n);
  }
}
#endif
