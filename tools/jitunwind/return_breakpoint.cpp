#include "return_breakpoint.hpp"

#include "proc_files.hpp"

#include <dirent.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace jitunwind::cli::tracee {

namespace {

int event_of(int status) {
  return status >> 16;
}

void resume(pid_t tid, int signal) {
  ptrace(PTRACE_CONT, tid, nullptr, signal);
}

}  // namespace

void return_breakpoint::start(pid_t checked, bool kill_on_exit) {
  checked_ = checked;
  process_ = process_of(checked);
  options_ = thread_group::options | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
  ptrace(PTRACE_SETOPTIONS, checked, nullptr, options_ | (kill_on_exit ? PTRACE_O_EXITKILL : 0));
  threads_.seize_process(checked, options_);  // all but `checked`, which is traced already
  most_traced_ = threads_.size();
}

run_end return_breakpoint::run(pid_t pid, uint64_t ra, uint64_t sp_after, int& pending,
                               int& status) {
  if (!arm(pid, ra)) return run_end::step_instead;
  const auto waiter = [this, pid](int& st) { return wait(pid, st, true); };
  for (;;) {
    if (auto end = run_until_signal(pid, pending, status, waiter)) {
      if (*end == run_end::exec)
        forget();  // the memory it was written in is gone
      else if (*end != run_end::ended)
        disarm(pid);
      return *end;
    }
    uint64_t sp = 0;
    if (!met(pid, status, &sp)) {
      pending = signal_to_deliver(pid, status);
      continue;
    }
    disarm(pid);
    if (sp == sp_after) return run_end::returned;
    // A nested call's return through the same address: past it, then armed again.
    if (!step_over(pid, status)) return run_end::ended;
    if (event_of(status) != 0 || !arm(pid, ra)) return run_end::step_instead;
    pending = signal_to_deliver(pid, status);  // arrived before the step: delivered now
  }
}

// Single-steps `tid` (no other thread is stepped meanwhile) past ptrace's own stops: a
// PTRACE_INTERRUPT sent while it was stopping for something else comes as a stop of its own.
bool return_breakpoint::step_over(pid_t tid, int& status) {
  for (;;) {
    if (ptrace(PTRACE_SINGLESTEP, tid, nullptr, 0) != 0 || waitpid(tid, &status, __WALL) != tid)
      return false;
    if (!WIFSTOPPED(status) || event_of(status) != PTRACE_EVENT_STOP ||
        WSTOPSIG(status) != SIGTRAP || stop_requested)
      return true;
  }
}

bool return_breakpoint::wait(pid_t checked, int& status, bool may_interrupt) {
  if (!started()) return wait_stop(checked, status, may_interrupt);
  if (checked_status_) {
    status = *checked_status_;
    checked_status_.reset();
    step_past_stalled(status);
    return true;
  }
  bool asked = false;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(-1, &st, __WALL);
    if (r == checked) {
      status = st;
      step_past_stalled(st);
      return true;
    }
    if (r > 0) {
      serve(r, st);
    } else if (errno != EINTR) {
      return false;
    } else if (may_interrupt && stop_requested && !asked) {
      ptrace(PTRACE_INTERRUPT, checked, nullptr, nullptr);
      asked = true;
    }
  }
}

bool return_breakpoint::arm(pid_t via, uint64_t ra) {
  if (!started() || !covers_process()) return false;
  const std::optional<uint8_t> original = read_byte(via, ra);
  // An int3 there already is the program's own: its trap is not ours to take.
  if (!original || *original == int3_opcode || !int3_.insert(via, ra)) return false;
  sites_.emplace(ra, *original);
  armed_ = ra;
  return true;
}

void return_breakpoint::disarm(pid_t via) {
  if (armed_ != 0) int3_.remove(via, armed_);  // writes only over an int3
  armed_ = 0;
}

void return_breakpoint::forget() {
  int3_.forget();
  armed_ = 0;
  sites_.clear();
}

