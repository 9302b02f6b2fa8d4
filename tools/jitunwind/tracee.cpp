#include "tracee.hpp"

#include <jitunwind/registry_abi.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

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

}  // namespace

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
  const bool seized = ptrace(PTRACE_SEIZE, pid, nullptr, PTRACE_O_EXITKILL | trace_options) == 0;
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

run_end run_to_return(pid_t pid, uint64_t ra, uint64_t sp_after, int& pending, int& status) {
  if (ptrace(PTRACE_POKEUSER, pid, debug_register(0), ra) != 0 ||
      ptrace(PTRACE_POKEUSER, pid, debug_register(7), dr7_enable(0, 0b0000)) != 0)
    return run_end::stopped;
  for (;;) {
    // ESRCH: taken out of its stop by SIGKILL; the wait gets its end.
    if ((ptrace(PTRACE_CONT, pid, nullptr, pending) != 0 && errno != ESRCH) ||
        !wait_stop(pid, status, true))
      return run_end::ended;
    pending = 0;
    if (!WIFSTOPPED(status)) return run_end::ended;
    const int event = status >> 16;
    if (event == PTRACE_EVENT_EXEC) return run_end::exec;
    if (event == PTRACE_EVENT_EXIT) return run_end::exiting;
    if (event != 0) {  // PTRACE_INTERRUPT, or a group stop
      if (!stop_requested) continue;
      unwatch(pid);
      return run_end::stopped;
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
