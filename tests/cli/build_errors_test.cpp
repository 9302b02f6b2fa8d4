// `jitunwind sframe build` rejects bad descriptions with messages naming the JSON path, and bad
// command lines with exit status 2.
#include "cli/cli_support.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;

namespace {

/// Builds `json` into a raw section; returns the result.
run_result build(const temp_dir& dir, const std::string& json,
                 const std::vector<std::string>& extra = {}) {
  REQUIRE(write_file(dir / "in.json", json));
  std::vector<std::string> args{"sframe",        "build", "--input",
                                dir / "in.json", "--raw", dir / "out.sframe"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_tool(args);
}

void expect_error(const temp_dir& dir, const std::string& json, const std::string& message) {
  auto r = build(dir, json);
  INFO(json << "\n--- stderr:\n" << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  // "jitunwind sframe build: error: <input path>: <message>"
  CHECK(r.err.find("jitunwind sframe build: error: " + dir / "in.json" + ": ") == 0);
  CHECK(r.err.find(message) != std::string::npos);
}

std::string one_function(const std::string& rows, const std::string& extra = "") {
  return R"({"abi": "amd64", "functions": [{"start": 4096, "size": 32)" + extra + R"(, "rows": [)" +
         rows + "]}]}";
}

}  // namespace

TEST_CASE("build: JSON errors name the path and the value") {
  temp_dir dir;
  expect_error(
      dir, one_function(R"({"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "x+1"})"),
      R"m(functions[0].rows[1].cfa: expected "sp+N", "fp+N", "rREG+N" or "*(...)" of one of them, got "x+1")m");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8", "fq": -16})"),
               R"(functions[0].rows[0]: unknown key "fq")");
  expect_error(dir, one_function(R"({"pc": 0})"),
               R"(functions[0].rows[0]: missing "cfa" (or "outermost": true))");
  expect_error(dir, one_function(R"({"pc": -1, "cfa": "sp+8"})"),
               "functions[0].rows[0].pc: expected an integer >= 0, got -1");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8", "fp": 1.5})"),
               "functions[0].rows[0].fp: expected an integer, got 1.5");
  expect_error(dir, one_function(R"({"pc": 0, "outermost": true, "cfa": "sp+8"})"),
               R"(functions[0].rows[0]: an outermost row has no "cfa")");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8"})", R"(, "pcmask_rep": 300)"),
               "functions[0].pcmask_rep: 300 is out of range (0..255)");
  expect_error(dir, R"({"abi": "amd64", "functions": [{"start": 1, "size": 0, "rows": []}]})",
               "functions[0].size: 0 is out of range (1..4294967295)");
  expect_error(dir, R"({"abi": "amd64", "functions": [{"size": 4, "rows": []}]})",
               R"(functions[0]: missing "start")");
  // No rows: a v3 outermost function; v2 cannot say it.
  expect_error(
      dir, R"({"version": 2, "abi": "amd64", "functions": [{"start": 1, "size": 4, "rows": []}]})",
      "functions[0].rows: an empty array (an outermost function without rows) needs "
      "version 3");
  expect_error(dir, R"({"abi": "amd64", "functions": [{"start": 1, "size": 4, "rows": {}}]})",
               "functions[0].rows: expected an array of rows, got {}");
  expect_error(
      dir, one_function(R"({"pc": 0, "cfa": "sp+8", "ra": "r3"})"),
      R"m(functions[0].rows[0].ra: expected an offset from the CFA, "rREG+N" or "*(rREG+N)", got "r3")m");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8"})", R"(, "pauth_key": "c")"),
               R"(functions[0].pauth_key: expected "a" or "b", got "c")");
  expect_error(dir,
               R"({"version": 3, "abi": "amd64", "flags": ["FRAME_POINTER"], "functions": []})",
               R"(flags: "FRAME_POINTER" does not exist in SFrame version 3)");
  expect_error(dir, R"({"abi": "riscv", "functions": []})",
               R"(abi: expected "amd64", "aarch64-le" or "aarch64-be", got "riscv")");
  expect_error(dir, R"({"functions": []})", R"((top level): missing "abi")");
  expect_error(dir, R"({"abi": "amd64", "functions": [], "extra": 1})",
               R"((top level): unknown key "extra")");
  expect_error(dir, R"({"version": 1, "abi": "amd64", "functions": []})",
               "version: only versions 2 and 3 can be encoded, got 1");
  expect_error(
      dir, R"({"abi": "amd64", "flags": ["SORTED"], "functions": []})",
      R"(flags[0]: expected "FDE_SORTED", "FRAME_POINTER" or "FDE_FUNC_START_PCREL", got "SORTED")");
  expect_error(dir, "{\"abi\": \"amd64\",\n \"functions\": [}", "invalid JSON: ");
  expect_error(dir, "{\"abi\": \"amd64\",\n \"functions\": [}", "line 2");
  expect_error(dir, "[1, 2]", "(top level): expected an object, got [1,2]");
  // Found by fuzz/cli_sframe_json.cpp: nlohmann reports this overflow as out_of_range.
  expect_error(dir, R"({"abi": "amd64", "functions": [{"start": 66666666e66666666}]})",
               "invalid JSON: number overflow");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8", "fp": 99999999999})"),
               "functions[0].rows[0].fp: 99999999999 does not fit in 32 bits");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+9999999999"})"),
               R"(functions[0].rows[0].cfa: offset in "sp+9999999999" does not fit in 32 bits)");
}

