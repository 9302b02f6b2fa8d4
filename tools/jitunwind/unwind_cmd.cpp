// `jitunwind unwind check`: single-steps a thread of a runtime that publishes its JIT code
// through the SDK and checks, at every instruction it executes in that code, that the
// published SFrame rows unwind to the frames the thread really entered (step_check.hpp says
// how that is known). For runtime authors writing frame descriptions: a sampling profiler hits
// prologues and epilogues too, which call-site checks (`jitwalk verify`) never do.
#include "cli.hpp"
#include "first_publication.hpp"
#include <jitunwind/toolkit/guarded_file.hpp>
#include <jitunwind/toolkit/proc_stat.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>
#include "proc_files.hpp"
#include "step_check.hpp"
#include "tracee.hpp"

#include <jitunwind/registry_abi.h>
#include <jitunwind/usdt.h>

#include <jitunwind/toolkit/elf_reader.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
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
      "Attach to this thread (a process id is its main thread) instead of running COMMAND."},
     {"steps", 'n', "N", "Stop checking after N single steps (default 1000000)."},
     {"seconds", 0, "S", "Stop checking after S seconds (default 60)."},
     {"wait", 0, "S", "Wait up to S seconds for the first published code (default 30)."},
     {"frames", 0, "N", "Compare at most N JIT frames per instruction (default 512)."},
     {"skip-native", 0, "",
      "Run each native function the JIT code calls at full speed (an execute breakpoint on "
      "its return address) instead of stepping through it. Much faster for runtimes whose JIT "
      "code calls into large native helpers; JIT code that such a call re-enters (callbacks, "
      "an interpreter's trampolines) is then not checked, nor frames it leaves by longjmp."},
     {"max-reports", 0, "N",
      "Print the first mismatch of at most N addresses in full (default 10; 0: the summary "
      "only)."}},
    0,
    SIZE_MAX,
    "jitunwind unwind check -- build/examples/toy-jit/toy-jit --frame-pointers=off \\\n"
    "    examples/toy-jit/programs/fib.toy 12\n"
    "jitunwind unwind check --skip-native -- build/examples/toy-jit/toy-jit \\\n"
    "    examples/toy-jit/programs/features.toy\n"
    "jitunwind unwind check --pid 4242 --seconds 5"};

using namespace tracee;

struct limits {
  uint64_t steps = 1000000, seconds = 60, wait = 30, frames = 512, reports = 10;
  bool skip_native = false;
};

bool parse_limit(const parsed_args& a, const char* name, uint64_t min, uint64_t max, uint64_t& out,
                 std::string& bad) {
  auto v = a.value(name);
  if (!v) return true;
  auto n = parse_u64(*v);
  if (!n || *n < min || *n > max) {
    bad = std::string("--") + name + ": '" + toolkit::shortened(*v) + "' is not a number from " +
          std::to_string(min) + " to " + std::to_string(max);
    return false;
  }
  out = *n;
  return true;
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
        "software breakpoint is not safe while other threads run)\n",
        static_cast<unsigned long long>(t.native_stepped));
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

