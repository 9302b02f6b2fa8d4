#include "tracee.hpp"

#include "proc_files.hpp"
#include "return_breakpoint.hpp"

#include <jitunwind/registry_abi.h>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace jitunwind::cli::tracee {

std::atomic<bool> stop_requested{false};

namespace {

size_t debug_register(int n) {
  return offsetof(struct user, u_debugreg) + n * sizeof(long);
}

// Debug register 7: enable n locally (bit 2n); RW and LEN at bits 16 + 4n (RW 00 = execute,
// 01 = write; LEN 00 = 1 byte, 10 = 8 bytes).
uint64_t dr7_enable(int n, uint64_t rw_len) {
  return (uint64_t{1} << (n * 2)) | (rw_len << (16 + n * 4));
}

// The 8-byte word of the target's memory that holds the byte at `address`.
uint64_t word_of(uint64_t address) {
  return address & ~uint64_t{7};
}

}  // namespace

bool debug_registers_work() {
  static const bool works = [] {
    // Testing the other path on a machine whose debug registers work (docs/cli.md).
    if (const char* v = std::getenv("JITUNWIND_DEBUG_REGISTERS");
        v != nullptr && std::string_view(v) == "off")
      return false;
    static volatile uint64_t word = 0;
    const pid_t child = fork();
    if (child < 0) return true;  // cannot tell: assume what most machines do
    if (child == 0) {
      ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      raise(SIGSTOP);
      word = word + 1;
      _exit(0);
    }
    int st = 0;
    bool trapped = false;
    if (waitpid(child, &st, __WALL) == child && WIFSTOPPED(st) &&
        ptrace(PTRACE_POKEUSER, child, debug_register(0), &word) == 0 &&
        ptrace(PTRACE_POKEUSER, child, debug_register(7), dr7_enable(0, 0b1001)) == 0 &&
        ptrace(PTRACE_CONT, child, nullptr, 0) == 0 && waitpid(child, &st, __WALL) == child)
      trapped = WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP;
    kill(child, SIGKILL);
    while (waitpid(child, &st, __WALL) == child && WIFSTOPPED(st)) {
    }
    return trapped;
  }();
  return works;
}

std::optional<uint8_t> read_byte(pid_t pid, uint64_t address) {
  errno = 0;
  const long word = ptrace(PTRACE_PEEKTEXT, pid, word_of(address), nullptr);
  if (errno != 0) return std::nullopt;
  return static_cast<uint8_t>(static_cast<uint64_t>(word) >> ((address - word_of(address)) * 8));
}

bool write_byte(pid_t pid, uint64_t address, uint8_t byte) {
  errno = 0;
  const long word = ptrace(PTRACE_PEEKTEXT, pid, word_of(address), nullptr);
  if (errno != 0) return false;
  const unsigned shift = static_cast<unsigned>(address - word_of(address)) * 8;
  const uint64_t patched =
      (static_cast<uint64_t>(word) & ~(uint64_t{0xff} << shift)) | (uint64_t{byte} << shift);
  return ptrace(PTRACE_POKETEXT, pid, word_of(address), patched) == 0;
}

bool software_breakpoints::insert(pid_t pid, uint64_t address) {
  if (saved_.count(address) != 0) return false;
  const std::optional<uint8_t> original = read_byte(pid, address);
  if (!original || !write_byte(pid, address, int3_opcode)) return false;
  saved_[address] = *original;
  return true;
}

bool software_breakpoints::remove(pid_t pid, uint64_t address) {
  const auto it = saved_.find(address);
  if (it == saved_.end()) return false;
  if (read_byte(pid, address) == int3_opcode) write_byte(pid, address, it->second);
  saved_.erase(it);
  return true;
}

std::vector<uint64_t> software_breakpoints::addresses() const {
  std::vector<uint64_t> all;
  for (const auto& [address, original] : saved_) all.push_back(address);
  return all;
}

void software_breakpoints::remove_all(pid_t pid) {
  while (!saved_.empty()) remove(pid, saved_.begin()->first);
}

bool software_breakpoints::reassert(pid_t pid, uint64_t address) {
  const auto it = saved_.find(address);
  if (it == saved_.end()) return false;
  const std::optional<uint8_t> now = read_byte(pid, address);
  if (now == int3_opcode) return true;
  const uint8_t original = it->second;
  saved_.erase(it);
  return now == original && insert(pid, address);
}

