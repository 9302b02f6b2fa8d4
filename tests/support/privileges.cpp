#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace jitunwind::test {

bool privileged_tests_required() {
  const char* v = std::getenv("JITUNWIND_REQUIRE_BPF");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

bool skip_or_fail(const std::string& reason) {
  if (privileged_tests_required()) {
    FAIL("JITUNWIND_REQUIRE_BPF=1 but " << reason);
  }
  WARN("SKIPPED: " << reason);
  return false;
}

bool may_run_privileged(const std::string& what) {
  if (geteuid() == 0) return true;
  return skip_or_fail(what + " needs root (BPF, perf events, uprobes)");
}

bool tool_available(const std::string& program) {
  std::string cmd = "command -v '" + program + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  return skip_or_fail(program + " is not installed (scripts/install-deps.sh installs it)");
}

bool ensure_tracefs(std::string* why) {
  struct stat st {};
  if (stat("/sys/kernel/tracing/uprobe_events", &st) == 0) return true;
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) return true;
  if (why != nullptr)
    *why = std::string("tracefs is not mounted on /sys/kernel/tracing and mounting it failed: ") +
           std::strerror(errno) + " (scripts/prepare-host.sh mounts it, as root)";
  return false;
}

}  // namespace jitunwind::test