TEST_CASE("build: frame-model and layout errors") {
  temp_dir dir;
  // jitunwind::validate's message, prefixed with the function's path.
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8"}, {"pc": 2, "cfa": "sp+12"})"),
               "functions[0]: ");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8"}, {"pc": 2, "cfa": "sp+12"})"),
               "multiple of 8");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8"}, {"pc": 40, "cfa": "sp+16"})"),
               "past the function's end");
  expect_error(dir, one_function(R"({"pc": 0, "cfa": "sp+8", "ra": -12})"), "functions[0]: ");
  // An AMD64 RA away from CFA-8 needs a v3 FLEX FDE: v2 refuses it, naming function and row.
  expect_error(
      dir,
      R"({"version": 2, "abi": "amd64", "functions": [{"start": 4096, "size": 32, "rows": [{"pc": 0, "cfa": "sp+24", "ra": -16}]}]})",
      "function at 0x1000: row 0 (offset 0): AMD64 SFrame fixes the return address at "
      "CFA-8: SFrame v2 cannot express it (write version 3)");
  expect_error(dir, R"({"abi": "amd64", "functions": [
      {"start": 4096, "size": 32, "rows": [{"pc": 0, "cfa": "sp+8"}]},
      {"start": 4112, "size": 32, "rows": [{"pc": 0, "cfa": "sp+8"}]}]})",
               "functions[1]: [0x1010, 0x1030) overlaps functions[0] [0x1000, 0x1020)");
  // Out of the ±2 GiB a v2 FDE start offset can reach from the section (raw: address 0).
  expect_error(dir, R"({"version": 2, "abi": "amd64", "functions": [
      {"start": 140737488289792, "size": 32, "rows": [{"pc": 0, "cfa": "sp+8"}]}]})",
               "");
}

TEST_CASE("build: command-line errors exit with status 2") {
  temp_dir dir;
  REQUIRE(write_file(dir / "in.json", one_function(R"({"pc": 0, "cfa": "sp+8"})")));
  const std::string in = dir / "in.json";
  auto neither = run_tool({"sframe", "build", "--input", in});
  CHECK(neither.exit_code == 2);
  CHECK(neither.err.find("give exactly one of --raw OUT and --elf OUT") != std::string::npos);
  auto both = run_tool({"sframe", "build", "--input", in, "--raw", dir / "a", "--elf", dir / "b"});
  CHECK(both.exit_code == 2);
  auto no_input = run_tool({"sframe", "build", "--raw", dir / "a"});
  CHECK(no_input.exit_code == 2);
  CHECK(no_input.err.find("--input FILE is required") != std::string::npos);
  auto elf_address = run_tool({"sframe", "build", "-i", in, "--elf", dir / "b", "--address", "1"});
  CHECK(elf_address.exit_code == 2);
  auto bad_address = run_tool({"sframe", "build", "-i", in, "--raw", dir / "a", "--address", "x"});
  CHECK(bad_address.exit_code == 2);
  CHECK(bad_address.err.find("--address: not a number: 'x'") != std::string::npos);
  auto missing = run_tool({"sframe", "build", "-i", dir / "nope.json", "--raw", dir / "a"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find(dir / "nope.json" + ": cannot open: No such file or directory") !=
        std::string::npos);
  auto unwritable = run_tool({"sframe", "build", "-i", in, "--raw", dir / "no/such/dir/x"});
  CHECK(unwritable.exit_code == 1);
  CHECK(unwritable.err.find(dir / "no/such/dir/x: cannot create") != std::string::npos);
  // A failed build leaves nothing behind.
  CHECK(read_file(dir / "a").empty());
}

TEST_CASE("build: a value nested 200 000 deep is an error, not a stack overflow") {
  temp_dir dir;
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_error(dir, deep, "invalid JSON: nested more than 64 levels deep at byte 64");
  expect_error(dir,
               R"({"abi": "amd64", "functions": [{"start": )" + deep +
                   R"(, "size": 16, "rows": [{"pc": 0, "cfa": "sp+8"}]}]})",
               "invalid JSON: nested more than 64 levels deep at byte 102");
}

TEST_CASE("build: duplicate keys and NUL characters in names are errors") {
  temp_dir dir;
  expect_error(dir, R"({"abi": "amd64", "functions": [], "functions": []})",
               R"(invalid JSON: duplicate key "functions")");
  expect_error(dir,
               R"({"abi": "amd64", "functions": [{"start": 4096, "size": 16, "name": "a)"
               "\\u0000"  // JSON's escape, not C++'s
               R"(b",)"
               R"( "rows": [{"pc": 0, "cfa": "sp+8"}]}]})",
               R"(functions[0].name: contains a NUL character)");
}

TEST_CASE("inputs that never end are refused, and long names are dumped whole") {
  temp_dir dir;
  auto zero = run_tool({"sframe", "check", "/dev/zero"});
  CHECK(zero.exit_code == 1);
  CHECK(zero.out + zero.err == "/dev/zero: is a character device, not a regular file\n");
  // A 700-byte symbol name (long C++ names are common) in the text dump, not cut at 511 bytes.
  const std::string name = "_Z" + std::string(700, 'a');
  REQUIRE(write_file(dir / "long.json",
                     R"({"abi": "amd64", "functions": [{"start": 4096, "size": 16, "name": ")" +
                         name + R"(", "rows": [{"pc": 0, "cfa": "sp+8"}]}]})"));
  auto built =
      run_tool({"sframe", "build", "--input", dir / "long.json", "--elf", dir / "long.so"});
  REQUIRE(built.exit_code == 0);
  auto dump = run_tool({"sframe", "dump", dir / "long.so"});
  CHECK(dump.exit_code == 0);
  CHECK(dump.out.find(name) != std::string::npos);
}
