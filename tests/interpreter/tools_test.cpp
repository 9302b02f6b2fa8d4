// Interpreted frames are visible: perf -g and gdb see one toy:<function> trampoline frame per
// interpreted call, in order; without frame pointers SFrame alone recovers the exact chain.
#include "support/gdb.hpp"
#include "support/privileges.hpp"
#include "tools_support.hpp"

#include <algorithm>

using jitunwind::test::run;
using namespace toytest;

namespace {

// spin.toy's interpreted chains: [toy:compute | toy:work_fp | toy:work_nofp] toy:level+ toy:main.
bool is_spin_chain(const std::vector<std::string>& toy) {
  if (toy.size() < 2 || toy.back() != "toy:main") return false;
  size_t i = 0;
  if (toy[0] == "toy:compute" || toy[0] == "toy:work_fp" || toy[0] == "toy:work_nofp") i = 1;
  if (i == toy.size() - 1) return false;
  return std::all_of(toy.begin() + static_cast<std::ptrdiff_t>(i), toy.end() - 1,
                     [](const std::string& f) { return f == "toy:level"; });
}

}  // namespace

TEST_CASE("perf record -g: samples in the eval loop carry the toy:<function> chain down to main") {
  if (examples_missing(TOY_INTERP)) return;
  if (!jitunwind::test::may_run_privileged("perf record")) return;
  if (!jitunwind::test::tool_available("perf")) return;
  jitunwind::test::temp_dir dir;
  const std::string data = dir / "perf.data";
  const auto rec = run({"perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data,
                        "--", TOY_INTERP, "--publish=perfmap", program_path("spin.toy"), "4000"});
  REQUIRE(rec.exit_code == 0);
  const auto script = run({"perf", "script", "-i", data, "-F", "ip,sym"});
  remove_perf_maps(data);
  REQUIRE(script.exit_code == 0);
  size_t in_eval = 0, chained = 0, deepest = 0;
  for (const stack& s : parse_perf_script(script.out)) {
    // Samples in the interpreter itself (the eval loop), not in the native helpers.
    if (s.empty() || s.front().find("toyinterp::interpreter::eval") == std::string::npos) continue;
    ++in_eval;
    const auto toy = toy_frames(s);
    if (is_spin_chain(toy)) {
      ++chained;
      deepest = std::max(deepest, toy.size());
    }
  }
  INFO(in_eval << " samples in eval, " << chained << " with a valid toy chain");
  REQUIRE(in_eval >= 50);
  CHECK(chained >= in_eval * 95 / 100);
  CHECK(deepest == 15);  // toy:compute + 13 x toy:level + toy:main
}

TEST_CASE("gdb bt shows the toy:<function> trampoline frames") {
  if (examples_missing(TOY_INTERP)) return;
  if (!jitunwind::test::tool_available("gdb")) return;
  for (const char* binary : {TOY_INTERP, TOY_INTERP_NOFP}) {
    INFO(binary);
    const auto r = jitunwind::test::gdb_backtrace(
        "toylang_native_nofp", {binary, "--publish=gdb", program_path("spin.toy"), "1"});
    REQUIRE(r.exit_code == 0);
    INFO(r.out);
    const auto frames = jitunwind::test::backtrace_names(r.out);
    std::vector<std::string> toy;
    for (const auto& f : frames) {
      if (f.rfind("toy:", 0) == 0) toy.push_back(f);
    }
    std::vector<std::string> expected = {"toy:work_nofp"};
    for (int i = 0; i < 13; ++i) expected.push_back("toy:level");
    expected.push_back("toy:main");
    CHECK(toy == expected);
    REQUIRE(!frames.empty());
    CHECK(frames.front() == "toylang_native_nofp");
    CHECK(frames.back() == "main");
  }
}
