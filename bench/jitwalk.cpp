// jitwalk's costs, each next to a baseline measured in the same run (root needed):
//  1. BPF cost per sample (kernel bpf_stats: run_time_ns / run_cnt) of the SFrame walk vs the
//     kernel's frame-pointer walk (bpf_get_stack) on the same stacks (a JIT workload that keeps
//     frame pointers, so both see everything), and of the SFrame walk on the same code without
//     frame pointers.
//  2. Slowdown of the workload (its CPU time, from wait4) under `jitwalk profile -F 99` and
//     `-F 999` vs unprofiled, and under `perf record --call-graph dwarf` at the same rates,
//     with the stack completeness each profiler reached.
// The workload is toy-jit on examples/toy-jit/programs/spin.toy (the test JIT,
// tests/jitwalk/targets/jit_target.cpp, when toy-jit is not built); JITWALK_BENCH_WORKLOAD="cmd
// args" replaces it and JITWALK_BENCH_WORKLOAD_FP its frame-pointer variant. The "deep" rows use
// the test JIT's 100-deep recursion.
// Prints Google Benchmark's table, then a ratio table.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct measurement {
  double cpu_s = 0, wall_s = 0;
  double root_pct = -1;       // stacks reaching the root, when the profiler reports it
  double bpf_ns = -1;         // BPF run time per run
  double bpf_share_pct = -1;  // BPF run time / workload CPU time
  double samples = 0;
  double data_mb = -1;  // perf.data size
};
std::map<std::string, std::vector<measurement>> g_results;
std::string g_self;

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> workload(bool frame_pointers, int depth = 12) {
  // Another workload: JITWALK_BENCH_WORKLOAD, and for the configurations that need frame
  // pointers in JIT code JITWALK_BENCH_WORKLOAD_FP (the same program built/run with them).
  if (const char* w = depth == 12 ? std::getenv("JITWALK_BENCH_WORKLOAD") : nullptr) {
    const char* wfp = std::getenv("JITWALK_BENCH_WORKLOAD_FP");
    return split(frame_pointers && wfp ? wfp : w);
  }
  // toy-jit on spin.toy (~1.2 s of CPU): 13 toy frames over 5 native ones.
  if (depth == 12 && access(JITWALK_BENCH_TOY_JIT, X_OK) == 0) {
    return {JITWALK_BENCH_TOY_JIT, frame_pointers ? "--frame-pointers=on" : "--frame-pointers=off",
            JITWALK_BENCH_SPIN_TOY, "130000"};
  }
  // The test JIT: recursion `depth` deep, spinning in JIT code at the bottom (~1.2 s).
  const int iterations = 6000 * 12 / (depth > 12 ? depth / 3 : 12);
  std::vector<std::string> v = {JITWALK_BENCH_JIT_TARGET, "deep", "--depth", std::to_string(depth),
                                "--iterations", std::to_string(iterations), "--spin", "600000",
                                "--no-checkpoint"};
  if (frame_pointers) v.push_back("--fp");
  return v;
}

std::string quote(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += "'" + a + "' ";
  return s;
}

