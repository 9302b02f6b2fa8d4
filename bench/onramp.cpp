// The on-ramp's forget_code with 1 000, 10 000 and 100 000 functions named at once: its cost
// must not grow with the number of live functions (docs/performance.md, "forget_code"). The
// baseline is the same benchmark with 1 000 live functions, measured in the same run; the
// table at the end prints each size against it (the target is at most 2x at 100 000).
//
// Each iteration forgets one function; every 256 forgets the timer stops and they are named
// again, so the number of live functions stays within 256 of the argument.
#include <jitunwind/onramp.h>

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr size_t stride = 64;  // bytes of code per function
constexpr size_t max_live = 100000;
constexpr size_t refill = 256;

// One mapping of `ret`s, cut into functions of 16 bytes every 64 bytes.
uint8_t* code_area() {
  static uint8_t* const area = [] {
    void* m = ::mmap(nullptr, max_live * stride, PROT_READ | PROT_WRITE | PROT_EXEC,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    std::memset(m, 0xC3, max_live * stride);
    return static_cast<uint8_t*>(m);
  }();
  return area;
}

const jitunwind::frame_row entry_row{};  // pc 0: CFA = SP + 8, RA at CFA - 8 (amd64 leaf)

void name(size_t i) {
  const std::string n = "fn" + std::to_string(i);
  auto r = jitunwind::name_code(code_area() + i * stride, 16, n, {&entry_row, 1});
  if (!r) {
    std::fprintf(stderr, "name_code: %s\n", r.error().message().c_str());
    std::exit(1);
  }
}

void forget(size_t i) {
  if (auto r = jitunwind::forget_code(code_area() + i * stride); !r) {
    std::fprintf(stderr, "forget_code: %s\n", r.error().message().c_str());
    std::exit(1);
  }
}

size_t g_live = 0;  // functions 0 .. g_live-1 are named

void set_live(size_t n) {
  while (g_live < n) name(g_live++);
  while (g_live > n) forget(--g_live);
}

void BM_forget_code(benchmark::State& state) {
  const size_t live = static_cast<size_t>(state.range(0));
  set_live(live);
  size_t next = 0;  // forgets functions live-1, live-2, ... and names them again
  std::vector<size_t> forgotten;
  for (auto _ : state) {
    const size_t i = live - 1 - next;
    forget(i);
    forgotten.push_back(i);
    if (++next == refill) {
      state.PauseTiming();
      for (size_t f : forgotten) name(f);
      forgotten.clear();
      next = 0;
      state.ResumeTiming();
    }
  }
  for (size_t f : forgotten) name(f);
  state.counters["live"] = static_cast<double>(live);
}

// Prints the run as usual, then each size against 1 000 live functions.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) cpu_[r.benchmark_name()] = r.GetAdjustedCPUTime();
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const char* baseline = "BM_forget_code/1000";
    if (cpu_.count(baseline) == 0 || cpu_[baseline] <= 0) return;
    std::printf("\n%-26s %-26s %10s\n", "measured", "baseline (same run)", "cpu ratio");
    for (const auto& [name, cpu] : cpu_)
      std::printf("%-26s %-26s %10.2f%s\n", name.c_str(), baseline, cpu / cpu_[baseline],
                  name == "BM_forget_code/100000" ? "   (target: at most 2)" : "");
  }

 private:
  std::map<std::string, double> cpu_;
};

}  // namespace

BENCHMARK(BM_forget_code)->Arg(1000)->Arg(10000)->Arg(100000);

int main(int argc, char** argv) {
  // The registry alone: the file publishers would measure the page cache, and 100 000 windows
  // are no load for it (JITUNWIND_PUBLISH set outside wins).
  ::setenv("JITUNWIND_PUBLISH", "registry", 0);
  benchmark::Initialize(&argc, argv);
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
