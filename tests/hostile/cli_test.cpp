// Issue 22 against `jitunwind`: each finding's hostile shape, the tool bounded in time and
// memory (prlimit --as), a clear message, and the good data of the same target still reported.
#ifndef HOSTILE_TESTS_DISABLED
#include "hostile_support.hpp"

#include "support/hostile_elf.hpp"

#include <sys/stat.h>

#include <sstream>

using namespace jitunwind;
using namespace jitunwind::test;
using namespace jitunwind::test::hostile;
using json = nlohmann::json;

namespace {

bool write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  return write_file(path, std::string(bytes.begin(), bytes.end()));
}

// The JSON description of one function of `rows` rows (alternating CFA offsets).
std::string one_function_json(size_t rows) {
  std::string s = R"({"version": 2, "abi": "amd64", "functions": [{"start": "0x100000", "size": )" +
                  std::to_string(rows * 2 + 2) + R"(, "rows": [)";
  for (size_t i = 0; i < rows; ++i) {
    if (i != 0) s += ",";
    s += R"({"pc": )" + std::to_string(i * 2) + R"(, "cfa": "sp+)" +
         std::to_string(8 + 8 * (i % 2)) + "\"}";
  }
  return s + "]}]}";
}

}  // namespace

TEST_CASE("1 SIGBUS: windows list reads an object truncated under it and lists the windows") {
  temp_dir dir;
  const std::string obj = dir / "libtruncated.so";
  target t({"--map-elf", "truncate:" + obj});
  t.wait_ready();  // printed once the target watches the object for a reader's open
  auto r = bounded({cli(), "windows", "list", "--json", "-p", t.pid_text()});
  CHECK(r.exit_code == 0);
  const auto windows = usable_windows(r.out);
  REQUIRE(windows.count(1) == 1);
  REQUIRE(windows.count(2) == 1);
  CHECK(windows.at(1));
  CHECK(windows.at(2));
  // The object really was cut while the tool had it open.
  // The target cuts it at most 2 s after the open (30 s allowed: its thread may run late).
  for (int i = 0; i < 1500 && t.err().find("truncated") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_THAT(t.err(), Catch::Contains("truncated after another process opened it"));
}

TEST_CASE("2 perf map: a FIFO, a link to /dev/zero, a 20 GiB sparse file") {
  for (const std::string kind : {"fifo", "zero-link", "sparse"}) {
    INFO(kind);
    target t({"--perf-map-kind", kind});
    t.wait_ready();
    auto r = bounded({cli(), "windows", "list", "--functions", "-p", t.pid_text()});
    // Why there are no names: refused (a note), or, the sparse file, read up to the cap (a
    // limit cut the input: a warning and exit status 3).
    const bool cut = kind == "sparse";
    CHECK(r.exit_code == (cut ? 3 : 0));
    CHECK_THAT(r.out, Catch::Contains("window 1 (") && Catch::Contains("window 2 ("));
    CHECK_THAT(r.err, Catch::Contains(std::string(cut ? "warning" : "note") + ": perf map /tmp/perf-" +
                                      t.pid_text() + ".map"));
    auto w =
        bounded({cli(), "windows", "watch", "--functions", "--seconds", "1", "-p", t.pid_text()});
    CHECK(w.exit_code == (cut ? 3 : 0));
    CHECK_THAT(w.out, Catch::Contains("present") && Catch::Contains("window 2 ("));
  }
}

TEST_CASE("3 ELF amplification: sframe check and dump stay linear in the file") {
  temp_dir dir;
  // 40 000 section headers sharing one 1 MB name (3.5 MB): 40 GB if each name is copied.
  const std::string names = dir / "shared-names.so";
  REQUIRE(write_bytes(names, shared_section_names(40000, 1 << 20)));
  // 60 000 SHT_SYMTAB headers over one table of 400 000 symbols (13 MB), with a valid .sframe.
  symbol_tables_options so;
  so.sframe = small_sframe();
  const std::string tables = dir / "symbol-tables.so";
  REQUIRE(write_bytes(tables, many_symbol_tables(so)));
  const std::string good = dir / "good.o";
  REQUIRE(write_bytes(good, many_symbol_tables({3, 10, small_sframe(), 0})));

  // Every file is checked, the bad ones with the reason; the good one (last) is ok.
  auto check = bounded({cli(), "sframe", "check", names, tables, good}, address_space_limit,
                       3 * seconds_per_object);
  CHECK(check.exit_code == 1);
  CHECK_THAT(check.out, Catch::Contains(names + ": elf: section ") &&
                            Catch::Contains(": names add up to more than 4 times their string "
                                            "table"));
  CHECK_THAT(check.out, Catch::Contains(tables + ": ok (1 function, 1 row, SFrame v3"));
  CHECK_THAT(check.out, Catch::Contains(good + ": ok (1 function"));
  // dump names the function from the first symbol table only.
  auto dump = bounded({cli(), "sframe", "dump", tables});
  CHECK(dump.exit_code == 0);
  CHECK_THAT(dump.out, Catch::Contains("Function 0 <f0>: [0x1000, 0x1010)"));
}

TEST_CASE("3 a limit that leaves function names out is said: warning and exit status 3") {
  temp_dir dir;
  // 2000 symbols sharing one 4 KiB name (a 60 KB file): 8 MB of names, over the reader's cap of
  // 4 times the string table plus 1 MiB, so the symbol table is refused as a whole.
  symbol_tables_options so;
  so.tables = 1;
  so.symbols = 2000;
  so.sframe = small_sframe();
  so.shared_name_bytes = 4096;
  const std::string shared = dir / "shared-symbol-names.so";
  REQUIRE(write_bytes(shared, many_symbol_tables(so)));
  for (const std::string format : {"text", "json"}) {
    INFO(format);
    auto dump = bounded({cli(), "sframe", "dump", "--format", format, shared});
    CHECK(dump.exit_code == 3);
    CHECK_THAT(dump.err, Catch::Contains("sframe dump: warning: symbol table .symtab [") &&
                             Catch::Contains("] of " + shared + " (function names) left out: ") &&
                             Catch::Contains("names add up to more than 4 times"));
    // The rest of the answer is there.
    CHECK_THAT(dump.out, Catch::Contains(format == "text" ? "[0x1000, 0x1010)" : "\"start\": 4096"));
  }
  auto convert = bounded(
      {cli(), "sframe", "convert", "--sframe-version", "3", "--elf", dir / "out.so", shared});
  CHECK(convert.exit_code == 3);
  CHECK_THAT(convert.err, Catch::Contains("(function names) left out"));
  // The same file with names that fit: no warning, exit 0.
  so.shared_name_bytes = 0;
  REQUIRE(write_bytes(dir / "names.so", many_symbol_tables(so)));
  auto fine = bounded({cli(), "sframe", "dump", dir / "names.so"});
  CHECK(fine.exit_code == 0);
  CHECK(fine.err.empty());
  CHECK_THAT(fine.out, Catch::Contains("<f0>"));
}

TEST_CASE("3 ELF amplification: a target mapping such objects is listed in bounded time") {
  temp_dir dir;
  const std::string names = dir / "shared-names.so", tables = dir / "symbol-tables.so";
  target t({"--map-elf", "shared-names:" + names, "--map-elf", "symbol-tables:" + tables});
  t.wait_ready();
  auto r = bounded({cli(), "windows", "list", "--json", "-p", t.pid_text()});
  CHECK(r.exit_code == 0);
  const auto windows = usable_windows(r.out);
  CHECK(windows.count(1) == 1);
  CHECK(windows.count(2) == 1);
}

TEST_CASE("4 registry memory: windows that all point at one untouched region") {
  SECTION("64 windows of 64 MiB each: not read beyond the budget, the good ones are") {
    target t({"--many-windows", "64", "--window-sframe-size", std::to_string(64 << 20)});
    t.wait_ready();
    auto r = bounded({cli(), "windows", "list", "--json", "-p", t.pid_text()});
    CHECK(r.exit_code == 1);  // windows it could not read are unusable
    const auto windows = usable_windows(r.out);
    CHECK(windows.size() == 66);
    CHECK(windows.at(1));
    CHECK(windows.at(2));
    CHECK_THAT(r.out, Catch::Contains("not read: memory budget of 64 MiB reached: the SFrame of "
                                      "window 1000 needs 64 MiB"));
    // More memory lets the tool read them (and find they are not SFrame).
    auto more =
        bounded({cli(), "windows", "list", "--json", "--max-memory", "200", "-p", t.pid_text()},
                uint64_t{512} << 20);
    CHECK_THAT(more.out, Catch::Contains("sframe: "));
  }
  SECTION("a million windows: read up to the budget, then counted") {
    target t({"--many-windows", "1000000"});
    t.wait_ready();
    auto r = bounded({cli(), "windows", "list", "--json", "-p", t.pid_text()});
    CHECK(r.exit_code == 1);
    auto doc = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(doc.is_discarded());
    CHECK(doc["windows"][0]["id"] == 1);
    CHECK(doc["windows"][0]["usable"] == true);
    CHECK(doc["windows"][1]["usable"] == true);
    REQUIRE(doc["skipped"].size() == 1);
    CHECK(doc["summary"]["skipped"] == doc["skipped"][0]["entries"]);
    CHECK(doc["summary"]["skipped"].get<uint64_t>() + doc["windows"].size() == 1000002);
    CHECK_THAT(doc["skipped"][0]["reason"].get<std::string>(),
               Catch::Contains("after it not read: memory budget of 64 MiB reached"));
  }
}

TEST_CASE("5 one bad slot: stuck and invalid entries are skipped, the good windows listed") {
  target t({"--bad-slots"});
  t.wait_ready();
  auto r = bounded({cli(), "windows", "list", "-p", t.pid_text()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("(2 registry entries skipped)"));
  CHECK_THAT(r.out, Catch::Contains("window 1 (") && Catch::Contains("window 2 ("));
  CHECK_THAT(r.out, Catch::Contains("slot 16 SKIPPED: kept changing (or stayed locked) for 200 "
                                    "attempts"));
  CHECK_THAT(r.out, Catch::Contains("slot 17 SKIPPED: state 9 is not free/live/retired"));
  auto j = bounded({cli(), "windows", "list", "--json", "-p", t.pid_text()});
  auto doc = json::parse(j.out);
  CHECK(doc["summary"]["skipped"] == 2);
  CHECK(usable_windows(j.out).at(1));
  auto w = bounded({cli(), "windows", "watch", "--seconds", "1", "-p", t.pid_text()});
  CHECK(w.exit_code == 1);
  CHECK_THAT(w.out, Catch::Contains("skipped   slot 16 SKIPPED"));
  CHECK_THAT(w.err, Catch::Contains("2 registry entries skipped"));
}

TEST_CASE("6 /proc/PID/stat: a process named with a newline and parentheses is watched") {
  target t({"--comm", "evil\n) Z (x"});
  t.wait_ready();
  auto w = bounded({cli(), "windows", "watch", "--seconds", "1", "-p", t.pid_text()});
  CHECK(w.exit_code == 0);
  CHECK_THAT(w.out, Catch::Contains("present") && Catch::Contains("window 1 ("));
  CHECK_THAT(w.err, Catch::Contains("time limit after"));
}

TEST_CASE("7 outputs: sframe build never writes through a planted link") {
  temp_dir dir;
  const std::string victim = dir / "victim";
  REQUIRE(write_file(victim, "root's file"));
  const std::string input = source_path("examples/demo/jit-functions.json");
  for (const char* kind : {"--raw", "--elf"}) {
    INFO(kind);
    const std::string out = dir / (std::string("out") + kind);
    REQUIRE(::symlink(victim.c_str(), out.c_str()) == 0);
    const std::vector<std::string> address =
        std::string(kind) == "--raw" ? std::vector<std::string>{"--address", "0x7f3a5bf00000"}
                                     : std::vector<std::string>{};
    std::vector<std::string> argv = {cli(), "sframe", "build", "-i", input, kind, out};
    argv.insert(argv.end(), address.begin(), address.end());
    auto r = bounded(argv);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(out + ": is a symbolic link"));
    CHECK(read_file(victim) == "root's file");
    // A hard link (fs.protected_hardlinks=0) is replaced, not written through.
    ::unlink(out.c_str());
    REQUIRE(::link(victim.c_str(), out.c_str()) == 0);
    auto h = bounded(argv);
    CHECK(h.exit_code == 0);
    CHECK(read_file(victim) == "root's file");
    CHECK(read_file(out) != "root's file");
  }
}

TEST_CASE("8 sframe build is linear in the rows of a function") {
  temp_dir dir;
  REQUIRE(write_file(dir / "rows.json", one_function_json(300000)));
  auto r = bounded({cli(), "sframe", "build", "-i", dir / "rows.json", "--raw", dir / "out"},
                   uint64_t{1} << 30);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("300000 rows"));
}

