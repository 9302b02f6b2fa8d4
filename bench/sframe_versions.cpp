// SFrame v3 against v2, measured in the same run (bench/run.sh prints the ratios):
//
//   BM_encode_version/baseline/C   v2: encoder::append per function of corpus C
//   BM_encode_version/v3/C         v3: the same
//   BM_lookup_version/baseline     table::find in a 10 000-function v2 section (random PCs)
//   BM_lookup_version/v3           the same section as v3
//
// Corpora C: 0 = toy-jit's code generator on a generated 400-function program, frame pointers
// on; 1 = the same with frame pointers off (SP-based rows, epilogues); 2 = every function of the
// binutils vectors in ../shared/sframe-vectors (their own rows, non-strict, each section with
// its own encoder; skipped with a message if the vectors are not there).
// Counters: bytes_per_function (whole section bytes / functions) for the corpus in that version.
#include <jitunwind/sframe.h>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#ifdef JITUNWIND_BENCH_TOYJIT
#include "codegen.h"
#include "toylang.h"
#endif

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

struct corpus {
  std::string name;
  std::vector<std::vector<function_desc>> sections;  ///< each encoded on its own
  std::vector<abi> targets;
  std::vector<uint64_t> addresses;  ///< where each section is encoded for
  size_t functions = 0;
};

#ifdef JITUNWIND_BENCH_TOYJIT
std::string generated_source(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "fn f" + std::to_string(i) + "(a, b, c) {\n  let x = a * " + std::to_string(i + 3) +
           " + b;\n  if (x % 7 == " + std::to_string(i % 7) +
           ") { return x / 3 - c; }\n  let y = 0;\n  while (y < c) { y = y + f" +
           std::to_string((i + 1) % n) + "(y, 1, 0) % 5 + 1; }\n  return x + y * " +
           std::to_string(i) + ";\n}\n";
  }
  out += "fn main() { return f0(1, 2, 3); }\n";
  return out;
}

corpus toyjit_corpus(bool frame_pointers) {
  corpus c;
  c.name = frame_pointers ? "toy-jit (frame pointers)" : "toy-jit (no frame pointers)";
  std::vector<toylang::diagnostic> errors;
  const auto program = toylang::compile("bench.toy", generated_source(400), errors);
  if (!program) return c;
  toyjit::runtime_addresses rt;
  for (uint64_t* a : {&rt.entry_table, &rt.counters, &rt.shadow_top, &rt.stack_limit, &rt.print,
                      &rt.checkpoint, &rt.native_fp, &rt.native_nofp, &rt.division_by_zero,
                      &rt.stack_overflow, &rt.recompile_hook})
    *a = 0x100000;  // the code is never run
  toyjit::codegen_options o;
  o.frame_pointers = frame_pointers;
  std::vector<uint8_t> scratch(1 << 16);
  uint64_t at = 0x7f0000000000;
  std::vector<function_desc> fs;
  std::string error;
  for (const auto& f : program->functions) {
    auto g = toyjit::generate(f, o, rt, error);
    if (!g) continue;
    auto d = g->place(at, scratch);
    if (!d) continue;
    at += (g->size() + 15) / 16 * 16;
    fs.push_back(std::move(*d));
  }
  c.functions = fs.size();
  c.sections.push_back(std::move(fs));
  c.targets.push_back(abi::amd64);
  c.addresses.push_back(0x7f0000800000);
  return c;
}
#endif

corpus vectors_corpus() {
  corpus c;
  c.name = "binutils vectors";
  std::string dir = std::string(JITUNWIND_SOURCE_DIR) + "/../shared/sframe-vectors";
  if (const char* e = std::getenv("JITUNWIND_SFRAME_VECTORS"); e && *e) dir = e;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return c;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) continue;
    std::vector<uint8_t> bytes;
    for (const auto& b : j["content"]) bytes.push_back(b.get<uint8_t>());
    auto d = decode(bytes, j["section_base"].get<uint64_t>());
    if (!d || d->info.target == abi::s390x || d->functions.empty()) continue;
    bool v2_can = true;  // compare like with like: sections v2 can express
    for (const auto& f : d->functions) {
      v2_can &= !f.signal_frame;
      for (const auto& r : f.rows) v2_can &= default_expressible(d->info.target, r);
    }
    if (!v2_can) continue;
    c.functions += d->functions.size();
    c.targets.push_back(d->info.target);
    c.addresses.push_back(j["section_base"].get<uint64_t>());
    c.sections.push_back(std::move(d->functions));
  }
  return c;
}