// Single-steps the stopped thread until a limit, its end, or Ctrl-C, checking every stop.
// Returns whether it is still alive (then it is stopped, and detached here); `status` is the
// last wait status.
bool step_thread(const std::string& program, pid_t pid, stepcheck::published_code& code,
                 stepcheck::frame_oracle& oracle, const limits& lim, int& status, tally& t) {
  int pending = signal_to_deliver(pid, status);
  stepcheck::page_cache memory(pid);
  // --seconds also ends a native call run at full speed (--skip-native) or a long system call.
  struct sigaction alarm_action {};
  alarm_action.sa_handler = [](int) { stop_requested = true; };
  sigaction(SIGALRM, &alarm_action, nullptr);
  alarm(static_cast<unsigned>(lim.seconds));
  const auto start = steady_clock::now();
  const auto deadline = start + seconds(lim.seconds);
  auto next_progress = start + seconds(1);
  const bool progress = isatty(STDERR_FILENO);
  cpu_pin pinned;
  pinned.pin(pid);
  bool alive = WIFSTOPPED(status);
  if (!alive) t.stopped_because = "the target " + wait_text(status);
  // This stop and the previous one: whether a call just happened (the word it pushed, the
  // return address, is at rsp), and whether it left JIT code (--skip-native).
  bool in_jit = false, was_in_jit = false, just_called = false;
  uint64_t prev_pc = 0, prev_sp = 0, pushed = 0;
  user_regs_struct regs{};
  auto stop_reason = [&]() {
    return steady_clock::now() >= deadline ? "time limit" : "interrupted";
  };
  // Where waiting left it: at the first instruction of a function, its frame is known.
  memory.clear();
  if (alive && ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0)
    in_jit = check_stop(code, oracle, memory, regs, false, lim, t);
  while (alive) {
    if (t.steps >= lim.steps) {
      t.stopped_because = "step limit";
      break;
    }
    if (stop_requested) {
      t.stopped_because = stop_reason();
      break;
    }
    if ((t.steps & 1023) == 0) {
      const auto now = steady_clock::now();
      if (now >= deadline) {
        t.stopped_because = "time limit";
        break;
      }
      if (progress && now >= next_progress) {
        std::fprintf(stderr, "\r%s: %llu steps, %llu in JIT code, %llu mismatches", program.c_str(),
                     static_cast<unsigned long long>(t.steps),
                     static_cast<unsigned long long>(t.jit_steps),
                     static_cast<unsigned long long>(t.mismatches));
        next_progress = now + seconds(1);
      }
    }
    // A call out of JIT code (--skip-native): run at full speed to its return where that can
    // be done, else stepped like the rest.
    bool run_free = lim.skip_native && was_in_jit && !in_jit && just_called;
    run_end r = run_end::step_instead;
    if (run_free) {
      pinned.unpin_thread();  // threads it creates meanwhile inherit its own mask
      r = run_to_return(pid, pushed, regs.rsp + 8, pending, status);
      pinned.repin_thread();
      if (r == run_end::step_instead) {
        ++t.native_stepped;
        run_free = false;
        just_called = false;  // the call is being stepped: not a new one at the next stop
      }
    }
    if (run_free) {
      if (r == run_end::ended) {
        t.stopped_because = "the target " + wait_text(status);
        alive = false;
        break;
      }
      if (r == run_end::exec) {
        t.stopped_because = "the target ran exec";
        break;
      }
      if (r == run_end::exiting) {
        t.stopped_because = "the thread " + wait_text(exit_stop(pid, status).value_or(0));
        break;
      }
      if (r == run_end::stopped) {
        t.stopped_because = stop_reason();
        break;
      }
      ++t.native_runs;
    } else {
      // ESRCH: a SIGKILL (another thread's exit_group) took it out of its stop: the wait
      // below gets its end.
      if ((ptrace(PTRACE_SINGLESTEP, pid, nullptr, pending) != 0 && errno != ESRCH) ||
          !wait_stop(pid, status, false)) {
        t.stopped_because = std::string("lost the thread: ") + std::strerror(errno);
        alive = false;
        break;
      }
      pending = 0;
      if (!WIFSTOPPED(status)) {
        t.stopped_because = "the target " + wait_text(status);
        alive = false;
        break;
      }
      if ((status >> 16) == PTRACE_EVENT_EXEC) {
        t.stopped_because = "the target ran exec";
        break;
      }
      // Exiting (exit, exit_group, a fatal signal, or pthread_exit of a main thread whose
      // end would not be reported while other threads run): detached below.
      if (auto exiting = exit_stop(pid, status)) {
        t.stopped_because = "the thread " + wait_text(*exiting);
        break;
      }
      if ((status >> 16) != 0) continue;  // ptrace's own stop: the thread did not move
      // A signal, or the program's own SIGTRAP: delivered by the next step.
      if ((pending = signal_to_deliver(pid, status)) != 0) continue;
      ++t.steps;
    }
    prev_pc = regs.rip;
    prev_sp = regs.rsp;
    if (ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) continue;
    // A step over a system call stops after it; orig_rax is -1 after any other instruction.
    if (created_task(regs)) pinned.release(static_cast<pid_t>(regs.rax));
    was_in_jit = in_jit;
    memory.clear();  // a new stop: memory may have changed
    just_called = regs.rsp == prev_sp - 8 && memory.read(regs.rsp, &pushed, 8) &&
                  pushed > prev_pc && pushed <= prev_pc + 15;
    in_jit = check_stop(code, oracle, memory, regs, just_called, lim, t);
  }
  alarm(0);
  if (progress && t.steps >= 1024) std::fputc('\n', stderr);
  if (alive) ptrace(PTRACE_DETACH, pid, nullptr, pending);
  pinned.restore();
  return alive;
}

