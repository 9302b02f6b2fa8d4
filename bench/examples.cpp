// Benchmarks of the example runtimes. Every quantity is measured next to its baseline in the
// same run and reported as a ratio:
//
//   toy-jit run time, --frame-pointers=off vs on (spin.toy, recompile.toy, fib.toy)
//   toy-interp: probes compiled in but untraced vs not compiled in (toy-interp-noprobes)
//   toy-interp: trampolines on vs off
//   toy-jit: SDK publication cost per function vs asmjit compile time (in-process)
//
// Whole-program comparisons run the real binaries as child processes, alternating measured
// and baseline runs (so drift on a shared machine hits both alike), and compare the medians
// of the children's CPU time (user + system, from wait4), which load from other processes
// perturbs less than wall time. Counters: `measured_s`, `baseline_s`, `ratio`.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
  fp_off_vs_on(s, "fib.toy", "35");
}
void BM_toyjit_fp_off_vs_on_recompile(benchmark::State& s) {
  fp_off_vs_on(s, "recompile.toy", "3000000");
}

void BM_interp_probes_untraced_vs_compiled_out(benchmark::State& state) {
  compare_runs(state, {TOY_INTERP, "--trampolines=off", program("spin.toy"), "6000"},
               {TOY_INTERP_NOPROBES, "--trampolines=off", program("spin.toy"), "6000"});
}

void BM_interp_probes_untraced_vs_compiled_out_fib(benchmark::State& state) {
  compare_runs(state, {TOY_INTERP, "--trampolines=off", program("fib.toy"), "32"},
               {TOY_INTERP_NOPROBES, "--trampolines=off", program("fib.toy"), "32"});
}

void BM_interp_trampolines_on_vs_off(benchmark::State& state) {
  compare_runs(state, {TOY_INTERP, "--trampolines=on", "--probes=off", program("fib.toy"), "32"},
               {TOY_INTERP, "--trampolines=off", "--probes=off", program("fib.toy"), "32"});
}

void BM_interp_trampolines_on_vs_off_spin(benchmark::State& state) {
  compare_runs(state, {TOY_INTERP, "--trampolines=on", "--probes=off", program("spin.toy"), "6000"},
               {TOY_INTERP, "--trampolines=off", "--probes=off", program("spin.toy"), "6000"});
}

constexpr int pairs = 9;
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
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_probes_untraced_vs_compiled_out_fib)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_trampolines_on_vs_off)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interp_trampolines_on_vs_off_spin)
    ->UseManualTime()
    ->Iterations(pairs)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
