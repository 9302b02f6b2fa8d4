#include "tracer_support.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace jitunwind::test {

background_run::background_run(std::vector<std::string> argv, std::chrono::milliseconds timeout)
    : thread_([this, argv = std::move(argv), timeout] {
        result_ = run(argv, {}, timeout);
        done_.store(true);
      }) {}

background_run::~background_run() {
  if (thread_.joinable()) thread_.join();
}

const run_result& background_run::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

uprobe_events_lock::uprobe_events_lock() {
  // The lock is on the resource itself (read-only: opened for writing with O_TRUNC it would
  // clear the events), so that no lock file is left behind; without tracefs the tests run as
  // before, untaken.
  fd_ = ::open("/sys/kernel/tracing/uprobe_events", O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

uprobe_events_lock::~uprobe_events_lock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string unique_provider(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
}

std::vector<std::string> bpftrace_command(const std::string& script, int pid) {
  std::vector<std::string> argv = {"bpftrace"};
  if (pid != 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(pid));
  }
  argv.push_back("-e");
  argv.push_back(script);
  return argv;
}

}  // namespace jitunwind::test
