// Private: keeps the latency bound of batched files (record_file) while the runtime publishes
// nothing. One per session; its thread ("jitunwind-flush", every signal blocked, so the
// runtime's handlers never run on it) starts at the first buffered record, sleeps until the
// oldest buffered record of any watched file is due, writes it, and ends once nothing has been
// buffered for `linger` (100 ms): a runtime that publishes, then only runs, is single-threaded
// again soon after (debuggers, ptrace tools, fork() see no thread of ours), and an idle process
// is never woken by it. The next buffered record starts a new thread (the old one is joined).
// A file wakes the thread only when its buffer goes from empty to non-empty and the thread is
// lingering or gone (one futex wake or thread start per burst of publishing, not per publish).
//
// Every watched file must have the same latency bound (a session's do): a file that becomes
// non-empty while the thread sleeps until another file's deadline is due later than that.
//
// In a forked child the thread does not exist: every call there returns at once without
// touching the locks (the child never writes: record_file::check_owner).
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace jitunwind::detail {

class record_file;

class flusher {
 public:
  flusher();
  /// Stops and joins the thread (if started, and not in a forked child).
  ~flusher();
  flusher(const flusher&) = delete;
  flusher& operator=(const flusher&) = delete;

  void watch(record_file* f);
  /// Stops watching `f`; waits while the thread is writing it.
  void unwatch(record_file* f);
  /// A watched file's buffer just went from empty to non-empty: starts the thread if needed and
  /// wakes it if it lingers (or starts one if it ended). Cheap otherwise (one atomic load).
  void wake();

  /// How long the thread stays without anything buffered before it ends.
  static constexpr std::chrono::milliseconds linger{100};

  /// Whether a thread runs (false before the first wake, after it ended for lack of work, and
  /// if it could not be created).
  bool running() const;
  /// Threads started so far (for tests and benchmarks).
  uint64_t starts() const noexcept { return starts_.load(std::memory_order_relaxed); }
  /// False once the thread could not be created: the files then check the bound themselves.
  bool usable() const noexcept { return usable_.load(std::memory_order_relaxed); }
  /// Wake-ups of the thread and writes it made (for tests and benchmarks).
  uint64_t wakeups() const noexcept { return wakeups_.load(std::memory_order_relaxed); }
  uint64_t flushes() const noexcept { return flushes_.load(std::memory_order_relaxed); }

 private:
  static void* main(void* self);
  void run();
  bool in_forked_child() const noexcept;

  const uint64_t fork_generation_;
  // The locks live apart so that a forked child can leave them undestroyed: the parent's thread
  // may have been waiting on cv_ at the fork, and glibc's pthread_cond_destroy waits for that
  // waiter, which does not exist in the child, forever (a child's session end hung).
  struct locks {
    std::mutex mu;
    std::condition_variable cv, idle_cv;
  };
  std::unique_ptr<locks> locks_ = std::make_unique<locks>();
  std::mutex& mu_ = locks_->mu;
  std::condition_variable& cv_ = locks_->cv;  // the thread waits here
  std::condition_variable& idle_cv_ =
      locks_->idle_cv;               // unwatch waits here while `busy_` is its file
  std::vector<record_file*> files_;  // mu_
  record_file* busy_ = nullptr;      // being written by the thread (mu_)
  // started_: `thread_` is a thread to join (running, or ended: `ended_`). mu_.
  bool started_ = false, ended_ = false, failed_ = false, stop_ = false;
  pthread_t thread_{};
  // True while there is no thread or it lingers with nothing buffered: only then does wake()
  // take the lock and notify. seq_cst with record_file's pending_since_ (see run()).
  std::atomic<bool> idle_{true};
  std::atomic<bool> usable_{true};
  std::atomic<uint64_t> wakeups_{0}, flushes_{0}, starts_{0};
};

}  // namespace jitunwind::detail