// Runs a shell command, returns its stdout+stderr.
std::string shell(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(("exec 2>&1; " + cmd).c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (status) *status = st;
  return out;
}

// The child's CPU time as measured by `bench_jitwalk --run-child CMD...` (see main()).
measurement parse_child(const std::string& out) {
  measurement m;
  size_t at = out.rfind("bench_jitwalk-child: cpu_ns=");
  if (at != std::string::npos) {
    unsigned long long cpu = 0, wall = 0;
    std::sscanf(out.c_str() + at, "bench_jitwalk-child: cpu_ns=%llu wall_ns=%llu", &cpu, &wall);
    m.cpu_s = cpu / 1e9;
    m.wall_s = wall / 1e9;
  }
  if (size_t c = out.find("s CPU (user + system)"); c != std::string::npos) {
    size_t start = out.rfind(", ", c);  // "command: exit status 0, 1.234 s CPU"
    if (start != std::string::npos) m.cpu_s = std::atof(out.c_str() + start + 2);
  }
  if (size_t b = out.find("BPF time / command CPU time: "); b != std::string::npos) {
    m.bpf_share_pct = std::atof(out.c_str() + b + 29);
  }
  if (size_t r = out.find("unwound to the root: "); r != std::string::npos) {
    m.root_pct = std::atof(out.c_str() + r + 21);
  }
  if (size_t b = out.find(" ns per run (kernel bpf_stats)"); b != std::string::npos) {
    size_t start = out.rfind(", ", b);
    if (start != std::string::npos) m.bpf_ns = std::atof(out.c_str() + start + 2);
  }
  if (size_t s = out.find("jitwalk: "); s != std::string::npos) {
    size_t line = out.find(" samples of pid");
    if (line != std::string::npos) {
      size_t begin = out.rfind("jitwalk: ", line);
      m.samples = std::atof(out.c_str() + begin + 9);
    }
  }
  return m;
}

// perf script: fraction of samples whose call chain reaches main. `perf inject --jit` first, so
// that JIT code described by a jitdump (names and .eh_frame) is unwound too.
double perf_root_pct(const std::string& data, double* samples, double* data_mb) {
  struct stat st {};
  *data_mb = stat(data.c_str(), &st) == 0 ? st.st_size / 1048576.0 : 0;
  int status = 0;
  shell("perf inject --jit -i " + data + " -o " + data + ".jit", &status);
  const std::string input = status == 0 ? data + ".jit" : data;
  std::string out = shell("perf script -i " + input + " -F comm,ip,sym 2>/dev/null");
  std::remove((data + ".jit").c_str());
  std::istringstream in(out);
  std::string line;
  size_t total = 0, rooted = 0;
  bool in_sample = false, has_main = false;
  auto end_sample = [&] {
    if (!in_sample) return;
    ++total;
    if (has_main) ++rooted;
    in_sample = false;
    has_main = false;
  };
  while (std::getline(in, line)) {
    if (line.empty()) {
      end_sample();
      continue;
    }
    if (line[0] != ' ' && line[0] != '\t') {
      end_sample();
      in_sample = true;
      continue;
    }
    if (line.find(" main") != std::string::npos ||
        line.find(" __libc_start_call_main") != std::string::npos) {
      has_main = true;
    }
  }
  end_sample();
  *samples = static_cast<double>(total);
  return total ? 100.0 * rooted / total : 0;
}

struct config {
  std::string name;
  std::string prefix;  // profiler command line before the workload
  bool runner;         // workload started through `bench_jitwalk --run-child` (CPU from wait4)
  bool fp;
  int depth;
  std::string perf;  // perf.data to read back, for perf configs
};

measurement measure(const config& c) {
  std::string cmd = c.prefix;
  if (c.runner) cmd += "'" + g_self + "' --run-child ";
  cmd += quote(workload(c.fp, c.depth));
  if (!c.runner) cmd += " >/dev/null";
  int status = 0;
  std::string out = shell(cmd, &status);
  measurement m = parse_child(out);
  if (m.cpu_s <= 0)
    std::fprintf(stderr, "bench_jitwalk: %s: no measurement: %s\n", c.name.c_str(),
                 out.substr(0, 600).c_str());
  if (!c.perf.empty()) m.root_pct = perf_root_pct(c.perf, &m.samples, &m.data_mb);
  return m;
}

std::string format_mb(double mb) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", mb);
  return buf;
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0; }), v.end());
  if (v.empty()) return -1;
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double med(const std::string& name, double measurement::*field) {
  std::vector<double> v;
  for (const auto& m : g_results[name]) v.push_back(m.*field);
  return median(v);
}

}  // namespace