const corpus& corpus_for(int which) {
  static const std::vector<corpus> all = [] {
    std::vector<corpus> v;
#ifdef JITUNWIND_BENCH_TOYJIT
    v.push_back(toyjit_corpus(true));
    v.push_back(toyjit_corpus(false));
#else
    v.push_back(corpus{"toy-jit (not built)", {}, {}, {}, 0});
    v.push_back(corpus{"toy-jit (not built)", {}, {}, {}, 0});
#endif
    v.push_back(vectors_corpus());
    return v;
  }();
  return all[static_cast<size_t>(which)];
}

void encode_version(benchmark::State& state, uint8_t version) {
  const corpus& c = corpus_for(static_cast<int>(state.range(0)));
  if (c.functions == 0) {
    state.SkipWithError((c.name + ": no functions (not built, or no vectors)").c_str());
    return;
  }
  state.SetLabel(c.name);
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = 0;
    for (size_t s = 0; s < c.sections.size(); ++s) {
      encoder_options o;
      o.target = c.targets[s];
      o.version = version;
      o.section_address = c.addresses[s];
      o.strict = false;
      auto enc = encoder::create(o).value();
      for (const auto& f : c.sections[s]) {
        auto r = enc.append(f);
        if (!r) {
          state.SkipWithError(r.error().message().c_str());
          return;
        }
      }
      bytes += enc.size();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * c.functions));
  state.counters["bytes_per_function"] =
      static_cast<double>(bytes) / static_cast<double>(c.functions);
}

void BM_encode_version_baseline(benchmark::State& state) {
  encode_version(state, version_2);
}
void BM_encode_version_v3(benchmark::State& state) {
  encode_version(state, version_3);
}

// 10 000 typical JIT functions (push rbp; mov rbp, rsp; ...; leave; ret), random PCs.
struct lookup_fixture {
  std::vector<uint8_t> bytes;
  std::optional<table> t;
  std::vector<uint64_t> pcs;
  explicit lookup_fixture(uint8_t version) {
    std::vector<function_desc> fs;
    std::mt19937 rng(1);
    uint64_t at = 0x10000000;
    for (int i = 0; i < 10000; ++i) {
      const uint32_t size = 32 + rng() % 400;
      const recipes::epilogue ep[] = {{size - 1, size}};
      fs.push_back(recipes::frame_pointer(abi::amd64, at, size, 1, 4, ep).value());
      at += size + (rng() % 4) * 16;
    }
    encoder_options o;
    o.version = version;
    o.section_address = 0x0fff0000;
    bytes = encode(o, fs).value();
    t.emplace(table::create(bytes, 0x0fff0000).value());
    std::mt19937_64 r2(2);
    for (int i = 0; i < 4096; ++i) {
      const auto& f = fs[r2() % fs.size()];
      pcs.push_back(f.start + r2() % f.size);
    }
  }
};

void lookup_version(benchmark::State& state, uint8_t version) {
  static lookup_fixture v2(version_2), v3(version_3);
  const lookup_fixture& f = version == version_2 ? v2 : v3;
  lookup_result out;
  size_t i = 0;
  for (auto _ : state) {
    const bool hit = f.t->find(f.pcs[i++ & 4095], out);
    benchmark::DoNotOptimize(hit);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["section_bytes"] = static_cast<double>(f.bytes.size());
}

void BM_lookup_version_baseline(benchmark::State& state) {
  lookup_version(state, version_2);
}
void BM_lookup_version_v3(benchmark::State& state) {
  lookup_version(state, version_3);
}

}  // namespace

BENCHMARK(BM_encode_version_baseline)->Name("BM_encode_version/baseline")->DenseRange(0, 2);
BENCHMARK(BM_encode_version_v3)->Name("BM_encode_version/v3")->DenseRange(0, 2);
BENCHMARK(BM_lookup_version_baseline)->Name("BM_lookup_version/baseline");
BENCHMARK(BM_lookup_version_v3)->Name("BM_lookup_version/v3");
BENCHMARK_MAIN();
