// Controlling the thread `jitunwind unwind check` watches: starting or seizing it, waiting for
// its stops, x86 debug registers (data watchpoints on the registry, an execute breakpoint to run
// native callees at full speed) or, where they do not work, software breakpoints
// (return_breakpoint.hpp for native callees), and CPU pinning while it is single-stepped.
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/result.h>

#include <sched.h>
#include <sys/ptrace.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace jitunwind::cli::tracee {

/// Set from signal handlers (Ctrl-C, SIGTERM, the --seconds timer): a blocking wait for the
/// thread then stops it with PTRACE_INTERRUPT, so that the caller can detach and report.
extern std::atomic<bool> stop_requested;

/// "exited with status 3", "was killed by Segmentation fault".
std::string wait_text(int status);

/// The ptrace options of every traced thread: exec and exit are reported as stops (an exit
/// stop comes before the thread is gone; a main thread that leaves by pthread_exit is never
/// reaped while other threads run, so waiting for its end would hang), system call stops are
/// marked.
constexpr int trace_options = PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD;

/// Forks argv and seizes the child (thread_group::options and PTRACE_O_EXITKILL) before it runs
/// exec: nothing of it runs untraced. If exec fails the child says why on stderr and exits 127.
result<pid_t> spawn(const std::vector<std::string>& argv);

/// The signal a stop should pass on when the thread resumes: 0 for ptrace's own stops
/// (system call, event and group stops, single steps, our debug register traps); a SIGTRAP
/// the program raised itself (int3, kill, raise) is passed on.
int signal_to_deliver(pid_t pid, int status);
bool is_syscall_stop(int status);
/// For an exit stop (PTRACE_EVENT_EXIT): the thread's wait status as waitpid will report it.
std::optional<int> exit_stop(pid_t pid, int status);

/// waitpid for the thread. With `may_interrupt`, stop_requested stops a running thread with
/// PTRACE_INTERRUPT; never while a single step is in flight: its SIGTRAP, queued until a blocking
/// system call returns, would then be delivered after the detach and kill the thread.
/// False if it cannot be waited for.
bool wait_stop(pid_t pid, int& status, bool may_interrupt);

/// Whether the x86 debug registers work for a traced thread on this machine. Some virtual
/// machines (paravirtualized guests such as PVM) accept them through ptrace but never raise
/// the trap: a watchpoint there is silently never hit. Found out once per run, with a
/// watchpoint on a word a short-lived child writes. JITUNWIND_DEBUG_REGISTERS=off in the
/// tool's environment says they do not (to test that path on a machine where they do).
bool debug_registers_work();

constexpr uint8_t int3_opcode = 0xcc;
/// One byte of the memory of the stopped thread `pid` (PTRACE_PEEKTEXT), and writing one.
std::optional<uint8_t> read_byte(pid_t pid, uint64_t address);
bool write_byte(pid_t pid, uint64_t address, uint8_t byte);

/// Software breakpoints: int3 written over the first byte of an instruction in the target's
/// code (the thread must be stopped). Unlike debug registers they are seen by every thread of
/// the process, and a thread that is not traced dies of the SIGTRAP: the caller inserts them
/// only while every thread of the process is traced, removes them before a new process can
/// copy them untraced, and before it detaches.
class software_breakpoints {
 public:
  /// False if the byte cannot be read or written (or `address` already has one).
  bool insert(pid_t pid, uint64_t address);
  /// Writes the original byte back (unless something else than int3 is there now: the memory
  /// was rewritten); false if `address` has none of ours.
  bool remove(pid_t pid, uint64_t address);
  void remove_all(pid_t pid);
  /// The address of ours that a thread stopped by SIGTRAP at `rip` just hit (int3 leaves rip
  /// one byte past it), if that is what happened (the siginfo says int3).
  std::optional<uint64_t> hit(pid_t pid, uint64_t rip) const;
  bool empty() const noexcept { return saved_.empty(); }
  /// Forgets all of them without writing (after exec: the memory is gone).
  void forget() noexcept { saved_.clear(); }
  /// Whether ours at `address` is still in memory. A loader that maps an object's segment
  /// again (ld.so maps the whole file, then each segment over it) brings the original byte
  /// back: then it is written again. Anything else there now: forgotten, false.
  bool reassert(pid_t pid, uint64_t address);
  bool has(uint64_t address) const { return saved_.count(address) != 0; }
  std::vector<uint64_t> addresses() const;

 private:
  std::map<uint64_t, uint8_t> saved_;  // address -> original byte
};

/// Data watchpoints on the change counters of up to four registries (debug registers 0-3);
/// the thread must be stopped. `unwatch` clears debug register 7.
void watch_registries(pid_t pid, const remote::registry_reader& reader);
void unwatch(pid_t pid);

/// How run_to_return ended.
enum class run_end { returned, ended, exec, exiting, stopped, step_instead };

