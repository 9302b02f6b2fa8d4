// Cost per published function of each publisher, next to a baseline measured in the same run:
// assembling a typical small function with asmjit (the cheapest step of any JIT).
//
//   build/bench/bench_publishers [--benchmark_min_time=0.2]
//
// Prints Google Benchmark's table, then the ratio to the baseline for every benchmark, from CPU
// time (user + system of the thread: on a shared machine wall time mostly measures waiting).
#include <jitunwind/cfi.h>
#include <jitunwind/frame.h>

#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/perfmap_writer.hpp"

#include "growing_file.hpp"

#include <asmjit/x86.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

using namespace jitunwind;
using namespace jitunwind::detail;

namespace {

// A scratch directory for the files the publishers write (removed at exit).
const std::string& scratch_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/jitunwind-bench-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) std::abort();
    return std::string(d);
  }();
  return dir;
}

// push rbp; mov rbp, rsp; sub rsp, 16; mov [rbp-8], rdi; lea rax, [rdi+rsi*2]; imul rax, rdx;
// add rax, 42; mov rsp, rbp; pop rbp; ret — plus the address it will live at.
size_t assemble(uint8_t* out, size_t cap, uint64_t base) {
  using namespace asmjit;
  CodeHolder code;
  code.init(Environment::host(), base);
  x86::Assembler a(&code);
  a.push(x86::rbp);
  a.mov(x86::rbp, x86::rsp);
  a.sub(x86::rsp, 16);
  a.mov(x86::qword_ptr(x86::rbp, -8), x86::rdi);
  a.lea(x86::rax, x86::ptr(x86::rdi, x86::rsi, 1));
  a.imul(x86::rax, x86::rdx);
  a.add(x86::rax, 42);
  a.mov(x86::rsp, x86::rbp);
  a.pop(x86::rbp);
  a.ret();
  code.flatten();
  code.resolveUnresolvedLinks();
  code.relocateToBase(base);
  const size_t size = code.codeSize();
  if (size > cap) std::abort();
  code.copyFlattenedData(out, size, CopySectionFlags::kPadSectionBuffer);
  return size;
}

struct sample_function {
  uint8_t code[64];
  size_t size;
  function_desc frame;
};

sample_function make_sample(uint64_t base) {
  sample_function s{};
  s.size = assemble(s.code, sizeof s.code, base);
  const recipes::epilogue ep{static_cast<uint32_t>(s.size - 1), static_cast<uint32_t>(s.size)};
  s.frame = recipes::frame_pointer(abi::amd64, base, static_cast<uint32_t>(s.size), 1, 4,
                                   std::span(&ep, 1))
                .value();
  return s;
}

void BM_baseline_asmjit_assemble(benchmark::State& state) {
  uint8_t buf[64];
  uint64_t base = 0x7f0000000000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(assemble(buf, sizeof buf, base));
    base += 64;
  }
}
BENCHMARK(BM_baseline_asmjit_assemble);

void BM_frame_rows_recipe(benchmark::State& state) {
  const recipes::epilogue ep{28, 29};
  uint64_t base = 0x7f0000000000;
  for (auto _ : state) {
    auto f = recipes::frame_pointer(abi::amd64, base, 29, 1, 4, std::span(&ep, 1));
    benchmark::DoNotOptimize(f);
    base += 64;
  }
}
BENCHMARK(BM_frame_rows_recipe);

void BM_eh_frame_and_hdr(benchmark::State& state) {
  sample_function s = make_sample(0x7f0000000000);
  cfi::encoder_options o;
  for (auto _ : state) {
    o.eh_frame_address = s.frame.start + 64;
    auto r = cfi::encode(o, std::span(&s.frame, 1));
    benchmark::DoNotOptimize(r);
    s.frame.start += 64;
  }
}
BENCHMARK(BM_eh_frame_and_hdr);

void BM_perfmap_add(benchmark::State& state) {
  auto w = perfmap_writer::create({scratch_dir(), 1}).value();
  uint64_t base = 0x7f0000000000;
  for (auto _ : state) {
    if (!w->add(base, 29, "jit::some_function(int, long)")) std::abort();
    base += 64;
  }
}
BENCHMARK(BM_perfmap_add);

