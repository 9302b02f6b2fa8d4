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

// `p/x $rbx` and `p/x $r12` in the frame of call_with_rbx, right above the JIT frame, at each
// of the program's two stops: the copy described in C++ (jit_saves_rbx), then the one described
// through the C API (jit_saves_rbx_c).
std::vector<std::pair<std::string, std::string>> caller_registers(
    const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"gdb", "-q", "-batch", "-nx",
                                   "-ex", "set debuginfod enabled off",
                                   "-ex", "break native_breakpoint",
                                   "-ex", "run"};
  for (int stop = 0; stop < 2; ++stop) {
    if (stop > 0) argv.insert(argv.end(), {"-ex", "continue"});
    argv.insert(argv.end(), {"-ex", "echo ==stop==\\n", "-ex", "bt", "-ex", "frame 2", "-ex",
                             "printf \"rbx=%#lx r12=%#lx\\n\", $rbx, $r12"});
  }
  argv.push_back("--args");
  argv.insert(argv.end(), program.begin(), program.end());
  const run_result r = run(argv, {}, std::chrono::seconds(120));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<std::string, std::string>> found;
  const char* jit_names[] = {"jit_saves_rbx", "jit_saves_rbx_c"};
  size_t at = 0;
  for (const char* jit : jit_names) {
    at = r.out.find("==stop==", at);
    REQUIRE(at != std::string::npos);
    const std::string stop = r.out.substr(at, r.out.find("==stop==", at + 1) - at);
    at += 8;
    const std::vector<std::string> names = backtrace_names(stop);
    REQUIRE(names.size() >= 4);
    CHECK(names[1] == jit);
    CHECK(names[2] == "call_with_rbx");
    CHECK(names[3] == "main");
    const auto rbx = stop.find("rbx=");
    REQUIRE(rbx != std::string::npos);
    const auto r12 = stop.find(" r12=", rbx);
    REQUIRE(r12 != std::string::npos);
    const auto end = stop.find('\n', r12);
    found.emplace_back(stop.substr(rbx + 4, r12 - rbx - 4), stop.substr(r12 + 5, end - r12 - 5));
  }
  return found;
}

}  // namespace

TEST_CASE(
    "gdb shows the caller's rbx and r12 above JIT frames whose rows came from .eh_frame (C++) and "
    "from the C builder's save_register (C API)") {
  if (!tool_available("gdb")) return;
  const auto regs = caller_registers({binary_path("tests/gdbjit/savedregs")});
  for (const auto& [rbx, r12] : regs) {
    CHECK(rbx == "0x1122334455667788");
    CHECK(r12 == "0xbadc0ffee0ddf00");
  }
  // Without the saved registers gdb takes the JIT code's values (it zeroed both): the
  // checks above can fail.
  const auto dropped =
      caller_registers({binary_path("tests/gdbjit/savedregs"), "--drop-saved-registers"});
  for (const auto& [rbx, r12] : dropped) {
    CHECK(rbx == "0");
    CHECK(r12 == "0");
  }
}
