// `jitunwind unwind check`: single-steps a thread of a runtime that publishes its JIT code
// through the SDK and checks, at every instruction it executes in that code, that the
// published SFrame rows unwind to the frames the thread really entered (step_check.hpp says
// how that is known). For runtime authors writing frame descriptions: a sampling profiler hits
// prologues and epilogues too, which call-site checks (`jitwalk verify`) never do.
#include "cli.hpp"
#include "first_publication.hpp"
#include "guarded/file.hpp"
#include "guarded/proc.hpp"
#include "guarded/text.hpp"
#include "proc_files.hpp"
#include "return_breakpoint.hpp"
#include "step_check.hpp"
#include "tracee.hpp"

#include <jitunwind/registry_abi.h>
#include <jitunwind/usdt.h>

#include "elf/elf_reader.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_set>

namespace jitunwind::cli {

namespace {

using namespace std::chrono;
using stepcheck::mismatch;

constexpr double one_day_s = 24 * 3600;

const command_spec check_spec{
    "check",
    "[-- COMMAND [ARG...]]",
    "Single-step a JIT runtime and check its published unwind rows at every instruction.",
    "Runs COMMAND (or attaches to thread --pid) under ptrace. Once the target's jitunwind "
    "registry lists published code, the thread is single-stepped; at every instruction inside "
    "a published function, the function's SFrame rows (read from the target, as a profiler "
    "would) unwind the thread's registers, and each JIT frame's caller — stack pointer, return "
    "address and rbp — must be the one the thread really had when it entered that function "
    "(seen at the function's first instruction). Executing code in a window that no published "
    "function covers is reported too, and so is every window whose SFrame data cannot be used "
    "(none, unreadable, invalid, or for code outside the window).\n"
    "The thread checked is the one given with --pid or, with COMMAND, the first thread to "
    "enter published code (every thread is traced until then); the other threads run freely. "
    "Only frames entered while the thread is watched are compared: a function must be entered "
    "at its start for its frame to be known. A target whose registry stays empty (a runtime "
    "publishing without the SDK's 'registry' publisher) is an error that says so. The native "
    "code the JIT calls is stepped through (it counts against --steps) but not checked.\n"
    "Output: a summary (instructions checked, distinct addresses, functions, frames compared) "
    "and the first mismatches, each with the pc, the frame, and the expected and unwound "
    "values; function names come from /tmp/perf-PID.map when it exists. With COMMAND, the "
    "command runs to its end after checking stops. Exit status: 0 if every check passed and "
    "at least one instruction of JIT code was checked, 1 otherwise or if the target cannot be "
    "traced, 2 for a bad command line.",
    {{"pid", 'p', "PID",
      "Attach to this thread (a process id is its main thread) instead of running COMMAND.",
      cmdline::kind::whole, 1, INT_MAX},
     {"steps", 'n', "N", "Stop checking after N single steps (default 1000000).",
      cmdline::kind::whole, 1, double(uint64_t{1} << 40)},
     {"seconds", 0, "S", "Stop checking after S seconds (default 60).", cmdline::kind::duration,
      0.001, one_day_s},
     {"wait", 0, "S", "Wait up to S seconds for the first published code (default 30).",
      cmdline::kind::duration, 0.001, one_day_s},
     {"frames", 0, "N", "Compare at most N JIT frames per instruction (default 512).",
      cmdline::kind::whole, 1, 1u << 20},
     {"skip-native", 0, "",
      "Run each native function the JIT code calls at full speed (an execute breakpoint on "
      "its return address; where debug registers do not trap, an int3, with every thread of "
      "the process traced meanwhile) instead of stepping through it. Much faster for runtimes "
      "whose JIT code calls into large native helpers; JIT code that such a call re-enters "
      "(callbacks, an interpreter's trampolines) is then not checked, nor frames it leaves by "
      "longjmp."},
     {"max-reports", 0, "N",
      "Print the first mismatch of at most N addresses in full (default 10; 0: the summary "
      "only).",
      cmdline::kind::whole, 0, 1u << 20}},
    0,
    SIZE_MAX,
    "jitunwind unwind check -- build/examples/toy-jit/toy-jit --frame-pointers=off \\\n"
    "    examples/toy-jit/programs/fib.toy 12\n"
    "jitunwind unwind check --skip-native -- build/examples/toy-jit/toy-jit \\\n"
    "    examples/toy-jit/programs/features.toy\n"
    "jitunwind unwind check --pid 4242 --seconds 5"};

using namespace tracee;

struct limits {
  uint64_t steps = 1000000, frames = 512, reports = 10;
  double seconds = 60, wait = 30;
  bool skip_native = false;
};

limits read_limits(const parsed_args& a) {
  limits lim;
  lim.steps = a.whole("steps", lim.steps);
  lim.seconds = a.decimal("seconds", lim.seconds);
  lim.wait = a.decimal("wait", lim.wait);
  lim.frames = a.whole("frames", lim.frames);
  lim.reports = a.whole("max-reports", lim.reports);
  lim.skip_native = a.flag("skip-native");
  return lim;
}

// ---- names for the report ----

// "'jit:rec'+0x34" (or "0x7f..000+0x34" without a name): what a runtime author looks up.
std::string location_text(const perf_map_names& names, uint64_t start, uint64_t pc) {
  return names.name_or_address(start) + "+" + hex_text(pc - start);
}

// ---- the check ----

struct tally {
  uint64_t steps = 0, jit_steps = 0, unwatched = 0, frames = 0, mismatches = 0, native_runs = 0;
  uint64_t native_stepped = 0;  // --skip-native calls that had to be stepped (see run_to_return)
  size_t others_traced = 0;     // --skip-native with an int3: the other threads traced meanwhile
  uint64_t others_stepped = 0;  // and how often they met it
  std::string watch_note;       // how the first publication was caught, when not by watchpoints
  std::string thread_note;      // why this thread, when it is not the one given
  uint64_t registry_errors = 0;
  std::unordered_set<uint64_t> pcs, bad_pcs;
  std::set<uint64_t> functions;
  std::vector<mismatch> shown;
  std::string stopped_because;
};

// Checks one stop; true if the thread is in published JIT code.
bool check_stop(stepcheck::published_code& code, stepcheck::frame_oracle& oracle,
                stepcheck::page_cache& memory, const user_regs_struct& r, bool just_called,
                const limits& lim, tally& t) {
  if (!code.refresh()) ++t.registry_errors;  // retried at the next stop
  const sframe::regs at{r.rip, r.rsp, r.rbp, 0};
  sframe::lookup_result row;
  const bool in_code = code.unwinder().find(at.pc, row);
  // An entry: a function's start, or the start of a repeated block (a PCMASK FDE: one FDE for
  // many trampolines) that a call just reached.
  const bool entry =
      in_code && (row.function_start == at.pc || (just_called && row.row.pc_offset == 0));
  uint64_t ra = 0;
  if (entry && !memory.read(at.sp, &ra, sizeof ra)) ra = 0;
  oracle.observe(row.function_start, at.sp, at.fp, entry, ra);
  auto record = [&](mismatch m) {
    ++t.mismatches;
    // The first mismatch at each address: the same instruction runs wrong many times.
    if (t.bad_pcs.insert(m.pc).second && t.shown.size() < lim.reports)
      t.shown.push_back(std::move(m));
  };
  if (!in_code) {
    const std::string* unusable = nullptr;
    if (const remote::window_record* w = code.window_at(at.pc, &unusable))
      record({at.pc, 0, at.pc, 0,
              "executing in window " + std::to_string(w->window_id) +
                  (unusable ? ", whose published SFrame cannot be used: " + *unusable
                            : ", where no published function covers this address")});
    return false;
  }
  ++t.jit_steps;
  t.pcs.insert(at.pc);
  t.functions.insert(row.function_start);
  if (oracle.frames().empty()) ++t.unwatched;
  size_t compared = 0;
  auto bad = stepcheck::compare(code, oracle, at, memory.reader(), lim.frames, compared);
  t.frames += compared;
  if (bad) record(std::move(*bad));
  return true;
}

void print_report(const std::string& program, pid_t pid, const std::string& perf_map,
                  const tally& t, const stepcheck::frame_oracle& oracle,
                  const stepcheck::published_code& code) {
  perf_map_names names(perf_map);
  names.update();
  std::printf("%s: thread %d%s\n", program.c_str(), pid,
              t.thread_note.empty() ? "" : (", " + t.thread_note).c_str());
  std::printf("  single steps:      %llu (%s)\n", static_cast<unsigned long long>(t.steps),
              t.stopped_because.c_str());
  std::printf(
      "  in JIT code:       %llu instructions at %zu distinct addresses in %s "
      "(%zu published at most at once)\n",
      static_cast<unsigned long long>(t.jit_steps), t.pcs.size(),
      count_text(t.functions.size(), "function").c_str(), code.function_count());
  std::printf("  frames compared:   %llu (deepest JIT stack seen: %zu frames)\n",
              static_cast<unsigned long long>(t.frames), oracle.deepest());
  if (t.native_runs > 0)
    std::printf("  native calls run:  %llu at full speed (--skip-native)\n",
                static_cast<unsigned long long>(t.native_runs));
  if (t.native_stepped > 0)
    std::printf(
        "  native calls stepped: %llu (--skip-native: no working debug registers here, and a "
        "thread of the process could not be traced or the return address not written)\n",
        static_cast<unsigned long long>(t.native_stepped));
  if (t.others_traced > 0)
    std::printf(
        "  other threads:     %zu traced (an int3 on the return address: no working debug "
        "registers here); they met it %llu times and were stepped past it\n",
        t.others_traced, static_cast<unsigned long long>(t.others_stepped));
  if (!t.watch_note.empty()) std::printf("  first publication: %s\n", t.watch_note.c_str());
  if (t.unwatched > 0)
    std::printf(
        "  not comparable:    %llu instructions in functions entered before the thread "
        "was watched\n",
        static_cast<unsigned long long>(t.unwatched));
  if (t.registry_errors > 0)
    std::printf("  registry re-reads: %llu failed (retried)\n",
                static_cast<unsigned long long>(t.registry_errors));
  if (!code.unusable().empty()) {
    std::printf("  unusable windows:  %zu (a profiler cannot unwind their code)\n",
                code.unusable().size());
    for (const stepcheck::unusable_window& u : code.unusable())
      std::printf("    window %llu at %s (generation %llu): %s\n",
                  static_cast<unsigned long long>(u.record.window_id),
                  hex_text(u.record.text_start).c_str(),
                  static_cast<unsigned long long>(u.record.generation), u.why.c_str());
  }
  std::printf("  mismatches:        %llu at %zu distinct addresses\n",
              static_cast<unsigned long long>(t.mismatches), t.bad_pcs.size());
  for (const mismatch& m : t.shown) {
    std::printf("\nmismatch at pc %s", hex_text(m.pc).c_str());
    if (m.function_start != 0 && m.frame == 0)
      std::printf(" (%s), innermost frame", location_text(names, m.function_start, m.pc).c_str());
    else if (m.function_start != 0)
      std::printf(", frame %zu (its pc at %s)", m.frame,
                  location_text(names, m.function_start, m.frame_pc).c_str());
    std::printf(":\n  %s\n", m.what.c_str());
  }
}

// Why no frame was compared, and what to try.
std::string nothing_compared_text(const tally& t, pid_t thread) {
  const std::string which = "thread " + std::to_string(thread);
  if (t.jit_steps > 0)
    return "the functions " + which +
           " ran were entered before the check began: only frames entered while it is "
           "watched can be compared";
  return "no JIT code ran on " + which +
         "; if another thread runs it, check that one while the runtime runs: --pid TID";
}

// Whether the instruction just stepped was a system call that created a thread or process
// (its id in rax).
bool created_task(const user_regs_struct& r) {
  const auto nr = static_cast<long>(r.orig_rax);
  return (nr == SYS_clone || nr == SYS_clone3 || nr == SYS_fork || nr == SYS_vfork) &&
         static_cast<long>(r.rax) > 0;
}

// Single-steps one stopped thread until a limit, its end, or Ctrl-C, checking every stop. With
// --skip-native a call out of JIT code runs at full speed to its return where that can be done.
class stepper {
 public:
  stepper(const std::string& program, pid_t pid, stepcheck::published_code& code,
          stepcheck::frame_oracle& oracle, const limits& lim, return_breakpoint& returns,
          int status, tally& t)
      : program_(program),
        pid_(pid),
        code_(code),
        oracle_(oracle),
        lim_(lim),
        returns_(returns),
        t_(t),
        memory_(pid),
        status_(status),
        pending_(signal_to_deliver(pid, status)),
        deadline_(steady_clock::now() +
                  duration_cast<steady_clock::duration>(duration<double>(lim.seconds))) {}

