// SFrame benchmarks. Each measured quantity has a baseline measured in the same run; bench/run.sh
// prints the ratios (naming convention: BM_<thing>/baseline next to BM_<thing>/<variant>).
//
//   BM_encode/baseline       memcpy of one typical function's encoded bytes (FDE + FREs)
//   BM_encode/append         encoder::append of a typical function (4 rows: entry, push rbp,
//                            FP-based body, epilogue)
//   BM_grow/baseline/N       memcpy of a window's section of N functions
//   BM_grow/append_write/N   append one function to a window of N and serialize the section
//   BM_lookup/baseline       std::lower_bound over the sorted starts of 10k functions
//   BM_lookup/table          table::find in a 10k-function section (same PCs), std::optional
//   BM_lookup/table_into     the same through find(pc, out), filling a caller's lookup_result
//   BM_unwind/baseline       frame-pointer walk of a 32-frame stack (per frame)
//   BM_unwind/sframe         unwinder::unwind of the same stack from its SFrame (per frame)
//
// `bench_sframe --size-report FILE.c` instead compiles FILE.c with gcc and clang and prints
// SFrame vs .eh_frame bytes per function (see docs/performance.md).
#include <jitunwind/sframe.h>

#include <jitunwind/toolkit/elf_reader.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

// push rbp; mov rbp, rsp; ...; leave; ret — the typical JIT function (4 rows).
function_desc typical_function(uint64_t start, uint32_t size) {
  const recipes::epilogue ep[] = {{size - 1, size}};  // leave; ret at the end
  return recipes::frame_pointer(abi::amd64, start, size, 1, 4, ep).value();
}

std::vector<function_desc> functions(size_t n, uint64_t base = 0x10000000) {
  std::vector<function_desc> out;
  std::mt19937 rng(1);
  uint64_t at = base;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t size = 32 + rng() % 400;
    out.push_back(typical_function(at, size));
    at += size + (rng() % 4) * 16;
  }
  return out;
}

