// `--help` at every level exits 0 and documents every option; `--version`; usage errors exit 2.
#include "cli/cli_support.hpp"
#include "support/help_options.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <regex>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;

TEST_CASE("help: top level and group") {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    auto r = run_tool(args);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Usage: jitunwind GROUP COMMAND") == 0);
    CHECK(r.out.find("sframe") != std::string::npos);
    CHECK(r.out.find("--version") != std::string::npos);
  }
  auto v = run_tool({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.rfind("jitunwind 0.", 0) == 0);

  for (const char* h : {"--help", "-h"}) {
    auto g = run_tool({"sframe", h});
    CHECK(g.exit_code == 0);
    for (const char* cmd : {"dump", "check", "build"})
      CHECK(g.out.find(std::string("  ") + cmd + " ") != std::string::npos);
  }
}

TEST_CASE("help: every sframe command documents every option") {
  const std::map<std::string, std::vector<std::string>> options = {
      {"dump", {"--section NAME", "--raw", "--address ADDR", "-f, --format FMT", "-h, --help"}},
      {"check", {"--section NAME", "--raw", "--address ADDR", "-h, --help"}},
      {"build",
       {"-i, --input FILE", "--raw OUT", "--elf OUT", "--address ADDR", "--section-relative",
        "-h, --help"}},
  };
  for (const auto& [cmd, opts] : options) {
    INFO(cmd);
    for (const char* h : {"--help", "-h"}) {
      auto r = run_tool({"sframe", cmd, h});
      INFO(r.out);
      CHECK(r.exit_code == 0);
      CHECK(r.out.find("Usage: jitunwind sframe " + cmd) == 0);
      for (const auto& o : opts) CHECK(r.out.find(o) != std::string::npos);
      CHECK(r.out.find("Examples:") != std::string::npos);
    }
    // --help wins over other errors on the same line.
    auto r = run_tool({"sframe", cmd, "--no-such-option", "--help"});
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("--help after an unknown group or command still shows the help") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus", "--help"}, {"sframe", "--bogus", "--help"}}) {
    auto r = run_tool(args);
    INFO(args[0] << " " << args[1]);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("sframe") != std::string::npos);
    CHECK(r.err.empty());
  }
}

TEST_CASE("usage errors exit 2 and point to --help") {
  auto none = run_tool({});
  CHECK(none.exit_code == 2);
  auto group = run_tool({"nosuchgroup"});
  CHECK(group.exit_code == 2);
  CHECK(group.err.find("unknown command group 'nosuchgroup'") != std::string::npos);
  auto cmd = run_tool({"sframe", "frobnicate"});
  CHECK(cmd.exit_code == 2);
  CHECK(cmd.err.find("unknown command 'frobnicate'") != std::string::npos);
  auto opt = run_tool({"sframe", "dump", "--bogus", "x"});
  CHECK(opt.exit_code == 2);
  CHECK(opt.err.find("unknown option '--bogus'") != std::string::npos);
  CHECK(opt.err.find("Try 'jitunwind sframe dump --help'") != std::string::npos);
  auto operand = run_tool({"sframe", "dump"});
  CHECK(operand.exit_code == 2);
  CHECK(operand.err.find("'dump' needs FILE") != std::string::npos);
  auto format = run_tool({"sframe", "dump", "--format", "xml", "x"});
  CHECK(format.exit_code == 2);
  CHECK(format.err.find("--format: expected text or json, got 'xml'") != std::string::npos);
  auto value = run_tool({"sframe", "dump", "x", "--format"});
  CHECK(value.exit_code == 2);
  CHECK(value.err.find("option --format needs a value (FMT)") != std::string::npos);
  auto section_raw = run_tool({"sframe", "check", "--raw", "--section", ".x", "f"});
  CHECK(section_raw.exit_code == 2);
  // A blank before a number hid a sign from the unsigned check (u64: -1 fired 0xfff...f).
  // So did a blank or a sign after "0x" (u64:0x-1 fired 0xfff...f).
  for (const char* bad : {"u64: -1", "ptr: -5", "i32: 5", "u64:0x-1", "u8:0x 5", "u64:0x+1"}) {
    auto arg = run_tool({"usdt", "fire", "--provider", "p", "--probe", "e", "--args", bad});
    INFO(bad);
    CHECK(arg.exit_code == 2);
    CHECK(arg.err.find("not a number") != std::string::npos);
  }
  // Times that would overflow the clock arithmetic are refused (they once returned at once).
  for (const char* option : {"--hold-ms", "--timeout-s", "--settle-ms", "--interval-ms"}) {
    auto time = run_tool(
        {"usdt", "fire", "--provider", "p", "--probe", "e", option, "18446744073709551615"});
    INFO(option);
    CHECK(time.exit_code == 2);
    CHECK(time.err.find("is more than") != std::string::npos);
  }
}

