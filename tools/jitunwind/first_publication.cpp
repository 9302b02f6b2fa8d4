#include "first_publication.hpp"

#include "cli.hpp"
#include "guarded/file.hpp"
#include "guarded/text.hpp"
#include "proc_files.hpp"
#include "registry_traps.hpp"
#include "tracee.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <sstream>
#include <thread>

namespace jitunwind::cli {

namespace {

using namespace std::chrono;
using namespace tracee;

// The files mapped into the process ("device inode" of each), from /proc/PID/maps.
std::set<std::string> mapped_files(pid_t pid) {
  std::set<std::string> files;
  std::istringstream maps(detail::proc_text_or_empty("/proc/" + std::to_string(pid) + "/maps"));
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    if (fields >> range >> perms >> offset >> device >> inode && inode != "0")
      files.insert(device + " " + inode);
  }
  return files;
}

constexpr const char* empty_registry = "the registry lists no window with published code";
// Entry breakpoints set at most (a trampoline pool may have many blocks).
constexpr size_t max_entry_breakpoints = 16384;

class publication_wait {
 public:
  publication_wait(pid_t pid, bool spawned, milliseconds patience)
      : pid_(pid),
        spawned_(spawned),
        watchpoints_(debug_registers_work()),
        patience_(patience),
        deadline_(steady_clock::now() + patience) {}

  result<first_publication> run(wait_failure& failure);

 private:
  enum class verdict { go_on, found, over };

  verdict on_stop(pid_t tid, int status);
  verdict on_end(pid_t tid, int status);
  void on_exec(pid_t tid);
  void on_syscall(pid_t tid, int status);
  void look(pid_t tid);
  bool has_code();
  void arm(pid_t tid);
  bool arm_entries(pid_t tid);
  bool entered(pid_t tid, int status);
  void resume(pid_t tid, int signal);
  void poll();
  void interrupt(pid_t tid);
  result<first_publication> take(pid_t tid, int status);
  std::optional<int> release_all();
  // The signal a thread stopped in `status` gets when it is detached: none for our traps.
  int pass(pid_t tid, int status) {
    return traps_.hit(tid, status) || entered(tid, status) ? 0 : signal_to_deliver(tid, status);
  }
  std::string how() const;
  std::string reason() const;
  // "30 s", or "1500 ms" for a --wait that is not whole seconds.
  std::string patience_text() const {
    const auto ms = patience_.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  }
  std::string what_was_published() const;
  // True once per 10 ms: time to compare the mapped files (another thread may map the SDK).
  bool poll_due() {
    if (code_ || steady_clock::now() < next_poll_) return false;
    next_poll_ = steady_clock::now() + milliseconds(10);
    return true;
  }
  // Whether files were mapped since the last look (a look parses every mapped ELF file).
  bool has_new(const std::set<std::string>& now) const {
    return !std::includes(examined_.begin(), examined_.end(), now.begin(), now.end());
  }

  const pid_t pid_;
  const bool spawned_, watchpoints_;
  const milliseconds patience_;
  const steady_clock::time_point deadline_;
  thread_group threads_;
  registry_traps traps_;
  std::optional<stepcheck::published_code> code_;
  pid_t reader_thread_ = 0;  // the thread code_ reads the registry through
  std::string last_error_ = "no jitunwind registry found in the target";
  std::string over_;  // why waiting is over (verdict::over)
  bool look_ = true, execed_ = false;
  std::set<pid_t> interrupting_;    // sent PTRACE_INTERRUPT: the next wait blocks for a stop
  std::set<pid_t> watched_;         // threads whose debug registers watch the registries
  std::set<pid_t> mapping_a_file_;  // threads in an mmap of a file
  std::set<pid_t> making_process_;  // threads in a fork, vfork or clone of a new process
  std::set<std::string> examined_;  // the mapped files the last look saw
  steady_clock::time_point next_poll_ = steady_clock::now();
  std::optional<std::string> publish_setting_;  // JITUNWIND_PUBLISH in the target's environment
  std::string perf_map_;                        // where the target writes its perf map
  std::optional<int> ended_;                    // the process's wait status, once reaped
  // With COMMAND, the thread checked is the first to enter published code: int3 at every entry
  // point, set once code is published (for the registry change `entries_for_`).
  software_breakpoints entries_;
  std::set<uint64_t> entry_sites_;  // every entry point ever armed (a hit may be seen late)
  std::optional<uint64_t> entries_for_;
  bool at_entry_ = false;       // the thread found stopped at an entry point
  bool seen_at_probe_ = false;  // the first publication was caught at the SDK's probe
};

result<first_publication> publication_wait::run(wait_failure& failure) {
  threads_.add(pid_);
  if (!spawned_) threads_.seize_process(pid_);
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(-1, &status, (interrupting_.empty() ? WNOHANG : 0) | __WALL);
    if (r > 0) {
      interrupting_.erase(r);
      const verdict v = WIFSTOPPED(status) ? on_stop(r, status) : on_end(r, status);
      if (v == verdict::found) return take(r, status);
      if (v == verdict::over) {
        if (!ended_) ended_ = release_all();
        failure.ended = ended_;
        return error(errc::not_found, over_);
      }
    } else {
      poll();
    }
    std::string why;
    if (stop_requested) why = "interrupted while waiting for JIT code";
    if (why.empty() && steady_clock::now() >= deadline_)
      why = "no published JIT code within " + patience_text() + " (" + reason() + ")";
    if (!why.empty()) {
      failure.ended = release_all();
      return error(stop_requested ? errc::bad_state : errc::not_found, why);
    }
    if (r <= 0) std::this_thread::sleep_for(milliseconds(1));
  }
}

