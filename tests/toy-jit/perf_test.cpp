// perf sees toy-jit's code: frame-pointer call graphs with perf-map names, and DWARF call
// graphs through JIT code without frame pointers via jitdump + perf inject --jit.
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "tools_support.hpp"

#include <algorithm>

using jitunwind::test::run;
using namespace toytest;

namespace {

bool can_run_perf() {
  return !examples_missing(TOY_JIT) && jitunwind::test::may_run_privileged("perf record") &&
         jitunwind::test::tool_available("perf");
}

// spin.toy's chain under `compute`: toy:compute, 13 x toy:level, toy:main.
bool is_full_spin_chain(const std::vector<std::string>& toy) {
  if (toy.size() != 15 || toy.front() != "toy:compute" || toy.back() != "toy:main") return false;
  return std::all_of(toy.begin() + 1, toy.end() - 1,
                     [](const std::string& f) { return f == "toy:level"; });
}

}  // namespace

TEST_CASE("perf record -g with frame pointers: perf-map names and stacks down to main") {
  if (!can_run_perf()) return;
  jitunwind::test::temp_dir dir;
  const std::string data = dir / "perf.data";
  const auto rec =
      run({"perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data, "--", TOY_JIT,
           "--frame-pointers=on", "--publish=perfmap", program_path("spin.toy"), "20000"});
  REQUIRE(rec.exit_code == 0);
  const auto script = run({"perf", "script", "-i", data, "-F", "ip,sym"});
  // perf report (below) still needs the perf map: both run before it is removed.
  const auto report = run(
      {"perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-g", "none"});
  remove_perf_maps(data);
  REQUIRE(script.exit_code == 0);
  const auto samples = parse_perf_script(script.out);
  size_t in_compute = 0, full = 0, to_main = 0;
  for (const stack& s : samples) {
    if (s.empty() || s.front() != "toy:compute") continue;
    ++in_compute;
    const auto toy = toy_frames(s);
    if (is_full_spin_chain(toy)) ++full;
    // After toy:main come the runner and C main.
    const auto it = std::find(s.begin(), s.end(), "toy:main");
    if (it != s.end() && std::find(it, s.end(), "main") != s.end()) ++to_main;
  }
  INFO(in_compute << " samples in toy:compute, " << full << " with the whole toy chain, " << to_main
                  << " reaching main");
  REQUIRE(in_compute >= 20);
  // A sample can land in a prologue/epilogue instant where the FP walk skips one frame; allow
  // a few percent, no more.
  CHECK(full >= in_compute * 95 / 100);
  CHECK(to_main >= in_compute * 95 / 100);

  // perf report attributes samples to the toy functions by name.
  REQUIRE(report.exit_code == 0);
  CHECK(report.out.find("toy:compute") != std::string::npos);
  CHECK(report.out.find("toylang_native_fp") != std::string::npos);
}

TEST_CASE("perf --call-graph dwarf + perf inject --jit without frame pointers: named callers") {
  if (!can_run_perf()) return;
  jitunwind::test::temp_dir dir;
  const std::string data = dir / "perf.data";
  const std::string injected = dir / "perf.jit.data";
  // jitdump files and the .so files perf inject writes go to the temp dir (JITDUMPDIR); perf
  // finds them through the jitdump's mmap record.
  const std::string env = "JITDUMPDIR=" + dir.path();
  auto argv = jitunwind::test::perf_record(
      data, {"-F", "1000", "--call-graph", "dwarf,16384"},
      {TOY_JIT, "--frame-pointers=off", "--publish=jitdump", program_path("spin.toy"), "20000"});
  argv.insert(argv.begin(), {"env", env});
  const auto rec = run(argv);
  REQUIRE(rec.exit_code == 0);
  const auto inject = run({"perf", "inject", "--jit", "-i", data, "-o", injected});
  REQUIRE(inject.exit_code == 0);
  const auto script = run({"perf", "script", "-i", injected, "-F", "ip,sym"});
  REQUIRE(script.exit_code == 0);
  const auto samples = parse_perf_script(script.out);
  size_t in_compute = 0, with_callers = 0, full = 0;
  for (const stack& s : samples) {
    if (s.empty() || s.front() != "toy:compute") continue;
    ++in_compute;
    const auto toy = toy_frames(s);
    if (toy.size() >= 3 && toy[1] == "toy:level") ++with_callers;
    if (is_full_spin_chain(toy)) ++full;
  }
  INFO(in_compute << " samples in toy:compute, " << with_callers << " with toy callers, " << full
                  << " with the whole chain");
  REQUIRE(in_compute >= 10);
  CHECK(with_callers >= in_compute * 90 / 100);
  CHECK(full >= in_compute * 80 / 100);
}