std::optional<uint64_t> software_breakpoints::hit(pid_t pid, uint64_t rip) const {
  if (rip == 0 || saved_.count(rip - 1) == 0) return std::nullopt;
  siginfo_t info{};
  if (ptrace(PTRACE_GETSIGINFO, pid, nullptr, &info) != 0 || info.si_code != SI_KERNEL)
    return std::nullopt;
  return rip - 1;
}

syscall_stop syscall_at(pid_t pid, int status) {
  syscall_stop s;
  if (!is_syscall_stop(status)) return s;
  __ptrace_syscall_info info{};
  if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info, &info) > 0) {
    s.entry = info.op == PTRACE_SYSCALL_INFO_ENTRY;
    s.exit = info.op == PTRACE_SYSCALL_INFO_EXIT;
    s.nr = s.entry ? static_cast<long>(info.entry.nr) : -1;
    s.arg0 = info.entry.args[0];
    s.flags = info.entry.args[3];
    s.failed = s.exit && info.exit.is_error;
    return s;
  }
  // Before Linux 5.3: at an entry stop rax holds -ENOSYS (set by the kernel), at an exit the
  // result; the flags are the fourth argument (r10).
  user_regs_struct r{};
  if (ptrace(PTRACE_GETREGS, pid, nullptr, &r) != 0) return s;
  s.entry = static_cast<long>(r.rax) == -ENOSYS;
  s.exit = !s.entry;
  s.nr = s.entry ? static_cast<long>(r.orig_rax) : -1;
  s.arg0 = r.rdi;
  s.flags = r.r10;
  s.failed = s.exit && static_cast<long>(r.rax) < 0 && static_cast<long>(r.rax) > -4096;
  return s;
}

bool creates_process_at_entry(pid_t pid, int status) {
  const syscall_stop sc = syscall_at(pid, status);
  const long nr = sc.nr;
  uint64_t flags = sc.arg0;
  if (nr == SYS_fork || nr == SYS_vfork) return true;
  if (nr == SYS_clone3) {  // the flags are the first field of struct clone_args
    errno = 0;
    flags = static_cast<uint64_t>(ptrace(PTRACE_PEEKDATA, pid, flags, nullptr));
    if (errno != 0) return true;
  } else if (nr != SYS_clone) {
    return false;
  }
  return (flags & CLONE_THREAD) == 0;
}

int thread_count(pid_t pid) {
  // At an exit stop /proc/PID/task may list fewer threads than "Threads:" counts.
  return static_cast<int>(status_field(pid, "Threads:", 1));
}

pid_t thread_group::live(pid_t preferred) const {
  if (contains(preferred) && exiting_.count(preferred) == 0) return preferred;
  for (pid_t t : threads_)
    if (exiting_.count(t) == 0) return t;
  return 0;
}

void thread_group::seize_process(pid_t tid, int with_options) {
  const std::string tasks = "/proc/" + std::to_string(process_of(tid)) + "/task";
  for (bool added = true; added;) {
    added = false;
    DIR* d = ::opendir(tasks.c_str());
    if (d == nullptr) return;
    while (dirent* e = ::readdir(d)) {
      const auto t = static_cast<pid_t>(std::atol(e->d_name));
      if (t <= 0 || contains(t) || ptrace(PTRACE_SEIZE, t, nullptr, with_options) != 0) continue;
      add(t);
      added = true;
    }
    ::closedir(d);
  }
}

bool thread_group::covers_process(pid_t tid) const {
  return static_cast<size_t>(thread_count(tid)) == threads_.size();
}

