// `unwind check --skip-native` where debug registers do not trap: the native call is run to its
// return with an int3 on the return address. Every thread of the process sees that byte, and a
// thread that is not traced dies of its SIGTRAP, so every other thread of the process is traced
// while the checked thread is (PTRACE_O_TRACECLONE, TRACEFORK, TRACEVFORK: the tasks they
// create too). Another thread that meets the int3 is set back to the return address and, while
// the checked thread is stopped (PTRACE_INTERRUPT) so that it cannot pass the return unseen,
// single-stepped over the original byte; then the int3 is written again. A new process with a
// copy of the memory (fork) gets the original bytes back and is detached; one that shares it
// (vfork, CLONE_VM) is traced like a thread until it runs exec or ends.
#pragma once

#include "tracee.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace jitunwind::cli::tracee {

class return_breakpoint {
 public:
  /// Seizes every other thread of the process of the stopped thread `checked` and gives every
  /// thread the options that trace what it creates (`kill_on_exit`: PTRACE_O_EXITKILL too, for
  /// a command the tool started). Until then wait() is wait_stop() and run() steps.
  void start(pid_t checked, bool kill_on_exit);
  bool started() const { return checked_ != 0; }

  /// run_to_return with the int3: `checked` runs at full speed until it returns to `ra` with
  /// stack pointer `sp_after`. step_instead if a thread of the process is not traced or the
  /// byte cannot be written.
  run_end run(pid_t checked, uint64_t ra, uint64_t sp_after, int& pending, int& status);

  /// The next stop (or end) of the running thread `checked`, serving the other threads' stops
  /// meanwhile: their signals passed on, the threads and processes they create taken in, their
  /// hits of the int3 stepped past. `may_interrupt`: as wait_stop().
  bool wait(pid_t checked, int& status, bool may_interrupt);

  /// Detaches every other thread (the checked one is detached or gone): the int3 taken out, a
  /// thread that met it set back, pending signals passed on. The wait status of the process's
  /// main thread if it was reaped while traced here.
  std::optional<int> release();

  size_t traced() const { return most_traced_; }     ///< other threads traced at once, at most
  uint64_t stepped_past() const { return passes_; }  ///< times another thread met the int3

 private:
  bool arm(pid_t via, uint64_t ra);
  void disarm(pid_t via);
  void forget();
  bool met(pid_t tid, int status, uint64_t* sp = nullptr);
  bool step_over(pid_t tid, int& status);
  void serve(pid_t tid, int status);
  void take_in(pid_t child);
  bool adopt(pid_t tid, int status);
  void on_event(pid_t tid, int status);
  void on_exec(pid_t tid);
  void stall(pid_t tid);
  void step_past_stalled(int checked_status);
  void drain();
  bool covers_process();
  bool shares_memory(pid_t task) const;
  void scrub(pid_t task) const;
  int pass(pid_t tid, int status);

  pid_t checked_ = 0, process_ = 0;
  int options_ = 0;
  thread_group threads_;       // the process's other threads
  thread_group others_;        // tasks of other processes: sharing the memory, or not seen yet
  std::set<pid_t> newborn_;    // in others_, not seen stopped yet: not known to share it
  std::set<pid_t> sharers_;    // in others_, known to share it
  software_breakpoints int3_;  // the one in memory, if any
  uint64_t armed_ = 0;         // its address (0: none)
  std::map<uint64_t, uint8_t> sites_;  // every address armed, with its original byte
  std::vector<pid_t> stalled_;         // met the armed int3: stepped past once checked_ stops
  bool interrupting_ = false;          // checked_ was asked to stop for them
  std::optional<int> checked_status_;  // a stop of checked_ reaped while serving the others
  std::optional<int> leader_status_;
  size_t most_traced_ = 0;
  uint64_t passes_ = 0;
};

}  // namespace jitunwind::cli::tracee
