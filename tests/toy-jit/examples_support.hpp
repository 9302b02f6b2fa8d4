// Shared by the tests of the example runtimes (tests/toy-jit, tests/interpreter).
#pragma once

#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace toytest {

/// A sample program with arguments small enough for tests, and its known result where one is
/// known independently of both runtimes.
struct sample {
  std::string file;  // under examples/toy-jit/programs/
  std::vector<std::string> args;
  std::string known_value;  // main's value ("" = compare runtimes only)
};

inline const std::vector<sample>& samples() {
  static const std::vector<sample> all = {
      {"fib.toy", {"20"}, "6765"},     {"fib.toy", {"1"}, "1"},    {"mutual.toy", {"1000"}, ""},
      {"mutual.toy", {"5"}, ""},       {"features.toy", {}, "7"},  {"spin.toy", {"300"}, ""},
      {"recompile.toy", {"2000"}, ""}, {"verify.toy", {"20"}, ""},
  };
  return all;
}

inline std::string program_path(const std::string& file) {
  return jitunwind::test::source_path("examples/toy-jit/programs/" + file);
}

inline std::vector<std::string> command(const std::string& binary,
                                        const std::vector<std::string>& options, const sample& s) {
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(program_path(s.file));
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  return argv;
}

/// The last line of a program's output (main's value).
inline std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

/// True (after a WARN) when the example binaries were not built (JITUNWIND_BUILD_EXAMPLES=OFF).
inline bool examples_missing(const char* binary) {
  if (binary[0] != '\0') return false;
  WARN("SKIPPED: examples not built (JITUNWIND_BUILD_EXAMPLES=OFF)");
  return true;
}

}  // namespace toytest