publication_wait::verdict publication_wait::on_end(pid_t tid, int status) {
  threads_.erase(tid);
  watched_.erase(tid);
  if (tid != pid_) return verdict::go_on;
  // The command's process (its main thread is reported last), or the thread given.
  if (spawned_) ended_ = status;
  over_ = spawned_ && !execed_  // the child said why on stderr
              ? "the command could not be started"
              : "the target " + wait_text(status) + " before it published any JIT code (" +
                    reason() + ")";
  return verdict::over;
}

publication_wait::verdict publication_wait::on_stop(pid_t tid, int status) {
  threads_.add(tid);  // a new thread is first seen at its first stop
  const int event = status >> 16;
  if (event == PTRACE_EVENT_EXIT) {
    threads_.exiting(tid);
    if (!spawned_ && tid == pid_) {
      // The thread given ends (pthread_exit, or with its process): detached here, it goes on.
      const int others = thread_count(tid) - 1;
      unwatch(tid);
      traps_.disarm(tid);
      ptrace(PTRACE_DETACH, tid, nullptr, 0);
      threads_.erase(tid);
      over_ = "the thread " + wait_text(exit_stop(tid, status).value_or(0)) +
              " before it published any JIT code (" + reason() + ")" +
              (others > 0 ? "; the process goes on with " + count_text(others, "other thread") +
                                ": if one runs the JIT code, use --pid TID"
                          : "");
      return verdict::over;
    }
  }
  if (event == PTRACE_EVENT_EXEC) on_exec(tid);
  if (event == PTRACE_EVENT_CLONE) {
    unsigned long created = 0;
    if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &created) == 0)
      threads_.add(static_cast<pid_t>(created));
  }
  if (is_syscall_stop(status)) on_syscall(tid, status);
  const bool trapped = traps_.hit(tid, status);
  if (entered(tid, status)) {
    at_entry_ = true;
    return verdict::found;
  }
  if (poll_due()) look_ = true;  // look() looks only if there are new files
  if (!code_ && look_) {
    look_ = false;
    look(tid);
  }
  arm(tid);
  if (has_code()) {
    seen_at_probe_ = seen_at_probe_ || (trapped && entries_.empty());
    if (spawned_ ? !arm_entries(tid) : tid == pid_) return verdict::found;
    if (!spawned_) interrupt(pid_);  // published by another thread: stop the one given
  }
  resume(tid, trapped ? 0 : signal_to_deliver(tid, status));
  return verdict::go_on;
}

void publication_wait::on_exec(pid_t tid) {
  // Every other thread is gone: a thread other than the main one that ran exec now has its id.
  unsigned long former = 0;
  if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &former) == 0 && static_cast<pid_t>(former) != tid)
    threads_.erase(static_cast<pid_t>(former));
  execed_ = true;
  code_.reset();
  traps_.forget();
  look_ = true;
  watched_.clear();
  mapping_a_file_.clear();
  making_process_.clear();
}

void publication_wait::on_syscall(pid_t tid, int status) {
  const syscall_stop sc = syscall_at(tid, status);
  if (sc.entry) {
    // Anonymous mappings (heaps, stacks, JIT code) cannot bring a registry.
    if (sc.nr == SYS_mmap && (sc.flags & MAP_ANONYMOUS) == 0) mapping_a_file_.insert(tid);
    // A new process would share (vfork) or copy the patched code, untraced.
    if (creates_process_at_entry(tid, status)) {
      making_process_.insert(tid);
      traps_.disarm(tid);
      entries_.remove_all(tid);
      entries_for_.reset();
    }
  } else if (sc.exit) {
    if (mapping_a_file_.erase(tid) != 0 && !sc.failed) look_ = true;
    making_process_.erase(tid);
  }
}

