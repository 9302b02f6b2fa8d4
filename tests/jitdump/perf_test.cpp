// perf record -k 1 --call-graph dwarf + perf inject --jit + perf report/script on frame-pointer-
// less JIT code: names come from CODE_LOAD, callers of JIT frames from CODE_UNWINDING_INFO.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"
#include "support/killed_perf_map.hpp"
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <sstream>

using namespace jitunwind;
using namespace jitunwind::test;
namespace jd = jitunwind::detail::jitdump;

namespace {

struct injected {
  std::vector<std::vector<std::string>> chains;
  std::string report;
  std::string dir_listing;
};

// Records testjit (FP-less JIT code) with DWARF call graphs, injects, and returns the chains.
injected record_and_inject(const temp_dir& dir, const std::vector<std::string>& extra) {
  const std::string data = dir / "perf.data", jitted = dir / "perf.jit.data";
  std::vector<std::string> argv = {"perf",
                                   "record",
                                   "-q",
                                   "-k",
                                   "1",
                                   "-e",
                                   "cpu-clock",
                                   "--call-graph",
                                   "dwarf",
                                   "-o",
                                   data,
                                   "--",
                                   binary_path("tests/jitdump/testjit"),
                                   "--jitdump",
                                   dir.path(),
                                   "--seconds",
                                   "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const run_result rec = run(argv);
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  const run_result inj = run({"perf", "inject", "--jit", "-i", data, "-o", jitted});
  INFO(inj.out << inj.err);
  REQUIRE(inj.exit_code == 0);
  injected out;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    out.dir_listing += e.path().filename().string() + "\n";
  const run_result script = run({"perf", "script", "-i", jitted, "-F", "ip,sym"});
  INFO(script.err);
  REQUIRE(script.exit_code == 0);
  out.chains = perf_script_chains(script.out);
  const run_result report =
      run({"perf", "report", "-i", jitted, "--stdio", "--no-children", "--sort", "dso,sym"});
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  out.report = report.out;
  return out;
}

}  // namespace

TEST_CASE("perf inject --jit: JIT names and DWARF-unwound callers of FP-less JIT code") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  temp_dir dir;  // under /tmp, where perf's unwinders expect jitted-*.so
  const injected with = record_and_inject(dir, {});
  INFO(with.dir_listing);
  CHECK_THAT(with.dir_listing,
             Catch::Contains("jitted-") && Catch::Contains("-0.so") && Catch::Contains("-1.so"));
  CHECK_THAT(with.report, Catch::Contains("[.] jit_inner") && Catch::Contains("[.] jit_outer"));
  const size_t inner = chains_starting_with(with.chains, "jit_inner");
  const size_t full = chains_with(with.chains, {"jit_inner", "jit_outer"}, "main");
  const size_t from_native =
      chains_with(with.chains, {"native_work", "jit_inner", "jit_outer"}, "main");
  INFO("samples " << with.chains.size() << ", in jit_inner " << inner << ", unwound to main "
                  << full << ", native_work->...->main " << from_native);
  CHECK(inner >= 20);
  CHECK(full >= inner * 8 / 10);
  CHECK(from_native >= 10);

  // Control: the same program without CODE_UNWINDING_INFO loses the callers of JIT frames,
  // so the callers above come from our .eh_frame.
  temp_dir dir2;
  const injected without = record_and_inject(dir2, {"--no-unwind"});
  const size_t inner2 = chains_starting_with(without.chains, "jit_inner");
  INFO("without unwinding info: in jit_inner " << inner2);
  CHECK(inner2 >= 20);
  CHECK(chains_with(without.chains, {"jit_inner", "jit_outer"}, "main") == 0);
}

TEST_CASE("a cut perf map line is recognised only as the start of a stress line") {
  for (const char* ok :
       {"", "7f3a", "7f3a ", "7f3a 1", "7f3a 10 st", "7f3a 10 stress_t3", "7f3a 10 stress_t3_f",
        "7f3a 10 stress_t3_fn12", "7f3a 10 stress_t3_fn12_with_a_lo",
        "7f3a 10 stress_t3_fn12_with_a_longer_name_bb?"}) {
    INFO(ok);
    CHECK(is_start_of_stress_line(ok, {"_a", "_bb?cc"}));
  }
  for (const char* bad : {"7f3a 11", "7f3a 10 x", "7f3a 10 stress_tx", "7f3a 10 stress_t3_fnx",
                          "7f3a 10 stress_t3_fn_", "7f3a 10 stress_t3_fn1_with_a_longer_name_c",
                          "7f3a 10 stress_t3_fn1_with_a_longer_name_ab"}) {
    INFO(bad);
    CHECK_FALSE(is_start_of_stress_line(bad, {"_a", "_bb?cc"}));
  }
  // A cut is accepted only at a page boundary of the file.
  const std::string line = "7f3a 10 stress_t1_fn2_with_a_longer_name_a\n";
  std::string pages;
  while (pages.size() + line.size() <= 4096) pages += line;
  const std::string at_boundary = pages + std::string(line, 0, 4096 - pages.size());
  CHECK(split_killed_perf_map(at_boundary, {"_a"}).problem.empty());
  CHECK(split_killed_perf_map(at_boundary, {"_a"}).lines == pages);
  CHECK_FALSE(split_killed_perf_map(at_boundary + "7", {"_a"}).problem.empty());
  CHECK(split_killed_perf_map(pages, {"_a"}).tail.empty());
}