// 64 lines with one write (perfmap_writer::add_batch), per line.
void BM_perfmap_add_batch_of_64(benchmark::State& state) {
  auto w = perfmap_writer::create({scratch_dir(), 4}).value();
  uint64_t base = 0x7f0000000000;
  std::vector<perfmap_entry> batch(64);
  for (auto _ : state) {
    for (auto& e : batch) {
      e = {base, 29, "jit::some_function(int, long)"};
      base += 64;
    }
    if (!w->add_batch(batch)) std::abort();
  }
  state.counters["functions_per_iteration"] = 64;
}
BENCHMARK(BM_perfmap_add_batch_of_64);

void run_jitdump_load(benchmark::State& state, bool unwinding) {
  jitdump_options o;
  o.dir = scratch_dir();
  o.pid = unwinding ? 2 : 3;
  auto w = jitdump_writer::create(o).value();
  sample_function s = make_sample(0x7f0000000000);
  for (auto _ : state) {
    jitdump_load l{"jit::some_function(int, long)", s.frame.start,
                   std::span<const uint8_t>(s.code, s.size), unwinding ? &s.frame : nullptr};
    if (!w->load(l)) std::abort();
    s.frame.start += 256;
  }
}
void BM_jitdump_load_with_unwinding(benchmark::State& state) {
  run_jitdump_load(state, true);
}
void BM_jitdump_load_without_unwinding(benchmark::State& state) {
  run_jitdump_load(state, false);
}
BENCHMARK(BM_jitdump_load_with_unwinding);
BENCHMARK(BM_jitdump_load_without_unwinding);

// 64 functions' CODE_UNWINDING_INFO + CODE_LOAD per write_batch call, per function: sync (one
// write per call) or batched (built straight into the 64 KiB buffer, one write per flush).
void run_write_batch_of_64(benchmark::State& state, pid_t pid, durability mode) {
  jitdump_options o;
  o.dir = scratch_dir();
  o.pid = pid;
  o.policy.mode = mode;
  auto w = jitdump_writer::create(o).value();
  std::vector<sample_function> fs;
  for (int i = 0; i < 64; ++i) fs.push_back(make_sample(0x7f0000000000 + 256 * i));
  std::vector<jitdump_entry> batch(64);
  uint64_t shift = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < fs.size(); ++i) {
      fs[i].frame.start = 0x7f0000000000 + 256 * i + shift;
      batch[i].load = {"jit::some_function(int, long)", fs[i].frame.start,
                       std::span<const uint8_t>(fs[i].code, fs[i].size), &fs[i].frame};
    }
    if (!w->write_batch(batch)) std::abort();
    shift += 256 * 64;
  }
  state.counters["functions_per_iteration"] = 64;
}
void BM_jitdump_write_batch_of_64_with_unwinding(benchmark::State& state) {
  run_write_batch_of_64(state, 5, durability::sync);
}
BENCHMARK(BM_jitdump_write_batch_of_64_with_unwinding);
void BM_jitdump_write_batch_of_64_batched(benchmark::State& state) {
  run_write_batch_of_64(state, 6, durability::batched);
}
BENCHMARK(BM_jitdump_write_batch_of_64_batched);

// ---- jitdump: where the code bytes travel on their way to the file ----
//
// Every function's records are a head (CODE_UNWINDING_INFO with its .eh_frame, then the
// CODE_LOAD header and name; ~250 bytes here) and the code bytes. The heads are built into a
// buffer whatever the layout; the code can be
//   copy:   copied after its head, one write of the buffer (what the writer does: records built
//           straight into the write buffer);
//   double: the same built into a batch buffer, then copied into a second (write) buffer, one
//           write (building records apart and appending them to a pending buffer);
//   writev: left in place, one writev of (head, code) pairs (IOV_MAX = 1024 entries a call).
// Per function, for 64 functions per write and for a 64 KiB flush, with 81 and 1024 code
// bytes. The file is truncated (untimed) every 256 MiB.
enum class layout { copy, twice, writev };

