// jitwalk's names for frames that are not plain functions of a file (the vDSO, PLT entries) and
// the summary's accounting (how the command ended, steps tried and failed). The profiles are
// root-only (BPF); each runs its target for a bounded CPU time (about 2 s, the whole file ~10 s).
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <regex>

#include "jitwalk/elf_file.hpp"
#include "jitwalk_support.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

std::string symbols_target() {
  return jt::binary_path("tests/jitwalk/jitwalk_symbols_target");
}

// Samples whose leaf (last folded frame) is `leaf`, and whether any frame anywhere is `frame`.
uint64_t samples_with_leaf(const std::map<std::string, uint64_t>& folded, const std::string& leaf) {
  uint64_t n = 0;
  for (const auto& [stack, count] : folded) {
    const size_t semi = stack.rfind(';');
    if (stack.substr(semi == std::string::npos ? 0 : semi + 1) == leaf) n += count;
  }
  return n;
}

bool any_frame(const std::map<std::string, uint64_t>& folded, const std::string& frame) {
  for (const auto& [stack, count] : folded) {
    if ((";" + stack + ";").find(";" + frame + ";") != std::string::npos) return true;
  }
  return false;
}

// `jitwalk profile -F 999 --folded F -- symbols_target MODE 2`: ~2 s of the target's CPU time.
std::map<std::string, uint64_t> profile_symbols_target(const std::string& mode, jt::run_result* r) {
  jt::temp_dir dir;
  *r = jt::run({jitwalk_test::jitwalk(), "profile", "-F", "999", "--folded", dir / "s.folded", "--",
                symbols_target(), mode, "2"},
               {}, std::chrono::seconds(60));
  INFO(r->err);
  REQUIRE(r->exit_code == 0);
  return parse_folded(jt::read_file(dir / "s.folded"));
}

}  // namespace

TEST_CASE("PLT entries are named name@plt in the object's symbols, .init's _init stops at .init") {
  auto obj = jitwalk::elf_file::open(symbols_target());
  REQUIRE(obj);
  const auto& img = obj.value()->image();
  const auto* plt =
      img.find_section(".plt.sec") ? img.find_section(".plt.sec") : img.find_section(".plt");
  REQUIRE(plt != nullptr);
  bool labs_plt = false;
  for (uint64_t at = plt->addr; at < plt->addr + plt->size; ++at) {
    const jitwalk::function_symbol* s = obj.value()->find_symbol(at);
    // Every named byte of the PLT is a PLT entry (never _init or another size-0 symbol).
    if (s != nullptr) CHECK_THAT(s->name, Catch::EndsWith("@plt"));
    if (s != nullptr && s->name == "labs@plt") labs_plt = true;
  }
  CHECK(labs_plt);
}

TEST_CASE("vDSO frames are named from the process's [vdso] image") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::run_result r;
  auto folded = profile_symbols_target("vdso", &r);
  const uint64_t all = total(folded);
  // clock_gettime(CLOCK_MONOTONIC) does its work in the vDSO: 15-30 % of ~2000 samples end there
  // (the rest in glibc's wrapper and the loop).
  const uint64_t in_vdso = samples_with_leaf(folded, "__vdso_clock_gettime");
  INFO(r.err);
  INFO(all << " samples, " << in_vdso << " with the leaf __vdso_clock_gettime");
  CHECK(all >= 500);
  CHECK(in_vdso >= 100);
  // No frame of the clock_gettime loop is unnamed code ("[unknown]" is an address outside
  // every mapping: a cut walk's last PC elsewhere may be one; "[vdso]" would be the vDSO's
  // mapping, had its image not been read).
  for (const auto& [stack, count] : folded) {
    if (stack.find(";vdso_loop;") == std::string::npos) continue;
    INFO(stack);
    CHECK(stack.find(";[unknown") == std::string::npos);
    CHECK(stack.find(";[vdso];") == std::string::npos);
    CHECK(stack.substr(stack.size() - 7) != ";[vdso]");
  }
}

TEST_CASE("PLT frames are named name@plt in profiles") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::run_result r;
  auto folded = profile_symbols_target("plt", &r);
  const uint64_t all = total(folded);
  // One jump of labs@plt per call of a few instructions: 2-5 % of ~2000 samples. The PLT's
  // .eh_frame rule (a DWARF expression) becomes a 16-byte PCMASK function, so the walk goes on
  // from there to main and the root.
  const uint64_t in_plt = samples_with_leaf(folded, "labs@plt");
  uint64_t in_plt_rooted = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.size() > 9 && stack.ends_with(";labs@plt") &&
        stack.find(";main;") != std::string::npos && stack.find("[cut") == std::string::npos)
      in_plt_rooted += count;
  }
  INFO(r.err);
  INFO(all << " samples, " << in_plt << " with the leaf labs@plt, " << in_plt_rooted
           << " of them walked through main");
  CHECK(all >= 500);
  // (5: on a loaded machine 8 were seen; what matters is that each of them is walked on.)
  CHECK(in_plt >= 5);
  CHECK(in_plt_rooted == in_plt);
  CHECK_FALSE(any_frame(folded, "_init"));
}