  /// Steps to the end. Returns whether the thread is still alive (then it is detached here);
  /// `status()` is the last wait status.
  bool run() {
    end_run_on_time_limit();
    pinned_.pin(pid_);
    bool alive = WIFSTOPPED(status_);
    if (!alive) t_.stopped_because = "the target " + wait_text(status_);
    // Where waiting left it: at the first instruction of a function, its frame is known.
    memory_.clear();
    if (alive && ptrace(PTRACE_GETREGS, pid_, nullptr, &regs_) == 0)
      in_jit_ = check_stop(code_, oracle_, memory_, regs_, false, lim_, t_);
    while (alive && !limit_reached()) {
      const step_end e = lim_.skip_native && was_in_jit_ && !in_jit_ && just_called_
                             ? run_native_call()
                             : single_step();
      if (e == step_end::over) break;
      if (e == step_end::lost) alive = false;
      if (e != step_end::moved) continue;
      observe();
    }
    alarm_after(0);
    if (progress_ && t_.steps >= steps_per_look) std::fputc('\n', stderr);
    if (alive) ptrace(PTRACE_DETACH, pid_, nullptr, pending_);
    pinned_.restore();
    return alive;
  }

  int status() const { return status_; }

 private:
  enum class step_end { moved, still, over, lost };
  // The clock and the progress line are looked at once per this many steps (a step is ~30 µs).
  static constexpr uint64_t steps_per_look = 1024;
  // A call's return address lies at most one instruction after it: x86 instructions are at
  // most 15 bytes long.
  static constexpr uint64_t max_x86_instruction_bytes = 15;