TEST_CASE("8 sframe dump holds memory within a small constant of the section") {
  temp_dir dir;
  // 40 000 functions of 8 rows: a section of about 1.5 MB.
  std::string s = R"({"version": 2, "abi": "amd64", "functions": [)";
  for (int f = 0; f < 40000; ++f) {
    s += std::string(f ? "," : "") + R"({"start": ")" + std::to_string(0x100000 + 64 * f) +
         R"(", "size": 64, "rows": [)";
    for (int i = 0; i < 8; ++i)
      s += std::string(i ? "," : "") + R"({"pc": )" + std::to_string(i * 8) + R"(, "cfa": "sp+)" +
           std::to_string(8 + 8 * i) + "\"}";
    s += "]}";
  }
  REQUIRE(write_file(dir / "big.json", s + "]}"));
  auto b = run({cli(), "sframe", "build", "-i", dir / "big.json", "--raw", dir / "big.sframe"});
  REQUIRE(b.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat((dir / "big.sframe").c_str(), &st) == 0);
  const uint64_t section = static_cast<uint64_t>(st.st_size);
  // The tool's own baseline (code, libraries) plus 16 times the section.
  auto base = bounded(
      {cli(), "sframe", "dump", "--raw", source_path("fuzz/corpus/sframe_decode/ours-amd64")});
  for (const char* format : {"text", "json"}) {
    INFO(format);
    auto d = bounded({cli(), "sframe", "dump", "--raw", "--format", format, dir / "big.sframe"});
    REQUIRE(d.exit_code == 0);
    INFO("section " << section << " bytes, peak RSS " << d.max_rss_kib << " KiB, baseline "
                    << base.max_rss_kib << " KiB");
    CHECK(static_cast<uint64_t>(d.max_rss_kib - base.max_rss_kib) * 1024 <= 16 * section);
  }
}

