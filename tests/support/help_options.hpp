// The long options a generated --help lists (cmdline/), for tests that hold the docs to it.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace jitunwind::test {

/// "--name" of every option row of `help` ("  -p, --pid PID", "      --no-jit"), --help left out.
inline std::vector<std::string> help_options(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    // Rows start at column 2 ("-p, --pid") or 6 ("--kernel"); wrapped help text further right.
    const size_t first = line.find_first_not_of(' ');
    if ((first != 2 && first != 6) || line[first] != '-') continue;
    const size_t dashes = line.find("--", first);
    if (dashes == std::string::npos || dashes > first + 4) continue;
    const std::string name = line.substr(dashes, line.find_first_of(" =[", dashes) - dashes);
    if (name != "--help") out.push_back(name);
  }
  return out;
}

}  // namespace jitunwind::test
