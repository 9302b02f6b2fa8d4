// What taking in LLVM's CFI costs, next to what LLVM itself spends on the same code:
//
//   BM_orc_function/baseline    JITLink links a one-function object (add, look up, remove)
//   BM_orc_function/cfi_decode  cfi::decode of that object's .eh_frame (the conversion alone)
//   BM_orc_function/plugin      the same link with jitunwind::orc installed (decode + window
//                               + publish + retire), registry publisher only
//   BM_register_frame/baseline  libgcc's __register_frame + __deregister_frame of one FDE
//   BM_register_frame/preload   the same through libjitunwind_preload.so (decode, window,
//                               publish, retire; registry publisher only)
#include <jitunwind/cfi.h>
#include <jitunwind/orc.h>

#include <benchmark/benchmark.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

// One function like orc-jit's levels: a call, a value kept across it.
const char* const ir =
    "declare i64 @callee(i64)\n"
    "define i64 @f(i64 %n) #0 {\n"
    "  %k = mul i64 %n, 7\n  %r = call i64 @callee(i64 %n)\n  %s = add i64 %r, %k\n"
    "  ret i64 %s\n}\n"
    "attributes #0 = { noinline uwtable \"frame-pointer\"=\"none\" }\n";

extern "C" int64_t callee(int64_t v) {
  return v;
}

struct fixture {
  std::unique_ptr<llvm::MemoryBuffer> object;
  std::vector<uint8_t> eh_frame;  // unrelocated: decoding costs the same

  fixture() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::cantFail(llvm::orc::JITTargetMachineBuilder::detectHost());
    auto tm = llvm::cantFail(jtmb.createTargetMachine());
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic diag;
    auto m = llvm::parseIR(llvm::MemoryBufferRef(ir, "bench"), diag, ctx);
    m->setDataLayout(tm->createDataLayout());
    object = llvm::cantFail(llvm::orc::SimpleCompiler(*tm)(*m));
    auto obj = llvm::cantFail(llvm::object::ObjectFile::createObjectFile(*object));
    for (const auto& s : obj->sections()) {
      if (llvm::cantFail(s.getName()) != ".eh_frame") continue;
      auto c = llvm::cantFail(s.getContents());
      eh_frame.assign(c.begin(), c.end());
    }
  }
};

fixture& the_fixture() {
  static fixture f;
  return f;
}

void link_loop(benchmark::State& state, jitunwind::session* s) {
  fixture& fx = the_fixture();
  auto jit = llvm::cantFail(llvm::orc::LLJITBuilder().create());
  if (s != nullptr)
    llvm::cast<llvm::orc::ObjectLinkingLayer>(jit->getObjLinkingLayer())
        .addPlugin(std::make_shared<jitunwind::orc::plugin>(*s));
  auto& jd = jit->getMainJITDylib();
  llvm::orc::SymbolMap natives;
  natives[jit->mangleAndIntern("callee")] = {llvm::orc::ExecutorAddr::fromPtr(&callee),
                                             llvm::JITSymbolFlags::Exported};
  llvm::cantFail(jd.define(llvm::orc::absoluteSymbols(std::move(natives))));
  for (auto _ : state) {
    auto rt = jd.createResourceTracker();
    llvm::cantFail(jit->addObjectFile(
        rt, llvm::MemoryBuffer::getMemBufferCopy(fx.object->getBuffer(), "f.o")));
    benchmark::DoNotOptimize(llvm::cantFail(jit->lookup("f")));
    llvm::cantFail(rt->remove());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_orc_function_baseline(benchmark::State& state) {
  link_loop(state, nullptr);
}
BENCHMARK(BM_orc_function_baseline)->Name("BM_orc_function/baseline");

void BM_orc_function_plugin(benchmark::State& state) {
  jitunwind::session_options o;
  o.publishers = static_cast<jitunwind::publisher_set>(jitunwind::publisher::registry);
  auto s = jitunwind::session::create(o);
  link_loop(state, s->get());
}
BENCHMARK(BM_orc_function_plugin)->Name("BM_orc_function/plugin");

void BM_orc_function_cfi_decode(benchmark::State& state) {
  const auto& bytes = the_fixture().eh_frame;
  jitunwind::cfi::decoder_options o;
  for (auto _ : state) {
    auto d = jitunwind::cfi::decode(bytes, o);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_orc_function_cfi_decode)->Name("BM_orc_function/cfi_decode");

// ---- __register_frame ----

alignas(16) uint8_t code[64];  // what the FDE describes (never run)

// A terminated .eh_frame with one CIE and one FDE for `code`, as libgcc takes it.
std::vector<uint8_t> one_fde_section() {
  std::vector<jitunwind::function_desc> fs(1);
  fs[0].start = reinterpret_cast<uint64_t>(code);
  fs[0].size = sizeof code;
  fs[0].rows = {jitunwind::entry_row(jitunwind::abi::amd64)};
  jitunwind::cfi::encoder_options eo;
  eo.encoding = jitunwind::cfi::address_encoding::absolute;
  eo.terminator = true;
  auto enc = jitunwind::cfi::encoder::create(eo);
  (void)enc->append(fs[0]);
  return enc->bytes();
}

using register_fn = void (*)(void*);

void register_loop(benchmark::State& state, register_fn reg, register_fn dereg) {
  std::vector<uint8_t> section = one_fde_section();
  for (auto _ : state) {
    reg(section.data());
    dereg(section.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_register_frame_baseline(benchmark::State& state) {
  auto reg = reinterpret_cast<register_fn>(dlsym(RTLD_DEFAULT, "__register_frame"));
  auto dereg = reinterpret_cast<register_fn>(dlsym(RTLD_DEFAULT, "__deregister_frame"));
  if (reg == nullptr || dereg == nullptr) return state.SkipWithError("no libgcc __register_frame");
  register_loop(state, reg, dereg);
}
BENCHMARK(BM_register_frame_baseline)->Name("BM_register_frame/baseline");

void BM_register_frame_preload(benchmark::State& state) {
  setenv("JITUNWIND_PUBLISH", "registry", 1);
  // This process has LLVM's __jit_debug_descriptor but registers nothing with it: without this,
  // every registration would wait for names and be deregistered before it is published.
  setenv("JITUNWIND_PRELOAD_NAME_WAIT_MS", "0", 1);
  void* h = dlopen(JITUNWIND_PRELOAD_PATH, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return state.SkipWithError("cannot load libjitunwind_preload.so");
  auto reg = reinterpret_cast<register_fn>(dlsym(h, "__register_frame"));
  auto dereg = reinterpret_cast<register_fn>(dlsym(h, "__deregister_frame"));
  register_loop(state, reg, dereg);
}
BENCHMARK(BM_register_frame_preload)->Name("BM_register_frame/preload");

}  // namespace

BENCHMARK_MAIN();