TEST_CASE("8 FIFOs as files on the command line are refused, the other files handled") {
  temp_dir dir;
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string good = source_path("fuzz/corpus/sframe_decode/ours-amd64");
  auto c = bounded({cli(), "sframe", "check", "--raw", fifo, good, good});
  CHECK(c.exit_code == 1);
  CHECK_THAT(c.out, Catch::Contains(fifo + ": is a FIFO, not a regular file"));
  CHECK_THAT(c.out, Catch::Contains(good + ": ok"));
  auto b = bounded({cli(), "sframe", "build", "-i", fifo, "--raw", dir / "x"});
  CHECK(b.exit_code == 1);
  CHECK_THAT(b.err, Catch::Contains("is a FIFO"));
  auto o = bounded({cli(), "sframe", "build", "-i", source_path("examples/demo/jit-functions.json"),
                    "--raw", fifo, "--address", "0x7f3a5bf00000"});
  CHECK(o.exit_code == 1);
  CHECK_THAT(o.err, Catch::Contains(fifo + ": is a FIFO, not a regular file"));
  auto m = bounded({cli(), "windows", "list", "-p", "1", "--perf-map", fifo});
  CHECK(m.exit_code == 1);
  CHECK_THAT(m.err, Catch::Contains("is a FIFO"));
  // Standard input may still be a pipe.
  auto in = run({"/bin/sh", "-c",
                 "cat " + source_path("examples/demo/jit-functions.json") + " | " + cli() +
                     " sframe build -i - --raw " + dir / "y" + " --address 0x7f3a5bf00000"});
  CHECK(in.exit_code == 0);
}