int main(int argc, char** argv) {
  // Runner mode: run a command, report its CPU and wall time (rusage of the waited child).
  if (argc > 2 && std::strcmp(argv[1], "--run-child") == 0) {
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", 1);
      dup2(devnull, 1);
      execvp(argv[2], argv + 2);
      _exit(127);
    }
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    auto wall = std::chrono::steady_clock::now() - t0;
    const unsigned long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
                                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
    std::fprintf(
        stderr, "bench_jitwalk-child: cpu_ns=%llu wall_ns=%lld status=%d\n", cpu,
        static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()),
        status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  g_self.assign(self, static_cast<size_t>(n));
  if (geteuid() != 0) {
    std::fprintf(stderr, "bench_jitwalk: needs root (BPF, perf events); nothing measured\n");
    return 0;
  }
  const std::string jw = std::string("'") + JITWALK_BENCH_JITWALK + "' profile -q ";
  const std::string data = "/tmp/bench_jitwalk.perf.data";
  const int reps =
      std::getenv("JITWALK_BENCH_REPS") ? std::atoi(std::getenv("JITWALK_BENCH_REPS")) : 3;
  const std::string perf = "perf record -q -k 1 -e cpu-clock --call-graph dwarf -o " + data;
  const std::vector<config> configs = {
      {"unprofiled", "", true, false, 12, ""},
      {"jitwalk -F 99", jw + "-F 99 --bpf-stats -- ", false, false, 12, ""},
      {"jitwalk -F 999", jw + "-F 999 --bpf-stats -- ", false, false, 12, ""},
      {"perf dwarf -F 99", perf + " -F 99 -- ", true, false, 12, data},
      {"perf dwarf -F 999", perf + " -F 999 -- ", true, false, 12, data},
      {"bpf: sframe walk, FP code", jw + "-F 999 --bpf-stats --unwinder sframe -- ", false, true,
       12, ""},
      {"bpf: kernel FP walk, FP code", jw + "-F 999 --bpf-stats --unwinder kernel-fp -- ", false,
       true, 12, ""},
      {"bpf: sframe walk, no-FP code", jw + "-F 999 --bpf-stats --unwinder sframe -- ", false,
       false, 12, ""},
      {"bpf deep: sframe walk, FP code", jw + "-F 999 --bpf-stats --unwinder sframe -- ", false,
       true, 100, ""},
      {"bpf deep: kernel FP walk, FP code", jw + "-F 999 --bpf-stats --unwinder kernel-fp -- ",
       false, true, 100, ""},
      {"bpf deep: sframe walk, no-FP code", jw + "-F 999 --bpf-stats --unwinder sframe -- ", false,
       false, 100, ""},
  };
  // One benchmark = `reps` rounds over every configuration, interleaved so that the machine's
  // drifting load affects all of them alike; per-configuration medians are its counters.
  benchmark::RegisterBenchmark(
      "jitwalk rounds",
      [&](benchmark::State& st) {
        for (auto _ : st) {
          double total = 0;
          for (int r = 0; r < reps; ++r) {
            for (const config& c : configs) {
              measurement m = measure(c);
              total += m.cpu_s;
              g_results[c.name].push_back(m);
            }
          }
          st.SetIterationTime(total);
        }
        for (const config& c : configs) {
          st.counters[c.name + " cpu_s"] = med(c.name, &measurement::cpu_s);
          if (med(c.name, &measurement::bpf_ns) > 0)
            st.counters[c.name + " bpf_ns"] = med(c.name, &measurement::bpf_ns);
        }
      })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kSecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::remove(data.c_str());

  const double base = med("unprofiled", &measurement::cpu_s);
  std::printf("\nworkload: %s\n", quote(workload(false)).c_str());
  std::printf("| measured vs baseline (same run, medians of %d) | measured | baseline | ratio |\n",
              reps);
  std::printf("|---|---|---|---|\n");
  for (const char* name :
       {"jitwalk -F 99", "jitwalk -F 999", "perf dwarf -F 99", "perf dwarf -F 999"}) {
    if (g_results[name].empty()) continue;
    const double cpu = med(name, &measurement::cpu_s);
    std::printf(
        "| workload CPU time under %s vs unprofiled | %.3f s | %.3f s | %.4fx (%+.2f%%) |\n", name,
        cpu, base, cpu / base, 100.0 * (cpu / base - 1));
  }
  for (const char* name : {"jitwalk -F 99", "jitwalk -F 999"}) {
    const double share = med(name, &measurement::bpf_share_pct);
    if (share >= 0) {
      std::printf(
          "| BPF run time (bpf_stats) under %s vs workload CPU time | %.4f%% | 100%% | %.6fx |\n",
          name, share, share / 100);
    }
  }
  for (const char* pfx : {"bpf: ", "bpf deep: "}) {
    const std::string p = pfx;
    const double sf = med(p + "sframe walk, FP code", &measurement::bpf_ns);
    const double kf = med(p + "kernel FP walk, FP code", &measurement::bpf_ns);
    const double sfn = med(p + "sframe walk, no-FP code", &measurement::bpf_ns);
    const char* depth = p == "bpf: " ? "12" : "100";
    if (kf <= 0) continue;
    std::printf(
        "| BPF ns per sample, JIT depth %s: SFrame walk vs kernel FP walk, same FP stacks | %.0f "
        "ns | %.0f ns | %.2fx |\n",
        depth, sf, kf, sf / kf);
    std::printf(
        "| BPF ns per sample, JIT depth %s: SFrame walk on no-FP code vs kernel FP walk on FP code "
        "| %.0f ns | %.0f ns | %.2fx |\n",
        depth, sfn, kf, sfn / kf);
  }
  std::printf(
      "\n| profiler | samples (median) | stacks reaching main/root | perf.data "
      "|\n|---|---|---|---|\n");
  for (const char* name :
       {"jitwalk -F 99", "jitwalk -F 999", "perf dwarf -F 99", "perf dwarf -F 999",
        "bpf: kernel FP walk, FP code", "bpf: sframe walk, no-FP code"}) {
    if (g_results[name].empty()) continue;
    const double mb = med(name, &measurement::data_mb);
    std::printf("| %s | %.0f | %.1f%% | %s |\n", name, med(name, &measurement::samples),
                med(name, &measurement::root_pct), mb >= 0 ? format_mb(mb).c_str() : "-");
  }
  return 0;
}
