// Registry costs, each next to a baseline measured in the same run:
//  - an external reader's consistent snapshot of 1024 live windows (registry_reader::read, i.e.
//    header + three copies of the entry array) vs one process_vm_readv of the same bytes;
//  - finding the registry (registry_reader::open: /proc/PID/maps + ELF symbol tables) vs reading
//    /proc/PID/maps alone;
//  - the writer's update() and retire()+update() vs an uncontended mutex lock/unlock;
//  - a disabled USDT event (semaphore test) vs an empty out-of-line call.
// The reader side reads a forked child that published the windows. Ratios are printed at the end.
#include <benchmark/benchmark.h>

#include <jitunwind/registry_abi.h>
#include <jitunwind/remote.h>

#include "registry/registry_writer.hpp"
#include "usdt_events/events.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

constexpr int windows_in_child = 1024;
pid_t child = -1;

// Forks a process that publishes `windows_in_child` live windows and waits to be killed.
void start_child() {
  int ready[2];
  if (pipe(ready) != 0) std::abort();
  child = fork();
  if (child == 0) {
    close(ready[0]);
    static uint8_t sframe[64];
    for (int i = 0; i < windows_in_child; ++i) {
      detail::registry_window w;
      w.window_id = static_cast<uint64_t>(i);
      w.text_start = 0x100000000ull + static_cast<uint64_t>(i) * 0x10000;
      w.text_size = 0x10000;
      w.sframe_address = reinterpret_cast<uint64_t>(sframe);
      w.sframe_size = sizeof sframe;
      if (!detail::registry().add(w)) _exit(1);
    }
    (void)!write(ready[1], "r", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1) std::abort();
  close(ready[0]);
}

void BM_remote_read_1k(benchmark::State& state) {
  auto reader = remote::registry_reader::open(child);
  if (!reader) {
    state.SkipWithError(reader.error().message().c_str());
    return;
  }
  size_t windows = 0;
  for (auto _ : state) {
    auto snap = reader->read();
    if (!snap) {
      state.SkipWithError(snap.error().message().c_str());
      return;
    }
    windows = snap->windows.size();
    benchmark::DoNotOptimize(snap->windows.data());
  }
  state.counters["windows"] = static_cast<double>(windows);
}

// The same bytes in a single copy: what any consistent protocol costs at least.
void BM_baseline_one_vm_readv_64KiB(benchmark::State& state) {
  auto reader = remote::registry_reader::open(child);
  if (!reader) {
    state.SkipWithError(reader.error().message().c_str());
    return;
  }
  jitunwind_registry_header h;
  iovec l{&h, sizeof h}, r{reinterpret_cast<void*>(reader->registries()[0].address), sizeof h};
  if (process_vm_readv(child, &l, 1, &r, 1, 0) != sizeof h) std::abort();
  std::vector<uint8_t> buf(windows_in_child * sizeof(jitunwind_registry_entry));
  for (auto _ : state) {
    iovec local{buf.data(), buf.size()}, remote_iov{reinterpret_cast<void*>(h.entries), buf.size()};
    benchmark::DoNotOptimize(process_vm_readv(child, &local, 1, &remote_iov, 1, 0));
  }
}

void BM_remote_open(benchmark::State& state) {
  for (auto _ : state) {
    auto reader = remote::registry_reader::open(child);
    if (!reader) {
      state.SkipWithError(reader.error().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(reader->registries().data());
  }
}

void BM_baseline_read_proc_maps(benchmark::State& state) {
  const std::string path = "/proc/" + std::to_string(child) + "/maps";
  std::vector<char> buf(1 << 16);
  for (auto _ : state) {
    const int fd = open(path.c_str(), O_RDONLY);
    while (read(fd, buf.data(), buf.size()) > 0) {
    }
    close(fd);
  }
}

detail::registry_writer& bench_writer() {
  static jitunwind_registry_header header{};
  static detail::registry_writer writer(header, 64);
  return writer;
}

void BM_writer_update(benchmark::State& state) {
  auto& w = bench_writer();
  detail::registry_window win;
  win.window_id = 1;
  win.text_start = 0x10000;
  win.text_size = 0x1000;
  auto pub = w.add(win);
  uint64_t n = 0;
  for (auto _ : state) {
    win.text_size = 0x1000 + (++n & 0xff);
    benchmark::DoNotOptimize(w.update(pub->slot, win));
  }
  (void)w.release(pub->slot);
}

void BM_writer_retire_update(benchmark::State& state) {
  auto& w = bench_writer();
  detail::registry_window win;
  win.window_id = 2;
  win.text_start = 0x20000;
  win.text_size = 0x1000;
  auto pub = w.add(win);
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.retire(pub->slot));
    benchmark::DoNotOptimize(w.update(pub->slot, win));
  }
  (void)w.release(pub->slot);
}

void BM_baseline_mutex_lock_unlock(benchmark::State& state) {
  static std::mutex m;
  for (auto _ : state) {
    m.lock();
    benchmark::ClobberMemory();
    m.unlock();
  }
}

[[gnu::noinline]] void empty_call(uint64_t a, uint64_t b) {
  benchmark::DoNotOptimize(a + b);
}

void BM_usdt_window_publish_disabled(benchmark::State& state) {
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    detail::usdt_events::window_publish(n, n, n, n, n, n);
    benchmark::ClobberMemory();
  }
}

void BM_baseline_empty_call(benchmark::State& state) {
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    empty_call(n, n);
    benchmark::ClobberMemory();
  }
}

// Prints the run as usual, then "measured / baseline" for each pair.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      times_[r.benchmark_name()] = r.GetAdjustedRealTime();
      cpu_[r.benchmark_name()] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const std::pair<const char*, const char*> pairs[] = {
        {"BM_remote_read_1k", "BM_baseline_one_vm_readv_64KiB"},
        {"BM_remote_open", "BM_baseline_read_proc_maps"},
        {"BM_writer_update", "BM_baseline_mutex_lock_unlock"},
        {"BM_writer_retire_update", "BM_baseline_mutex_lock_unlock"},
        {"BM_usdt_window_publish_disabled", "BM_baseline_empty_call"},
    };
    std::printf("\n%-34s %-34s %10s %10s\n", "measured", "baseline (same run)", "wall ratio",
                "cpu ratio");
    for (auto [m, b] : pairs) {
      if (!times_.count(m) || !times_.count(b) || times_[b] <= 0 || cpu_[b] <= 0) continue;
      std::printf("%-34s %-34s %10.2f %10.2f\n", m, b, times_[m] / times_[b], cpu_[m] / cpu_[b]);
    }
  }

 private:
  std::map<std::string, double> times_, cpu_;
};

}  // namespace

BENCHMARK(BM_remote_read_1k);
BENCHMARK(BM_baseline_one_vm_readv_64KiB);
BENCHMARK(BM_remote_open);
BENCHMARK(BM_baseline_read_proc_maps);
BENCHMARK(BM_writer_update);
BENCHMARK(BM_writer_retire_update);
BENCHMARK(BM_baseline_mutex_lock_unlock);
BENCHMARK(BM_usdt_window_publish_disabled);
BENCHMARK(BM_baseline_empty_call);

int main(int argc, char** argv) {
  start_child();
  benchmark::Initialize(&argc, argv);
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}
