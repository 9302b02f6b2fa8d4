// Benchmarks of the example runtimes. Every quantity is measured next to its baseline in the
// same run and reported as a ratio:
//
//   toy-jit run time, --frame-pointers=off vs on (spin.toy, recompile.toy, fib.toy)
//   toy-interp: probes compiled in but untraced vs not compiled in (toy-interp-noprobes)
//   toy-interp: trampolines on vs off
//   toy-jit's code generator: SDK publication cost per function vs asmjit compile time
//            (in-process, 400 generated functions, one publish or one per function; the file
//            publishers sync or batched)
//   toy-interp trampolines on fib.toy: ns per toy call against the floor of a trampoline (one
//            extra call and return per call: C recursion through a stub vs direct, same run);
//            probes compiled in but untraced: instructions per call (callgrind, if valgrind is
//            installed) next to the time ratio
//
// Whole-program comparisons run the real binaries as child processes, alternating measured
// and baseline runs (so drift on a shared machine hits both alike), and compare the medians
// of the children's CPU time (user + system, from wait4), which load from other processes
// perturbs less than wall time. Counters: `measured_s`, `baseline_s`, `ratio`.
#include <benchmark/benchmark.h>
#include <jitunwind/window.h>

#include "codegen.h"
#include "toylang.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

extern char** environ;

namespace {

// CPU seconds of one child run (stdout/stderr to /dev/null); aborts the benchmark on failure.
double run_child(benchmark::State& state, const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    state.SkipWithError(("cannot run " + argv[0]).c_str());
    return 0;
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    state.SkipWithError((argv[0] + " failed").c_str());
    return 0;
  }
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string program(const char* name) {
  return std::string(JITUNWIND_SOURCE_DIR) + "/examples/toy-jit/programs/" + name;
}

// Alternates `measured` and `baseline` runs; each benchmark iteration is one pair.
void compare_runs(benchmark::State& state, const std::vector<std::string>& measured,
                  const std::vector<std::string>& baseline) {
  std::vector<double> m, b;
  for (auto _ : state) {
    const double tm = run_child(state, measured);
    const double tb = run_child(state, baseline);
    state.SetIterationTime(tm + tb);
    m.push_back(tm);
    b.push_back(tb);
  }
  state.counters["measured_s"] = median(m);
  state.counters["baseline_s"] = median(b);
  state.counters["ratio"] = median(b) > 0 ? median(m) / median(b) : 0;
}

void fp_off_vs_on(benchmark::State& state, const char* file, const char* arg) {
  compare_runs(state, {TOY_JIT, "--frame-pointers=off", program(file), arg},
               {TOY_JIT, "--frame-pointers=on", program(file), arg});
}

void BM_toyjit_fp_off_vs_on_spin(benchmark::State& s) {
  fp_off_vs_on(s, "spin.toy", "20000");
}
void BM_toyjit_fp_off_vs_on_fib(benchmark::State& s) {
  fp_off_vs_on(s, "fib.toy", "38");
}
void BM_toyjit_fp_off_vs_on_recompile(benchmark::State& s) {
  fp_off_vs_on(s, "recompile.toy", "3000000");
}

// The interpreter comparisons run over several builds of each side that differ only in code
// layout (toy-interp-layoutN: everything moved by N bytes, see examples/interpreter): where the
// eval loop's jumps fall changes its speed by as much as the few percent measured here, so one
// layout per side would measure the layout. Iteration i uses layout i % layouts for both
// sides; `ratio` compares the two sides' means over layouts (of each layout's median run), and
// `ratio_layoutN` shows how far one layout alone would have led astray.
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(s.substr(start, comma - start));
  out.push_back(s.substr(start));
  return out;
}

const std::vector<std::string> interp_layouts = split_commas(TOY_INTERP_LAYOUTS);
const std::vector<std::string> interp_noprobes_layouts = split_commas(TOY_INTERP_NOPROBES_LAYOUTS);
const std::vector<std::string> layout_names = split_commas(TOY_INTERP_LAYOUT_NAMES);