void publication_wait::look(pid_t tid) {
  std::set<std::string> now = mapped_files(tid);
  const bool added = has_new(now);
  examined_ = std::move(now);
  if (!added) return;
  auto reader = remote::registry_reader::open(tid);
  if (!reader) {
    last_error_ = reader.error().message();
    return;
  }
  if (!watchpoints_) traps_.find(tid, *reader);
  // For the error that says what was published, if the registry stays empty.
  publish_setting_ = environment_value(tid, "JITUNWIND_PUBLISH");
  perf_map_ = perf_map_path(process_of(tid), tid);
  code_.emplace(std::move(reader).value());
  reader_thread_ = tid;
}

bool publication_wait::has_code() {
  if (!code_) return false;
  // The registry is read through a thread of the process: the one that found it may end.
  if (threads_.live(reader_thread_) != reader_thread_) {
    const pid_t t = threads_.live(pid_);
    auto reader = remote::registry_reader::open(t != 0 ? t : pid_);
    if (reader) code_.emplace(std::move(reader).value());
    reader_thread_ = t;
  }
  if (auto ok = code_->refresh(); !ok) {
    last_error_ = ok.error().message();
    return false;
  }
  if (!code_->empty()) return true;
  last_error_ = empty_registry;
  return false;
}

// At each stop once a registry is known: the thread's watchpoints, or the software breakpoints
// (armed again where a new mapping took them out).
void publication_wait::arm(pid_t tid) {
  if (!code_) return;
  if (watchpoints_) {
    if (watched_.insert(tid).second) watch_registries(tid, code_->reader());
  } else if (making_process_.empty() && threads_.covers_process(tid)) {
    traps_.refresh(tid);
  }
}

// Int3 at the entry points of the code published (again after each change): the first thread
// to enter that code stops at the first instruction of a function, and is the one checked.
// Only while every thread of the process is traced; false if none could be set.
bool publication_wait::arm_entries(pid_t tid) {
  if (!making_process_.empty() || !threads_.covers_process(tid) ||
      entries_for_ == code_->change_count())
    return !entries_.empty();
  const std::vector<uint64_t> now = code_->entry_points(max_entry_breakpoints);
  const std::set<uint64_t> wanted(now.begin(), now.end());
  for (uint64_t a : entries_.addresses())
    if (wanted.count(a) == 0) entries_.remove(tid, a);  // retired or freed
  for (uint64_t a : now)
    if (!entries_.has(a) && entries_.insert(tid, a)) entry_sites_.insert(a);
  entries_for_ = code_->change_count();
  return !entries_.empty();
}

// Whether the thread stopped at one of the entry breakpoints: then its pc is set back to the
// entry, whose instruction is still to run.
bool publication_wait::entered(pid_t tid, int status) {
  if (entry_sites_.empty() || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP ||
      (status >> 16) != 0)
    return false;
  user_regs_struct r{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0 || entry_sites_.count(r.rip - 1) == 0)
    return false;
  siginfo_t info{};
  if (ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) != 0 || info.si_code != SI_KERNEL)
    return false;
  r.rip -= 1;
  return ptrace(PTRACE_SETREGS, tid, nullptr, &r) == 0;
}

// A watched thread runs freely (its watchpoints stop it at a publication); the others stop at
// each system call, where a registry is looked for or breakpoints armed.
void publication_wait::resume(pid_t tid, int signal) {
  const bool watched = code_ && watched_.count(tid) != 0;
  ptrace(watched ? PTRACE_CONT : PTRACE_SYSCALL, tid, nullptr, signal);
}

void publication_wait::interrupt(pid_t tid) {
  if (interrupting_.count(tid) == 0 && ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0)
    interrupting_.insert(tid);
}

// Nothing reported: code published unseen (watchpoints not set yet in the thread that
// published, no breakpoints), --pid not looked at yet, or a file mapped by a thread not
// stopped at its system calls: the thread to check (or any) is stopped to look.
void publication_wait::poll() {
  const pid_t target = threads_.live(pid_);
  if (target == 0) return;
  // Code whose entry points are armed needs no stop: a thread entering it stops by itself.
  const bool unseen = code_ ? has_code() && (!spawned_ || entries_for_ != code_->change_count())
                            : look_ && !spawned_;
  if (unseen) {
    interrupt(target);
  } else if (poll_due() && has_new(mapped_files(target))) {
    look_ = true;
    interrupt(target);
  }
}

