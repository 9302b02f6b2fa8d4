// What publishing functions one at a time costs in each owned-window code layout (docs/window.md,
// "Code layouts"), and what the candidate mechanisms for sub-page publishing cost on their own.
//
//   build/bench/bench_code_layouts        (bench/run.sh prints the ratio table)
//
// BM_layout/<layout>/<publishers>: per function, a 48-byte function (FP-less, a call) is
//   allocated, copied, described, appended and published on its own, through the session API,
//   in windows of 4 MiB (a full window is published, retired, freed and released: all timed).
//   Baseline: page_flip, the page-per-publish layout (mprotect RX per publish, the next function
//   on a fresh page). Counter `code_bytes_per_function`: window bytes each function uses up.
// BM_mechanism/<candidate>: the bare mechanism that makes 48 new bytes runnable next to running
//   code, without the SDK. Baseline: page_flip (write a fresh page, mprotect it RX).
//   - tail_flip: the last page goes RW (not executable: whatever runs on it faults meanwhile),
//     the bytes are written, the page goes back to RX: two mprotects.
//   - alias: the bytes are written through an RW view of RX memory (shared_alias): a memcpy.
//   - pkey: RWX pages whose protection key denies writes, opened for this thread around the
//     copy (pkey_set, as V8 does); skipped where the CPU has no protection keys.
// Time is CPU time of the benchmark thread (user + system).
#include <jitunwind/frame.h>
#include <jitunwind/window.h>

#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

using namespace jitunwind;

namespace {

constexpr size_t function_bytes = 48;
constexpr size_t window_bytes = size_t{4} << 20;

// sub rsp, 8; mov eax, imm; call rax (never run); add rsp, 8; ret; int3 padding.
void emit(uint8_t* out, uint32_t i) {
  const uint8_t code[] = {0x48, 0x83, 0xEC, 0x08, 0xB8, 0,    0,    0,
                          0,    0xFF, 0xD0, 0x48, 0x83, 0xC4, 0x08, 0xC3};
  std::memcpy(out, code, sizeof code);
  std::memcpy(out + 5, &i, 4);
  std::memset(out + sizeof code, 0xCC, function_bytes - sizeof code);
}

void describe(function_desc& f, uint64_t start) {
  f.start = start;
  f.size = function_bytes;
  f.pcmask_rep = 0;
  f.rows.resize(3);
  const auto set = [](frame_row& r, uint32_t at, int32_t cfa) {
    r = frame_row{};
    r.pc_offset = at;
    r.cfa_offset = cfa;
  };
  set(f.rows[0], 0, 8);
  set(f.rows[1], 4, 16);
  set(f.rows[2], 15, 8);
}

void BM_layout(benchmark::State& state, code_layout layout, publisher_set publishers) {
  const std::string dir = "/tmp/jitunwind-bench-layouts-" + std::to_string(getpid());
  (void)mkdir(dir.c_str(), 0700);
  session_options o;
  o.publishers = publishers;
  o.perfmap_dir = dir;
  o.jitdump_dir = dir;
  o.reuse = address_reuse::allowed;
  auto s = session::create(o);
  if (!s) {
    state.SkipWithError(s.error().message().c_str());
    return;
  }
  window* w = nullptr;
  function_desc desc;
  const std::string name = "jit_function";
  uint64_t functions = 0, windows = 0;
  const auto finish = [&] {
    if (w == nullptr) return;
    if (!w->retire(std::chrono::milliseconds(0)) || (*s)->poll() != 1 || !(*s)->release(w))
      std::abort();
    w = nullptr;
  };
  for (auto _ : state) {
    result<window::code_space> space = error(errc::bad_state, "no window");
    if (w != nullptr) space = w->allocate(function_bytes);
    if (!space) {
      finish();
      auto created = (*s)->create_owned_window({.code_capacity = window_bytes, .layout = layout});
      if (!created) std::abort();
      w = *created;
      ++windows;
      space = w->allocate(function_bytes);
      if (!space) std::abort();
    }
    emit(space->writable.data(), static_cast<uint32_t>(functions));
    describe(desc, space->address);
    if (!w->append(name, desc) || !w->publish()) std::abort();
    ++functions;
  }
  finish();
  state.SetItemsProcessed(state.iterations());
  state.counters["code_bytes_per_function"] =
      static_cast<double>(windows * window_bytes) / static_cast<double>(functions);
  s->reset();
  std::string rm = "rm -rf " + dir;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

// ---- bare mechanisms ----

struct region {
  uint8_t* base = nullptr;
  size_t size = window_bytes;
  size_t used = 0;
};

void BM_mechanism_page_flip(benchmark::State& state) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, window_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto* base = static_cast<uint8_t*>(p);
  size_t used = 0;
  for (auto _ : state) {
    if (used + page > window_bytes) {
      state.PauseTiming();
      mprotect(base, window_bytes, PROT_READ | PROT_WRITE);
      used = 0;
      state.ResumeTiming();
    }
    emit(base + used, 1);
    mprotect(base + used, page, PROT_READ | PROT_EXEC);
    used += page;
  }
  munmap(p, window_bytes);
  state.SetItemsProcessed(state.iterations());
}

void BM_mechanism_tail_flip(benchmark::State& state) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, window_bytes, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto* base = static_cast<uint8_t*>(p);
  size_t used = 0;
  for (auto _ : state) {
    if (used + function_bytes > window_bytes) used = 0;
    uint8_t* tail = base + used / page * page;
    const size_t len = (used + function_bytes - 1) / page * page + page - used / page * page;
    mprotect(tail, len, PROT_READ | PROT_WRITE);
    emit(base + used, 1);
    mprotect(tail, len, PROT_READ | PROT_EXEC);
    used += function_bytes;
  }
  munmap(p, window_bytes);
  state.SetItemsProcessed(state.iterations());
}

