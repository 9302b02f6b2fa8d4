#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// The USDT provider's file mode keeps its files in $XDG_RUNTIME_DIR/jitunwind, else in
// /tmp/jitunwind-UID: the tests and what they start get a runtime directory of their own,
// removed when the test program ends (by the process that made it, not a forked child).
// Plain data: set before the dynamic initializers of this file would run.
char runtime_dir[] = "/tmp/jitunwind-test-run-XXXXXX";
pid_t runtime_dir_owner = -1;

void remove_runtime_dir() {
  if (getpid() != runtime_dir_owner) return;
  std::error_code ec;
  std::filesystem::remove_all(runtime_dir, ec);
}

void own_runtime_dir() {
  if (mkdtemp(runtime_dir) == nullptr) return;
  runtime_dir_owner = getpid();
  setenv("XDG_RUNTIME_DIR", runtime_dir, 1);
  std::atexit(remove_runtime_dir);
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
  own_runtime_dir();
}

}  // namespace
