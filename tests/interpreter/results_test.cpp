// Every interpreter variant and flag combination prints the same thing; --stats counts calls.
#include "examples_support.hpp"

#include <map>

using jitunwind::test::run;
using namespace toytest;

TEST_CASE("all interpreter variants and flags give the same output") {
  if (examples_missing(TOY_INTERP)) return;
  for (const sample& s : samples()) {
    INFO(s.file);
    const auto reference = run(command(TOY_INTERP, {}, s));
    REQUIRE(reference.exit_code == 0);
    if (!s.known_value.empty()) CHECK(last_line(reference.out) == s.known_value);
    for (const char* binary : {TOY_INTERP, TOY_INTERP_NOFP, TOY_INTERP_NOPROBES}) {
      for (const std::vector<std::string>& options : {std::vector<std::string>{"--trampolines=off"},
                                                      {"--probes=off"},
                                                      {"--trampolines=on", "--probes=on"}}) {
        INFO(binary << " " << options[0]);
        const auto r = run(command(binary, options, s));
        CHECK(r.exit_code == 0);
        CHECK(r.out == reference.out);
      }
    }
  }
}

TEST_CASE("the stats option prints calls per function") {
  if (examples_missing(TOY_INTERP)) return;
  const auto r = run(command(TOY_INTERP, {"--stats"}, {"fib.toy", {"10"}, ""}));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "55\n");
  // fib(n) makes 2 * fib(n + 1) - 1 calls of fib: 2 * 89 - 1.
  // The four probes' semaphores share one word: an untraced call checks them with one load.
  CHECK(r.err == "calls fib 177\ncalls main 1\ncheckpoints 0 deepest 0\nprobe check one word\n");
  const auto off = run(command(TOY_INTERP, {"--stats", "--probes=off"}, {"fib.toy", {"10"}, ""}));
  CHECK(off.err == "calls fib 177\ncalls main 1\ncheckpoints 0 deepest 0\n");
}
