// What perf sees on each integration path that tests/window/perf_paths drives (docs/integrating.md,
// "What perf sees"): packed code and code at a reused address, under `perf record -g` with the
// perf map and under `perf record --call-graph dwarf` + `perf inject --jit` with the jitdump.
// Every sample is judged by the functions live at its time (support/perf_view.hpp): its JIT
// frames named right, and `main` reached above them. Where perf cannot be right (runtime-placed
// packed code and DWARF unwinding; a reused address and the perf map) the SDK must say so: the
// warning is checked instead of perf's output.
#include "support/perf_view.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include <regex>
#include <sstream>
#include <string>

using namespace jitunwind::test;

namespace {

// The start addresses the program printed ("fn NAME 0xSTART SIZE from T"), in order.
std::vector<uint64_t> starts(const std::string& out) {
  std::vector<uint64_t> v;
  static const std::regex fn(R"(^fn \S+ 0x([0-9a-f]+) )");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, fn)) v.push_back(std::stoull(m[1], nullptr, 16));
  }
  return v;
}

const std::vector<std::string> callees = {"spin_a", "spin_b"};

std::vector<std::string> command(const std::string& path, const std::string& shape) {
  return {binary_path("tests/window/perf_paths"), "--path", path, "--shape", shape, "--ms", "200"};
}

perf_view_run profile(const std::string& path, const std::string& shape, perf_mode mode) {
  temp_dir dir;
  std::vector<std::string> cmd = command(path, shape);
  // perf -g walks frame pointers: the JIT code keeps them for it (the DWARF mode has none).
  if (mode == perf_mode::perf_map) cmd.push_back("--fp");
  perf_view_run r = perf_view_of(cmd, mode, dir, callees, {"JITUNWIND_LOG=stderr"});
  // The numbers of docs/integrating.md, "What perf sees" (ctest -V shows them).
  std::printf("perf sees: %s, %s, %s: %s\n", path.c_str(), shape.c_str(), to_string(mode),
              r.view.text().c_str());
  INFO(path << ", " << shape << ", " << to_string(mode) << ": " << r.view.text() << "\n"
            << r.program_out << r.program_err);
  REQUIRE(r.phases.size() >= 1);
  // 200 ms of CPU per phase at 2000 Hz: about 400 samples per phase on an idle machine; a
  // busy one gives perf fewer, never fewer than this many.
  REQUIRE(r.view.samples >= 100);
  return r;
}

bool profiling_allowed() {
  return may_run_privileged("perf record") && tool_available("perf");
}

// jitwalk on the same program, next to perf: right whatever the placement (SFrame rows per
// window; names by the generation of the rows a frame was unwound with).
void jitwalk_sees(const std::string& path) {
  const std::string jitwalk = binary_path("bpf/jitwalk");
  if (::access(jitwalk.c_str(), X_OK) != 0) {
    skip_or_fail("jitwalk is not built (JITUNWIND_BUILD_BPF)");
    return;
  }
  for (const std::string shape : {"packed", "reused"}) {
    temp_dir dir;
    const perf_view_run r = jitwalk_view_of(jitwalk, command(path, shape), dir, callees);
    std::printf("perf sees: %s, %s, jitwalk: %s\n", path.c_str(), shape.c_str(),
                r.view.text().c_str());
    INFO(path << ", " << shape << ", jitwalk: " << r.view.text() << "\n" << r.program_out
              << r.program_err);
    REQUIRE(r.view.samples >= 50);
    CHECK(r.view.named_share() >= 0.95);
    CHECK(r.view.main_share() >= 0.95);
  }
}

// Code the SDK places (owned windows, the asmjit glue): perf right in both modes, packed or
// recompiled (address reuse off while the perf map or jitdump is on: the new code goes
// elsewhere).
void sdk_places(const std::string& path) {
  for (perf_mode mode : {perf_mode::perf_map, perf_mode::jitdump}) {
    const auto packed = profile(path, "packed", mode);
    CHECK(packed.view.named_share() >= 0.95);
    CHECK(packed.view.main_share() >= 0.95);
    CHECK(packed.program_err.find("warning") == std::string::npos);
    const auto reused = profile(path, "reused", mode);
    const auto at = starts(reused.program_out);
    REQUIRE(at.size() == 2);
    CHECK(at[0] != at[1]);
    CHECK(reused.view.named_share() >= 0.95);
    CHECK(reused.view.main_share() >= 0.95);
  }
}

// Code the runtime places (the on-ramp, described windows): DWARF unwinding through packed code
// is lost (perf inject maps each function's unwinding data over the next function) and said;
// spaced by jitunwind_perf_code_gap() it is right. A reused address is misnamed by the perf map
// (said) and right through the jitdump.
void runtime_places(const std::string& path) {
  const auto packed_map = profile(path, "packed", perf_mode::perf_map);
  CHECK(packed_map.view.named_share() >= 0.95);
  CHECK(packed_map.view.main_share() >= 0.95);
  const auto packed = profile(path, "packed", perf_mode::jitdump);
  CHECK(packed.view.named_share() >= 0.95);
  CHECK(packed.view.main_share() < 0.5);  // f0..f2 lost their unwinding data
  CHECK_THAT(packed.program_err, Catch::Contains("perf --call-graph dwarf cannot unwind through"));
  const auto spaced = profile(path, "spaced", perf_mode::jitdump);
  CHECK(spaced.view.named_share() >= 0.95);
  CHECK(spaced.view.main_share() >= 0.95);
  CHECK(spaced.program_err.find("warning") == std::string::npos);
  const auto reused_map = profile(path, "reused", perf_mode::perf_map);
  const auto at = starts(reused_map.program_out);
  REQUIRE(at.size() == 2);
  CHECK(at[0] == at[1]);
  CHECK_THAT(reused_map.program_err, Catch::Contains("perf map lines cannot be withdrawn"));
  // perf takes one of the two lines for both phases: about half the samples are misnamed.
  CHECK(reused_map.view.named_share() < 0.9);
  const auto reused = profile(path, "reused", perf_mode::jitdump);
  CHECK(reused.view.named_share() >= 0.95);
  CHECK(reused.view.main_share() >= 0.95);
}

}  // namespace

TEST_CASE("perf sees: the one-call on-ramp (C API): packed, spaced and reused code") {
  if (!profiling_allowed()) return;
  runtime_places("onecall");
  jitwalk_sees("onecall");
}

TEST_CASE("perf sees: a described window: packed, spaced and reused code") {
  if (!profiling_allowed()) return;
  runtime_places("described");
  jitwalk_sees("described");
}

TEST_CASE("perf sees: an owned window: code the SDK places, recompiled") {
  if (!profiling_allowed()) return;
  sdk_places("owned");
  jitwalk_sees("owned");
}

TEST_CASE("perf sees: the asmjit glue: code the SDK places, recompiled") {
  if (!profiling_allowed()) return;
  const run_result probe = run({"env", "JITUNWIND_PUBLISH=none", binary_path("tests/window/perf_paths"), "--path", "asmjit",
                                "--shape", "packed", "--ms", "1"});
  if (probe.exit_code != 0 && probe.err.find("unavailable") != std::string::npos) {
    skip_or_fail("perf_paths was built without asmjit");
    return;
  }
  sdk_places("asmjit");
  jitwalk_sees("asmjit");
}