  // --seconds also ends a native call run at full speed (--skip-native) or a long system call.
  void end_run_on_time_limit() {
    struct sigaction alarm_action {};
    alarm_action.sa_handler = [](int) { stop_requested = true; };
    sigaction(SIGALRM, &alarm_action, nullptr);
    alarm_after(lim_.seconds);
  }
  static void alarm_after(double s) {
    itimerval when{};
    when.it_value.tv_sec = static_cast<time_t>(s);
    when.it_value.tv_usec =
        static_cast<suseconds_t>((s - static_cast<double>(when.it_value.tv_sec)) * 1e6);
    setitimer(ITIMER_REAL, &when, nullptr);
  }

  std::string stop_reason() const {
    return steady_clock::now() >= deadline_ ? "time limit" : "interrupted";
  }

  // The step limit, Ctrl-C or the time limit (looked at every 1024 steps, with the progress
  // line on a terminal).
  bool limit_reached() {
    if (t_.steps >= lim_.steps) {
      t_.stopped_because = "step limit";
      return true;
    }
    if (stop_requested) {
      t_.stopped_because = stop_reason();
      return true;
    }
    if (t_.steps % steps_per_look != 0) return false;
    const auto now = steady_clock::now();
    if (now >= deadline_) {
      t_.stopped_because = "time limit";
      return true;
    }
    if (progress_ && now >= next_progress_) {
      std::fprintf(stderr, "\r%s: %llu steps, %llu in JIT code, %llu mismatches", program_.c_str(),
                   static_cast<unsigned long long>(t_.steps),
                   static_cast<unsigned long long>(t_.jit_steps),
                   static_cast<unsigned long long>(t_.mismatches));
      next_progress_ = now + seconds(1);
    }
    return false;
  }