TEST_CASE("help: unwind check documents every option") {
  auto g = run_tool({"unwind", "--help"});
  CHECK(g.exit_code == 0);
  CHECK(g.out.find("  check ") != std::string::npos);
  auto r = run_tool({"unwind", "check", "--help"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Usage: jitunwind unwind check") == 0);
  for (const char* o : {"-p, --pid PID", "-n, --steps N", "--seconds S", "--wait S", "--frames N",
                        "--max-reports N", "--skip-native", "Examples:"})
    CHECK(r.out.find(o) != std::string::npos);
  auto top = run_tool({"--help"});
  CHECK(top.out.find("unwind") != std::string::npos);
}

TEST_CASE("help: docs/cli.md describes every option --help lists") {
  const std::string docs = read_file(std::string(JITUNWIND_SOURCE_DIR) + "/docs/cli.md") +
                           read_file(std::string(JITUNWIND_SOURCE_DIR) + "/docs/usdt.md");
  REQUIRE(docs.size() > 10000);
  const std::vector<std::vector<std::string>> commands = {
      {"sframe", "dump"},    {"sframe", "check"},  {"sframe", "build"},
      {"sframe", "convert"}, {"usdt", "fire"},     {"usdt", "list"},
      {"windows", "list"},   {"windows", "watch"}, {"unwind", "check"}};
  for (const auto& c : commands) {
    auto r = run_tool({c[0], c[1], "--help"});
    const auto options = help_options(r.out);
    CHECK(!options.empty());
    for (const std::string& o : options) {
      INFO(c[0] << " " << c[1] << ": " << o);
      CHECK(std::regex_search(docs, std::regex(o + "([^a-z0-9-]|$)")));
    }
  }
}

TEST_CASE("flags have --no- forms, times and sizes take units, errors name option and value") {
  // sframe build --no-flex (the old spelling) and --flex parse alike; the bad --sframe-version
  // after them is what fails.
  for (const char* flex : {"--no-flex", "--flex", "--flex=off", "--section-relative=on"}) {
    auto r = run_tool({"sframe", "build", "-i", "x.json", flex, "--sframe-version", "9"});
    INFO(flex << ": " << r.err);
    CHECK(r.err.find("unknown option") == std::string::npos);
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"windows", "watch", "-p", "1", "--seconds", "x"},
       "--seconds: 'x' is not a duration (e.g. 1.5, 500ms, 2s, 1m)"},
      {{"windows", "watch", "-p", "1", "--interval-ms", "2m"},
       "--interval-ms: 2m is more than 60000ms"},
      {{"windows", "list", "-p", "1", "--max-memory", "2T"},
       "--max-memory: 2T is more than 1048576MiB"},
      {{"windows", "list", "-p", "1", "--max-memory", "0"}, "--max-memory: 0 is less than 1MiB"},
      {{"usdt", "fire", "--provider", "p", "--probe", "e", "--hold-ms", "x"},
       "--hold-ms: 'x' is not a duration"},
      {{"usdt", "fire", "--provider", "p", "--probe", "e", "-n", "1.5"},
       "-n: '1.5' is not a whole number"},
      {{"sframe", "dump", "--raw=maybe", "f"}, "--raw: 'maybe' is not on or off"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run_tool(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
