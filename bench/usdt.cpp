// Cost of dynamic USDT probes against a compiled-in <sys/sdt.h> probe with a semaphore,
// measured in the same run:
//   guarded, no tracer:   if (p.enabled()) p.fire(...)   vs   if (sema) STAP_PROBE2(...)
//   unguarded, no tracer: p.fire(...) (a call into the stub: libstapsdt's model)
//   traced (root + bpftrace): a fired probe with bpftrace attached (uprobe trap), both kinds.
// Prints a ratio table after Google Benchmark's own output.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include <jitunwind/usdt.h>

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

extern char** environ;

// The compiled-in baseline's semaphore (sys/sdt.h naming: provider_name_semaphore).
__extension__ unsigned short jitbench_hot_semaphore __attribute__((unused))
__attribute__((section(".probes")));
// M(0); M(1); ... M(7);
#define JITBENCH_EIGHT(M) \
  M(0);                   \
  M(1);                   \
  M(2);                   \
  M(3);                   \
  M(4);                   \
  M(5);                   \
  M(6);                   \
  M(7)
#define JITBENCH_SEMAPHORE(n)                                                       \
  __extension__ unsigned short jitbench_site##n##_semaphore __attribute__((unused)) \
  __attribute__((section(".probes")))
JITBENCH_EIGHT(JITBENCH_SEMAPHORE);