  // A call out of JIT code (--skip-native) run to its return, or stepped where that cannot be
  // done.
  step_end run_native_call() {
    pinned_.unpin_thread();  // threads it creates meanwhile inherit its own mask
    const run_end r = run_to_return(pid_, pushed_, regs_.rsp + 8, pending_, status_, returns_);
    pinned_.repin_thread();
    switch (r) {
      case run_end::step_instead:
        ++t_.native_stepped;
        just_called_ = false;  // the call is being stepped: not a new one at the next stop
        return single_step();
      case run_end::ended:
        t_.stopped_because = "the target " + wait_text(status_);
        return step_end::lost;
      case run_end::exec:
        t_.stopped_because = "the target ran exec";
        return step_end::over;
      case run_end::exiting:
        t_.stopped_because = "the thread " + wait_text(exit_stop(pid_, status_).value_or(0));
        return step_end::over;
      case run_end::stopped:
        t_.stopped_because = stop_reason();
        return step_end::over;
      case run_end::returned:
        break;
    }
    ++t_.native_runs;
    return step_end::moved;
  }

  step_end single_step() {
    // ESRCH: a SIGKILL (another thread's exit_group) took it out of its stop: the wait below
    // gets its end.
    if ((ptrace(PTRACE_SINGLESTEP, pid_, nullptr, pending_) != 0 && errno != ESRCH) ||
        !returns_.wait(pid_, status_, false)) {
      t_.stopped_because = std::string("lost the thread: ") + std::strerror(errno);
      return step_end::lost;
    }
    pending_ = 0;
    if (!WIFSTOPPED(status_)) {
      t_.stopped_because = "the target " + wait_text(status_);
      return step_end::lost;
    }
    if ((status_ >> 16) == PTRACE_EVENT_EXEC) {
      t_.stopped_because = "the target ran exec";
      return step_end::over;
    }
    // Exiting (exit, exit_group, a fatal signal, or pthread_exit of a main thread whose end
    // would not be reported while other threads run): detached by run().
    if (auto exiting = exit_stop(pid_, status_)) {
      t_.stopped_because = "the thread " + wait_text(*exiting);
      return step_end::over;
    }
    if ((status_ >> 16) != 0) return step_end::still;  // ptrace's own stop: it did not move
    // A signal, or the program's own SIGTRAP: delivered by the next step.
    if ((pending_ = signal_to_deliver(pid_, status_)) != 0) return step_end::still;
    ++t_.steps;
    return step_end::moved;
  }