result<first_publication> publication_wait::take(pid_t tid, int status) {
  const bool ours = at_entry_ || traps_.hit(tid, status);
  traps_.disarm(tid);
  entries_.remove_all(tid);
  unwatch(tid);
  threads_.erase(tid);
  // The main thread cannot end while this one lives: no wait status to keep.
  threads_.detach_all_but(0, pid_, [this](pid_t t, int st) { return pass(t, st); });
  ptrace(PTRACE_SETOPTIONS, tid, nullptr, (spawned_ ? PTRACE_O_EXITKILL : 0) | trace_options);
  // The registry is read through the thread that found it, which may end: through this one.
  if (auto reader = remote::registry_reader::open(tid)) {
    stepcheck::published_code own(std::move(reader).value());
    if (own.refresh()) code_.emplace(std::move(own));
  }
  first_publication found{std::move(*code_), tid,
                          // Our trap is not the program's: handed on as a ptrace stop.
                          ours ? (PTRACE_EVENT_STOP << 16) | (SIGTRAP << 8) | 0x7f : status, how(),
                          ""};
  if (spawned_ && tid != pid_)
    found.whom = std::string(at_entry_ ? "the first to enter" : "the first to publish") +
                 " JIT code (the command's main thread is " + std::to_string(pid_) + ")";
  return found;
}

// How the first publication was seen, where debug registers do not trap.
std::string publication_wait::how() const {
  if (watchpoints_) return "";
  const std::string entry =
      at_entry_ ? "; the thread was stopped at its first entry into published code" : "";
  if (seen_at_probe_)
    return "caught at the SDK's probe jitunwind_registry:change" + entry +
           " (software breakpoints: this machine's debug registers do not trap)";
  return "seen at a system call or by polling" + entry +
         " (this machine's debug registers do not trap, and no probe of the SDK could be "
         "used): code run before that was not checked";
}

// Every thread stopped, breakpoints taken out, and detached; the main thread's wait status if
// it was reaped meanwhile.
std::optional<int> publication_wait::release_all() {
  const pid_t t = threads_.live(pid_);
  if (t != 0) {
    interrupt(t);
    int st = 0;
    while (waitpid(t, &st, __WALL) == t && WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_CLONE) {
      unsigned long created = 0;
      if (ptrace(PTRACE_GETEVENTMSG, t, nullptr, &created) == 0)
        threads_.add(static_cast<pid_t>(created));
      ptrace(PTRACE_CONT, t, nullptr, 0);
    }
    threads_.erase(t);
    if (!WIFSTOPPED(st)) return t == pid_ ? std::optional<int>(st) : std::nullopt;
    traps_.disarm(t);
    entries_.remove_all(t);
    unwatch(t);
    ptrace(PTRACE_DETACH, t, nullptr, pass(t, st));
  }
  return threads_.detach_all_but(0, pid_, [this](pid_t tid, int st) { return pass(tid, st); });
}

std::string publication_wait::reason() const {
  return code_ && last_error_ == empty_registry ? what_was_published() : last_error_;
}

// For a registry that stayed empty: what `unwind check` needs, what the target chose instead.
std::string publication_wait::what_was_published() const {
  std::string text =
      "its jitunwind registry stayed empty: unwind check reads the JIT code and its unwind rows "
      "from the registry, which the SDK fills only with the publisher 'registry'";
  if (publish_setting_)
    text += "; the target's environment has JITUNWIND_PUBLISH=" +
            detail::terminal_text(*publish_setting_) + " (include registry, e.g. " +
            "JITUNWIND_PUBLISH=registry," + detail::terminal_text(*publish_setting_) +
            ", unless the runtime chooses its publishers itself)";
  else
    text +=
        "; JITUNWIND_PUBLISH is not set in the target's environment: the runtime chose its "
        "publishers itself (set JITUNWIND_PUBLISH=registry or make the runtime include it)";
  struct stat st {};
  if (!perf_map_.empty() && ::stat(perf_map_.c_str(), &st) == 0 && st.st_size > 0)
    text +=
        "; it wrote names without unwind rows to its perf map " + detail::terminal_text(perf_map_);
  return text;
}

}  // namespace

result<first_publication> wait_for_code(pid_t pid, bool spawned, milliseconds patience,
                                        wait_failure& failure) {
  publication_wait wait(pid, spawned, patience);
  return wait.run(failure);
}

}  // namespace jitunwind::cli
