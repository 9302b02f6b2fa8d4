// Tests that need root, BPF, perf events or uprobes call `may_run_privileged` first.
#pragma once

#include <string>

namespace jitunwind::test {

/// True if the process can do what `what` needs (root). Otherwise prints why the test is
/// skipped and returns false — unless JITUNWIND_REQUIRE_BPF=1 (set by .ci/run), where a missing
/// privilege fails the current test instead.
bool may_run_privileged(const std::string& what);

/// True if JITUNWIND_REQUIRE_BPF=1 is set.
bool privileged_tests_required();

/// A missing prerequisite: prints why the test is skipped and returns false — unless
/// JITUNWIND_REQUIRE_BPF=1, where it fails the current test (CI has everything).
bool skip_or_fail(const std::string& reason);

/// True if `program` is found on PATH. Otherwise behaves like may_run_privileged: skip with a
/// printed reason, or fail when JITUNWIND_REQUIRE_BPF=1 (CI installs every tool).
bool tool_available(const std::string& program);

/// Mounts tracefs on /sys/kernel/tracing if it is not there (a fresh machine may not have it):
/// bpftrace's tracepoints and kprobes, perf probe and uprobe_events need it. Returns false with
/// a reason in `why` if it cannot (not root, or the mount failed).
bool ensure_tracefs(std::string* why);

}  // namespace jitunwind::test