void BM_mechanism_alias(benchmark::State& state) {
  void* p = mmap(nullptr, window_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  void* rw = mremap(p, 0, window_bytes, MREMAP_MAYMOVE);
  if (p == MAP_FAILED || rw == MAP_FAILED ||
      mprotect(p, window_bytes, PROT_READ | PROT_EXEC) != 0) {
    state.SkipWithError("shared alias mapping failed");
    return;
  }
  auto* alias = static_cast<uint8_t*>(rw);
  size_t used = 0;
  for (auto _ : state) {
    if (used + function_bytes > window_bytes) used = 0;
    emit(alias + used, 1);
    benchmark::DoNotOptimize(alias[used]);
    used += function_bytes;
  }
  munmap(rw, window_bytes);
  munmap(p, window_bytes);
  state.SetItemsProcessed(state.iterations());
}

void BM_mechanism_pkey(benchmark::State& state) {
  const int key = pkey_alloc(0, PKEY_DISABLE_WRITE);
  if (key < 0) {
    const std::string why = std::string("pkey_alloc: ") + std::strerror(errno) +
                            " (no memory protection keys on this CPU/kernel)";
    state.SkipWithError(why.c_str());
    return;
  }
  void* p = mmap(nullptr, window_bytes, PROT_READ | PROT_WRITE | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED ||
      pkey_mprotect(p, window_bytes, PROT_READ | PROT_WRITE | PROT_EXEC, key) != 0) {
    state.SkipWithError("pkey_mprotect failed");
    pkey_free(key);
    return;
  }
  auto* base = static_cast<uint8_t*>(p);
  size_t used = 0;
  for (auto _ : state) {
    if (used + function_bytes > window_bytes) used = 0;
    pkey_set(key, 0);
    emit(base + used, 1);
    pkey_set(key, PKEY_DISABLE_WRITE);
    used += function_bytes;
  }
  munmap(p, window_bytes);
  pkey_free(key);
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

// Named so that bench/run.sh compares each with its family's baseline.
BENCHMARK_CAPTURE(BM_layout, baseline, code_layout::page_flip, publisher_set{0});
BENCHMARK_CAPTURE(BM_layout, shared_alias, code_layout::shared_alias, publisher_set{0});
BENCHMARK_CAPTURE(BM_layout, memfd_alias, code_layout::memfd_alias, publisher_set{0});
BENCHMARK_CAPTURE(BM_layout, baseline / registry_perfmap, code_layout::page_flip,
                  publisher::registry | publisher::perfmap);
BENCHMARK_CAPTURE(BM_layout, shared_alias / registry_perfmap, code_layout::shared_alias,
                  publisher::registry | publisher::perfmap);
BENCHMARK_CAPTURE(BM_layout, memfd_alias / registry_perfmap, code_layout::memfd_alias,
                  publisher::registry | publisher::perfmap);
BENCHMARK(BM_mechanism_page_flip)->Name("BM_mechanism/baseline");
BENCHMARK(BM_mechanism_tail_flip)->Name("BM_mechanism/tail_flip");
BENCHMARK(BM_mechanism_alias)->Name("BM_mechanism/alias");
BENCHMARK(BM_mechanism_pkey)->Name("BM_mechanism/pkey");

BENCHMARK_MAIN();