// Every thread of the process traced: the threads' stops reported so far taken in, any thread
// not traced yet seized (one made by a thread before it was seized), and one a traced thread
// has just made (traced from its start, but its creator's clone not reported yet) taken in.
bool return_breakpoint::covers_process() {
  drain();
  if (threads_.size() + 1 == static_cast<size_t>(thread_count(checked_))) return true;
  const std::string tasks = "/proc/" + std::to_string(process_) + "/task";
  if (DIR* d = ::opendir(tasks.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const auto t = static_cast<pid_t>(std::atol(e->d_name));
      if (t <= 0 || t == checked_ || threads_.contains(t)) continue;
      if (status_field(t, "TracerPid:", 0) == getpid() ||
          ptrace(PTRACE_SEIZE, t, nullptr, options_) == 0)
        take_in(t);
    }
    ::closedir(d);
  }
  return threads_.size() + 1 == static_cast<size_t>(thread_count(checked_));
}

void return_breakpoint::drain() {
  int st = 0;
  for (pid_t r; (r = waitpid(-1, &st, WNOHANG | __WALL)) > 0;) {
    if (r == checked_)
      checked_status_ = st;  // taken out of its stop (SIGKILL): the next wait reports it
    else
      serve(r, st);
  }
}

bool return_breakpoint::met(pid_t tid, int status, uint64_t* sp) {
  if (sites_.empty() || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP || event_of(status) != 0)
    return false;
  user_regs_struct r{};
  siginfo_t info{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0 || sites_.count(r.rip - 1) == 0 ||
      ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) != 0 || info.si_code != SI_KERNEL)
    return false;
  const uint64_t at = r.rip - 1;
  // Met before it was taken out (reported late) if the original byte is back; an int3 there
  // that is not ours now is the program's own.
  if (at != armed_ && read_byte(tid, at).value_or(int3_opcode) == int3_opcode) return false;
  r.rip = at;
  if (sp != nullptr) *sp = r.rsp;
  return ptrace(PTRACE_SETREGS, tid, nullptr, &r) == 0;
}

// A stop of a thread other than the checked one.
void return_breakpoint::serve(pid_t tid, int status) {
  if (!WIFSTOPPED(status)) {
    threads_.erase(tid);
    others_.erase(tid);
    newborn_.erase(tid);
    sharers_.erase(tid);
    if (tid == process_) leader_status_ = status;
    return;
  }
  if (!adopt(tid, status)) return;
  if (event_of(status) != 0) {
    on_event(tid, status);
  } else if (met(tid, status)) {
    stall(tid);
  } else {
    resume(tid, signal_to_deliver(tid, status));
  }
}

// A task just created by a traced one, traced from its start (its first stop may come later):
// a thread of the process counts as traced at once; a new process is known, so that release()
// waits for it, and what it is is found out at its first stop.
void return_breakpoint::take_in(pid_t child) {
  if (threads_.contains(child) || others_.contains(child)) return;
  if (process_of(child) == process_) {
    threads_.add(child);
    most_traced_ = std::max(most_traced_, threads_.size());
  } else {
    others_.add(child);
    newborn_.insert(child);
  }
}

// A task seen stopped for the first time (created by a traced one): a thread joins the group,
// a process that shares the memory is traced like one, any other gets the original bytes back
// and is detached (false).
bool return_breakpoint::adopt(pid_t tid, int status) {
  if (threads_.contains(tid) || (others_.contains(tid) && newborn_.count(tid) == 0)) return true;
  newborn_.erase(tid);
  others_.erase(tid);
  if (process_of(tid) == process_) {
    threads_.add(tid);
    most_traced_ = std::max(most_traced_, threads_.size());
    return true;
  }
  if (shares_memory(tid)) {
    others_.add(tid);
    sharers_.insert(tid);
    return true;
  }
  scrub(tid);
  ptrace(PTRACE_DETACH, tid, nullptr, signal_to_deliver(tid, status));
  return false;
}

void return_breakpoint::on_event(pid_t tid, int status) {
  switch (event_of(status)) {
    case PTRACE_EVENT_EXEC:
      on_exec(tid);
      return;
    case PTRACE_EVENT_EXIT:
      (threads_.contains(tid) ? threads_ : others_).exiting(tid);
      break;
    case PTRACE_EVENT_CLONE:
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK: {
      unsigned long created = 0;
      if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &created) == 0)
        take_in(static_cast<pid_t>(created));
      break;
    }
    case PTRACE_EVENT_STOP:
      // A group stop (SIGSTOP, SIGTSTP, ...): it stays stopped until SIGCONT.
      if (WSTOPSIG(status) != SIGTRAP && ptrace(PTRACE_LISTEN, tid, nullptr, nullptr) == 0) return;
      break;
    default:
      break;
  }
  resume(tid, 0);
}