std::optional<int> thread_group::detach_all_but(pid_t keep, pid_t leader,
                                                const std::function<int(pid_t, int)>& pass) {
  std::optional<int> leader_status;
  std::vector<pid_t> todo;
  for (pid_t t : threads_)
    if (t != keep) todo.push_back(t);
  while (!todo.empty()) {
    const pid_t t = todo.back();
    todo.pop_back();
    const bool past_exit = exiting_.count(t) != 0;
    erase(t);
    // Past its exit stop it never stops again: a thread is reaped (it ends at once), a main
    // thread that other threads outlive stays a zombie, reported when the process ends.
    if (past_exit || ptrace(PTRACE_INTERRUPT, t, nullptr, nullptr) != 0) {
      int st = 0;
      if (t != leader) waitpid(t, &st, __WALL);
      continue;
    }
    int st = 0;
    if (waitpid(t, &st, __WALL) != t) continue;
    if (!WIFSTOPPED(st)) {
      if (t == leader) leader_status = st;
      continue;
    }
    const int event = st >> 16;
    if (event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK) {
      unsigned long created = 0;  // the new task is traced too
      if (ptrace(PTRACE_GETEVENTMSG, t, nullptr, &created) == 0) todo.push_back(created);
    }
    unwatch(t);
    ptrace(PTRACE_DETACH, t, nullptr, pass(t, st));
  }
  return leader_status;
}

std::string wait_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// Forks COMMAND and seizes it before it runs exec: nothing of it runs untraced.
result<pid_t> spawn(const std::vector<std::string>& argv) {
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0)
    return error(errc::io_error, std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) return error(errc::io_error, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(gate[1]);
    char go;
    if (read(gate[0], &go, 1) != 1) _exit(127);
    std::vector<char*> args;
    for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "jitunwind unwind check: cannot run '%s': %s\n", args[0],
                 std::strerror(errno));
    _exit(127);
  }
  close(gate[0]);
  const bool seized =
      ptrace(PTRACE_SEIZE, pid, nullptr, PTRACE_O_EXITKILL | thread_group::options) == 0;
  const int seize_errno = errno;
  if (write(gate[1], "g", 1) != 1 || !seized) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(gate[1]);
    return error(errc::permission_denied,
                 std::string("cannot trace the command: ") + std::strerror(seize_errno));
  }
  close(gate[1]);
  return pid;
}

bool is_syscall_stop(int status) {
  return WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80);
}

int signal_to_deliver(pid_t pid, int status) {
  if (!WIFSTOPPED(status) || (status >> 16) != 0 || is_syscall_stop(status)) return 0;
  if (WSTOPSIG(status) != SIGTRAP) return WSTOPSIG(status);
  // Ours: a step (TRAP_TRACE, or TRAP_BRKPT after a system call), a watchpoint or execute
  // breakpoint (TRAP_HWBKPT). Anything else is the program's own: int3 (SI_KERNEL), kill or
  // raise (code <= 0), a perf event's SIGTRAP (TRAP_PERF), ...
  siginfo_t info{};
  if (ptrace(PTRACE_GETSIGINFO, pid, nullptr, &info) != 0) return 0;
  const bool ours =
      info.si_code == TRAP_TRACE || info.si_code == TRAP_BRKPT || info.si_code == TRAP_HWBKPT;
  return ours ? 0 : SIGTRAP;
}

std::optional<int> exit_stop(pid_t pid, int status) {
  if (!WIFSTOPPED(status) || (status >> 16) != PTRACE_EVENT_EXIT) return std::nullopt;
  unsigned long message = 0;
  ptrace(PTRACE_GETEVENTMSG, pid, nullptr, &message);
  return static_cast<int>(message);
}

