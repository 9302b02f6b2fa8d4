// bpftrace attached to the toyjit:checkpoint dynamic USDT probe reads the ground truth.
#include "examples_support.hpp"
#include "support/privileges.hpp"

using namespace toytest;

TEST_CASE("bpftrace reads every checkpoint's ground truth from the toyjit provider") {
  if (examples_missing(TOY_JIT)) return;
  if (!jitunwind::test::may_run_privileged("bpftrace usdt")) return;
  if (!jitunwind::test::tool_available("bpftrace")) return;
  for (const char* shadow : {"--shadow-stack", "--frame-pointers=on"}) {
    INFO(shadow);
    // Entry 0 is the return address into the function that called checkpoint: never the same
    // as the outermost entry (a return address into main's callee chain).
    const traced_checkpoints t = trace_checkpoints(
        command(TOY_JIT, {shadow, "--wait-for-tracer=60", "--stats"}, {"verify.toy", {"3"}, ""}),
        "toyjit");
    INFO(t.bpftrace_out);
    CHECK(std::stol(t.checkpoints) > 100);
    CHECK(t.bpftrace_out.find("@n: " + t.checkpoints + "\n") != std::string::npos);
    if (std::string(shadow) == "--shadow-stack") {
      CHECK(std::stol(t.deepest) > 100);
      CHECK(t.bpftrace_out.find("@deepest: " + t.deepest + "\n") != std::string::npos);
      CHECK(t.bpftrace_out.find("@distinct[1]: ") != std::string::npos);
    } else {
      // Without --shadow-stack there is no ground truth: every checkpoint reports count 0.
      CHECK(t.deepest == "0");
      CHECK(t.bpftrace_out.find("@deepest: 0\n") != std::string::npos);
    }
  }
}