void BM_jitdump_layout(benchmark::State& state, layout how, size_t code_size, bool flush_sized) {
  constexpr size_t head = 250;
  const size_t per_fn = head + code_size;
  const size_t n = flush_sized ? (size_t{64} << 10) / per_fn + 1 : 64;
  std::vector<uint8_t> heads(n * head, 0x11), code(n * code_size, 0x90);
  std::vector<uint8_t> buf(n * per_fn), second(n * per_fn);
  std::vector<iovec> iov(2 * n);
  growing_file file(scratch_dir() + "/layout");
  const int fd = file.fd();
  for (auto _ : state) {
    if (how == layout::writev) {
      // Heads built contiguously, code referenced where it lies.
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(buf.data() + i * head, heads.data() + i * head, head);
        iov[2 * i] = {buf.data() + i * head, head};
        iov[2 * i + 1] = {code.data() + i * code_size, code_size};
      }
      for (size_t at = 0; at < iov.size(); at += 1024) {
        const int count = static_cast<int>(std::min<size_t>(1024, iov.size() - at));
        if (::writev(fd, iov.data() + at, count) < 0) std::abort();
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(buf.data() + i * per_fn, heads.data() + i * head, head);
        std::memcpy(buf.data() + i * per_fn + head, code.data() + i * code_size, code_size);
      }
      const uint8_t* out = buf.data();
      if (how == layout::twice) {
        std::memcpy(second.data(), buf.data(), buf.size());
        out = second.data();
      }
      if (::write(fd, out, buf.size()) != static_cast<ssize_t>(buf.size())) std::abort();
    }
    benchmark::ClobberMemory();
    file.grew(state, n * per_fn);
  }
  state.counters["functions_per_iteration"] = static_cast<double>(n);
}

void register_layouts() {
  for (const auto& [name, how] :
       {std::pair{"copy", layout::copy}, std::pair{"double", layout::twice},
        std::pair{"writev", layout::writev}})
    for (const size_t code_size : {size_t{81}, size_t{1024}})
      for (const bool flush_sized : {false, true})
        benchmark::RegisterBenchmark(
            (std::string("BM_jitdump_layout/") + name + "/code_" + std::to_string(code_size) +
             (flush_sized ? "/64KiB" : "/64fn"))
                .c_str(),
            [how = how, code_size, flush_sized](benchmark::State& s) {
              BM_jitdump_layout(s, how, code_size, flush_sized);
            })
            ->MeasureProcessCPUTime();
}

void BM_gdb_register_and_unregister(benchmark::State& state) {
  auto reg = gdbjit::registrar::create({}).value();
  sample_function s = make_sample(0x7f0000000000);
  // Registrations already live: registering stays O(1) however many there are.
  std::vector<gdbjit::registration_id> keep;
  for (int i = 0; i < static_cast<int>(state.range(0)); ++i) {
    const gdbjit::function_symbol f{"old", 0x100000000 + 64ull * i, 16, nullptr};
    keep.push_back(reg->add(std::span(&f, 1)).value());
  }
  for (auto _ : state) {
    const gdbjit::function_symbol f{"jit::some_function(int, long)", s.frame.start, s.size,
                                    &s.frame};
    auto id = reg->add(std::span(&f, 1));
    if (!id || !reg->remove(*id)) std::abort();
  }
}
BENCHMARK(BM_gdb_register_and_unregister)->Arg(0)->Arg(10000);

// Collects real time per iteration to print the ratios after the normal table.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0) {  // time unit: ns (default)
        const auto per = r.counters.find("functions_per_iteration");
        const double n = per == r.counters.end() ? 1.0 : per->second.value;
        ns_[r.benchmark_name()] = {r.GetAdjustedCPUTime() / n, r.GetAdjustedRealTime() / n};
      }
  }
  void print_ratios() const {
    const auto base = ns_.find("BM_baseline_asmjit_assemble");
    if (base == ns_.end()) return;
    std::printf("\n%-40s %10s %10s %16s\n", "per function", "CPU ns", "wall ns", "CPU vs asmjit");
    for (const auto& [name, t] : ns_)
      std::printf("%-40s %10.1f %10.1f %15.2fx\n", name.c_str(), t.first, t.second,
                  t.first / base->second.first);
  }

 private:
  std::map<std::string, std::pair<double, double>> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_layouts();
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
  return 0;
}
