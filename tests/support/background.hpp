// A program started in the background for tests that inspect a running process (the tools'
// -p PID modes): its output to /dev/null, killed through a pidfd and reaped at the end.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace jitunwind::test {

// A runtime started in the background (output to /dev/null, or to `err_file` for its standard
// error), killed and reaped at the end.
// `reap_in_background` waits for it on a thread, as a shell would: a process that ends is then
// gone, not a zombie of the test.
class background {
 public:
  explicit background(const std::vector<std::string>& argv, bool reap_in_background = false,
                      const std::string& err_file = {}) {
    // The constructor returns once the child has exec'd (the close-on-exec pipe reads end of
    // file): until then the pid is a copy of this test, whose registry a tool would find.
    int exec_pipe[2] = {-1, -1};
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      if (!err_file.empty()) {
        const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0) dup2(err, 2);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(exec_pipe[1]);
    char byte;
    while (pid_ > 0 && read(exec_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    close(exec_pipe[0]);
    // A signal through a pidfd never reaches another process that got the pid after the
    // reaper thread reaped this one.
    if (pid_ > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (reap_in_background && pid_ > 0)
      reaper_ = std::thread([this] {
        int st = 0;
        while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
        }
        status_ = st;
      });
  }
  ~background() {
    if (pid_ <= 0) return;
    if (pidfd_ >= 0) {
      syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
      close(pidfd_);
    } else if (!reaper_.joinable()) {
      kill(pid_, SIGKILL);  // not reaped yet: the pid is still ours
    }
    if (reaper_.joinable())
      reaper_.join();
    else
      waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  /// The wait status, once the reaper thread has it.
  int join() {
    if (reaper_.joinable()) reaper_.join();
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_ = -1;
  std::thread reaper_;
};

}  // namespace jitunwind::test
