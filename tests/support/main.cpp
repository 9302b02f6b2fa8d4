#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

// The variables that configure the SDK, the tools or the peers (JITUNWIND_PUBLISH, JITDUMPDIR,
// ...) come from whoever runs the tests: a developer's shell must not change what a test sees.
// Tests that need one set it themselves. Kept: the switches of the test suite itself. The
// messages of the peers (readelf, gdb, perf) are matched in English. This runs before any static
// initializer of a test (constructor priority), some of which set variables of their own.
bool kept(const std::string& name) {
  for (const char* keep :
       {"JITUNWIND_REQUIRE_BPF", "JITUNWIND_HAMMER_SECONDS", "JITUNWIND_SFRAME_VECTORS",
        "JITUNWIND_WRITE_FUZZ_SEEDS", "JITUNWIND_CHURN_CYCLES", "JITUNWIND_CSMITH_PROGRAMS",
        "JITUNWIND_SOAK_SECONDS", "JITUNWIND_HOSTILE_", "JITUNWIND_TEST_"}) {
    if (name.rfind(keep, 0) == 0) return true;
  }
  return false;
}

__attribute__((constructor(101))) void neutral_environment() {
  std::vector<std::string> drop;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if ((name.rfind("JITUNWIND_", 0) == 0 && !kept(name)) || name == "JITDUMPDIR" ||
        name == "DEBUGINFOD_URLS")
      drop.push_back(name);
  }
  for (const std::string& name : drop) unsetenv(name.c_str());
  setenv("LC_ALL", "C", 1);
}

}  // namespace