// `measured` and `baseline` get the binary (of their layout) prepended.
void compare_over_layouts(benchmark::State& state, const std::vector<std::string>& measured_bins,
                          const std::vector<std::string>& measured_args,
                          const std::vector<std::string>& baseline_bins,
                          const std::vector<std::string>& baseline_args) {
  const size_t n = std::min(measured_bins.size(), baseline_bins.size());
  std::vector<double> m, b;
  std::vector<std::vector<double>> lm(n), lb(n);
  size_t i = 0;
  auto with = [](const std::string& bin, const std::vector<std::string>& args) {
    std::vector<std::string> argv{bin};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  for (auto _ : state) {
    const size_t k = i++ % n;
    const double tm = run_child(state, with(measured_bins[k], measured_args));
    const double tb = run_child(state, with(baseline_bins[k], baseline_args));
    state.SetIterationTime(tm + tb);
    m.push_back(tm);
    b.push_back(tb);
    lm[k].push_back(tm);
    lb[k].push_back(tb);
  }
  // Each layout weighs the same: the mean over layouts of each layout's median.
  double sum_m = 0, sum_b = 0;
  for (size_t k = 0; k < n; ++k) {
    if (lm[k].empty()) continue;
    sum_m += median(lm[k]);
    sum_b += median(lb[k]);
    if (k < layout_names.size() && median(lb[k]) > 0)
      state.counters["ratio_layout" + layout_names[k]] = median(lm[k]) / median(lb[k]);
  }
  state.counters["measured_s"] = median(m);
  state.counters["baseline_s"] = median(b);
  state.counters["ratio"] = sum_b > 0 ? sum_m / sum_b : 0;
}

void probes_untraced_vs_compiled_out(benchmark::State& state, const char* file, const char* arg) {
  compare_over_layouts(state, interp_layouts, {"--trampolines=off", program(file), arg},
                       interp_noprobes_layouts, {"--trampolines=off", program(file), arg});
}

void trampolines_on_vs_off(benchmark::State& state, const char* file, const char* arg) {
  compare_over_layouts(state, interp_layouts,
                       {"--trampolines=on", "--probes=off", program(file), arg}, interp_layouts,
                       {"--trampolines=off", "--probes=off", program(file), arg});
}

void BM_interp_probes_untraced_vs_compiled_out(benchmark::State& state) {
  probes_untraced_vs_compiled_out(state, "spin.toy", "6000");
}

void BM_interp_probes_untraced_vs_compiled_out_fib(benchmark::State& state) {
  probes_untraced_vs_compiled_out(state, "fib.toy", "32");
}

void BM_interp_trampolines_on_vs_off(benchmark::State& state) {
  trampolines_on_vs_off(state, "fib.toy", "32");
}

void BM_interp_trampolines_on_vs_off_spin(benchmark::State& state) {
  trampolines_on_vs_off(state, "spin.toy", "6000");
}

// ---- the floor of a trampoline ----
//
// A trampoline adds one call and one return per interpreted call. The floor: naive recursive
// fib in C, every recursive call direct or through a stub (sub rsp, 8; call; add rsp, 8; ret)
// in .text next to it, as the interpreter's stubs sit near its eval loop. (floor_stub) - (direct)
// per call is what any trampoline costs at least.
extern "C" long floor_fib_stubbed(long n);
extern "C" long floor_stub(long n);
asm(R"(
  .text
  .p2align 4
  .globl floor_stub
  .type floor_stub, @function
floor_stub:
  sub $8, %rsp
  call floor_fib_stubbed
  add $8, %rsp
  ret
  .size floor_stub, .-floor_stub
)");

extern "C" __attribute__((noinline)) long floor_fib_stubbed(long n) {
  return n < 2 ? n : floor_stub(n - 1) + floor_stub(n - 2);
}

__attribute__((noinline)) long floor_fib_direct(long n) {
  return n < 2 ? n : floor_fib_direct(n - 1) + floor_fib_direct(n - 2);
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Calls naive fib(n) makes: 2 fib(n + 1) - 1.
double fib_calls(int n) {
  double a = 0, b = 1;
  for (int i = 0; i < n + 1; ++i) {
    const double c = a + b;
    a = b;
    b = c;
  }
  return 2 * a - 1;
}

// Trampolines on fib.toy 32 (calls only), per toy call, against the floor; both alternated in
// the same run. Counters: ns_per_call (on - off, per toy call; mean over layouts), floor_ns
// (stub - direct, per C call), ratio (target <= 1.1).
void BM_interp_trampolines_vs_floor(benchmark::State& state) {
  const int n = 32;
  const double calls = fib_calls(n);
  const size_t layouts = interp_layouts.size();
  std::vector<std::vector<double>> on(layouts), off(layouts);
  std::vector<double> floors;
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ % layouts;
    const double t_on = run_child(
        state, {interp_layouts[k], "--trampolines=on", "--probes=off", program("fib.toy"), "32"});
    const double t_off = run_child(
        state, {interp_layouts[k], "--trampolines=off", "--probes=off", program("fib.toy"), "32"});
    double t0 = process_cpu_s();
    benchmark::DoNotOptimize(floor_fib_stubbed(n));
    const double t_stub = process_cpu_s() - t0;
    t0 = process_cpu_s();
    benchmark::DoNotOptimize(floor_fib_direct(n));
    const double t_direct = process_cpu_s() - t0;
    on[k].push_back(t_on);
    off[k].push_back(t_off);
    floors.push_back((t_stub - t_direct) / calls * 1e9);
    state.SetIterationTime(t_on + t_off + t_stub + t_direct);
  }
  double diff = 0;
  size_t used = 0;
  for (size_t k = 0; k < layouts; ++k) {
    if (on[k].empty()) continue;
    diff += median(on[k]) - median(off[k]);
    ++used;
  }
  const double per_call = used == 0 ? 0 : diff / static_cast<double>(used) / calls * 1e9;
  const double floor = median(floors);
  state.counters["ns_per_call"] = per_call;
  state.counters["floor_ns"] = floor;
  state.counters["ratio"] = floor > 0 ? per_call / floor : 0;
}

// Instructions per toy call of fib.toy, probes compiled in (untraced) vs not, by callgrind: the
// difference of runs at n = 18 and n = 24 divided by the difference of their calls (start-up
// cancels out). Skipped without valgrind. Counter `ratio` (target <= 1.02); the time ratio is
// BM_interp_probes_untraced_vs_compiled_out_fib's.
double callgrind_instructions(const std::string& binary, int n) {
  char out[] = "/tmp/bench_examples.cg.XXXXXX";
  const int fd = mkstemp(out);
  if (fd < 0) return -1;
  close(fd);
  const std::string cmd = "valgrind --tool=callgrind --callgrind-out-file=" + std::string(out) +
                          " " + binary + " --trampolines=off " + program("fib.toy") + " " +
                          std::to_string(n) + " >/dev/null 2>&1";
  double total = -1;
  if (std::system(cmd.c_str()) == 0) {
    std::ifstream f(out);
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("summary: ", 0) == 0) total = std::stod(line.substr(9));
  }
  std::remove(out);
  return total;
}

