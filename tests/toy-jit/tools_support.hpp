// Helpers for the tests that run real profilers and debuggers on the example runtimes.
#pragma once

#include "examples_support.hpp"
#include "support/perf_script.hpp"

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace toytest {

/// One sample of `perf script -F ip,sym`: its frames' symbol names, innermost first.
using stack = std::vector<std::string>;

/// The samples of `perf script -F ip,sym` output (see support/perf_script.hpp).
inline std::vector<stack> parse_perf_script(const std::string& text) {
  return jitunwind::test::perf_script_chains(text);
}

/// The `toy:` frames of a stack, innermost first.
inline std::vector<std::string> toy_frames(const stack& s) {
  std::vector<std::string> out;
  for (const auto& f : s) {
    if (f.rfind("toy:", 0) == 0) out.push_back(f);
  }
  return out;
}

/// Removes the /tmp/perf-PID.map files of the processes recorded in `perf_data` (perf reads
/// perf maps from /tmp only, so the runtimes cannot be pointed at a scratch directory).
inline void remove_perf_maps(const std::string& perf_data) {
  const auto pids = jitunwind::test::run({"perf", "script", "-i", perf_data, "-F", "pid"});
  std::istringstream in(pids.out);
  std::set<std::string> seen;
  for (std::string pid; in >> pid;) {
    if (seen.insert(pid).second) std::remove(("/tmp/perf-" + pid + ".map").c_str());
  }
}

}  // namespace toytest
