// Helpers for the tests that run real profilers and debuggers on the example runtimes.
#pragma once

#include "examples_support.hpp"

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace toytest {

/// One sample of `perf script -F ip,sym`: its frames' symbol names, innermost first.
using stack = std::vector<std::string>;

/// Parses `perf script -F ip,sym` output (blank-line separated samples, one "ADDR SYMBOL"
/// line per frame; unresolved frames are "[unknown]").
inline std::vector<stack> parse_perf_script(const std::string& text) {
  std::vector<stack> samples;
  stack current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) {
      if (!current.empty()) samples.push_back(std::move(current));
      current.clear();
      continue;
    }
    const size_t space = line.find(' ', first);
    if (space == std::string::npos) continue;
    std::string sym = line.substr(space + 1);
    // "sym+0x1a" when offsets are shown; strip them.
    if (const size_t plus = sym.rfind("+0x"); plus != std::string::npos) sym.resize(plus);
    current.push_back(sym);
  }
  if (!current.empty()) samples.push_back(std::move(current));
  return samples;
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
