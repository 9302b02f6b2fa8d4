// perf record -k 1 --call-graph dwarf + perf inject --jit + perf report/script on frame-pointer-
// less JIT code: names come from CODE_LOAD, callers of JIT frames from CODE_UNWINDING_INFO.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"
#include "support/perf_map_text.hpp"
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
  std::vector<std::string> argv = perf_record(
      data, {"--call-graph", "dwarf"},
      {binary_path("tests/jitdump/testjit"), "--jitdump", dir.path(), "--seconds", "1"});
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

TEST_CASE("perf map text: padding only up to page boundaries, no line across one") {
  const std::string line = "7f3a 10 stress_t1_fn2_with_a_longer_name_a\n";
  std::string pages;
  while (pages.size() + line.size() <= 4096) pages += line;
  const std::string padded = pages + std::string(4096 - pages.size(), '\n') + line;
  const perf_map_text ok = parse_perf_map_text(padded);
  CHECK(ok.problem.empty());
  CHECK(ok.lines.size() == pages.size() / line.size() + 1);
  // A line across the boundary, a cut line, padding that ends elsewhere.
  CHECK_FALSE(parse_perf_map_text(pages + line).problem.empty());
  CHECK_FALSE(parse_perf_map_text(pages + "7f3a 10 st").problem.empty());
  CHECK_FALSE(parse_perf_map_text(line + "\n\n" + line).problem.empty());
  // Cut right after the padding: whole lines only.
  CHECK(parse_perf_map_text(pages + std::string(4096 - pages.size(), '\n')).problem.empty());
}

TEST_CASE("kill -9 during heavy publishing: complete perf map lines, parseable dump") {
  // One record (line) per write, and batches of 16 per write (add_batch / write_batch).
  const std::string batch = GENERATE(as<std::string>{}, "1", "16");
  INFO("batch " << batch);
  temp_dir dir;
  const run_result r = run({binary_path("tests/jitdump/testjit"), "--stress", "4",
                            "--kill-after-functions", "1200", "--kill-after-ms", "50", "--batch",
                            batch, "--perfmap", dir.path(), "--jitdump", dir.path()});
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
  // Whole lines only: none crosses a page boundary, where SIGKILL can cut a write.
  const perf_map_text text = parse_perf_map_text(whole);
  INFO(text.problem);
  CHECK(text.problem.empty());
  static const std::regex line_re(
      R"(^[0-9a-f]+ 10 stress_t\d_fn\d+_with_a_longer_name_(a|bb\?cc)$)");
  size_t lines = 0;
  for (const std::string& line : text.lines) {
    INFO("line " << lines << ": " << line);
    REQUIRE(std::regex_match(line, line_re));
    ++lines;
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
  // perf record of a publisher killed once it wrote 150 functions (whatever the load).
  const std::vector<std::string> jit = {binary_path("tests/jitdump/testjit"),
                                        "--stress",
                                        "2",
                                        "--stress-pause-us",
                                        "200",
                                        "--batch",
                                        batch,
                                        "--kill-after-functions",
                                        "150",
                                        "--kill-after-ms",
                                        "50",
                                        "--jitdump",
                                        dir.path()};
  std::vector<std::string> argv = {"perf", "record",    "-q", "-k", "1",
                                   "-e",   "cpu-clock", "-o", data, "--"};
  argv.insert(argv.end(), jit.begin(), jit.end());
  const run_result rec = run(argv);
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