void BM_interp_probes_instructions(benchmark::State& state) {
  if (std::system("valgrind --version >/dev/null 2>&1") != 0) {
    state.SkipWithError("valgrind is not installed");
    return;
  }
  double per_call[2] = {0, 0};
  for (auto _ : state) {
    const std::string bins[2] = {interp_layouts[0], interp_noprobes_layouts[0]};
    for (int b = 0; b < 2; ++b) {
      const double lo = callgrind_instructions(bins[b], 18),
                   hi = callgrind_instructions(bins[b], 24);
      if (lo < 0 || hi < 0) {
        state.SkipWithError("callgrind failed");
        return;
      }
      per_call[b] = (hi - lo) / (fib_calls(24) - fib_calls(18));
    }
    state.SetIterationTime(1);
  }
  state.counters["instructions_per_call"] = per_call[0];
  state.counters["noprobes_instructions_per_call"] = per_call[1];
  state.counters["ratio"] = per_call[1] > 0 ? per_call[0] / per_call[1] : 0;
}

// ---- compile time vs SDK publication cost, in-process ----
//
// The toy-jit code generator (toyjit_core) compiles a generated program of 400 functions; the
// same generated code is then placed into SDK windows with a set of publishers. Each iteration
// measures, over all 400 functions (so timer cost is negligible):
//   asmjit:    generate + relocate/copy into a plain buffer (what compiling costs anyway)
//   copy:      relocate/copy alone into a plain buffer
//   windowed:  allocate in the window + relocate/copy + append, and publish (once at the end,
//              or after every function); the window is then retired and freed, so from the
//              second iteration on its memory is recycled (the median), the first is reported
//              on its own
// SDK cost per function = (windowed - copy) / 400; ratio = SDK cost / asmjit cost. The file
// publishers are sync or batched (second argument); under batched the session is flushed at the
// end of the windowed part, so every record's write is counted. Times are CPU time of the
// process (the flusher thread's writes count).
// With jitdump on, `jitdump_floor_ratio` is what writing the dump's new bytes with plain
// write() calls (as many as publishes under sync; one per 64 KiB under batched) costs against
// asmjit: the least any jitdump can add.

