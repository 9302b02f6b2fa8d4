#include "perfmap/record_file.hpp"

#include "common/error.hpp"
#include "perfmap/flusher.hpp"
#include "perfmap/owned_file.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace jitunwind::detail {

namespace {

// fork() and exit() are events of the whole process, so this is the one place with process-wide
// state: a counter that every forked child increments (how a record_file knows it was
// inherited) and the batched files to flush at exit. Created once, never destroyed (exit
// handlers may run after static destructors). The list's lock is held across fork(), so a
// child finds it unlocked and the list intact (a child may destroy the files it inherited).
struct process_state {
  std::mutex mu;
  std::vector<record_file*> batched;  // mu
};

void flush_at_exit();

// Outside process_state: read on every append, without the guard of a function-local static.
constinit std::atomic<uint64_t> forks_counted{0};

process_state& process() {
  static process_state* const p = [] {
    auto* s = new process_state;
    ::pthread_atfork([] { process().mu.lock(); }, [] { process().mu.unlock(); },
                     [] {
                       forks_counted.fetch_add(1, std::memory_order_relaxed);
                       process().mu.unlock();
                     });
    std::atexit(flush_at_exit);
    return s;
  }();
  return *p;
}

void flush_at_exit() {
  process_state& p = process();
  std::lock_guard lock(p.mu);
  // Errors cannot be reported any more; a forked child's files refuse (check_owner).
  for (record_file* f : p.batched) (void)f->flush();
}

}  // namespace

uint64_t forks_so_far() noexcept {
  return forks_counted.load(std::memory_order_relaxed);
}

uint64_t start_counting_forks() noexcept {
  (void)process();
  return forks_so_far();
}

namespace {

// Keep what a steady stream of flushes needs; let one huge publish's buffer go.
void trim(std::vector<uint8_t>& v, size_t keep) {
  v.clear();
  if (v.capacity() > 4 * keep) std::vector<uint8_t>().swap(v);
}

}  // namespace

record_file::record_file(int fd, std::string path, off_t end, const file_policy& policy)
    : path_(std::move(path)),
      policy_(policy),
      fork_generation_(start_counting_forks()),
      owner_pid_(::getpid()),
      fd_(fd),
      end_(end),
      logical_end_(static_cast<uint64_t>(end)) {
  if (!batched()) return;
  pending_.reserve(policy_.flush_bytes + 4096);
  {
    process_state& p = process();
    std::lock_guard lock(p.mu);
    p.batched.push_back(this);
  }
  registered_ = true;
  if (policy_.background != nullptr) policy_.background->watch(this);
}

record_file::~record_file() {
  unregister();
  if (fd_ >= 0) ::close(fd_);
}

void record_file::unregister() {
  if (!registered_) return;
  // The flusher of a forked child never runs and ignores this (flusher.hpp).
  if (policy_.background != nullptr) policy_.background->unwatch(this);
  process_state& p = process();
  std::lock_guard lock(p.mu);
  std::erase(p.batched, this);
  registered_ = false;
}

result<void> record_file::check_owner() const {
  if (forks_so_far() == fork_generation_) return {};
  return make_error(errc::bad_state,
                    "%s belongs to process %d; this process (%d) is a fork of it and writes "
                    "nothing there (the parent writes what it had buffered)",
                    path_.c_str(), static_cast<int>(owner_pid_), static_cast<int>(::getpid()));
}

record_file::batch::batch(record_file& f)
    : f_(f), lock_(f.append_mu_), buf_(&f.pending_), start_(f.pending_.size()) {}

void record_file::batch::rollback() noexcept {
  if (lock_.owns_lock() && !committed_) buf_->resize(start_);
}