class return_breakpoint;

/// The loop of a run at full speed: resumes the stopped thread (PTRACE_CONT with `pending`,
/// then 0) and `wait`s, going on past ptrace's own stops, until a signal stop (nullopt: `status`
/// is for the caller to look at) or the run's end: `ended`, `exec`, `exiting` or `stopped`
/// (stop_requested).
std::optional<run_end> run_until_signal(pid_t pid, int& pending, int& status,
                                        const std::function<bool(int&)>& wait);

/// Lets the stopped thread run at full speed until it executes `ra` with stack pointer
/// `sp_after` (the return of the call it just made), with an execute breakpoint in debug
/// register 0 (no code is modified: other threads are unaffected). A hit at another stack
/// depth (the same return address reached by a nested call) runs on. Signals for the thread
/// are passed on. `ended`: `status` says how; `exiting`: `status` is an exit stop;
/// `stopped`: stop_requested. Without working debug registers, `breakpoint` does it with an
/// int3; `step_instead` (the thread is stopped where it was, nothing written) says the call
/// must be single-stepped.
run_end run_to_return(pid_t pid, uint64_t ra, uint64_t sp_after, int& pending, int& status,
                      return_breakpoint& breakpoint);

/// A system call stop: entry (number, first argument, mmap's flags) or exit (whether it
/// failed); neither at other stops.
struct syscall_stop {
  bool entry = false, exit = false, failed = false;
  long nr = -1;
  uint64_t arg0 = 0, flags = 0;
};
syscall_stop syscall_at(pid_t pid, int status);

/// Whether a system call stop is the entry of one that creates a new process (fork, vfork, a
/// clone without CLONE_THREAD): a thread_group traces the threads its threads create, not the
/// processes, so software breakpoints must be gone before it runs.
bool creates_process_at_entry(pid_t pid, int status);

/// The number of threads of the process of `pid` (1 if it cannot be read).
int thread_count(pid_t pid);

/// The threads of a target traced together while `unwind check` waits for its first
/// publication: every thread of its process, and those they create (PTRACE_O_TRACECLONE), so
/// that a software breakpoint any of them hits stops it instead of killing the process, and
/// the thread that publishes can be followed. Threads are added as waitpid reports them.
class thread_group {
 public:
  /// The ptrace options of a thread in the group.
  static constexpr int options = trace_options | PTRACE_O_TRACECLONE;
  void add(pid_t tid) { threads_.insert(tid); }
  void erase(pid_t tid) {
    threads_.erase(tid);
    exiting_.erase(tid);
  }
  /// At its exit stop: it runs no more code (a main thread may stay a zombie for long).
  void exiting(pid_t tid) { exiting_.insert(tid); }
  bool contains(pid_t tid) const { return threads_.count(tid) != 0; }
  bool empty() const { return threads_.empty(); }
  size_t size() const { return threads_.size(); }
  /// A thread of the group that has not reached its exit stop (`preferred` if it is one), 0 if
  /// none.
  pid_t live(pid_t preferred) const;
  /// Seizes (`with_options`) every thread of the process of `tid` that the group does not have
  /// yet, until no new one appears; those that cannot be seized are left out.
  void seize_process(pid_t tid, int with_options = options);
  /// Whether every thread of the process of `tid` is in the group: software breakpoints are
  /// safe.
  bool covers_process(pid_t tid) const;
  /// Stops and detaches every thread but `keep` (0: all of them), with the signal `pass`
  /// returns for the stop it is in, its debug registers cleared; threads and processes created
  /// meanwhile too (traced if the options say so). Returns the wait status of the main thread
  /// `leader` if it was reaped meanwhile.
  std::optional<int> detach_all_but(pid_t keep, pid_t leader,
                                    const std::function<int(pid_t, int)>& pass);

 private:
  std::set<pid_t> threads_, exiting_;
};

// Tracer and thread on one CPU while stepping: every step wakes the other side twice, and a
// wake-up across CPUs costs several times more (a bare step-and-wait loop on this project's
// 2-vCPU VM: 119 us per step across CPUs, 28 us on one). Threads and processes the thread
// creates would inherit the one CPU: the stepping loop hands each one it sees created back
// its mask (release), and the thread gets its own mask while it runs at full speed. A thread
// in another PID namespace is not pinned (the ids its clones return are not ours).
class cpu_pin {
 public:
  void pin(pid_t tid);
  /// The thread's own mask while it runs freely (--skip-native), and the one CPU again.
  void unpin_thread();
  void repin_thread();
  /// A task the pinned thread created (clone, fork) gets the thread's own mask.
  void release(pid_t task);
  void restore();

 private:
  pid_t tid_ = 0;
  cpu_set_t self_{}, thread_{}, one_{};
};

}  // namespace jitunwind::cli::tracee
