// What perf sees of LLVM ORC code (docs/integrating.md, "What perf sees"), next to jitwalk:
// packed functions and a module removed with ResourceTracker::remove then replaced, through the
// jitunwind::orc plugin and through libjitunwind_preload.so under an LLJIT that knows nothing of
// jitunwind (tests/orc/targets/orc_perf_paths.cpp). Every sample is judged by the functions
// running at its time (support/perf_view.hpp).
#include "support/perf_view.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

namespace t = jitunwind::test;
using t::perf_mode;

#if defined(HAVE_ORC_JIT)
namespace {

const std::vector<std::string> callees = {"spin_a", "spin_b"};

struct orc_path {
  const char* name;     // for the report
  bool preload;         // plain LLJIT under libjitunwind_preload.so, else the plugin
};

std::vector<std::string> command(const orc_path& p, const std::string& shape, bool fp) {
  std::vector<std::string> c;
  if (p.preload)
    c = {"LD_PRELOAD=" + t::binary_path("preload/libjitunwind_preload.so"),
         // Every publisher perf reads, and no wait for names beyond the default.
         "JITUNWIND_PUBLISH=registry,perfmap,jitdump,usdt-events"};
  c.push_back(t::binary_path(p.preload ? "tests/orc/orc_perf_paths_plain"
                                       : "tests/orc/orc_perf_paths"));
  // 100 ms of CPU per phase: at 1000 Hz ~100 samples each on an idle machine, never fewer
  // than the floors below on a busy one (a CPU-time phase gets its samples however long it takes).
  c.insert(c.end(), {"--shape", shape, "--ms", "150"});
  if (fp) c.push_back("--fp");
  return c;
}

t::perf_view_run profile(const orc_path& p, const std::string& shape, perf_mode mode) {
  t::temp_dir dir;
  // perf -g walks frame pointers: the JIT code keeps them for it (the DWARF mode has none).
  t::perf_view_run r = t::perf_view_of(command(p, shape, mode == perf_mode::perf_map), mode, dir,
                                       callees, {"JITUNWIND_LOG=stderr"});
  std::printf("perf sees: %s, %s, %s: %s\n", p.name, shape.c_str(), to_string(mode),
              r.view.text().c_str());
  INFO(p.name << ", " << shape << ", " << to_string(mode) << ": " << r.view.text() << "\n"
              << r.program_out << r.program_err);
  REQUIRE(r.phases.size() >= 1);
  REQUIRE(r.view.samples >= 60);
  return r;
}

// `whole`: the share of samples that must be whole to main (see the preload's test).
void jitwalk_sees(const orc_path& p, double whole = 0.95) {
#ifdef HAVE_JITWALK
  for (const std::string shape : {"packed", "reused"}) {
    t::temp_dir dir;
    const auto r =
        t::jitwalk_view_of(t::binary_path("bpf/jitwalk"), command(p, shape, false), dir, callees);
    std::printf("perf sees: %s, %s, jitwalk: %s\n", p.name, shape.c_str(), r.view.text().c_str());
    INFO(p.name << ", " << shape << ", jitwalk: " << r.view.text() << "\n"
                << r.program_out << r.program_err);
    REQUIRE(r.view.samples >= 50);
    CHECK(r.view.named_share() >= 0.95);
    CHECK(r.view.main_share() >= whole);
  }
#else
  (void)p;
  (void)whole;
#endif
}

bool profiling_allowed() {
  return t::may_run_privileged("perf record") && t::tool_available("perf");
}

}  // namespace

TEST_CASE("perf sees: ORC through the plugin: packed functions, a removed module replaced") {
  if (!profiling_allowed()) return;
  const orc_path plugin{"orc plugin", false};
  // One text section per function: the plugin grows each block by what perf inject needs. The
  // removed module's pages stay out of reach: JITLink puts the new one elsewhere, and perf's
  // one line per address names each right.
  t::check_placed_by_sdk(
      [&](const std::string& shape, perf_mode mode) { return profile(plugin, shape, mode); });
  jitwalk_sees(plugin);
}

#ifdef HAVE_PRELOAD
TEST_CASE("perf sees: ORC under the preload: packed functions, a removed module replaced") {
  if (!profiling_allowed()) return;
  const orc_path preload{"orc under the preload", true};
  // The preload publishes a registration once LLVM's debug object names it (it waits for it on
  // a worker thread, up to JITUNWIND_PRELOAD_NAME_WAIT_MS = 50 ms): the new code runs meanwhile,
  // unpublished — typically 1-3 % of a 150 ms phase here, up to a third of it on a machine so
  // busy that the worker waits the whole 50 ms. Where that gap matters (perf inject's names by
  // time, jitwalk's rows), the floors leave room for it.
  constexpr double gap_floor = 0.6;
  // JITLink packs the module's functions as it likes; the preload can only say what perf will
  // get wrong. perf -g names them all (frame pointers, the perf map).
  const auto packed_map = profile(preload, "packed", perf_mode::perf_map);
  CHECK(packed_map.view.named_share() >= 0.95);
  CHECK(packed_map.view.main_share() >= 0.95);
  const auto packed = profile(preload, "packed", perf_mode::jitdump);
  CHECK(packed.view.named_share() >= gap_floor);
  if (packed.view.main_share() < 0.95)  // what perf lost, the jitdump publisher said
    CHECK_THAT(packed.program_err, Catch::Contains("perf --call-graph dwarf cannot unwind"));
  // A removed module's memory is JITLink's to reuse: where the new code lands on the old
  // address, the perf map misnames it (said), the jitdump does not.
  const auto reused_map = profile(preload, "reused", perf_mode::perf_map);
  const auto at = t::printed_starts(reused_map.program_out);
  REQUIRE(at.size() == 2);
  if (at[0] == at[1]) {
    CHECK_THAT(reused_map.program_err, Catch::Contains("perf map lines cannot be withdrawn"));
    // ... named after the new module's debug object, which lies where the old one's was.
    CHECK_THAT(reused_map.program_err, Catch::Contains("'jit_g_b' at"));
    CHECK(reused_map.view.named_share() < 0.9);
  } else {
    CHECK(reused_map.view.named_share() >= 0.95);
  }
  // The second module's debug object lies where the first one's was, with the same size: the
  // preload must read it again, not take it for the first one (the code would be unnamed).
  const auto reused = profile(preload, "reused", perf_mode::jitdump);
  CHECK(reused.view.named_share() >= gap_floor);
  CHECK(reused.view.main_share() >= gap_floor);
  jitwalk_sees(preload, gap_floor);
}
#endif
#endif
