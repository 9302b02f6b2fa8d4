// gdb's backtrace from a native helper walks through 10+ JIT frames to main, with and without
// frame pointers in the JIT code (the GDB JIT interface gives it names and .eh_frame).
#include "support/gdb.hpp"
#include "support/privileges.hpp"
#include "tools_support.hpp"

using jitunwind::test::run;
using namespace toytest;

TEST_CASE("gdb bt from a native helper through JIT frames to main, in both FP modes") {
  if (examples_missing(TOY_JIT)) return;
  if (!jitunwind::test::tool_available("gdb")) return;
  for (const char* fp : {"--frame-pointers=on", "--frame-pointers=off"}) {
    INFO(fp);
    const auto r = jitunwind::test::gdb_backtrace(
        "toylang_native_nofp", {TOY_JIT, fp, "--publish=gdb", program_path("spin.toy"), "1"});
    REQUIRE(r.exit_code == 0);
    const auto frames = jitunwind::test::backtrace_names(r.out);
    INFO(r.out);
    // toylang_native_nofp <- toy:work_nofp <- 13 x toy:level <- toy:main <- main
    std::vector<std::string> expected = {"toylang_native_nofp", "toy:work_nofp"};
    for (int i = 0; i < 13; ++i) expected.push_back("toy:level");
    expected.push_back("toy:main");
    REQUIRE(frames.size() >= expected.size() + 1);
    CHECK(std::vector<std::string>(frames.begin(), frames.begin() + expected.size()) == expected);
    // The runner (inlined into main or not) and then main.
    bool reaches_main = false;
    for (size_t i = expected.size(); i < frames.size(); ++i) reaches_main |= frames[i] == "main";
    CHECK(reaches_main);
  }
}
