#include "perfmap/flusher.hpp"

#include "perfmap/record_file.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>

namespace jitunwind::detail {

flusher::flusher() : fork_generation_(start_counting_forks()) {}

flusher::~flusher() {
  if (in_forked_child()) {
    // The thread is the parent's; its locks too (a few bytes left behind in the child).
    (void)locks_.release();
    return;
  }
  bool join = false;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    join = started_;
    idle_.store(false, std::memory_order_seq_cst);
  }
  cv_.notify_one();
  if (join) ::pthread_join(thread_, nullptr);
}

bool flusher::in_forked_child() const noexcept {
  return forks_so_far() != fork_generation_;
}

void flusher::watch(record_file* f) {
  std::lock_guard lock(mu_);
  files_.push_back(f);
}

void flusher::unwatch(record_file* f) {
  if (in_forked_child()) return;
  std::unique_lock lock(mu_);
  std::erase(files_, f);
  idle_cv_.wait(lock, [&] { return busy_ != f; });
}

bool flusher::running() const {
  std::lock_guard lock(mu_);
  return started_ && !ended_ && !stop_;
}

void flusher::wake() {
  // seq_cst: the file stored its pending_since_ before this load; run() stores idle_ before
  // reading pending_since_. One of the two sees the other's store, so a record is never left
  // without the thread knowing.
  if (!idle_.load(std::memory_order_seq_cst) || in_forked_child()) return;
  {
    std::lock_guard lock(mu_);
    if (!idle_.load(std::memory_order_seq_cst) || stop_ || failed_) return;
    if (ended_) {
      // The last thread ended for lack of work: it no longer needs the lock.
      ::pthread_join(thread_, nullptr);
      started_ = ended_ = false;
    }
    if (!started_) {
      // The thread must never run the runtime's signal handlers (profiling timers, safepoint
      // signals): it inherits a fully blocked mask.
      sigset_t all, old;
      ::sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, &old);
      pthread_attr_t attr;
      ::pthread_attr_init(&attr);
      ::pthread_attr_setstacksize(&attr, size_t{128} << 10);
      const int rc = ::pthread_create(&thread_, &attr, &flusher::main, this);
      ::pthread_attr_destroy(&attr);
      ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
      if (rc != 0) {
        // No thread: the files keep the bound at their appends, as without one.
        failed_ = true;
        usable_.store(false, std::memory_order_relaxed);
        return;
      }
      started_ = true;
      starts_.fetch_add(1, std::memory_order_relaxed);
    }
    idle_.store(false, std::memory_order_seq_cst);
  }
  cv_.notify_one();
}

void* flusher::main(void* self) {
  ::pthread_setname_np(::pthread_self(), "jitunwind-flush");
  static_cast<flusher*>(self)->run();
  return nullptr;
}

void flusher::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const uint64_t now = monotonic_ns();
    uint64_t next = 0;
    record_file* due = nullptr;
    for (record_file* f : files_) {
      const uint64_t at = f->due_at();
      if (at == 0) continue;
      if (at <= now) {
        due = f;
        break;
      }
      next = next == 0 ? at : std::min(next, at);
    }
    if (due != nullptr) {
      busy_ = due;
      lock.unlock();
      due->flush_in_background();
      flushes_.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      busy_ = nullptr;
      idle_cv_.notify_all();
      continue;
    }
    if (next == 0) {
      // Nothing buffered: announce that a wake is needed, then look once more (a record
      // committed just before the announcement would otherwise wait for the next one), and
      // linger a while before ending.
      idle_.store(true, std::memory_order_seq_cst);
      bool any = false;
      for (record_file* f : files_) any = any || f->due_at() != 0;
      if (any) {
        idle_.store(false, std::memory_order_seq_cst);
        continue;
      }
      // wake() clears idle_ under the lock: a record committed meanwhile cannot be missed.
      if (!cv_.wait_for(lock, linger,
                        [&] { return stop_ || !idle_.load(std::memory_order_seq_cst); })) {
        ended_ = true;  // idle_ stays true: the next record starts a thread
        return;
      }
    } else {
      cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
    }
    wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace jitunwind::detail
