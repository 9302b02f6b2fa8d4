// With the interpreter built without frame pointers, SFrame alone (the SDK's unwinder, from a
// SIGTRAP context, over the binary's .sframe and the trampolines' PCMASK FDE) recovers the
// exact interpreted chain at every checkpoint.
#include "examples_support.hpp"

#include <regex>

using jitunwind::test::run;
using namespace toytest;

TEST_CASE("without frame pointers SFrame alone recovers the exact interpreted chain") {
  if (examples_missing(TOY_INTERP)) return;
  for (const char* binary : {TOY_INTERP_NOFP, TOY_INTERP}) {
    for (const sample& s : {sample{"verify.toy", {"30"}, ""}, sample{"mutual.toy", {"150"}, ""}}) {
      INFO(binary << " " << s.file);
      const auto r = run(command(binary, {"--verify-unwind"}, s));
      CHECK(r.exit_code == 0);
      static const std::regex re(
          R"(verify-unwind: (\d+) checkpoints, (\d+) exact, (\d+) complete)");
      std::smatch m;
      REQUIRE(std::regex_search(r.err, m, re));
      if (s.file == "verify.toy") CHECK(std::stol(m[1]) >= 3000);
      CHECK(m[2] == m[1]);
      CHECK(m[3] == m[1]);
      // Same output as without the check.
      CHECK(r.out == run(command(binary, {}, s)).out);
    }
  }
}

TEST_CASE("verify-unwind needs trampolines") {
  if (examples_missing(TOY_INTERP)) return;
  const auto r =
      run(command(TOY_INTERP, {"--verify-unwind", "--trampolines=off"}, {"fib.toy", {"3"}, ""}));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--verify-unwind needs --trampolines=on") != std::string::npos);
}
