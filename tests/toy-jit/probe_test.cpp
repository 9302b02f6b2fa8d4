// bpftrace attached to the toyjit:checkpoint dynamic USDT probe reads the ground truth.
#include "examples_support.hpp"
#include "support/privileges.hpp"

#include <regex>

using jitunwind::test::run;
using namespace toytest;

TEST_CASE("bpftrace reads every checkpoint's ground truth from the toyjit provider") {
  if (examples_missing(TOY_JIT)) return;
  if (!jitunwind::test::may_run_privileged("bpftrace usdt")) return;
  if (!jitunwind::test::tool_available("bpftrace")) return;
  for (const char* shadow : {"--shadow-stack", "--frame-pointers=on"}) {
    INFO(shadow);
    jitunwind::test::temp_dir dir;
    waiting_runtime rt(
        command(TOY_JIT, {shadow, "--wait-for-tracer=60", "--stats"}, {"verify.toy", {"3"}, ""}),
        dir);
    REQUIRE(rt.pid > 0);
    // Entry 0 is the return address into the function that called checkpoint: never the same
    // as the outermost entry (a return address into main's callee chain).
    const std::string script =
        "usdt:*:toyjit:checkpoint { @n = count(); @deepest = max(arg1); "
        "if (arg1 > 1) { @distinct[*(uint64*)arg2 != *(uint64*)(arg2 + 8 * (arg1 - 1))] = "
        "count(); } }" +
        exit_with(rt.pid);
    const auto r = run({"bpftrace", "-p", std::to_string(rt.pid), "-e", script});
    REQUIRE(rt.wait_exit());
    INFO(r.out << r.err << rt.err());
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    const std::string err = rt.err();
    REQUIRE(std::regex_search(err, m, std::regex(R"(checkpoints (\d+) deepest (\d+))")));
    CHECK(std::stol(m[1]) > 100);
    CHECK(r.out.find("@n: " + m[1].str() + "\n") != std::string::npos);
    if (std::string(shadow) == "--shadow-stack") {
      CHECK(std::stol(m[2]) > 100);
      CHECK(r.out.find("@deepest: " + m[2].str() + "\n") != std::string::npos);
      CHECK(r.out.find("@distinct[1]: ") != std::string::npos);
    } else {
      // Without --shadow-stack there is no ground truth: every checkpoint reports count 0.
      CHECK(m[2] == "0");
      CHECK(r.out.find("@deepest: 0\n") != std::string::npos);
    }
  }
}