std::string generated_source(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "fn f" + std::to_string(i) + "(a, b, c) {\n  let x = a * " + std::to_string(i + 3) +
           " + b;\n  if (x % 7 == " + std::to_string(i % 7) +
           ") { return x / 3 - c; }\n  let y = 0;\n  while (y < c) { y = y + native_fp(y % 3) "
           "% 5 + 1; }\n  return x + y * " +
           std::to_string(i) + ";\n}\n";
  }
  out += "fn main() { return f0(1, 2, 3); }\n";
  return out;
}

struct compiled_program {
  toylang::program program;
  toyjit::runtime_addresses rt;
  compiled_program() {
    std::vector<toylang::diagnostic> errors;
    program = *toylang::compile("bench.toy", generated_source(400), errors);
    // The code is never run: any non-zero addresses do.
    for (uint64_t* a : {&rt.entry_table, &rt.counters, &rt.shadow_top, &rt.stack_limit, &rt.print,
                        &rt.checkpoint, &rt.native_fp, &rt.native_nofp, &rt.division_by_zero,
                        &rt.stack_overflow, &rt.recompile_hook}) {
      *a = 0x100000;
    }
  }
  std::vector<std::unique_ptr<toyjit::generated_function>> generate_all() const {
    std::vector<std::unique_ptr<toyjit::generated_function>> out;
    std::string error;
    for (const auto& f : program.functions) {
      out.push_back(toyjit::generate(f, toyjit::codegen_options{}, rt, error));
    }
    return out;
  }
};

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(double t0) {
  return cpu_now() - t0;
}

// Size of this process's jitdump in $JITDUMPDIR (0 if there is none yet).
uintmax_t jitdump_size() {
  const char* dir = std::getenv("JITDUMPDIR");
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(
      std::string(dir ? dir : ".") + "/jit-" + std::to_string(getpid()) + ".dump", ec);
  return ec ? 0 : n;
}

// The jitdump publisher's floor: the kernel putting the same number of bytes into a new file
// in the same directory with as many write() calls. A jitdump whose records are in the file
// when publish() returns (what crash safety asks) cannot cost less. Seconds.
double timed_plain_writes(uintmax_t bytes, size_t writes) {
  const char* dir = std::getenv("JITDUMPDIR");
  const std::string path = std::string(dir ? dir : ".") + "/floor.bin";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  const std::vector<char> data(static_cast<size_t>(bytes / writes) + 1, 'x');
  const double t0 = cpu_now();
  for (size_t i = 0; i < writes; ++i) {
    const size_t n = static_cast<size_t>(bytes / writes) + (i < bytes % writes ? 1 : 0);
    if (write(fd, data.data(), n) != static_cast<ssize_t>(n)) std::abort();
  }
  const double t = seconds_since(t0);
  close(fd);
  unlink(path.c_str());
  return t;
}

// Publisher sets by benchmark argument: all that need no setup, none, then each on its own.
const char* const publisher_sets[] = {"default", "none",    "registry", "usdt-events",
                                      "perfmap", "jitdump", "gdb"};