TEST_CASE("the summary says whether the command exited by itself or jitwalk ended it") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // Ended at the end of -d (it would run 60 s of CPU): SIGINT from jitwalk, said so.
  auto ended =
      jt::run({jitwalk_test::jitwalk(), "profile", "-d", "1", "--", symbols_target(), "vdso", "60"},
              {}, std::chrono::seconds(60));
  INFO(ended.err);
  CHECK(ended.exit_code == 0);
  CHECK_THAT(ended.err, Catch::Contains("command: ended by jitwalk (SIGINT) at the end of -d 1,"));
  CHECK_THAT(ended.err, !Catch::Contains("exit status 130"));
  // Exited by itself with a status, and killed by its own signal.
  auto exited = jt::run({jitwalk_test::jitwalk(), "profile", "--", "sh", "-c", "exit 3"});
  INFO(exited.err);
  CHECK(exited.exit_code == 0);
  CHECK_THAT(exited.err, Catch::Contains("; command exited with status 3\n") &&
                             Catch::Contains("command: exited with status 3,"));
  auto killed = jt::run({jitwalk_test::jitwalk(), "profile", "--", "sh", "-c", "kill -SEGV $$"});
  INFO(killed.err);
  CHECK_THAT(killed.err, Catch::Contains("command: killed by signal 11 (SIGSEGV),") &&
                             !Catch::Contains("ended by jitwalk"));
}

TEST_CASE("the end of -d: SIGINT, SIGTERM and SIGKILL after grace periods, or --wait-exit") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // -d counts from the command's start: 1.5 s leave the shell ample time to set its traps.
  auto profile = [](const std::vector<std::string>& options, const std::string& script) {
    std::vector<std::string> argv = {jitwalk_test::jitwalk(), "profile", "-d", "1.5"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", "sh", "-c", script});
    return jt::run(argv, {}, std::chrono::seconds(60));
  };
  // A command that ignores SIGINT gets SIGTERM after the grace period.
  auto term = profile({"--grace", "0.3"}, "trap '' INT; while :; do :; done");
  INFO(term.err);
  CHECK_THAT(term.err, Catch::Contains("command: ended by jitwalk (SIGTERM) at the end of -d"));
  // One that ignores both gets SIGKILL after another.
  auto kill = profile({"--grace", "0.3"}, "trap '' INT TERM; while :; do :; done");
  INFO(kill.err);
  CHECK_THAT(kill.err, Catch::Contains("ended by jitwalk (SIGKILL: still running after SIGINT "
                                       "and SIGTERM)"));
  // --wait-exit: no signal; sampling stops at -d and the command ends by itself.
  auto waited = profile({"--wait-exit"}, "sleep 2.5; exit 4");
  INFO(waited.err);
  CHECK_THAT(waited.err, Catch::Contains("command: exited with status 4,") &&
                             !Catch::Contains("ended by jitwalk"));
}

TEST_CASE("caller steps count the steps tried and those that failed, per method") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // No tables and no frame pointers: nearly every walk fails at its first (frame-pointer) step.
  auto r = jt::run({jitwalk_test::jitwalk(), "profile", "-F", "499", "--native-tables", "none",
                    "--", jt::binary_path("tests/jitwalk/jitwalk_native_target"), "1"},
                   {}, std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  const std::regex samples_re("jitwalk: ([0-9]+) samples of pid");
  REQUIRE(std::regex_search(r.err, m, samples_re));
  const uint64_t samples = std::stoull(m[1]);
  REQUIRE(samples >= 200);
  // Frame-pointer steps over a register the code uses for data: the first step often works, the
  // next fails. Every cut walk failed one step, and the line says so (it used to say "100 %
  // frame-pointer fallback" for the steps made, failures unseen).
  const std::regex fp_re(
      "caller steps: ([0-9]+) tried: 0.0% JIT window tables, 0.0% native .sframe, 0.0% native "
      ".eh_frame, 100.0% frame-pointer fallback \\(([0-9]+) failed, ([0-9.]+)% of its tries\\)");
  REQUIRE(std::regex_search(r.err, m, fp_re));
  const uint64_t tried = std::stoull(m[1]), failed = std::stoull(m[2]);
  CHECK(failed >= samples * 9 / 10);
  CHECK(failed <= samples);
  CHECK(tried >= failed);
  CHECK(std::stod(m[3]) > 10.0);
}

#endif