  // The thread moved: where it is now, whether a call just happened (the word it pushed, the
  // return address, is at rsp), and the check of this stop.
  void observe() {
    const uint64_t prev_pc = regs_.rip, prev_sp = regs_.rsp;
    if (ptrace(PTRACE_GETREGS, pid_, nullptr, &regs_) != 0) return;
    // A step over a system call stops after it; orig_rax is -1 after any other instruction.
    if (created_task(regs_)) pinned_.release(static_cast<pid_t>(regs_.rax));
    was_in_jit_ = in_jit_;
    memory_.clear();  // a new stop: memory may have changed
    just_called_ = regs_.rsp == prev_sp - 8 && memory_.read(regs_.rsp, &pushed_, 8) &&
                   pushed_ > prev_pc && pushed_ <= prev_pc + max_x86_instruction_bytes;
    in_jit_ = check_stop(code_, oracle_, memory_, regs_, just_called_, lim_, t_);
  }

  const std::string& program_;
  const pid_t pid_;
  stepcheck::published_code& code_;
  stepcheck::frame_oracle& oracle_;
  const limits& lim_;
  return_breakpoint& returns_;
  tally& t_;
  stepcheck::page_cache memory_;
  cpu_pin pinned_;
  int status_;
  int pending_;
  const steady_clock::time_point deadline_;
  steady_clock::time_point next_progress_ = steady_clock::now() + seconds(1);
  const bool progress_ = isatty(STDERR_FILENO);
  user_regs_struct regs_{};
  // This stop and the previous one: whether it is in JIT code, and whether a call just
  // happened (`pushed_`: its return address).
  bool in_jit_ = false, was_in_jit_ = false, just_called_ = false;
  uint64_t pushed_ = 0;
};

// The thread to check: --pid PID attached, or COMMAND started under ptrace.
struct traced_target {
  pid_t pid = 0;
  bool spawned = false;
};
result<traced_target> trace_target(const parsed_args& a) {
  if (!a.has("pid")) {
    auto p = spawn(a.operands);
    if (!p) return std::move(p).error();
    return traced_target{*p, true};
  }
  const auto pid = static_cast<pid_t>(a.whole("pid", 0));
  // ptrace refuses kernel threads with EPERM, which would read as a missing privilege.
  if (auto st = detail::read_proc_stat(pid); st && st->kernel_thread())
    return error(errc::unsupported,
                 "thread " + std::to_string(pid) + " (" + detail::terminal_text(st->comm) +
                     ") is a kernel thread: it runs no user code and publishes no windows");
  if (ptrace(PTRACE_SEIZE, pid, nullptr, thread_group::options) != 0)
    return error(
        errc::permission_denied,
        "cannot trace thread " + std::to_string(pid) + ": " + std::strerror(errno) +
            (errno == EPERM ? " (needs CAP_SYS_PTRACE or a ptrace_scope that allows it)" : ""));
  return traced_target{pid, false};
}

// With COMMAND: waits for its end (unless `ended` already has it) and says how it ended.
void finish_command(const std::string& program, const traced_target& target,
                    std::optional<int> ended) {
  if (!target.spawned) return;
  int st = ended.value_or(0);
  bool over = ended.has_value() && !WIFSTOPPED(st);  // a stop is not an end: wait for it
  while (!over) {
    if (waitpid(target.pid, &st, __WALL) != target.pid) return;
    over = !WIFSTOPPED(st);
  }
  std::printf("%s: the command %s\n", program.c_str(), wait_text(st).c_str());
}

// The exit status of a check that ran: windows a profiler cannot use, nothing compared and
// mismatches are failures.
int verdict(const std::string& program, const tally& t, const stepcheck::published_code& code,
            pid_t thread) {
  if (!code.unusable().empty()) {
    std::fprintf(stderr, "%s: error: %s whose SFrame data cannot be used (listed above)\n",
                 program.c_str(), count_text(code.unusable().size(), "window").c_str());
    return exit_failure;
  }
  if (t.frames == 0) {
    std::fprintf(stderr, "%s: error: no JIT frame was compared (%s)\n", program.c_str(),
                 nothing_compared_text(t, thread).c_str());
    return exit_failure;
  }
  return t.mismatches == 0 ? exit_ok : exit_failure;
}

int run_check(const std::string& program, const parsed_args& a) {
  const limits lim = read_limits(a);
  if (a.has("pid") == !a.operands.empty())
    return report(program, "give either --pid PID or -- COMMAND, not both and not neither",
                  exit_usage);
  // Ctrl-C ends the checking, not the report (the command gets its own SIGINT).
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto target = trace_target(a);
  if (!target) return report(program, target.error().message(), exit_failure);
  // Output to a closed pipe (`| head`) must not kill the tool before it detaches; the command
  // was forked before this and keeps its own SIGPIPE.
  signal(SIGPIPE, SIG_IGN);

  wait_failure failed;
  const auto patience = duration_cast<milliseconds>(duration<double>(lim.wait));
  auto found = wait_for_code(target->pid, target->spawned, patience, failed);
  if (!found) {
    // A command that published nothing in time is not left running on its own.
    if (target->spawned && !failed.ended) kill(target->pid, SIGKILL);
    finish_command(program, *target, failed.ended);
    return report(program, found.error().message(), exit_failure);
  }

  // The thread is stopped: step it from here.
  const pid_t thread = found->thread;
  tally t;
  t.watch_note = found->how;
  t.thread_note = found->whom;
  stepcheck::frame_oracle oracle;
  // Where the perf map is depends on the process's environment (JITUNWIND_DIR), readable only
  // while it lives: found now, read when reporting.
  const pid_t process = process_of(thread);
  const std::string perf_map = perf_map_path(process, live_task(process, thread));
  // Without debug registers, --skip-native's int3 is seen by every thread: all are traced.
  return_breakpoint returns;
  if (lim.skip_native && !debug_registers_work()) returns.start(thread, target->spawned);
  stepper steps(program, thread, found->code, oracle, lim, returns, found->stop, t);
  const bool alive = steps.run();
  t.others_traced = returns.traced();
  t.others_stepped = returns.stepped_past();
  std::optional<int> ended = returns.release();
  print_report(program, thread, perf_map, t, oracle, found->code);
  std::fflush(stdout);
  // The end of another thread than the main one is not the command's.
  if (!alive && thread == target->pid) ended = steps.status();
  finish_command(program, *target, ended);
  return verdict(program, t, found->code, thread);
}

const command commands[] = {{&check_spec, run_check}};

void print_group_help(const std::string& program) {
  print_standard_group_help(
      program,
      "Check the unwind information a runtime publishes against what its threads really do.\n",
      commands);
}

}  // namespace

int unwind_main(const invocation& inv) {
  return run_group(inv, commands, print_group_help);
}

}  // namespace jitunwind::cli