namespace {

std::string pid_namespace(const std::string& proc_dir) {
  char link[64] = {};
  const ssize_t n = readlink((proc_dir + "/ns/pid").c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

}  // namespace

void cpu_pin::pin(pid_t tid) {
  // The ids a clone returns to the thread are those of its PID namespace: in another one
  // (a container), release() could not find the new tasks, so nothing is pinned.
  const std::string own = pid_namespace("/proc/self");
  if (own.empty() || own != pid_namespace("/proc/" + std::to_string(tid))) return;
  const int cpu = sched_getcpu();
  if (cpu < 0 || sched_getaffinity(0, sizeof self_, &self_) != 0 ||
      sched_getaffinity(tid, sizeof thread_, &thread_) != 0)
    return;
  CPU_ZERO(&one_);
  CPU_SET(cpu, &one_);
  if (sched_setaffinity(0, sizeof one_, &one_) != 0) return;
  if (sched_setaffinity(tid, sizeof one_, &one_) != 0) {
    sched_setaffinity(0, sizeof self_, &self_);
    return;
  }
  tid_ = tid;
}

void cpu_pin::unpin_thread() {
  if (tid_ != 0) sched_setaffinity(tid_, sizeof thread_, &thread_);
}

void cpu_pin::repin_thread() {
  if (tid_ != 0) sched_setaffinity(tid_, sizeof one_, &one_);
}

void cpu_pin::release(pid_t task) {
  if (tid_ != 0) sched_setaffinity(task, sizeof thread_, &thread_);
}

void cpu_pin::restore() {
  if (tid_ == 0) return;
  sched_setaffinity(tid_, sizeof thread_, &thread_);
  sched_setaffinity(0, sizeof self_, &self_);
  tid_ = 0;
}

// Hardware watchpoints (x86 debug registers 0-3) on the registries' change counters: the
// thread traps right after its first publish, before it can run the code it published.
// Polling the registry from outside would miss a short program entirely.
void watch_registries(pid_t pid, const remote::registry_reader& reader) {
  uint64_t dr7 = 0;
  int slot = 0;
  for (const remote::registry_location& r : reader.registries()) {
    if (slot == 4) break;
    const uint64_t counter = r.address + offsetof(jitunwind_registry_header, change_count);
    if (ptrace(PTRACE_POKEUSER, pid, debug_register(slot), counter) != 0) continue;
    // Enable (local), break on writes (RW = 01), 8 bytes (LEN = 10).
    dr7 |= dr7_enable(slot, 0b1001);
    ++slot;
  }
  ptrace(PTRACE_POKEUSER, pid, debug_register(7), dr7);
}

void unwatch(pid_t pid) {
  ptrace(PTRACE_POKEUSER, pid, debug_register(7), 0);
}

// waitpid for the thread; Ctrl-C while it sits in a long system call stops it with
// PTRACE_INTERRUPT, so that the check can still detach cleanly and report.
bool wait_stop(pid_t pid, int& status, bool may_interrupt) {
  bool asked = false;
  for (;;) {
    if (waitpid(pid, &status, __WALL) == pid) return true;
    if (errno != EINTR) return false;
    if (may_interrupt && stop_requested && !asked) {
      ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr);
      asked = true;
    }
  }
}

std::optional<run_end> run_until_signal(pid_t pid, int& pending, int& status,
                                        const std::function<bool(int&)>& wait) {
  for (;;) {
    // ESRCH: taken out of its stop by SIGKILL; the wait gets its end.
    if ((ptrace(PTRACE_CONT, pid, nullptr, pending) != 0 && errno != ESRCH) || !wait(status))
      return run_end::ended;
    pending = 0;
    if (!WIFSTOPPED(status)) return run_end::ended;
    const int event = status >> 16;
    if (event == PTRACE_EVENT_EXEC) return run_end::exec;
    if (event == PTRACE_EVENT_EXIT) return run_end::exiting;
    if (event == 0) return std::nullopt;
    // PTRACE_INTERRUPT (--seconds, Ctrl-C, or one sent for another thread), a group stop, a
    // new task: it goes on.
    if (stop_requested) return run_end::stopped;
  }
}

run_end run_to_return(pid_t pid, uint64_t ra, uint64_t sp_after, int& pending, int& status,
                      return_breakpoint& breakpoint) {
  if (!debug_registers_work()) return breakpoint.run(pid, ra, sp_after, pending, status);
  if (ptrace(PTRACE_POKEUSER, pid, debug_register(0), ra) != 0 ||
      ptrace(PTRACE_POKEUSER, pid, debug_register(7), dr7_enable(0, 0b0000)) != 0)
    return run_end::stopped;
  const auto waiter = [pid](int& st) { return wait_stop(pid, st, true); };
  for (;;) {
    if (auto end = run_until_signal(pid, pending, status, waiter)) {
      if (*end == run_end::stopped) unwatch(pid);
      return *end;
    }
    if (WSTOPSIG(status) != SIGTRAP) {
      pending = WSTOPSIG(status);
      continue;
    }
    siginfo_t info{};
    ptrace(PTRACE_GETSIGINFO, pid, nullptr, &info);
    if (info.si_code != TRAP_HWBKPT) {
      pending = signal_to_deliver(pid, status);  // the program's own trap
      continue;
    }
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0 && regs.rip == ra &&
        regs.rsp == sp_after) {
      unwatch(pid);
      return run_end::returned;
    }
    // The kernel sets RF for an execute breakpoint: continuing runs the instruction.
  }
}

}  // namespace jitunwind::cli::tracee