void return_breakpoint::on_exec(pid_t tid) {
  if (process_of(tid) != process_) {  // a process that shared the memory has its own now
    others_.erase(tid);
    sharers_.erase(tid);
    ptrace(PTRACE_DETACH, tid, nullptr, 0);
    return;
  }
  // The process's own exec: every other thread is gone, and so is the memory.
  unsigned long former = 0;
  if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &former) == 0)
    threads_.erase(static_cast<pid_t>(former));
  threads_.add(tid);
  forget();
  resume(tid, 0);
}

// Another thread met the int3 (and is set back to its address). Stepping it over the original
// byte lets the checked thread pass the return unseen if it runs meanwhile: it is stopped first.
void return_breakpoint::stall(pid_t tid) {
  ++passes_;
  user_regs_struct r{};
  if (armed_ == 0 || ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0 || r.rip != armed_) {
    resume(tid, 0);  // met before it was taken out: the original byte is back
    return;
  }
  stalled_.push_back(tid);
  if (!interrupting_ && ptrace(PTRACE_INTERRUPT, checked_, nullptr, nullptr) == 0)
    interrupting_ = true;
}

// The checked thread has stopped (or ended): each stalled thread runs the instruction under
// the int3, which is then written again (unless the checked thread ran exec or is gone).
void return_breakpoint::step_past_stalled(int checked_status) {
  interrupting_ = false;
  if (stalled_.empty()) return;
  std::vector<pid_t> todo;
  todo.swap(stalled_);
  const uint64_t site = armed_;
  disarm(todo.front());
  for (pid_t t : todo) {
    int st = 0;
    if (!step_over(t, st)) continue;  // gone: its end is reported later
    serve(t, st);  // a step: resumed; a signal that came first: delivered (it meets the int3 again)
  }
  if (site != 0 && WIFSTOPPED(checked_status) && event_of(checked_status) != PTRACE_EVENT_EXEC &&
      int3_.insert(checked_, site))
    armed_ = site;
}

bool return_breakpoint::shares_memory(pid_t task) const {
  // Without kcmp (a kernel without CONFIG_KCMP) it is taken for a copy.
  return syscall(SYS_kcmp, process_, task, KCMP_VM, 0, 0) == 0;
}

// A new process's copy of the memory: the original byte back wherever an int3 of ours is.
void return_breakpoint::scrub(pid_t task) const {
  for (const auto& [address, original] : sites_)
    if (read_byte(task, address) == int3_opcode) write_byte(task, address, original);
}

int return_breakpoint::pass(pid_t tid, int status) {
  const bool own_process = process_of(tid) == process_;
  if (own_process && WIFSTOPPED(status) && event_of(status) == PTRACE_EVENT_EXEC) forget();
  const bool shares = own_process || sharers_.count(tid) != 0 || shares_memory(tid);
  if (shares) {
    disarm(tid);
  } else {
    scrub(tid);
  }
  if (met(tid, status)) return 0;
  return signal_to_deliver(tid, status);
}

std::optional<int> return_breakpoint::release() {
  if (!started()) return std::nullopt;
  // Stalled threads are stopped already (a PTRACE_INTERRUPT would never be reported).
  for (pid_t t : stalled_) {
    disarm(t);
    threads_.erase(t);
    others_.erase(t);
    ptrace(PTRACE_DETACH, t, nullptr, 0);
  }
  stalled_.clear();
  auto pass_on = [this](pid_t t, int st) { return pass(t, st); };
  std::optional<int> leader_status = threads_.detach_all_but(0, process_, pass_on);
  others_.detach_all_but(0, 0, pass_on);
  checked_ = 0;
  sharers_.clear();
  newborn_.clear();
  if (leader_status_) leader_status = leader_status_;
  return leader_status;
}

}  // namespace jitunwind::cli::tracee
