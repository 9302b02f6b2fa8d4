// jitwalk profile: sample a process, unwind in BPF, write folded / SVG / pprof.
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include <jitunwind/toolkit/terminal_text.hpp>
#include "jitwalk/aggregate.hpp"
#include "jitwalk/cli.hpp"
#include "jitwalk/name_report.hpp"
#include "jitwalk/native_tables.hpp"
#include "jitwalk/tree_end.hpp"

namespace jitwalk {

namespace {

struct profile_options {
  run_options run;
  unsigned hz = 99;
  std::string folded, svg, pprof;
  bool mark_cut = true;
  bool raw_addresses = false;
  bool late_names = true;
  double grace_s = 2;
  bool wait_exit = false;
  bool bpf_stats = false;
  bool per_cpu_events = false;
  bool merge_processes = false;
  program unwinder = program::sample;
};

uint64_t unix_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  cmdline::parsed a;
  if (int status = 0; !parse_command_line(profile_command, argc, argv, a, &status)) return status;
  auto fail = [](const std::string& message) { return usage_failure(profile_command, message); };
  profile_options o;
  if (std::string bad = read_shared_options(a, o.run); !bad.empty()) return fail(bad);
  o.run.target.command = a.operands;
  o.run.target.pid = static_cast<pid_t>(a.whole("pid", 0));
  o.hz = static_cast<unsigned>(std::lround(a.decimal("frequency", o.hz)));
  o.grace_s = a.decimal("grace", o.grace_s);
  o.wait_exit = a.flag("wait-exit");
  o.raw_addresses = a.flag("raw-addresses");
  o.late_names = !a.flag("early-names");
  o.folded = a.value("folded").value_or("");
  o.svg = a.value("svg").value_or("");
  o.pprof = a.value("pprof").value_or("");
  o.run.kernel_stacks = a.flag("kernel");
  o.merge_processes = a.flag("merge-processes");
  o.run.per_thread = a.flag("per-thread");
  const std::string unwinder = a.value("unwinder").value_or("sframe");
  o.unwinder = unwinder == "kernel-fp" ? program::sample_kfp : program::sample;
  o.run.fp_only = unwinder == "fp";
  o.run.table_cache = a.state("table-cache").value_or(true);
  if (auto dir = a.value("table-cache")) o.run.table_cache_dir = *dir;
  o.run.tracker.jit = a.state("jit").value_or(true);
  o.mark_cut = a.state("cut-marker").value_or(true);
  o.bpf_stats = a.flag("bpf-stats");
  o.per_cpu_events = a.flag("per-cpu-events");
  o.run.max_memory = a.whole("max-memory", o.run.max_memory);
  o.run.max_file_bytes = a.whole("max-file", o.run.max_file_bytes);
  o.run.bpf.row_capacity = static_cast<uint32_t>(a.whole("rows", o.run.bpf.row_capacity));
  if ((o.run.target.pid > 0) == !o.run.target.command.empty())
    return fail("give exactly one of -p PID or -- COMMAND");
  // Default: follow a command's children, not -p's.
  o.run.follow_children = a.state("children").value_or(!o.run.target.command.empty());
  if (o.folded.empty() && o.svg.empty() && o.pprof.empty()) {
    note("no --folded/--svg/--pprof given: only the summary is printed");
  }
  o.run.tracker.attach_events = o.unwinder == program::sample && !o.run.fp_only;
  o.run.tracker.jit = o.run.tracker.jit && o.run.tracker.attach_events;

  if (o.hz > 5000)
    warn(
        "-F %u: each sample's stack walk takes ~15 us, so sampling will slow the command by "
        "~%.0f%% of its CPU time",
        o.hz, o.hz * 15e-6 * 100);
  // Find out now, not after the whole run, that an output cannot be written.
  for (const std::string* path : {&o.folded, &o.svg, &o.pprof}) {
    if (path->empty()) continue;
    if (auto r = check_output(*path); !r) {
      report(r.error());
      return 1;
    }
  }

  install_stop_signals();
  auto started = run_session::start(o.run);
  if (!started) {
    report(started.error());
    return 1;
  }
  run_session& s = *started.value();
  if (o.bpf_stats) {
    if (auto r = s.bpf().enable_run_time_stats(); !r) warn("%s", r.error().message().c_str());
  }
  // Per-thread events (inherited by new threads) run the BPF program only for the target;
  // --per-cpu-events uses one event per CPU and filters in BPF, like a system-wide profiler.
  auto attach_threads = [&]() -> result<void> {
    if (o.per_cpu_events) return {};
    return s.bpf().attach_sampling(o.unwinder, o.hz,
                                   s.child() ? std::vector<pid_t>{s.pid()} : list_threads(s.pid()));
  };
  if (auto r = o.per_cpu_events ? s.bpf().attach_sampling_cpus(o.unwinder, o.hz) : attach_threads();
      !r) {
    report(error(r.error().code(), format("pid %d: %s", s.pid(), r.error().message().c_str())));
    return 1;
  }