namespace {

using namespace jitunwind::usdt;

probe g_probe;     // the dynamic probe under test
probe g_sites[8];  // eight more, for the eight-site loops

// Code layout: a loop of one or two cycles per iteration runs a whole cycle faster or slower
// depending on where its head falls relative to the instruction fetch and micro-op cache
// windows (measured here: the same one-site comparison read 0.52x in one build and 1.99x in
// another). So each one-site loop is built at four places: the function is aligned to 64 bytes
// and `Shift` bytes of nops (run once, before the loop) move the loop by 0, 16, 32 or 48
// bytes; the ratios use the mean over the four.
template <int Shift>
inline void shift_code() {
  if constexpr (Shift > 0) asm volatile(".nops %c0" ::"i"(Shift));
}

template <int Shift>
[[gnu::noinline, gnu::aligned(64)]] void sdt_guarded(benchmark::State& state) {
  shift_code<Shift>();
  uint64_t i = 0;
  for (auto _ : state) {
    if (__builtin_expect(jitbench_hot_semaphore != 0, 0)) STAP_PROBE2(jitbench, hot, i, 42);
    benchmark::DoNotOptimize(++i);
  }
}

// Eight guarded sites per iteration, as in a runtime's hot path that checks several probes:
// the loop's own overhead (and where its head falls in the instruction cache, which moves a
// one-site loop by a whole cycle either way) is shared by eight checks.
#define JITBENCH_SDT_SITE(n) \
  if (__builtin_expect(jitbench_site##n##_semaphore != 0, 0)) STAP_PROBE2(jitbench, site##n, i, n)
void sdt_guarded8(benchmark::State& state) {
  uint64_t i = 0;
  for (auto _ : state) {
    JITBENCH_EIGHT(JITBENCH_SDT_SITE);
    benchmark::DoNotOptimize(++i);
  }
}

// The handles live in memory, as a runtime keeps them (members of its interpreter object).
#define JITBENCH_DYNAMIC_SITE(n) \
  if (ps[n].enabled()) ps[n].fire(i, uint64_t{n})
void dynamic_guarded8(benchmark::State& state) {
  const probe* ps = g_sites;
  uint64_t i = 0;
  for (auto _ : state) {
    JITBENCH_EIGHT(JITBENCH_DYNAMIC_SITE);
    benchmark::DoNotOptimize(++i);
  }
}

template <int Shift>
[[gnu::noinline, gnu::aligned(64)]] void dynamic_guarded(benchmark::State& state) {
  shift_code<Shift>();
  const probe p = g_probe;
  uint64_t i = 0;
  for (auto _ : state) {
    if (p.enabled()) p.fire(i, uint64_t{42});
    benchmark::DoNotOptimize(++i);
  }
}

// What a JIT embeds: the semaphore's address, valid until the provider is unloaded.
template <int Shift>
[[gnu::noinline, gnu::aligned(64)]] void dynamic_raw_semaphore(benchmark::State& state) {
  shift_code<Shift>();
  const probe p = g_probe;
  const volatile uint16_t* sem = p.semaphore_address();
  uint64_t i = 0;
  for (auto _ : state) {
    if (__builtin_expect(*sem != 0, 0)) p.fire(i, uint64_t{42});
    benchmark::DoNotOptimize(++i);
  }
}

void dynamic_unguarded(benchmark::State& state) {
  const probe p = g_probe;
  uint64_t i = 0;
  for (auto _ : state) {
    p.fire(i, uint64_t{42});
    benchmark::DoNotOptimize(++i);
  }
}

void sdt_traced(benchmark::State& state) {
  sdt_guarded<0>(state);
}
void dynamic_traced(benchmark::State& state) {
  dynamic_guarded<0>(state);
}

#define JITBENCH_AT_FOUR_PLACES(f) \
  BENCHMARK_TEMPLATE(f, 0);        \
  BENCHMARK_TEMPLATE(f, 16);       \
  BENCHMARK_TEMPLATE(f, 32);       \
  BENCHMARK_TEMPLATE(f, 48)
JITBENCH_AT_FOUR_PLACES(sdt_guarded);
JITBENCH_AT_FOUR_PLACES(dynamic_guarded);
JITBENCH_AT_FOUR_PLACES(dynamic_raw_semaphore);
BENCHMARK(sdt_guarded8);
BENCHMARK(dynamic_guarded8);
BENCHMARK(dynamic_unguarded);
BENCHMARK(sdt_traced)->Iterations(200000);
BENCHMARK(dynamic_traced)->Iterations(200000);

// Collects each benchmark's time per iteration (ns) while printing as usual.
class collecting_reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      // CPU time: the machine is shared, and wall time counts other processes' turns.
      if (!r.error_occurred && r.run_type == Run::RT_Iteration) {
        const std::string name = r.benchmark_name().substr(0, r.benchmark_name().find('/'));
        ns[name] = r.GetAdjustedCPUTime();
      }
    ConsoleReporter::ReportRuns(runs);
  }
};

pid_t start_bpftrace(const std::string& script) {
  const char* argv[] = {"bpftrace", "-p", nullptr, "-e", script.c_str(), nullptr};
  const std::string pid = std::to_string(getpid());
  argv[2] = pid.c_str();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t child = -1;
  const int rc = posix_spawnp(&child, "bpftrace", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? child : -1;
}

bool wait_for(bool (*cond)(), std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A benchmark's time, or for one built at four places ("name<0>" ... "name<48>") the mean
// over them; -1 if it did not run.
double time_of(const collecting_reporter& r, const std::string& name) {
  if (auto it = r.ns.find(name); it != r.ns.end()) return it->second;
  double sum = 0;
  int n = 0;
  for (const auto& [key, ns] : r.ns)
    if (key.rfind(name + "<", 0) == 0) {
      sum += ns;
      ++n;
    }
  return n > 0 ? sum / n : -1;
}

void print_ratio(const collecting_reporter& r, const char* what, const char* num, const char* den) {
  const double a = time_of(r, num), b = time_of(r, den);
  if (a < 0 || b <= 0) {
    std::printf("| %-52s | %9s | %9s | %7s |\n", what, "-", "-", "n/a");
    return;
  }
  std::printf("| %-52s | %9.3f | %9.3f | %6.2fx |\n", what, a, b, a / b);
}

// The ratio at each of the four places alone: how far one layout would have led astray.
void print_per_place(const collecting_reporter& r, const char* num, const char* den) {
  std::printf("  %s / %s at each place:", num, den);
  for (const char* at : {"<0>", "<16>", "<32>", "<48>"}) {
    const double a = time_of(r, std::string(num) + at), b = time_of(r, std::string(den) + at);
    if (a >= 0 && b > 0) std::printf(" %s %.2fx", at, a / b);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  auto prov = provider::create("jitbench_dyn");
  if (!prov) {
    std::fprintf(stderr, "%s\n", prov.error().message().c_str());
    return 1;
  }
  auto p = prov->add_probe("hot", {arg_type::u64, arg_type::u64});
  if (!p) {
    std::fprintf(stderr, "bench_usdt: cannot load the dynamic provider\n");
    return 1;
  }
  g_probe = *p;
  for (int k = 0; k < 8; ++k) {
    auto site = prov->add_probe("site" + std::to_string(k), {arg_type::u64, arg_type::u64});
    if (!site) {
      std::fprintf(stderr, "bench_usdt: %s\n", site.error().message().c_str());
      return 1;
    }
    g_sites[k] = *site;
  }

  if (!prov->load()) {
    std::fprintf(stderr, "bench_usdt: cannot load the dynamic provider\n");
    return 1;
  }

  collecting_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(
      &reporter,
      "^(sdt_guarded<|dynamic_guarded<|sdt_guarded8$|dynamic_guarded8$|dynamic_raw_semaphore<|"
      "dynamic_unguarded$)");

  // Traced: bpftrace attached to both probes (root only).
  bool traced = false;
  pid_t bt = -1;
  if (geteuid() == 0) {
    bt = start_bpftrace(
        "usdt:*:jitbench:hot { @s = count(); } usdt:*:jitbench_dyn:hot "
        "{ @d = count(); }");
    traced = bt > 0 && wait_for([] { return jitbench_hot_semaphore != 0 && g_probe.enabled(); },
                                std::chrono::seconds(60));
    // The semaphores rise when the uprobes are registered; give bpftrace a moment to attach
    // its programs before measuring.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (traced)
    benchmark::RunSpecifiedBenchmarks(&reporter, "^(sdt_traced|dynamic_traced)/");
  else
    std::fprintf(stderr, "bench_usdt: traced benchmarks skipped (need root and bpftrace)\n");
  if (bt > 0) {
    kill(bt, SIGINT);
    int status = 0;
    waitpid(bt, &status, 0);
  }

  std::printf("\nRatios (CPU time per iteration, ns; same run):\n");
  std::printf("| %-52s | %9s | %9s | %7s |\n", "measured vs baseline", "measured", "baseline",
              "ratio");
  std::printf("|%s|%s|%s|%s|\n", std::string(54, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(9, '-').c_str());
  print_ratio(reporter, "if (p.enabled()) p.fire() vs sdt.h, no tracer (4 places)",
              "dynamic_guarded", "sdt_guarded");
  print_ratio(reporter, "8 sites per iteration: enabled() guards vs sdt.h guards",
              "dynamic_guarded8", "sdt_guarded8");
  print_ratio(reporter, "raw semaphore check (JIT style) vs sdt.h (4 places)",
              "dynamic_raw_semaphore", "sdt_guarded");
  print_ratio(reporter, "unguarded p.fire() vs sdt.h semaphore, no tracer", "dynamic_unguarded",
              "sdt_guarded");
  print_ratio(reporter, "dynamic probe vs sdt.h probe, bpftrace attached", "dynamic_traced",
              "sdt_traced");
  print_per_place(reporter, "dynamic_guarded", "sdt_guarded");
  print_per_place(reporter, "dynamic_raw_semaphore", "sdt_guarded");
  benchmark::Shutdown();
  return 0;
}
