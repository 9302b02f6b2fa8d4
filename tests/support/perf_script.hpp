// Test helper: the call chains `perf script -F ip,sym[,dso]` prints, one vector of symbol names per
// sample (innermost first).
#pragma once

#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace jitunwind::test {

/// perf record's `--call-graph` argument copying `release_bytes` of stack per sample, or 32 KiB
/// in ASan builds: the programs the tests drive are built as the tests are, and ASan's redzones
/// make the native frames between a sample and main several times larger (toy-jit's recompile
/// path, the asmjit glue: samples there stopped short of main at 4 and 16 KiB).
inline std::string dwarf_call_graph(unsigned release_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  (void)release_bytes;
  return "dwarf,32768";
#else
  return "dwarf," + std::to_string(release_bytes);
#endif
}

/// `perf record -q -k 1 -e cpu-clock OPTIONS -o DATA -- COMMAND...`: the software clock (no
/// hardware counters on the machines the tests run on) and CLOCK_MONOTONIC timestamps (`-k 1`:
/// perf inject --jit orders the jitdump's records against the samples by them).
inline std::vector<std::string> perf_record(const std::string& data,
                                            const std::vector<std::string>& options,
                                            const std::vector<std::string>& command) {
  std::vector<std::string> argv = {"perf", "record", "-q", "-k", "1", "-e", "cpu-clock"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"-o", data, "--"});
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

inline std::vector<std::vector<std::string>> perf_script_chains(const std::string& out) {
  std::vector<std::vector<std::string>> chains;
  std::vector<std::string> current;
  static const std::regex frame(R"(^\s+[0-9a-f]+ (.*?)(\+0x[0-9a-f]+)?( \(.*\))?$)");
  std::stringstream s(out);
  std::string line;
  while (std::getline(s, line)) {
    std::smatch m;
    if (line.find_first_not_of(" \t") == std::string::npos) {
      if (!current.empty()) chains.push_back(std::move(current));
      current.clear();
    } else if (std::regex_match(line, m, frame)) {
      current.push_back(m[1]);
    }
  }
  if (!current.empty()) chains.push_back(std::move(current));
  return chains;
}

/// Samples whose chain starts with `first`.
inline size_t chains_starting_with(const std::vector<std::vector<std::string>>& chains,
                                   const std::string& first) {
  size_t n = 0;
  for (const auto& c : chains) n += !c.empty() && c[0] == first;
  return n;
}

/// Samples whose chain starts with `prefix` (consecutive frames) and contains `then` later.
inline size_t chains_with(const std::vector<std::vector<std::string>>& chains,
                          const std::vector<std::string>& prefix, const std::string& then) {
  size_t n = 0;
  for (const auto& c : chains) {
    if (c.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), c.begin())) continue;
    for (size_t i = prefix.size(); i < c.size(); ++i) {
      if (c[i] == then) {
        ++n;
        break;
      }
    }
  }
  return n;
}

}  // namespace jitunwind::test