int run_check(const std::string& program, const parsed_args& a) {
  limits lim;
  std::string bad;
  if (!parse_limit(a, "steps", 1, uint64_t{1} << 40, lim.steps, bad) ||
      !parse_limit(a, "seconds", 1, 86400, lim.seconds, bad) ||
      !parse_limit(a, "wait", 1, 86400, lim.wait, bad) ||
      !parse_limit(a, "frames", 1, 1u << 20, lim.frames, bad) ||
      !parse_limit(a, "max-reports", 0, 1u << 20, lim.reports, bad))
    return report(program, bad, exit_usage);
  lim.skip_native = a.flag("skip-native");
  const auto pid_text = a.value("pid");
  if (pid_text.has_value() == !a.operands.empty())
    return report(program, "give either --pid PID or -- COMMAND, not both and not neither",
                  exit_usage);

  // Ctrl-C ends the checking, not the report (the command gets its own SIGINT).
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  pid_t pid = 0;
  const bool spawned = !pid_text;
  if (pid_text) {
    auto n = parse_u64(*pid_text);
    if (!n || *n == 0 || *n > INT_MAX)
      return report(program, "--pid: '" + toolkit::shortened(*pid_text) + "' is not a thread id",
                    exit_usage);
    pid = static_cast<pid_t>(*n);
    // ptrace refuses kernel threads with EPERM, which would read as a missing privilege.
    if (auto st = toolkit::read_proc_stat(pid); st && st->kernel_thread())
      return report(program,
                    "thread " + std::to_string(pid) + " (" + toolkit::terminal_text(st->comm) +
                        ") is a kernel thread: it runs no user code and publishes no windows",
                    exit_failure);
    if (ptrace(PTRACE_SEIZE, pid, nullptr, thread_group::options) != 0)
      return report(program,
                    "cannot trace thread " + std::to_string(pid) + ": " + std::strerror(errno) +
                        (errno == EPERM ? " (needs CAP_SYS_PTRACE or a ptrace_scope that "
                                          "allows it)"
                                        : ""),
                    exit_failure);
  } else {
    auto p = spawn(a.operands);
    if (!p) return report(program, p.error().message(), exit_failure);
    pid = *p;
  }
  // With COMMAND: waits for its end (unless `ended` already has it) and says how it ended.
  auto finish_command = [&](std::optional<int> ended) {
    if (!spawned) return;
    int st = ended.value_or(0);
    bool over = ended.has_value() && !WIFSTOPPED(st);  // a stop is not an end: wait for it
    while (!over) {
      if (waitpid(pid, &st, __WALL) != pid) return;
      over = !WIFSTOPPED(st);
    }
    std::printf("%s: the command %s\n", program.c_str(), wait_text(st).c_str());
  };

  // Output to a closed pipe (`| head`) must not kill the tool before it detaches; the command
  // was forked before this and keeps its own SIGPIPE.
  signal(SIGPIPE, SIG_IGN);

  wait_failure failed;
  auto found = wait_for_code(pid, spawned, seconds(lim.wait), failed);
  if (!found) {
    // A command that published nothing in time is not left running on its own.
    if (spawned && !failed.ended) kill(pid, SIGKILL);
    finish_command(failed.ended);
    return report(program, found.error().message(), exit_failure);
  }

  // The thread is stopped: step it from here.
  const pid_t thread = found->thread;
  stepcheck::published_code& code = found->code;
  int status = found->stop;
  tally t;
  t.watch_note = found->how;
  t.thread_note = found->whom;
  stepcheck::frame_oracle oracle;
  // Where the perf map is depends on the process's environment (JITUNWIND_DIR), readable only
  // while it lives: found now, read when reporting.
  const pid_t process = process_of(thread);
  const std::string perf_map = perf_map_path(process, live_task(process, thread));
  const bool alive = step_thread(program, thread, code, oracle, lim, status, t);
  print_report(program, thread, perf_map, t, oracle, code);
  std::fflush(stdout);
  // The end of another thread than the main one is not the command's.
  finish_command(alive || thread != pid ? std::nullopt : std::optional<int>(status));
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