TEST_CASE("8 numbers in messages are shortened") {
  const std::string digits(5000, '7');
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"windows", "list", "-p", digits},
        std::vector<std::string>{"windows", "watch", "-p", "1", "--interval-ms", digits},
        std::vector<std::string>{"sframe", "dump", "--raw", "--address", digits, "x"},
        std::vector<std::string>{"unwind", "check", "--pid", digits}}) {
    std::vector<std::string> argv = {cli()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = bounded(argv);
    CHECK(r.exit_code == 2);
    CHECK(r.err.size() < 400);
    CHECK_THAT(r.err, Catch::Contains("... (5000 bytes)"));
  }
}

TEST_CASE("8 names from the target are escaped on the terminal") {
  temp_dir dir;
  // A perf map naming JIT code with escape sequences (window title, colours, a C1 CSI).
  target t({});
  t.wait_for_windows();
  auto fns =
      json::parse(run({cli(), "windows", "list", "--json", "--functions", "-p", t.pid_text()}).out);
  const uint64_t start = fns["windows"][0]["functions"][0]["start"];
  char line[160];
  std::snprintf(line, sizeof line,
                "%llx 10 evil\x1b]0;owned\x07\x1b[31m\xc2\x9b"
                "2J\n",
                static_cast<unsigned long long>(start));
  REQUIRE(write_file(dir / "map", line));
  auto r = bounded(
      {cli(), "windows", "list", "--functions", "--perf-map", dir / "map", "-p", t.pid_text()});
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("evil\\x1b]0;owned\\x07\\x1b[31m\\xc2\\x9b2J"));

  // --max-file: a name beyond the first MiB of the map is not read; a warning says why and the
  // exit status that the answer is incomplete (input_cuts.hpp).
  std::string padded;
  while (padded.size() < (uint64_t{3} << 19)) padded += "10 1 padding\n";
  REQUIRE(write_file(dir / "padded", padded + line));
  const std::vector<std::string> padded_list = {cli(),        "windows",      "list", "--functions",
                                                "--perf-map", dir / "padded", "-p",   t.pid_text()};
  auto whole = bounded(padded_list);
  CHECK_THAT(whole.out, Catch::Contains("evil\\x1b"));
  auto argv = padded_list;
  argv.insert(argv.end(), {"--max-file", "1"});
  auto cut = bounded(argv);
  CHECK(cut.exit_code == 3);
  CHECK(cut.out.find("evil") == std::string::npos);
  CHECK_THAT(cut.err, Catch::Contains("warning: perf map " + dir / "padded" +
                                      ": only its first 1 MiB read (--max-file)"));

  // ELF symbol names in `sframe dump`.
  std::vector<uint8_t> elf = many_symbol_tables({3, 1, small_sframe(), 0});
  const std::string f0 = std::string("f0") + '\0';
  auto at = std::search(elf.begin(), elf.end(), f0.begin(), f0.end());
  REQUIRE(at != elf.end());
  at[1] = 0x1b;  // "f\x1b"
  REQUIRE(write_bytes(dir / "esc.so", elf));
  auto d = bounded({cli(), "sframe", "dump", dir / "esc.so"});
  CHECK(d.out.find('\x1b') == std::string::npos);
  CHECK_THAT(d.out, Catch::Contains("<f\\x1b>"));
}

TEST_CASE("8 a function start that would wrap the address space is refused") {
  temp_dir dir;
  auto b = run({cli(), "sframe", "build", "-i", source_path("examples/demo/jit-functions.json"),
                "--raw", dir / "s", "--address", "0x7f3a5bf00000"});
  REQUIRE(b.exit_code == 0);
  auto r =
      bounded({cli(), "sframe", "dump", "--raw", "--address", "0xffffffffffffff00", dir / "s"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("wraps the address space"));
}

TEST_CASE("8 unwind check --pid of a kernel thread says so") {
  auto r = bounded({cli(), "unwind", "check", "--pid", "2"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("thread 2 (kthreadd) is a kernel thread"));
  CHECK(r.err.find("CAP_SYS_PTRACE") == std::string::npos);
}
#endif  // HOSTILE_TESTS_DISABLED
