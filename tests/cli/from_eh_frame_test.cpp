// `jitunwind sframe build --from-eh-frame`: converts an object's .eh_frame, reports each
// function it leaves out and why, and writes sections llvm-readobj-22 reads with the rows the
// assembler's own --gsframe wrote (the full differential tests are tests/cfi/gsframe_diff_test).
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

namespace t = jitunwind::test;
namespace tc = jitunwind::test::cli;
using tc::run_tool;

namespace {

std::string edge_cases_object(const t::temp_dir& dir) {
  const std::string obj = dir / "edge.o";
  const auto r =
      t::run({"llvm-mc-22", "--gsframe", "-filetype=obj", "-triple", "x86_64-linux-gnu",
              std::string(JITUNWIND_SOURCE_DIR) + "/tests/cfi/data/edge_cases.s", "-o", obj});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return obj;
}

}  // namespace

TEST_CASE("sframe build --from-eh-frame: left-out functions reported and the rest as LLVM wrote") {
  if (!t::tool_available("llvm-mc-22") || !t::tool_available("llvm-readobj-22")) return;
  t::temp_dir dir;
  const std::string obj = edge_cases_object(dir);
  // Version 2: LLVM 22 reads v2 only.
  const auto r = run_tool({"sframe", "build", "--from-eh-frame", obj, "--elf", dir / "out.so",
                           "--sframe-version", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("left out: [0x5, +0xe): FDE at offset 0x2c: at +0x5: CFA = r10 "
                                    "+ 0 (SFrame bases the CFA on SP or FP only)"));
  CHECK_THAT(r.out, Catch::Contains("left out: [0x16, +0x3): FDE at offset 0x60: at +0x1: CFA = "
                                    "*(rbp - 8)"));
  CHECK_THAT(r.out, Catch::Contains("5 functions converted (17 rows), 5 left out (0 malformed)"));
  CHECK_THAT(r.out, Catch::Contains("(10 relocations)"));  // one per FDE
  // What we wrote, read by LLVM: the converted functions with the rows of LLVM's own .sframe
  // in the object (relocated to the same layout by `sframe dump`: the object's sections
  // start at 0, and .text is the first).
  const tc::sframe_dump ours = tc::llvm_readobj_sframe(dir / "out.so");
  const tc::sframe_dump theirs = tc::from_json(tc::dump_json({"--format", "json", obj}));
  REQUIRE(ours.fdes.size() == 5);
  for (const tc::fde& f : ours.fdes) {
    INFO("function at 0x" << std::hex << f.start);
    const auto it = std::find_if(theirs.fdes.begin(), theirs.fdes.end(),
                                 [&](const tc::fde& g) { return g.start == f.start; });
    REQUIRE(it != theirs.fdes.end());
    CHECK(it->size == f.size);
    if (f.start == 0x19 || f.start == 0x1d) continue;  // outermost / same_value: see the diff test
    CHECK(it->fres == f.fres);
  }
}

TEST_CASE("sframe build --from-eh-frame: a linked executable converts whole") {
  if (!t::tool_available("gcc")) return;
  t::temp_dir dir;
  const std::string exe = dir / "prog";
  const auto cc = t::run({"gcc", "-O2", "-o", exe,
                          std::string(JITUNWIND_SOURCE_DIR) + "/tests/sframe/programs/shapes.c"});
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  const auto r = run_tool({"sframe", "build", "--from-eh-frame", exe, "--raw", dir / "out.sframe",
                           "--address", "0x10000"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(0 relocations)"));
  CHECK_THAT(r.out, Catch::Contains("SFrame v3 section for address 0x10000"));  // the default
  const auto check =
      run_tool({"sframe", "check", "--raw", "--address", "0x10000", dir / "out.sframe"});
  INFO(check.out);
  CHECK(check.exit_code == 0);
}

TEST_CASE("sframe build --from-eh-frame: usage and input errors") {
  t::temp_dir dir;
  const std::string text = dir / "text";
  REQUIRE(t::run_shell("echo hello > " + text).exit_code == 0);
  struct c {
    std::vector<std::string> args;
    int status;
    const char* message;
  };
  const c cases[] = {
      {{"--from-eh-frame", text}, 2, "give exactly one of --raw OUT and --elf OUT"},
      {{"--from-eh-frame", text, "--raw", dir / "a", "--elf", dir / "b"}, 2, "exactly one"},
      {{"--from-eh-frame", text, "--elf", dir / "b", "--address", "4"}, 2, "--raw only"},
      {{"--from-eh-frame", text, "--input", text, "--raw", dir / "a"}, 2, "alternatives"},
      {{"--from-eh-frame", text, "--raw", dir / "a"}, 1, "no ELF magic"},
      {{"--from-eh-frame", dir / "missing", "--raw", dir / "a"}, 1, "missing: cannot open"},
  };
  for (const c& x : cases) {
    std::vector<std::string> args = {"sframe", "build"};
    args.insert(args.end(), x.args.begin(), x.args.end());
    const auto r = run_tool(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == x.status);
    CHECK_THAT(r.err, Catch::Contains(x.message));
  }
}