  profile_data prof;
  prof.process_name = s.process_name();
  prof.pid = s.pid();
  prof.period_ns = 1000000000ull / o.hz;
  prof.start_unix_ns = unix_now_ns();
  aggregate_options ao;
  ao.kernel = o.run.kernel_stacks;
  ao.per_thread = o.run.per_thread;
  ao.mark_cut = o.mark_cut;
  ao.merge_processes = o.merge_processes;
  ao.raw_addresses = o.raw_addresses;
  ao.rename_late = o.late_names;
  aggregator agg(s.bpf(), s.sym(), s.track(), prof, ao);
  agg.follow(&s.processes());

  if (auto r = s.go(); !r) {
    report(r.error());
    return 1;
  }
  const std::string shown_name = jitunwind::toolkit::terminal_text(s.process_name());
  note("profiling pid %d (%s) at %u Hz%s", s.pid(), s.process_name().c_str(), o.hz,
       o.run.duration_s > 0 ? format(" for %.1f s", o.run.duration_s).c_str() : "");
  unsigned ticks = 0;
  s.loop([&] {
    if (!s.child()) (void)attach_threads();  // threads created before our events existed
    agg.drain();
    if (++ticks % 2 == 0) {
      const auto& t = s.track().stats();
      note("%.0f s: %llu samples, %zu objects, %zu JIT windows loaded", s.elapsed_s(),
           static_cast<unsigned long long>(agg.summary().samples), t.objects, t.windows_loaded);
    }
  });
  const double elapsed = s.elapsed_s();
  s.bpf().detach_sampling();
  // The target's mappings while it still lives: a jitdump mapped since the last drain is found
  // now, and read whole by the late names once the command has ended.
  if (!s.child() || !s.child()->poll_exit()) s.processes().refresh_symbols();
  // A started command ends with its whole tree, gently first (SIGINT, SIGTERM after --grace,
  // SIGKILL after another), so that a runtime can write the names it still holds; with
  // --wait-exit they are first left to exit by themselves.
  s.release_all();
  tree_end ended;
  if (s.child()) ended = end_tree(*s.child(), o.grace_s, o.wait_exit, stop_requested);
  agg.drain();
  // Names that arrived after the frames were first seen (a jitdump written through a buffer,
  // flushed at exit), and unnamed code grouped by mapping.
  const late_summary late = agg.resolve_late();
  prof.duration_ns = static_cast<uint64_t>(elapsed * 1e9);

  // ---- outputs ----
  int rc = 0;
  std::vector<std::string> wrote;
  if (!o.folded.empty()) {
    if (auto r = write_folded(prof, o.folded); !r) {
      report(r.error());
      rc = 1;
    } else {
      wrote.push_back("folded stacks to " + o.folded);
    }
  }
  const walk_summary& sum = agg.summary();
  if (!o.svg.empty()) {
    svg_options so;
    so.title = format("%s (pid %d): CPU, %u Hz", s.process_name().c_str(), s.pid(), o.hz);
    so.subtitle = format("%llu samples; %.1f%% unwound to the root; jitwalk (%s)",
                         static_cast<unsigned long long>(sum.samples), pct(sum.root, sum.samples),
                         o.unwinder == program::sample_kfp ? "kernel frame pointers"
                         : o.run.fp_only                   ? "frame pointers"
                                                           : "SFrame");
    if (auto r = write_svg(prof, so, o.svg); !r) {
      report(r.error());
      rc = 1;
    } else {
      wrote.push_back("SVG flame graph to " + o.svg);
    }
  }
  if (!o.pprof.empty()) {
    if (auto r = write_pprof(prof, o.pprof); !r) {
      report(r.error());
      rc = 1;
    } else {
      wrote.push_back("pprof profile to " + o.pprof);
    }
  }

