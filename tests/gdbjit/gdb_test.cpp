// gdb in batch mode: `bt` from a native function called by frame-pointer-less JIT code walks
// through the JIT frames (names from our symbols, unwinding from our .eh_frame) to main.
#include "support/gdb.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind::test;

TEST_CASE("gdb bt walks through FP-less JIT frames registered with the GDB JIT interface") {
  if (!tool_available("gdb")) return;
  const run_result r = gdb_backtrace(
      "native_breakpoint", {binary_path("tests/jitdump/testjit"), "--gdb", "--breakpoint"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE(names.size() >= 4);
  CHECK(names[0] == "native_breakpoint");
  CHECK(names[1] == "jit_inner");
  CHECK(names[2] == "jit_outer");
  CHECK(names[3] == "main");
}

TEST_CASE("after unregistration gdb no longer knows the JIT functions") {
  if (!tool_available("gdb")) return;
  const run_result r = gdb_backtrace(
      "native_breakpoint",
      {binary_path("tests/jitdump/testjit"), "--gdb", "--unregister", "--breakpoint"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE_FALSE(names.empty());
  CHECK(names[0] == "native_breakpoint");
  for (const std::string& n : names) {
    CHECK(n != "jit_inner");
    CHECK(n != "jit_outer");
  }
}

TEST_CASE("two JITs, two descriptors: gdb sees LLVM-style, own and shared registrations") {
  if (!tool_available("gdb")) return;
  const run_result plain = run({binary_path("tests/gdbjit/twojit")});
  INFO(plain.out << plain.err);
  REQUIRE(plain.exit_code == 0);
  // The program defines the pair and loads first: gdb reads only its descriptor, so both the
  // shim's registrar (like libjitunwind.so) and the statically linked one join its list.
  CHECK_THAT(plain.out, Catch::Contains("shim policy=shared first=main"));
  CHECK_THAT(plain.out, Catch::Contains("exe policy=shared first=main"));

  const run_result r = gdb_backtrace("native_breakpoint", {binary_path("tests/gdbjit/twojit")});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE(names.size() >= 5);
  CHECK(names[0] == "native_breakpoint");
  CHECK(names[1] == "shared_fn");
  CHECK(names[2] == "shim_fn");
  CHECK(names[3] == "llvm_like_fn");
  CHECK(names[4] == "main");
}

namespace {

// `p/x $rbx` and `p/x $r12` in the frame of call_with_rbx, right above the JIT frame.
std::pair<std::string, std::string> caller_registers(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"gdb", "-q", "-batch", "-nx",
                                   "-ex", "set debuginfod enabled off",
                                   "-ex", "break native_breakpoint",
                                   "-ex", "run",
                                   "-ex", "bt",
                                   "-ex", "frame 2",
                                   "-ex", "printf \"rbx=%#lx r12=%#lx\\n\", $rbx, $r12",
                                   "--args"};
  argv.insert(argv.end(), program.begin(), program.end());
  const run_result r = run(argv, {}, std::chrono::seconds(120));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> names = backtrace_names(r.out);
  REQUIRE(names.size() >= 4);
  CHECK(names[1] == "jit_saves_rbx");
  CHECK(names[2] == "call_with_rbx");
  CHECK(names[3] == "main");
  const auto at = r.out.find("rbx=");
  REQUIRE(at != std::string::npos);
  const auto r12 = r.out.find(" r12=", at);
  REQUIRE(r12 != std::string::npos);
  const auto end = r.out.find('\n', r12);
  return {r.out.substr(at + 4, r12 - at - 4), r.out.substr(r12 + 5, end - r12 - 5)};
}

}  // namespace

TEST_CASE("gdb shows the caller's rbx and r12 above a JIT frame whose rows came from .eh_frame") {
  if (!tool_available("gdb")) return;
  const auto regs = caller_registers({binary_path("tests/gdbjit/savedregs")});
  CHECK(regs.first == "0x1122334455667788");
  CHECK(regs.second == "0xbadc0ffee0ddf00");
  // Without the saved registers gdb takes the JIT code's values (it zeroed both): the
  // check above can fail.
  const auto dropped =
      caller_registers({binary_path("tests/gdbjit/savedregs"), "--drop-saved-registers"});
  CHECK(dropped.first == "0");
  CHECK(dropped.second == "0");
}
