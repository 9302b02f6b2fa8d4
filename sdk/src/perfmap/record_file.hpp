// Private: the file a perf map or jitdump writer appends records to, under the session's
// durability policy (jitunwind::durability):
//
//   sync     the records of a call are written with one `write` before the call returns;
//   batched  they are built straight into a buffer (no second copy) and written with one `write`
//            when the buffer holds `flush_bytes`, when its oldest record is `latency` old (checked
//            by the background flusher, by later appends and by flush_if_due), on flush(), at
//            close() and at normal process exit.
//
// Crash semantics: records are only ever written whole, at the end of the file, in the order
// they were committed; a failed write is truncated away. `kill -9` in the middle of a `write`
// can cut it where the kernel moves to the next page of the file (it checks for fatal signals
// between pages), so writers that must never leave part of a record (the perf map) keep records
// from crossing page boundaries (file_offset()).
//
// fork(): a child never writes: the file belongs to the parent's PID and the parent writes what
// was buffered before the fork. Every call in the child fails with `bad_state` (check_owner())
// before it touches a lock the parent's other threads may have held.
#pragma once

#include <jitunwind/result.h>
#include <jitunwind/window.h>

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::detail {

class flusher;

/// How many times this process and its ancestors forked since the SDK's first file was opened
/// (a pthread_atfork child handler counts): differs from the value at an object's creation in a
/// forked child.
uint64_t forks_so_far() noexcept;
/// forks_so_far(), after making sure forks are counted from now on (objects that compare it
/// later take their generation from here).
uint64_t start_counting_forks() noexcept;

inline uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct file_policy {
  durability mode = durability::sync;
  size_t flush_bytes = size_t{64} << 10;
  uint64_t latency_ns = 10'000'000;
  /// batched: the session's flusher, which keeps the latency bound while nobody appends; null
  /// (no thread allowed): appends, flush_if_due() and flush() check the bound instead.
  flusher* background = nullptr;
};

class record_file {
 public:
  /// Takes `fd`: a regular file this process alone appends to, `end` bytes long; `path` names it
  /// in errors.
  record_file(int fd, std::string path, off_t end, const file_policy& policy);
  /// Closes the descriptor; records still buffered are not written (close() writes them).
  ~record_file();
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  const std::string& path() const noexcept { return path_; }
  const file_policy& policy() const noexcept { return policy_; }
  bool batched() const noexcept { return policy_.mode == durability::batched; }

  /// `bad_state` in a process forked from the one that opened the file: the file belongs to the
  /// parent, which writes what it had buffered; the child must write nothing (not even a
  /// record its parent had buffered a second time). Call before taking any lock.
  result<void> check_owner() const;

  /// The lock that orders records: writers also guard their own per-record state with it.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock(append_mu_); }

  /// Records being added, under the append lock (taken by the constructor).
  class batch {
   public:
    explicit batch(record_file& f);
    batch(const batch&) = delete;
    batch& operator=(const batch&) = delete;
    ~batch() { (void)release(); }

    /// Where the records go: batched, the file's buffer itself (records are built in place
    /// and written from there); sync, a scratch buffer commit_locked() writes.
    std::vector<uint8_t>& bytes() noexcept { return *buf_; }
    /// The offset in the file that bytes()[pos] will have.
    uint64_t file_offset(size_t pos) const noexcept { return f_.logical_end_ + (pos - start_); }
    /// Forgets what this batch appended (also done on release without commit).
    void rollback() noexcept;

    /// The appended records are complete; the lock is still held (the writer may update its
    /// own state in the order of the file). sync: written now with one `write` (on failure the
    /// file is truncated back: none of them stays, and the error is returned). batched: kept.
    /// `now_ns`: the caller's CLOCK_MONOTONIC time if it has one (0: read when needed).
    result<void> commit_locked(uint64_t now_ns = 0);
    /// Releases the lock; batched: writes the buffer now if it holds flush_bytes or (no
    /// background flusher) its oldest record is older than the bound, or wakes the flusher.
    /// Errors: that write's, or one a background flush had (each reported once).
    result<void> release();
    /// commit_locked, then release.
    result<void> commit(uint64_t now_ns = 0) {
      if (auto r = commit_locked(now_ns); !r) {
        (void)release();
        return r;
      }
      return release();
    }

   private:
    record_file& f_;
    std::unique_lock<std::mutex> lock_;
    std::vector<uint8_t>* buf_;
    size_t start_;
    bool committed_ = false, first_ = false, flush_now_ = false;
  };

  /// Writes everything buffered with one `write` (nothing under sync). Errors: the write's
  /// (the file is then truncated back to the last complete record), one a background flush had,
  /// `bad_state` in a forked child.
  result<void> flush();
  /// flush() if the oldest buffered record is at least `latency_ns` old at `now_ns`.
  result<void> flush_if_due(uint64_t now_ns);
  /// CLOCK_MONOTONIC ns by which the buffer must be written; 0 if it is empty. Lock-free.
  uint64_t due_at() const noexcept {
    const uint64_t since = pending_since_.load(std::memory_order_seq_cst);
    return since == 0 ? 0 : since + policy_.latency_ns;
  }
  /// The background flusher's flush: an error is kept for the next commit() or flush().
  void flush_in_background();

  /// flush(), then closes the descriptor; later batches fail with `bad_state`. In a forked
  /// child the descriptor is closed without writing. Idempotent.
  result<void> close();
  bool closed() const noexcept { return fd_ < 0; }

  uint64_t bytes_buffered() const;

 private:
  result<void> take_deferred();  // caller holds append_mu_
  void unregister();             // from the flusher and the files flushed at exit

  const std::string path_;
  const file_policy policy_;
  const uint64_t fork_generation_;
  const pid_t owner_pid_;
  int fd_;
  // Order of locks: write_mu_, then append_mu_. Under batched, write_mu_ guards the writes and
  // end_ (so buffers reach the file in the order they were filled); append_mu_ guards the
  // buffer being filled. Under sync, append_mu_ guards everything.
  mutable std::mutex write_mu_;
  mutable std::mutex append_mu_;
  off_t end_;                     // bytes in the file (written)
  uint64_t logical_end_;          // bytes in the file once everything committed is written
  std::vector<uint8_t> pending_;  // batched: committed, not written yet; sync: scratch
  std::vector<uint8_t> writing_;  // batched: being written by flush() (write_mu_)
  std::atomic<uint64_t> pending_since_{0};  // commit time of pending_'s oldest record, 0: empty
  std::optional<error> deferred_;           // a background flush's error (append_mu_)
  bool registered_ = false;                 // in the list flushed at exit
};

}  // namespace jitunwind::detail