void publication_vs_compile(benchmark::State& state, bool publish_each) {
  static const compiled_program prog;
  const char* publishers = publisher_sets[state.range(0)];
  const auto mode =
      state.range(1) == 0 ? jitunwind::durability::sync : jitunwind::durability::batched;
  state.SetLabel(std::string(publishers) + "/" + to_string(mode));
  auto so = jitunwind::session_options::from_env();
  so->publishers = jitunwind::parse_publishers(publishers).value();
  so->perfmap_durability = so->jitdump_durability = mode;
  auto session = jitunwind::session::create(*so);
  if (!session) {
    state.SkipWithError(session.error().message().c_str());
    return;
  }
  std::vector<uint8_t> scratch(1 << 20);
  std::vector<double> asmjit_us, sdk_us, ratio, floor_us, floor_ratio;
  const bool jitdump_on =
      (so->publishers & static_cast<uint32_t>(jitunwind::publisher::jitdump)) != 0;
  const double n = static_cast<double>(prog.program.functions.size());
  for (auto _ : state) {
    // asmjit: generate + place into a plain buffer.
    double t0 = cpu_now();
    auto code = prog.generate_all();
    for (auto& g : code) {
      if (!g->place(reinterpret_cast<uint64_t>(scratch.data()), scratch)) std::abort();
    }
    const double t_asmjit = seconds_since(t0);
    // copy alone.
    t0 = cpu_now();
    for (auto& g : code) {
      if (!g->place(reinterpret_cast<uint64_t>(scratch.data()), scratch)) std::abort();
    }
    const double t_copy = seconds_since(t0);
    // windowed.
    jitunwind::owned_window_options wo;
    wo.code_capacity = publish_each ? size_t{4096} * code.size() : size_t{1} << 20;
    auto w = (*session)->create_owned_window(wo);
    if (!w) {
      state.SkipWithError(w.error().message().c_str());
      return;
    }
    const uintmax_t dump_before = jitdump_size();
    t0 = cpu_now();
    size_t i = 0;
    for (auto& g : code) {
      auto space = (*w)->allocate(g->size());
      auto frames = g->place(space->address, space->writable);
      if (!(*w)->append("toy:f" + std::to_string(i++), *frames).ok()) std::abort();
      if (publish_each && !(*w)->publish().ok()) std::abort();
    }
    if (!(*w)->publish().ok()) std::abort();
    if (!(*session)->flush().ok()) std::abort();  // batched: the last records' write counts too
    const double t_windowed = seconds_since(t0);
    if (jitdump_on) {
      const uintmax_t grown = jitdump_size() - dump_before;
      const size_t writes = mode == jitunwind::durability::sync
                                ? (publish_each ? code.size() : 1)
                                : static_cast<size_t>(grown / so->flush_bytes + 1);
      const double t_floor = timed_plain_writes(grown, writes);
      floor_us.push_back(t_floor / n * 1e6);
      floor_ratio.push_back(t_floor / t_asmjit);
    }
    (void)(*w)->retire(std::chrono::milliseconds(0));
    (*session)->poll();
    asmjit_us.push_back(t_asmjit / n * 1e6);
    sdk_us.push_back((t_windowed - t_copy) / n * 1e6);
    ratio.push_back((t_windowed - t_copy) / t_asmjit);
    state.SetIterationTime(t_asmjit + t_windowed);
  }
  state.counters["asmjit_us_per_fn"] = median(asmjit_us);
  state.counters["sdk_us_per_fn"] = median(sdk_us);
  // The first window of the session is fresh memory (a page fault per 4 KiB of code and
  // SFrame); the later ones get a freed window's pages back, as a long-running JIT would.
  state.counters["first_window_sdk_us_per_fn"] = sdk_us.empty() ? 0.0 : sdk_us.front();
  state.counters["ratio"] = median(ratio);
  if (jitdump_on) {
    state.counters["jitdump_floor_us_per_fn"] = median(floor_us);
    state.counters["jitdump_floor_ratio"] = median(floor_ratio);
  }
}

void BM_publication_vs_asmjit_one_publish(benchmark::State& s) {
  publication_vs_compile(s, false);
}
void BM_publication_vs_asmjit_publish_each(benchmark::State& s) {
  publication_vs_compile(s, true);
}

constexpr int pairs = 15;
// Four layouts (0, 16, 32, 48 bytes) of each interpreter build, five pairs each.
constexpr int layout_pairs = 20;
// Arguments: publisher set (publisher_sets), durability (0 sync, 1 batched; only the sets with
// a file publisher get both).
void publication_args(benchmark::internal::Benchmark* b) {
  for (int set = 0; set < 7; ++set) {
    const bool files = set == 0 || set == 4 || set == 5;  // default, perfmap, jitdump
    b->Args({set, 0});
    if (files) b->Args({set, 1});
  }
}
BENCHMARK(BM_publication_vs_asmjit_one_publish)
    ->Apply(publication_args)
    ->UseManualTime()
    ->Iterations(pairs);
BENCHMARK(BM_publication_vs_asmjit_publish_each)
    ->Apply(publication_args)
    ->UseManualTime()
    ->Iterations(pairs);
BENCHMARK(BM_toyjit_fp_off_vs_on_spin)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_toyjit_fp_off_vs_on_fib)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_toyjit_fp_off_vs_on_recompile)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_probes_untraced_vs_compiled_out)
    ->UseManualTime()
    ->Iterations(layout_pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_probes_untraced_vs_compiled_out_fib)
    ->UseManualTime()
    ->Iterations(layout_pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_trampolines_on_vs_off)
    ->UseManualTime()
    ->Iterations(layout_pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_trampolines_on_vs_off_spin)
    ->UseManualTime()
    ->Iterations(layout_pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_trampolines_vs_floor)
    ->UseManualTime()
    ->Iterations(layout_pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_probes_instructions)->UseManualTime()->Iterations(1);

}  // namespace

// The runtimes' perf maps and jitdumps go to a scratch directory removed at the end.
int main(int argc, char** argv) {
  char dir[] = "/tmp/bench_examples.XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  setenv("JITUNWIND_DIR", dir, 1);
  setenv("JITDUMPDIR", dir, 1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const std::string cleanup = std::string("rm -rf '") + dir + "'";
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
