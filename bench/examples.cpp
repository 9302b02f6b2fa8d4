// Benchmarks of the example runtimes. Every quantity is measured next to its baseline in the
// same run and reported as a ratio:
//
//   toy-jit run time, --frame-pointers=off vs on (spin.toy, recompile.toy, fib.toy)
//   toy-interp: probes compiled in but untraced vs not compiled in (toy-interp-noprobes)
//   toy-interp: trampolines on vs off
//   toy-jit: SDK publication cost per function vs asmjit compile time (both measured inside
//            one toy-jit run, --stats), for a program of 400 generated functions published at
//            once, and for recompilations that publish one function at a time
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

// ---- compile time vs publication cost, both measured by toy-jit itself (--stats) ----

// Runs argv, returns its stderr (empty on failure).
std::string run_capture_stderr(benchmark::State& state, std::vector<std::string> argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  cmd += "2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    state.SkipWithError("popen failed");
    return {};
  }
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) state.SkipWithError(("failed: " + cmd).c_str());
  return out;
}

// A program with `n` functions of a few statements each, all called from main.
std::string generated_program(int n) {
  const std::string path = "/tmp/bench_examples_" + std::to_string(getpid()) + ".toy";
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    out << "fn f" << i << "(a, b, c) {\n  let x = a * " << i + 3 << " + b;\n"
        << "  if (x % 7 == " << i % 7 << ") { return x / 3 - c; }\n"
        << "  let y = 0;\n  while (y < c) { y = y + native_fp(y % 3) % 5 + 1; }\n"
        << "  return x + y * " << i << ";\n}\n";
  }
  out << "fn main() {\n  let s = 0;\n";
  for (int i = 0; i < n; ++i) out << "  s = s + f" << i << "(s % 100, " << i << ", 3);\n";
  out << "  return s;\n}\n";
  return path;
}

void compile_vs_publish(benchmark::State& state, std::vector<std::string> argv) {
  static const std::regex re(
      R"(stats: (\d+) compilations .* asmjit ([0-9.]+) us, jitunwind ([0-9.]+) us)");
  std::vector<double> gen, pub, ratio;
  double functions = 0;
  for (auto _ : state) {
    const std::string err = run_capture_stderr(state, argv);
    std::smatch m;
    if (!std::regex_search(err, m, re)) {
      state.SkipWithError(("no stats in: " + err).c_str());
      return;
    }
    functions = std::stod(m[1]);
    gen.push_back(std::stod(m[2]) / functions);
    pub.push_back(std::stod(m[3]) / functions);
    ratio.push_back(std::stod(m[3]) / std::stod(m[2]));
    state.SetIterationTime((std::stod(m[2]) + std::stod(m[3])) / 1e6);
  }
  state.counters["functions"] = functions;
  state.counters["asmjit_us_per_fn"] = median(gen);
  state.counters["publish_us_per_fn"] = median(pub);
  state.counters["ratio"] = median(ratio);
}

// Publisher sets by benchmark argument: all that need no setup, none, then each on its own.
const char* const publisher_sets[] = {"default", "none",    "registry", "usdt-events",
                                      "perfmap", "jitdump", "gdb"};

void BM_toyjit_publish_vs_compile_batch(benchmark::State& state) {
  const char* publishers = publisher_sets[state.range(0)];
  state.SetLabel(publishers);
  const std::string file = generated_program(400);
  compile_vs_publish(state, {TOY_JIT, "--stats", std::string("--publish=") + publishers, file});
  std::remove(file.c_str());
}

void BM_toyjit_publish_vs_compile_recompile(benchmark::State& state) {
  const char* publishers = publisher_sets[state.range(0)];
  state.SetLabel(publishers);
  compile_vs_publish(
      state, {TOY_JIT, "--stats", "--recompile-every=200", std::string("--publish=") + publishers,
              program("recompile.toy"), "20000"});
}

constexpr int pairs = 15;
BENCHMARK(BM_toyjit_publish_vs_compile_batch)->DenseRange(0, 6)->UseManualTime()->Iterations(pairs);
BENCHMARK(BM_toyjit_publish_vs_compile_recompile)
    ->DenseRange(0, 6)
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