result<void> record_file::batch::commit_locked(uint64_t now_ns) {
  record_file& f = f_;
  const size_t added = buf_->size() - start_;
  if (f.fd_ < 0) {
    rollback();
    return make_error(errc::bad_state, "%s: already closed", f.path_.c_str());
  }
  committed_ = true;
  if (!f.batched()) {
    // One write of the scratch buffer, under the append lock (nothing else writes under sync).
    result<void> r;
    if (added != 0) {
      iovec iov{buf_->data() + start_, added};
      r = append_whole(f.fd_, &iov, 1, f.end_, f.path_);
      if (r) f.logical_end_ += added;
    }
    trim(*buf_, f.policy_.flush_bytes);
    return r;
  }
  if (added == 0) return {};
  f.logical_end_ += added;
  first_ = f.pending_since_.load(std::memory_order_relaxed) == 0;
  const bool self_timed = f.policy_.background == nullptr || !f.policy_.background->usable();
  if (first_ || self_timed) {
    if (now_ns == 0) now_ns = monotonic_ns();
    // seq_cst: pairs with the flusher announcing that it is idle (flusher::run).
    if (first_) f.pending_since_.store(now_ns, std::memory_order_seq_cst);
  }
  flush_now_ = buf_->size() >= f.policy_.flush_bytes ||
               (self_timed &&
                now_ns >= f.pending_since_.load(std::memory_order_relaxed) + f.policy_.latency_ns);
  return {};
}

result<void> record_file::batch::release() {
  if (!lock_.owns_lock()) return {};
  rollback();
  record_file& f = f_;
  // A background flush's error goes to the next caller that adds records.
  result<void> deferred =
      committed_ && f.batched() && f.deferred_ ? f.take_deferred() : result<void>{};
  lock_.unlock();
  if (first_ && f.policy_.background != nullptr) f.policy_.background->wake();
  if (!deferred) return deferred;
  if (flush_now_) return f.flush();
  return {};
}

result<void> record_file::take_deferred() {
  if (!deferred_) return {};
  error e = std::move(*deferred_);
  deferred_.reset();
  return e;
}

result<void> record_file::flush() {
  if (auto r = check_owner(); !r) return r;
  if (!batched()) {
    std::lock_guard a(append_mu_);
    return take_deferred();
  }
  std::lock_guard w(write_mu_);
  {
    std::lock_guard a(append_mu_);
    if (auto d = take_deferred(); !d) return d;
    if (pending_.empty() || fd_ < 0) return {};
    pending_.swap(writing_);
    pending_since_.store(0, std::memory_order_seq_cst);
    // The next records go into the other buffer, which has the capacity the last flush left.
    if (pending_.capacity() < policy_.flush_bytes) pending_.reserve(policy_.flush_bytes + 4096);
  }
  iovec iov{writing_.data(), writing_.size()};
  const size_t bytes = writing_.size();
  result<void> r = append_whole(fd_, &iov, 1, end_, path_);
  trim(writing_, policy_.flush_bytes);
  if (!r) {
    // append_whole cut the file back to its last complete record: those bytes are gone.
    std::lock_guard a(append_mu_);
    logical_end_ -= bytes;
  }
  return r;
}

result<void> record_file::flush_if_due(uint64_t now_ns) {
  const uint64_t due = due_at();
  if (due == 0 || now_ns < due) return {};
  return flush();
}

void record_file::flush_in_background() {
  if (auto r = flush(); !r && r.error().code() != errc::bad_state) {
    std::lock_guard a(append_mu_);
    if (!deferred_) deferred_ = r.error();
  }
}

result<void> record_file::close() {
  if (fd_ < 0) return {};
  if (!check_owner()) {
    // A forked child: no write, and none of the locks the parent's threads may have held.
    unregister();
    ::close(std::exchange(fd_, -1));
    return {};
  }
  result<void> r = flush();
  unregister();
  std::lock_guard w(write_mu_);
  std::lock_guard a(append_mu_);
  ::close(std::exchange(fd_, -1));
  return r;
}

uint64_t record_file::bytes_buffered() const {
  std::lock_guard a(append_mu_);
  return batched() ? pending_.size() : 0;
}

}  // namespace jitunwind::detail
