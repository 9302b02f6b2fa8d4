#include "support/gdb.hpp"

#include <regex>
#include <sstream>

namespace jitunwind::test {

run_result gdb_backtrace(const std::string& breakpoint, const std::vector<std::string>& program,
                         const std::vector<std::string>& before_run) {
  std::vector<std::string> argv = {"gdb",    "-q",
                                   "-batch", "-nx",
                                   "-ex",    "set debuginfod enabled off",
                                   "-ex",    "break " + breakpoint};
  for (const std::string& c : before_run) argv.insert(argv.end(), {"-ex", c});
  argv.insert(argv.end(), {"-ex", "run", "-ex", "bt", "--args"});
  argv.insert(argv.end(), program.begin(), program.end());
  return run(argv, {}, std::chrono::seconds(120));
}

std::vector<std::string> backtrace_names(const std::string& gdb_output) {
  // "#N  NAME (args) ..." or "#N  0x... in NAME (args) ..."
  static const std::regex frame(R"(^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \()");
  std::vector<std::string> names;
  std::istringstream in(gdb_output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, frame)) names.push_back(m[1]);
  }
  return names;
}

}  // namespace jitunwind::test