TEST_CASE("kill -9 during heavy publishing: complete perf map lines, parseable dump") {
  // One record (line) per write, and batches of 16 per write (add_batch / write_batch).
  const std::string batch = GENERATE(as<std::string>{}, "1", "16");
  INFO("batch " << batch);
  temp_dir dir;
  const run_result r =
      run({binary_path("tests/jitdump/testjit"), "--stress", "4", "--kill-after-ms", "300",
           "--batch", batch, "--perfmap", dir.path(), "--jitdump", dir.path()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 128 + 9);
  std::string map, dump;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("perf-", 0) == 0) map = e.path();
    if (name.rfind("jit-", 0) == 0) dump = e.path();
  }
  REQUIRE_FALSE(map.empty());
  REQUIRE_FALSE(dump.empty());

  const std::string whole = read_file(map);
  REQUIRE_FALSE(whole.empty());
  // Whole lines, and possibly the start of one cut by SIGKILL (support/killed_perf_map.hpp).
  const killed_perf_map cut = split_killed_perf_map(whole, {"_a", "_bb?cc"});
  INFO("unterminated tail: '" << cut.tail << "'");
  CHECK(cut.problem.empty());
  const std::string& text = cut.lines;
  static const std::regex line_re(
      R"(^[0-9a-f]+ 10 stress_t\d_fn\d+_with_a_longer_name_(a|bb\?cc)$)");
  size_t lines = 0;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line); ++lines) {
    INFO("line " << lines << ": " << line);
    REQUIRE(std::regex_match(line, line_re));
  }
  INFO("perf map lines: " << lines);
  CHECK(lines > 1000);

  const std::string bytes = read_file(dump);
  auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  INFO((d.ok() ? std::string() : d.error().message()));
  REQUIRE(d.ok());
  INFO("records " << d->records.size() << ", truncated tail " << d->truncated_tail);
  CHECK(d->records.size() > 1000);
  for (size_t i = 0; i < d->records.size(); ++i) {
    const auto& rec = d->records[i];
    if (rec.id != jd::code_load) continue;
    REQUIRE(i > 0);
    CHECK(d->records[i - 1].id == jd::code_unwinding_info);
    CHECK(rec.code.size() == 16);
  }
}

TEST_CASE("perf inject --jit succeeds on the dump of a process killed mid-publishing") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  const std::string batch = GENERATE(as<std::string>{}, "1", "8");
  INFO("batch " << batch);
  temp_dir dir;
  const std::string data = dir / "perf.data", jitted = dir / "perf.jit.data";
  const run_result rec =
      run({"perf", "record", "-q", "-k", "1", "-e", "cpu-clock", "-o", data, "--",
           binary_path("tests/jitdump/testjit"), "--stress", "2", "--stress-pause-us", "200",
           "--batch", batch, "--kill-after-ms", "300", "--jitdump", dir.path()});
  INFO(rec.out << rec.err);
  REQUIRE(std::filesystem::exists(data));
  std::string dump;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("jit-", 0) == 0) dump = e.path();
  REQUIRE_FALSE(dump.empty());
  const std::string bytes = read_file(dump);
  auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  REQUIRE(d.ok());
  size_t loads = 0;
  for (const auto& r : d->records) loads += r.id == jd::code_load;
  CHECK(loads > 100);
  const run_result inj = run({"perf", "inject", "--jit", "-i", data, "-o", jitted});
  INFO(inj.out << inj.err);
  REQUIRE(inj.exit_code == 0);
  size_t objects = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    objects += e.path().filename().string().rfind("jitted-", 0) == 0;
  INFO("loads " << loads << ", jitted objects " << objects);
  CHECK(objects == loads);
  const run_result report = run({"perf", "report", "-i", jitted, "--stdio"});
  CHECK(report.exit_code == 0);
}