  // ---- summary (always printed, even with -q) ----
  auto bs = s.bpf().stats();
  // Every process image's tables (one process: its own).
  const tracker_stats ts = s.processes().total_stats();
  const size_t others = s.processes().processes_sampled(s.pid());
  std::fprintf(
      stderr, "jitwalk: %llu samples of pid %d (%s)%s in %.1f s at %u Hz; %s\n",
      static_cast<unsigned long long>(sum.samples), s.pid(), shown_name.c_str(),
      others ? format(" and %zu process%s it started", others, others == 1 ? "" : "es").c_str()
             : "",
      elapsed, o.hz, s.stop_reason().c_str());
  std::fprintf(stderr,
               "jitwalk:   unwound to the root: %.1f%%   cut: %.1f%%   frame-pointer fallback: "
               "%.1f%%\n",
               pct(sum.root, sum.samples), pct(sum.samples - sum.root, sum.samples),
               pct(sum.fallback, sum.samples));
  std::fprintf(stderr, "jitwalk:   tasks: %s\n",
               s.processes().summary(bs[JW_STAT_OTHER_TASK], bs[JW_STAT_EXITING]).c_str());
  if (g_verbosity >= 2)
    for (const std::string& line : walk_accounting(sum))
      std::fprintf(stderr, "jitwalk:   %s\n", line.c_str());
  const std::string stops = stop_counts(sum.by_stop);
  if (!stops.empty()) std::fprintf(stderr, "jitwalk:   walks ended by: %s\n", stops.c_str());
  // Shares of the steps tried (not only those made): a run whose walks all failed at their
  // first step says so instead of showing 100 % for the one step that worked.
  if (const std::string steps = step_counts(sum); !steps.empty())
    std::fprintf(stderr, "jitwalk:   caller steps: %s\n", steps.c_str());
  std::fprintf(
      stderr,
      "jitwalk:   tables: %zu objects (%zu with .sframe: %zu v1, %zu v2, %zu v3; %zu without "
      "tables); JIT windows: %zu loaded, %zu rejected, %zu freed, %zu gone before "
      "they could be read; freed-window rows refused %llu times\n",
      ts.objects, ts.objects_sframe, ts.objects_sframe_v1, ts.objects_sframe_v2,
      ts.objects_sframe_v3, ts.objects_without, ts.windows_loaded, ts.windows_rejected,
      ts.windows_freed, ts.windows_vanished,
      static_cast<unsigned long long>(bs[JW_STAT_STALE_REJECT]));
  if (g_verbosity >= 2) {
    // What the tables cost (docs/performance.md compares jitwalk's RSS with it).
    const table_stats tst = s.tables().stats();
    std::string cache = "off";
    if (const table_cache* c = s.cache()) {
      cache = format(
          "%zu hits, %zu converted and stored, %zu invalid (rebuilt), %zu without a "
          "build ID, in %s",
          c->stats().hits, c->stats().written, c->stats().rejected, c->stats().uncacheable,
          c->dir().c_str());
    }
    std::fprintf(stderr,
                 "jitwalk:   table bytes: %zu rows (%zu bytes) in %zu ranges at the most, of a "
                 "table of %zu rows (grown %zu times); %zu ranges shared the rows of an object "
                 "another process loaded (%zu rows not loaded again); cache: %s\n",
                 tst.rows_peak, tst.rows_peak * sizeof(jw_row), tst.ranges_peak, tst.rows_capacity,
                 tst.grown, tst.shared_ranges, tst.shared_rows_saved, cache.c_str());
  }
  std::fprintf(stderr,
               "jitwalk:   BPF: %llu samples of the target, %llu of other tasks, %llu of exiting "
               "tasks, %llu lost (maps full), %llu discarded (table races), %llu events (%llu "
               "lost)\n",
               static_cast<unsigned long long>(bs[JW_STAT_SAMPLES]),
               static_cast<unsigned long long>(bs[JW_STAT_OTHER_TASK]),
               static_cast<unsigned long long>(bs[JW_STAT_EXITING]),
               static_cast<unsigned long long>(bs[JW_STAT_DROPPED_MAP]),
               static_cast<unsigned long long>(bs[JW_STAT_RACES]),
               static_cast<unsigned long long>(bs[JW_STAT_EVENTS]),
               static_cast<unsigned long long>(bs[JW_STAT_RINGBUF_FULL]));
  if (ts.slots_skipped != 0 || s.budget().refusals() != 0 || s.sym().names().dropped() != 0) {
    std::fprintf(stderr,
                 "jitwalk:   target data: %zu registry entries skipped; memory budget: %s of %s "
                 "used at most, %llu requests refused, %llu JIT names dropped\n",
                 ts.slots_skipped, jitunwind::toolkit::size_text(s.budget().peak()).c_str(),
                 jitunwind::toolkit::size_text(s.budget().limit()).c_str(),
                 static_cast<unsigned long long>(s.budget().refusals()),
                 static_cast<unsigned long long>(s.sym().names().dropped()));
  }
  if (o.run.kernel_stacks && sum.kernel_stack_lost) {
    std::fprintf(stderr, "jitwalk:   kernel stacks lost: %llu\n",
                 static_cast<unsigned long long>(sum.kernel_stack_lost));
  }
  if (o.bpf_stats) {
    prog_stats ps = s.bpf().stats_of(o.unwinder);
    std::fprintf(
        stderr,
        "jitwalk:   BPF %s: %llu runs, %.0f ns per run (kernel bpf_stats); %.0f ns per "
        "target sample inside the program (bpf_ktime)\n",
        to_string(o.unwinder), static_cast<unsigned long long>(ps.run_cnt),
        ps.run_cnt ? static_cast<double>(ps.run_time_ns) / ps.run_cnt : 0.0,
        bs[JW_STAT_SAMPLES] ? static_cast<double>(bs[JW_STAT_WALK_NS]) / bs[JW_STAT_SAMPLES] : 0.0);
  }
  if (s.child() && s.child()->exited()) {
    // Whether the command ended by itself or jitwalk ended it (end of -d, Ctrl-C), never a bare
    // "exit status 143" for a command jitwalk terminated.
    const std::string why = !s.child()->ended_by_jitwalk() ? ""
                            : o.run.duration_s > 0 && s.stop_reason() != "interrupted"
                                ? format(" at the end of -d %g", o.run.duration_s)
                                : " when jitwalk was interrupted";
    std::fprintf(stderr, "jitwalk:   command: %s%s, %.3f s CPU (user + system)\n",
                 s.child()->describe_end().c_str(), why.c_str(), s.child()->cpu_seconds());
  }
  if (const std::string t = ended.text(); !t.empty())
    std::fprintf(stderr, "jitwalk:   %s\n", t.c_str());
  if (o.bpf_stats && s.child() && s.child()->cpu_seconds() > 0) {
    prog_stats ps = s.bpf().stats_of(o.unwinder);
    std::fprintf(stderr, "jitwalk:   BPF time / command CPU time: %.4f%%\n",
                 100.0 * static_cast<double>(ps.run_time_ns) / 1e9 / s.child()->cpu_seconds());
  }
  {
    // Names per process: each process of a tree has its own files, windows and samples (the
    // busiest six are reported; one process: its report alone).
    const std::vector<process_image> images = s.processes().sampled();
    const bool tree = images.size() > 1 && !o.merge_processes;
    const size_t shown = tree ? std::min<size_t>(images.size(), 6) : 1;
    const name_counts all = count_names(prof);
    for (size_t i = 0; i < shown; ++i) {
      process_image img;
      if (images.size() == 1 || tree) {
        img = images[i];
      } else {
        img.pid = s.pid();
        img.comm = s.process_name();
        img.asid = s.track().asid();
      }
      symbolizer& sym = s.processes().sym(img.asid);
      process_names pn;
      pn.pid = img.pid;
      pn.comm = img.comm;
      pn.files = sym.names().files();
      pn.registry_windows = s.processes().track(img.asid).stats().windows_loaded;
      pn.where = sym.view().where();
      pn.still_running = process_alive(img.pid);
      pn.one_of_tree = tree;
      pn.samples = img.samples;
      if (s.child() && img.pid == s.pid() && s.child()->ended_by_jitwalk() &&
          s.child()->term_signal() != 0)
        pn.ended_by_signal = format("SIG%s", sigabbrev_np(s.child()->term_signal()));
      for (const ended_process& e : ended.signalled)
        if (e.pid == img.pid && e.gone)
          pn.ended_by_signal = format("SIG%s", sigabbrev_np(e.last_signal));
      const std::string label = s.processes().label(img.pid, 0, img.asid, false);
      const name_counts nc = !tree ? all : count_names(prof, [&](const std::string& thread) {
        return thread == label || thread.rfind(label + "/", 0) == 0;
      });
      for (const std::string& line : name_report_lines(nc, pn, g_verbosity >= 2))
        std::fprintf(stderr, "jitwalk:   %s%s\n",
                     tree && line.rfind("names for", 0) != 0 ? "  " : "", line.c_str());
    }
    if (tree && images.size() > shown) {
      uint64_t rest = 0;
      for (size_t i = shown; i < images.size(); ++i) rest += images[i].samples;
      std::fprintf(stderr, "jitwalk:   names of %zu more processes (%llu samples) not shown\n",
                   images.size() - shown, static_cast<unsigned long long>(rest));
    }
    if (late.pending != 0 && g_verbosity >= 2)
      std::fprintf(stderr,
                   "jitwalk:   late names: %llu frames unnamed when first seen, %llu named at "
                   "the end, %llu grouped by mapping\n",
                   static_cast<unsigned long long>(late.pending),
                   static_cast<unsigned long long>(late.named),
                   static_cast<unsigned long long>(late.grouped));
  }
  for (const std::string& w : wrote) std::fprintf(stderr, "jitwalk:   wrote %s\n", w.c_str());
  return status_after_cuts(rc, s.budget().refusals());
}

}  // namespace jitwalk
