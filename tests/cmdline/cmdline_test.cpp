// The command-line layer (cmdline/): parsing, units, --no- forms, generated help, and errors that
// name the option as typed and the bad value.
#include <cmdline/cmdline.hpp>

#include <catch2/catch.hpp>

#include <cmath>

using namespace cmdline;

namespace {

// A command with one option of every kind, as a tool would declare it.
command sample_command(layout style = layout::interleaved) {
  command c;
  c.name = "run";
  c.operands = "FILE...";
  c.summary = "Run things.";
  c.description =
      "A description long enough to be wrapped at one hundred columns, so that the "
      "help text shows how paragraphs are folded.";
  c.options = {
      {"pid", 'p', "PID", "The process.", kind::whole, 1, 1 << 30},
      {"frequency", 'F', "HZ", "Samples per second.", kind::frequency, 1, 20000},
      {"duration", 'd', "SEC", "Stop after SEC.", kind::duration, 0.001, 1e7},
      {"interval-ms", 0, "MS", "Poll every MS.", kind::duration, 0.001, 60, "ms"},
      {"max-memory", 0, "MIB", "Budget.", kind::size, 1 << 20, double(uint64_t{1} << 40), "MiB"},
      {"windows", 0, "SIZE", "Window bytes.", kind::size, 1, double(uint64_t{1} << 30)},
      {"min-match", 0, "PCT", "Percent.", kind::decimal, 0, 100},
      {"unwinder", 0, "KIND", "Walker.", kind::choice, 0, 0, "", {"sframe", "fp", "kernel-fp"}},
      {"kernel", 0, "", "Kernel stacks."},
      {.name = "jit", .help = "JIT windows.", .on_by_default = true},
      {.name = "table-cache", .value_name = "DIR", .help = "Cache dir.", .negatable = true},
      {.name = "wait",
       .value_name = "S",
       .help = "Wait.",
       .type = kind::duration,
       .max = 3600,
       .implicit_value = "30"},
      {"quiet", 'q', "", "Quiet."},
      {"verbose", 'v', "", "Verbose."},
  };
  c.min_operands = 1;
  c.style = style;
  return c;
}

struct outcome {
  bool ok;
  parsed p;
  std::string error;
};

outcome run(const command& c, std::vector<std::string> args) {
  outcome o;
  o.ok = parse(c, args, o.p, &o.error);
  return o;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("cmdline: whole numbers, decimals and their errors") {
  CHECK(parse_whole("0") == 0u);
  CHECK(parse_whole("0x1f") == 31u);
  CHECK(parse_whole("18446744073709551615") == UINT64_MAX);
  number_error why{};
  for (const char* bad : {"", "-1", " 2", "+2", "0x", "0x-1", "0x 5", "12x", "inf", "nan"}) {
    INFO(bad);
    CHECK_FALSE(parse_whole(bad, &why));
    CHECK(why == number_error::not_a_number);
  }
  CHECK_FALSE(parse_whole("18446744073709551616", &why));
  CHECK(why == number_error::too_large);
  for (const char* decimal : {"1.5", "2e3"}) {
    CHECK_FALSE(parse_whole(decimal, &why));
    CHECK(why == number_error::not_whole);
  }
  CHECK(parse_decimal("1.5") == 1.5);
  CHECK(parse_decimal(".5") == 0.5);
  CHECK_FALSE(parse_decimal("-1"));
  CHECK_FALSE(parse_decimal("1.5x"));
  CHECK_FALSE(parse_decimal("inf"));
}

TEST_CASE("cmdline: durations, sizes and frequencies take the units users type") {
  CHECK(parse_duration("1.5") == 1.5);
  CHECK(parse_duration("500ms") == 0.5);
  CHECK(parse_duration("2s") == 2);
  CHECK(parse_duration("2m") == 120);
  CHECK(parse_duration("1h") == 3600);
  CHECK(std::fabs(*parse_duration("250us") - 250e-6) < 1e-12);
  CHECK(parse_duration("100", "ms") == 0.1);  // a bare number in the option's unit
  CHECK(parse_duration("2s", "ms") == 2);     // a unit wins over it
  CHECK_FALSE(parse_duration("5x"));
  CHECK_FALSE(parse_duration("s"));

  CHECK(parse_size("4096") == 4096u);
  CHECK(parse_size("64k") == 65536u);
  CHECK(parse_size("16M") == 16u << 20);
  CHECK(parse_size("16MiB") == 16u << 20);
  CHECK(parse_size("16MB") == 16u << 20);
  CHECK(parse_size("1Gi") == uint64_t{1} << 30);
  CHECK(parse_size("1.5k") == 1536u);
  CHECK(parse_size("1024", "MiB") == uint64_t{1} << 30);
  CHECK(parse_size("1G", "MiB") == uint64_t{1} << 30);
  CHECK(parse_size("18446744073709551615") == UINT64_MAX);  // exact, not through a double
  number_error why{};
  CHECK_FALSE(parse_size("0.3k", "B", &why));
  CHECK(why == number_error::not_whole);
  CHECK_FALSE(parse_size("16777216T", "B", &why));
  CHECK(why == number_error::too_large);
  CHECK_FALSE(parse_size("16Q", "B", &why));
  CHECK(why == number_error::not_a_number);

  CHECK(parse_frequency("99") == 99);
  CHECK(parse_frequency("99Hz") == 99);
  CHECK(parse_frequency("1.5kHz") == 1500);
  CHECK_FALSE(parse_frequency("99/s"));
}

TEST_CASE("cmdline: options are typed, ranged and read in every spelling") {
  const command c = sample_command();
  auto r = run(
      c, {"-p", "42", "-F99", "--duration=1.5", "--interval-ms", "250", "--max-memory", "2G",
          "--windows", "64k", "--min-match", "99.5", "--unwinder", "fp", "f1", "--kernel", "f2"});
  REQUIRE(r.ok);
  CHECK(r.p.whole("pid", 0) == 42);
  CHECK(r.p.decimal("frequency", 0) == 99);
  CHECK(r.p.decimal("duration", 0) == 1.5);
  CHECK(r.p.decimal("interval-ms", 0) == 0.25);  // seconds, from a bare number of ms
  CHECK(r.p.whole("max-memory", 0) == uint64_t{2} << 30);
  CHECK(r.p.whole("windows", 0) == 65536);
  CHECK(r.p.decimal("min-match", 0) == 99.5);
  CHECK(r.p.value("unwinder") == "fp");
  CHECK(r.p.flag("kernel"));
  CHECK(r.p.operands == std::vector<std::string>{"f1", "f2"});
  CHECK(r.p.whole("absent", 7) == 7);
  CHECK(r.p.decimal("wait", 3) == 3);
  CHECK_FALSE(r.p.has("jit"));

  // Sizes given in the bare unit (MiB here) and durations in ms mean what they meant before.
  r = run(c, {"--max-memory", "1024", "--interval-ms=2s", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.whole("max-memory", 0) == uint64_t{1} << 30);
  CHECK(r.p.decimal("interval-ms", 0) == 2);
}

TEST_CASE("cmdline: every flag has its --no- form and =on|off, the last one wins") {
  const command c = sample_command();
  auto r = run(c, {"--kernel", "--no-kernel", "--no-jit", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.has("kernel"));
  CHECK_FALSE(r.p.flag("kernel"));
  CHECK(r.p.state("jit") == false);
  r = run(c, {"--no-jit", "--jit", "--kernel=on", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.state("jit") == true);
  CHECK(r.p.flag("kernel"));
  r = run(c, {"--kernel=off", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.state("kernel") == false);
  // A value option that is negatable: --no-table-cache turns it off and gives no value.
  r = run(c, {"--table-cache", "/tmp/x", "--no-table-cache", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.state("table-cache") == false);
  CHECK_FALSE(r.p.value("table-cache"));
  r = run(c, {"--no-table-cache", "--table-cache=/c", "f"});
  REQUIRE(r.ok);
  CHECK(r.p.value("table-cache") == "/c");
  // -q and -v: which came last.
  r = run(c, {"-q", "-v", "f"});
  CHECK(r.p.last_of("quiet", "verbose") == "verbose");
  r = run(c, {"-v", "-q", "f"});
  CHECK(r.p.last_of("quiet", "verbose") == "quiet");
  // Not every option has a --no- form: a plain value option does not.
  r = run(c, {"--no-pid", "f"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "unknown option '--no-pid' for 'run'"));
  r = run(c, {"--no-kernel=on", "f"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "--no-kernel takes no value"));
  r = run(c, {"--kernel=maybe", "f"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "--kernel: 'maybe' is not on or off"));
}

TEST_CASE("cmdline: errors name the option as typed and the bad value") {
  const command c = sample_command();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-F", "fast", "f"}, "-F: 'fast' is not a frequency"},
      {{"--frequency", "100000", "f"}, "--frequency: 100000 is more than 20000 Hz"},
      {{"-p", "0", "f"}, "-p: 0 is less than 1"},
      {{"-p", "12ab", "f"}, "-p: '12ab' is not a number"},
      {{"-p", "1.5", "f"}, "-p: '1.5' is not a whole number"},
      {{"-d", "5x", "f"}, "-d: '5x' is not a duration"},
      {{"--interval-ms", "2m", "f"}, "--interval-ms: 2m is more than 60000ms"},
      {{"--max-memory", "2T", "f"}, "--max-memory: 2T is more than 1048576MiB"},
      {{"--windows", "0.3k", "f"}, "--windows: '0.3k' is not a whole number of bytes"},
      {{"--min-match", "101", "f"}, "--min-match: 101 is more than 100"},
      {{"--unwinder", "dwarf", "f"}, "--unwinder: 'dwarf' (expected sframe, fp or kernel-fp)"},
      {{"--bogus", "f"}, "unknown option '--bogus' for 'run'"},
      {{"-x", "f"}, "unknown option '-x' for 'run'"},
      {{"f", "--pid"}, "option --pid needs a value (PID)"},
      {{}, "'run' needs FILE..."},
      {{"--pid", "\x1b[31m", "f"}, "--pid: '\\x1b[31m' is not a number"},
      {{"--pid", "\xc2\x9b" "31m", "f"}, "--pid: '\\xc2\\x9b31m' is not a number"},
      {{"--pid", std::string(5000, '7'), "f"}, "... (5000 bytes) is more than"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run(c, args);
    INFO(message << " <- " << r.error);
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, message));
  }
}

TEST_CASE("cmdline: --help wins, and the layouts of options and operands") {
  const command c = sample_command();
  auto r = run(c, {"--bogus", "--help"});
  CHECK(r.ok);
  CHECK(r.p.help);
  r = run(c, {"--", "--help"});  // after --, --help is an operand
  CHECK(r.ok);
  CHECK_FALSE(r.p.help);
  CHECK(r.p.operands == std::vector<std::string>{"--help"});
  CHECK(r.p.separator == 0);

  // leading: the first operand ends the options; values only with '='.
  const command lead = sample_command(layout::leading);
  r = run(lead, {"--kernel", "prog.toy", "--pid", "x", "--help"});
  REQUIRE(r.ok);
  CHECK_FALSE(r.p.help);
  CHECK(r.p.operands == std::vector<std::string>{"prog.toy", "--pid", "x", "--help"});
  r = run(lead, {"--pid", "prog.toy"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "option '--pid' needs a value (--pid=...)"));
  r = run(lead, {"--wait", "prog.toy"});  // optional value: --wait alone takes the implicit one
  REQUIRE(r.ok);
  CHECK(r.p.decimal("wait", 0) == 30);
  r = run(lead, {"--wait=5", "prog.toy"});
  REQUIRE(r.ok);
  CHECK(r.p.decimal("wait", 0) == 5);

  // after_separator: operands only after --, so a typo is never a command to run.
  command sep = sample_command(layout::after_separator);
  sep.min_operands = 0;
  r = run(sep, {"-p", "1", "ls"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "unexpected argument 'ls'"));
  r = run(sep, {"-F", "99", "--", "ls", "-l"});
  REQUIRE(r.ok);
  CHECK(r.p.operands == std::vector<std::string>{"ls", "-l"});
  CHECK(r.p.saw_separator);
}

TEST_CASE("cmdline: --help is generated from the table") {
  command c = sample_command();
  c.options[2].heading = "Time";
  c.notes = "Exit status: 0.";
  c.examples = "run -p 1 f";
  const std::string h = help_text("tool run", c);
  INFO(h);
  CHECK(h.rfind("Usage: tool run [OPTIONS] FILE...\n\nRun things.\n", 0) == 0);
  for (const char* row : {"-p, --pid PID", "-F, --frequency HZ", "-d, --duration SEC",
                          "--interval-ms MS", "--max-memory MIB", "--kernel", "--no-jit",
                          "--table-cache DIR", "--wait[=S]", "-h, --help", "\nTime:\n"})
    CHECK(contains(h, row));
  // The notes say what this command's options accept, and only that.
  CHECK(contains(h, "Every flag has a --no- form"));
  CHECK(contains(h, "Durations take a unit"));
  CHECK(contains(h, "Sizes take a unit"));
  CHECK(contains(h, "Frequencies take Hz or kHz"));
  CHECK(contains(h, "Exit status: 0.\n"));
  CHECK(contains(h, "Examples:\n  run -p 1 f\n"));
  // Lines stay within 100 columns.
  size_t start = 0;
  while (start < h.size()) {
    const size_t end = h.find('\n', start);
    CHECK(end - start <= 100);
    start = end + 1;
  }
  command plain;
  plain.name = "x";
  plain.summary = "Nothing.";
  plain.options = {{"file", 0, "F", "A file."}};
  const std::string p = help_text("x", plain);
  CHECK_FALSE(contains(p, "--no- form"));
  CHECK_FALSE(contains(p, "Durations"));
  // Leading layout shows values with '='.
  CHECK(contains(help_text("toy", sample_command(layout::leading)), "--pid=PID"));
}
