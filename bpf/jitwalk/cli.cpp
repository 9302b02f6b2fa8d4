// The option tables of `jitwalk profile` and `jitwalk verify`; their --help is generated from
// them (cmdline/), and docs/jitwalk.md lists the same options.
#include "jitwalk/cli.hpp"

#include "jitwalk/native_tables.hpp"

namespace jitwalk {

namespace {

using cmdline::kind;
using cmdline::option;

// Each sample's BPF walk takes ~15 µs: at 20 kHz that is a third of a CPU per thread, and
// beyond it the walks outrun the sampling period.
constexpr double max_frequency_hz = 20000;

option max_depth_option(uint32_t fallback) {
  return {.name = "max-depth",
          .value_name = "N",
          .help = format("Frames per user stack, 1..%d (default %u).", JW_MAX_DEPTH, fallback),
          .type = kind::whole,
          .min = 1,
          .max = JW_MAX_DEPTH};
}

const option native_tables_option{
    "native-tables", 0, "LIST",
    "Native tables to load: sframe,eh_frame (default), sframe, eh_frame or none."};

const option window_state_limit_option{
    .name = "window-state-limit",
    .value_name = "N",
    .help = "Prune BPF window states of gone windows beyond N (default 32768).",
    .type = kind::whole,
    .min = 1,
    .max = 60000};

option duration_option(const char* help) {
  return {"duration", 'd', "SEC", help, kind::duration, 0.001, 1e7};
}

const option quiet_option{"quiet", 'q', "", "Only errors and the summary."};
const option verbose_option{"verbose", 'v', "", "Details: every table and probe."};

}  // namespace

const cmdline::command profile_command{
    .name = "profile",
    .operands = "(-p PID | -- COMMAND [ARGS...])",
    .summary = "Sample a process and write folded stacks, an SVG flame graph, a pprof profile.",
    .description =
        "Samples the target's threads on cpu-clock perf events, unwinds their user stacks in BPF "
        "with the SFrame tables the target published (JIT windows from the jitunwind registry) "
        "and the .sframe / .eh_frame sections of its native objects, falls back to frame "
        "pointers where nothing covers a PC, aggregates in the kernel, symbolizes in user space "
        "and writes the profile.",
    .options =
        {
            {.name = "pid",
             .short_name = 'p',
             .value_name = "PID",
             .help = "Profile a running process (all its threads).",
             .type = kind::whole,
             .min = 1,
             .max = 1 << 30,
             .heading = "Target (-- COMMAND ARGS...: start COMMAND and profile it until it exits; "
                        "Ctrl-C stops early)"},
            {.name = "children",
             .help = "Follow the processes the target forks and exec's, recursively (default for "
                     "a COMMAND; with -p, those created from now on); --no-children: the target "
                     "process only (its exec's still get new tables). See docs/jitwalk.md, "
                     "\"Process trees\".",
             .type = kind::flag,
             .heading = "Processes"},
            {"merge-processes", 0, "",
             "Label stacks by command name (\"comm\") instead of \"comm-PID\"."},
            {.name = "frequency",
             .short_name = 'F',
             .value_name = "HZ",
             .help = "Samples per second of CPU time of each target thread (default 99; at most "
                     "20000).",
             .type = kind::frequency,
             .min = 1,
             .max = max_frequency_hz,
             .heading = "Sampling"},
            duration_option(
                "Stop after SEC seconds; a started command is then ended: sampling stops, "
                "SIGINT, SIGTERM after the grace period, SIGKILL after another (a runtime gets "
                "time to write its names)."),
            {"grace", 0, "SEC", "The grace period of that sequence (default 2; also after Ctrl-C).",
             kind::duration, 0, 3600},
            {"wait-exit", 0, "",
             "At the end of -d stop sampling but let the command run until it exits by itself "
             "(its jitdump complete); Ctrl-C then ends it as above."},
            {"kernel", 0, "", "Add kernel stacks (frames suffixed _[k] in folded output)."},
            {"per-thread", 0, "", "One root per thread (\"comm-PID/TID\") instead of per process."},
            {"per-cpu-events", 0, "",
             "Sample with one event per CPU, filtered by PID in BPF (default: one event per "
             "target thread, inherited by the threads it creates)."},
            {.name = "folded",
             .value_name = "FILE",
             .help = "Folded stacks (\"comm-PID;root;...;leaf count\"), for flamegraph tools.",
             .heading = "Outputs"},
            {"svg", 0, "FILE", "Self-contained SVG flame graph."},
            {"pprof", 0, "FILE", "pprof protobuf (gzip), for go tool pprof, Parca, Pyroscope."},
            {.name = "unwinder",
             .value_name = "KIND",
             .help = "sframe (default): tables, frame-pointer fallback; fp: our BPF walk with "
                     "frame pointers only; kernel-fp: the kernel's walk (bpf_get_stack); both "
                     "for comparisons.",
             .type = kind::choice,
             .choices = {"sframe", "fp", "kernel-fp"},
             .heading = "Walk"},
            max_depth_option(JW_DEFAULT_DEPTH),
            {.name = "cut-marker",
             .help = "Do not root cut stacks at a \"[cut: reason]\" frame.",
             .type = kind::flag,
             .on_by_default = true},
            {"raw-addresses", 0, "",
             "One \"[unknown 0xADDR]\" frame per unnamed address instead of one frame per mapping "
             "(\"[anon:0x7f..-0x7f..]\", \"[anon:v8]\", \"[memfd:x]\")."},
            {"early-names", 0, "",
             "Name frames only when first seen (default: frames unnamed then are named again at "
             "the end, against the whole perf map and jitdump)."},
            {.name = "jit",
             .help = "Do not read the target's JIT windows.",
             .type = kind::flag,
             .on_by_default = true,
             .heading = "Tables"},
            {"sync-tables", 0, "",
             "Stop the target at each window_publish until its rows are loaded (no sample ever "
             "misses a new window; costs the target a pause)."},
            native_tables_option,
            {.name = "table-cache",
             .value_name = "DIR",
             .help = "Cache converted native tables in DIR (default: by build ID in "
                     "$XDG_CACHE_HOME/jitwalk or ~/.cache/jitwalk; delete it to clear); "
                     "--no-table-cache converts native objects' tables afresh.",
             .negatable = true},
            {"rows", 0, "N", "Capacity of the BPF row table (default 1048576).", kind::whole, 1024,
             1 << 28},
            window_state_limit_option,
            {.name = "max-memory",
             .value_name = "MIB",
             .help = "Memory the target's data may take in jitwalk: symbols of its objects, its "
                     "JIT names, copies being converted (default 1024 MiB); beyond it names or "
                     "windows are left out, with a warning.",
             .type = kind::size,
             .min = 1 << 20,
             .max = double(uint64_t{1} << 40),
             .bare_unit = "MiB",
             .heading = "Limits"},
            {"max-file", 0, "MIB",
             "The most read from the target's perf map or jitdump, and the largest section read "
             "from one of its objects (default 512 MiB).",
             kind::size, 1 << 20, double(uint64_t{1} << 40), "MiB"},
            {.name = "bpf-stats",
             .help = "Report the BPF program's run time per sample (kernel bpf_stats).",
             .type = kind::flag,
             .heading = "Messages"},
            quiet_option,
            verbose_option,
        },
    .min_operands = 0,
    .max_operands = SIZE_MAX,
    .examples =
        "jitwalk profile -F 999 -d 10 --svg node.svg -- node app.js\n"
        "jitwalk profile -p 4242 -d 30s --folded out.folded --pprof out.pb.gz",
    .notes =
        "Progress and a summary (samples, unwound-to-root %, cut %, fallback %) go to "
        "stderr. Everything read from the target is treated as hostile (docs/jitwalk.md, "
        "\"Reading hostile processes\"); the output files are created beside PATH and "
        "renamed over it, and an existing symbolic link, FIFO or device at PATH is "
        "refused.\n"
        "Exit status: 0 when the run ended (whatever the command's own status), 1 for a "
        "runtime error, 2 for a bad command line.",
    .style = cmdline::layout::after_separator,
};

const cmdline::command verify_command{
    .name = "verify",
    .operands = "-- COMMAND [ARGS...]",
    .summary = "Run an example runtime and check every walked stack against its ground truth.",
    .description =
        "Runs COMMAND (an example runtime with its ground-truth `checkpoint` probe), walks the "
        "user stack in BPF at every checkpoint, and compares the return addresses found inside "
        "JIT code with the ground truth the probe carries (docs/ground-truth.md). The kernel's "
        "frame-pointer walk (bpf_get_stack with BPF_F_USER_STACK) runs on the same events and is "
        "reported side by side. It also checks the name of every walked JIT frame against the "
        "code live at the checkpoint (docs/jitwalk.md, \"Symbolization\").",
    .options =
        {
            {"min-match", 0, "PCT", "Required exact matches in percent (default 100).",
             kind::decimal, 0, 100},
            {"provider", 0, "NAME", "Only `checkpoint` probes of this provider (default: any)."},
            {"show", 0, "N", "Print up to N mismatching stacks (default 5).", kind::whole, 0,
             100000},
            {"print-walks", 0, "N", "Also print the first N walks, matching or not.", kind::whole,
             0, 100000},
            {"per-tag", 0, "",
             "One line per checkpoint tag (default when there are at most 20 tags)."},
            {.name = "sync-tables",
             .help = "Do not stop the command at window_publish while its tables are loaded "
                     "(then checkpoints right after a publish may run on old tables).",
             .type = kind::flag,
             .on_by_default = true},
            max_depth_option(JW_MAX_DEPTH),
            native_tables_option,
            window_state_limit_option,
            {"json", 0, "FILE", "Write the results as JSON."},
            duration_option("Stop after SEC seconds."),
            quiet_option,
            verbose_option,
        },
    .min_operands = 0,
    .max_operands = SIZE_MAX,
    .examples =
        "jitwalk verify -- toy-jit --frame-pointers=off --shadow-stack prog.toy 5\n"
        "jitwalk verify --print-walks 1 -- toy-interp prog.toy 2",
    .notes =
        "Exits 0 when at least --min-match percent of the checkpoints match exactly, 1 "
        "otherwise (also when there was no checkpoint, the command failed, a stale table "
        "was used, or a JIT frame was named after other code), 2 for a bad command line.",
    .style = cmdline::layout::after_separator,
};

std::string read_shared_options(const cmdline::parsed& a, run_options& ro) {
  ro.max_depth = static_cast<uint32_t>(a.whole("max-depth", ro.max_depth));
  ro.tracker.window_state_limit =
      static_cast<size_t>(a.whole("window-state-limit", ro.tracker.window_state_limit));
  ro.sync_tables = a.state("sync-tables").value_or(ro.sync_tables);
  ro.duration_s = a.decimal("duration", ro.duration_s);
  if (auto v = a.value("native-tables")) {
    auto policy = parse_native_policy(*v);
    if (!policy) return policy.error().message();
    ro.tracker.native = *policy;
  }
  if (auto last = a.last_of("quiet", "verbose")) {
    // The last of -q and -v wins; its --no- form means the default verbosity.
    g_verbosity = !a.flag(*last) ? 1 : *last == "quiet" ? 0 : 2;
  }
  if (a.saw_separator && a.operands.empty()) return "no command after --";
  return {};
}

bool parse_command_line(const cmdline::command& spec, int argc, char** argv, cmdline::parsed& a,
                        int* exit_status) {
  return cmdline::parse_or_exit_status(spec, "jitwalk " + spec.name, argc, argv, 2, a, exit_status);
}

int usage_failure(const cmdline::command& spec, const std::string& message) {
  return cmdline::usage_error("jitwalk " + spec.name, message);
}

}  // namespace jitwalk