void BM_encode_baseline(benchmark::State& state) {
  const auto fs = functions(1);
  const auto bytes = encode({abi::amd64, 0x0fff0000}, fs).value();
  const size_t per_function = bytes.size() - 28;  // FDE + FREs
  std::vector<uint8_t> out(per_function * 1024);
  size_t i = 0;
  for (auto _ : state) {
    std::memcpy(out.data() + (i++ % 1024) * per_function, bytes.data() + 28, per_function);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_encode_append(benchmark::State& state) {
  const auto fs = functions(1024);
  const encoder_options o{abi::amd64, 0x0fff0000};
  auto enc = encoder::create(o).value();
  size_t i = 0;
  for (auto _ : state) {
    if (i == fs.size()) {
      state.PauseTiming();
      enc = encoder::create(o).value();
      i = 0;
      state.ResumeTiming();
    }
    auto r = enc.append(fs[i++]);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_grow_baseline(benchmark::State& state) {
  const auto fs = functions(static_cast<size_t>(state.range(0)));
  const auto bytes = encode({abi::amd64, 0x0fff0000}, fs).value();
  std::vector<uint8_t> out(bytes.size());
  for (auto _ : state) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

// A window already holding N functions gets one more and republishes its whole section.
void BM_grow_append_write(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto fs = functions(n + 256);
  const encoder_options o{abi::amd64, 0x0fff0000};
  auto make = [&] {
    auto e = encoder::create(o).value();
    for (size_t k = 0; k < n; ++k) (void)e.append(fs[k]);
    return e;
  };
  auto enc = make();
  std::vector<uint8_t> out(encode(o, fs).value().size());
  size_t next = n;
  for (auto _ : state) {
    if (next == fs.size()) {
      state.PauseTiming();
      enc = make();
      next = n;
      state.ResumeTiming();
    }
    (void)enc.append(fs[next++]);
    auto r = enc.write(out);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

struct lookup_fixture {
  std::vector<function_desc> fs = functions(10000);
  std::vector<uint8_t> bytes = encode({abi::amd64, 0x0fff0000}, fs).value();
  table t = table::create(bytes, 0x0fff0000).value();
  std::vector<uint64_t> starts;
  std::vector<uint64_t> pcs;
  lookup_fixture() {
    for (const auto& f : fs) starts.push_back(f.start);
    std::mt19937_64 rng(2);
    for (int i = 0; i < 4096; ++i) {
      const auto& f = fs[rng() % fs.size()];
      pcs.push_back(f.start + rng() % f.size);
    }
  }
};

void BM_lookup_baseline(benchmark::State& state) {
  static lookup_fixture fx;
  size_t i = 0;
  for (auto _ : state) {
    const uint64_t pc = fx.pcs[i++ & 4095];
    auto it = std::upper_bound(fx.starts.begin(), fx.starts.end(), pc);
    benchmark::DoNotOptimize(it);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_lookup_table(benchmark::State& state) {
  static lookup_fixture fx;
  size_t i = 0;
  for (auto _ : state) {
    auto r = fx.t.find(fx.pcs[i++ & 4095]);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_lookup_table_into(benchmark::State& state) {
  static lookup_fixture fx;
  size_t i = 0;
  lookup_result r;
  for (auto _ : state) {
    const bool found = fx.t.find(fx.pcs[i++ & 4095], r);
    benchmark::DoNotOptimize(found);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

// A 32-frame stack of frame-pointer functions, so that both walkers can walk it: the outermost
// function fs[depth] (RA undefined) called fs[0], which called fs[1], ..., down to fs[depth-1],
// interrupted in the middle of its body. Each frame: return address, saved rbp, 16 bytes.
struct stack_fixture {
  static constexpr int depth = 32;
  static constexpr uint64_t stack_base = 0x7ff000000000;
  std::vector<function_desc> fs = functions(depth + 1);
  std::vector<uint8_t> bytes;
  std::optional<table> t;
  std::vector<uint64_t> memory;  // the stack, word-addressed from stack_base
  regs start;

  stack_fixture() {
    fs[depth].rows = {outermost_row(0)};
    bytes = encode({abi::amd64, 0x0fff0000}, fs).value();
    t.emplace(table::create(bytes, 0x0fff0000).value());
    memory.assign(depth * 4, 0);
    uint64_t sp = stack_base + memory.size() * 8;
    uint64_t fp = 0;
    for (int k = 0; k < depth; ++k) {
      const uint64_t ret = k == 0 ? fs[depth].start + 4 : fs[k - 1].start + fs[k - 1].size / 2;
      put(sp -= 8, ret);
      put(sp -= 8, fp);
      fp = sp;
      sp -= 16;
    }
    start = {fs[depth - 1].start + fs[depth - 1].size / 2, sp, fp, 0};
  }
  void put(uint64_t address, uint64_t v) { memory[(address - stack_base) / 8] = v; }
  static bool read(void* self, uint64_t address, void* out, size_t len) {
    auto* s = static_cast<stack_fixture*>(self);
    if (address < stack_base || (address - stack_base) / 8 >= s->memory.size() || len != 8)
      return false;
    std::memcpy(out, &s->memory[(address - stack_base) / 8], 8);
    return true;
  }
};

void BM_unwind_baseline(benchmark::State& state) {
  static stack_fixture fx;
  uint64_t pcs[64];
  size_t frames = 0;
  for (auto _ : state) {
    // The classic frame-pointer walk: pc = [fp + 8], fp = [fp], through the same reader.
    const memory_reader reader{&stack_fixture::read, &fx};
    uint64_t fp = fx.start.fp, sp = fx.start.sp;
    size_t n = 0;
    pcs[n++] = fx.start.pc;
    while (n < 64) {
      uint64_t ra = 0, next_fp = 0;
      if (fp <= sp || !reader.read(reader.user, fp + 8, &ra, 8) ||
          !reader.read(reader.user, fp, &next_fp, 8) || ra == 0)
        break;
      pcs[n++] = ra;
      sp = fp + 16;
      fp = next_fp;
    }
    frames += n;
    benchmark::DoNotOptimize(pcs);
  }
  state.SetItemsProcessed(static_cast<int64_t>(frames));
}

void BM_unwind_sframe(benchmark::State& state) {
  static stack_fixture fx;
  unwinder u(abi::amd64);
  (void)u.add(&*fx.t);
  size_t frames = 0;
  for (auto _ : state) {
    auto tr = u.unwind(fx.start, {&stack_fixture::read, &fx}, 64);
    frames += tr.pcs.size();
    benchmark::DoNotOptimize(tr);
  }
  state.SetItemsProcessed(static_cast<int64_t>(frames));
}

BENCHMARK(BM_encode_baseline)->Name("BM_encode/baseline");
BENCHMARK(BM_encode_append)->Name("BM_encode/append");
BENCHMARK(BM_grow_baseline)->Name("BM_grow/baseline")->Arg(100)->Arg(1000);
BENCHMARK(BM_grow_append_write)->Name("BM_grow/append_write")->Arg(100)->Arg(1000);
BENCHMARK(BM_lookup_baseline)->Name("BM_lookup/baseline");
BENCHMARK(BM_lookup_table)->Name("BM_lookup/table");
BENCHMARK(BM_lookup_table_into)->Name("BM_lookup/table_into");
BENCHMARK(BM_unwind_baseline)->Name("BM_unwind/baseline");
BENCHMARK(BM_unwind_sframe)->Name("BM_unwind/sframe");

}  // namespace

// ---- size report: SFrame vs .eh_frame for the same functions --------------------------------

namespace {

struct object_sizes {
  size_t eh_frame = 0, sframe = 0, functions = 0;
  std::vector<function_desc> rows;  // decoded from .sframe, laid out one after the other
};

bool run(const std::string& cmd) {
  if (std::system((cmd + " 2>/dev/null").c_str()) == 0) return true;
  std::fprintf(stderr, "failed: %s\n", cmd.c_str());
  return false;
}

std::optional<object_sizes> measure(const std::string& object) {
  auto file = toolkit::read_whole_file(object);
  if (!file) return std::nullopt;
  auto img = toolkit::elf_image::parse(*file);
  if (!img) return std::nullopt;
  object_sizes out;
  if (const auto* eh = img->find_section(".eh_frame")) out.eh_frame = eh->size;
  if (const auto* sf = img->find_section(".sframe")) {
    out.sframe = sf->size;
    auto d = decode(img->section_data(*sf).value(), 0);
    if (!d) {
      std::fprintf(stderr, "%s: %s\n", object.c_str(), d.error().message().c_str());
      return std::nullopt;
    }
    out.functions = d->functions.size();
    // In an object every start is still a relocation: lay the functions out back to back.
    uint64_t at = 0x100000;
    for (auto f : d->functions) {
      f.start = at;
      at += f.size + 16;
      out.rows.push_back(std::move(f));
    }
  }
  return out;
}

size_t ours(const std::vector<function_desc>& fs) {
  encoder_options o;
  o.section_address = 0;
  o.strict = false;  // gas and LLVM rows include dead "FP saved" slots after epilogues
  auto b = encode(o, fs);
  return b ? b->size() : 0;
}

}  // namespace

// Compiles the sources with gcc/g++ (-Wa,--gsframe: binutils 2.40 SFrame v1) and clang/clang++
// (its .eh_frame; clang -S piped through llvm-mc-22 --gsframe for LLVM's SFrame v2), re-encodes
// the rows with our encoder, and prints bytes per function.
int size_report(int n, char** sources) {
  char dir_template[] = "/tmp/jitunwind-size-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  size_t gcc_eh = 0, gcc_sf = 0, clang_eh = 0, llvm_sf = 0, fns = 0, llvm_fns = 0;
  std::vector<function_desc> gcc_rows, llvm_rows;
  for (int i = 0; i < n; ++i) {
    const std::string src = sources[i];
    const bool cxx = src.size() > 4 && src.substr(src.size() - 4) == ".cpp";
    const std::string gcc = cxx ? "g++ -std=c++20" : "gcc",
                      clang = cxx ? "clang++ -std=c++20" : "clang";
    const std::string inc = " -I" + std::string(JITUNWIND_SOURCE_DIR) + "/sdk/include -I" +
                            std::string(JITUNWIND_SOURCE_DIR) + "/sdk/src -I" +
                            std::string(JITUNWIND_SOURCE_DIR) + "/sdk/toolkit/include ";
    const std::string base = std::string(dir) + "/" + std::to_string(i);
    if (!run(gcc + " -O2 -Wa,--gsframe -c" + inc + src + " -o " + base + "-gcc.o") ||
        !run(clang + " -O2 -c" + inc + src + " -o " + base + "-clang.o") ||
        !run(clang + " -O2 -S" + inc + src + " -o " + base + "-clang.s") ||
        !run("llvm-mc-22 -filetype=obj --gsframe " + base + "-clang.s -o " + base + "-llvm.o"))
      return 1;
    auto g = measure(base + "-gcc.o"), c = measure(base + "-clang.o"),
         l = measure(base + "-llvm.o");
    if (!g || !c || !l) return 1;
    gcc_eh += g->eh_frame;
    gcc_sf += g->sframe;
    clang_eh += c->eh_frame;
    llvm_sf += l->sframe;
    fns += g->functions;
    llvm_fns += l->functions;
    for (auto& f : g->rows) gcc_rows.push_back(std::move(f));
    for (auto& f : l->rows) llvm_rows.push_back(std::move(f));
  }
  // Back-to-back layout across files too.
  uint64_t at = 0x100000;
  for (auto* v : {&gcc_rows, &llvm_rows}) {
    at = 0x100000;
    for (auto& f : *v) {
      f.start = at;
      at += f.size + 16;
    }
  }
  const size_t ours_gcc = ours(gcc_rows), ours_llvm = ours(llvm_rows);
  // A linked image also carries .eh_frame_hdr: 12 bytes + 8 per FDE (binary search table).
  const double per = static_cast<double>(fns);
  std::printf("functions with unwind info: %zu (gcc), %zu (clang/llvm-mc)\n", fns, llvm_fns);
  std::printf("%-52s %9s %12s %8s\n", "format", "bytes", "bytes/func", "ratio");
  auto line = [&](const char* what, size_t bytes, size_t count, double base) {
    const double b = static_cast<double>(bytes) / static_cast<double>(count);
    std::printf("%-52s %9zu %12.1f %8.2f\n", what, bytes, b, b / base);
  };
  const double eh_gcc = static_cast<double>(gcc_eh) / per;
  line("gcc .eh_frame (baseline)", gcc_eh, fns, eh_gcc);
  line("gcc .eh_frame + .eh_frame_hdr (linked)", gcc_eh + 12 + 8 * fns, fns, eh_gcc);
  line("clang .eh_frame", clang_eh, llvm_fns, eh_gcc);
  line("gcc/gas 2.40 .sframe (v1)", gcc_sf, fns, eh_gcc);
  line("jitunwind .sframe v2 from gas rows", ours_gcc, fns, eh_gcc);
  line("llvm-mc-22 .sframe (v2)", llvm_sf, llvm_fns, eh_gcc);
  line("jitunwind .sframe v2 from llvm-mc rows", ours_llvm, llvm_fns, eh_gcc);
  std::string cleanup = std::string("rm -rf ") + dir;
  (void)std::system(cleanup.c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--size-report") == 0)
    return size_report(argc - 2, argv + 2);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
