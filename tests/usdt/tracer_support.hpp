// Helpers of the usdt tests: running a tracer in the background while the test process (the
// traced process) fires probes, and waiting for conditions without blind sleeps.
#pragma once

#include "support/privileges.hpp"
#include "support/process.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace jitunwind::test {

/// A program running in a background thread (`run` with a timeout).
class background_run {
 public:
  background_run(std::vector<std::string> argv, std::chrono::milliseconds timeout);
  ~background_run();
  bool done() const { return done_.load(); }
  /// Waits for the end and returns the result.
  const run_result& wait();

 private:
  std::atomic<bool> done_{false};
  run_result result_;
  std::thread thread_;
};

/// Polls `cond` every millisecond until it is true or `timeout` passes.
bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

/// Held while a test defines, uses and deletes uprobe events with `perf probe` or by writing
/// uprobe_events: perf probe refuses to add an event whose name another test process defined
/// meanwhile in another group ("event already exists"), so under `ctest -j` such tests take
/// turns (an flock on /sys/kernel/tracing/uprobe_events, released when the holder exits, even
/// by a crash).
class uprobe_events_lock {
 public:
  uprobe_events_lock();
  ~uprobe_events_lock();
  uprobe_events_lock(const uprobe_events_lock&) = delete;
  uprobe_events_lock& operator=(const uprobe_events_lock&) = delete;

 private:
  int fd_ = -1;
};

/// A provider name unique to this test process and call ("<prefix>_<pid>_<n>").
std::string unique_provider(const std::string& prefix);

/// bpftrace command line prefix (bpftrace prints a harmless warning when it cannot raise
/// RLIMIT_MEMLOCK: kernels >= 5.11 account BPF memory to the cgroup instead).
std::vector<std::string> bpftrace_command(const std::string& script, int pid = 0);

}  // namespace jitunwind::test
