// orc-jit-plain: the same frame-pointer-less call chain as orc-jit, compiled by an LLJIT that
// knows nothing of jitunwind — an "unmodified runtime". LLJIT registers each object's .eh_frame
// with libgcc's __register_frame, which libjitunwind_preload.so interposes:
//
//   LD_PRELOAD=libjitunwind_preload.so orc-jit-plain --seconds 3
//
//   orc-jit-plain [--depth N] [--spin N] [--seconds S | --calls N] [--wait S] [--gdb 0|1]
//                 [--exit 0|1]
//
// --calls N makes N calls of level_N instead of calling for --seconds S of wall time (a fixed
// amount of work, however busy the machine). --gdb 1 turns on LLVM's own debugger support
// (llvm::orc::enableDebuggerSupport): each linked object is also registered with the GDB JIT
// interface (__jit_debug_descriptor), which is where the preload library finds the functions'
// names. --exit 1 ends with std::exit() while the LLJIT is alive, as runtimes that never tear down
// their JIT do: nothing is deregistered.
#include "module_ir.h"

#include <llvm/ExecutionEngine/Orc/Debugging/DebuggerSupport.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>

#include <dlfcn.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

// How many JIT frames (PCs in no loaded object) libgcc's unwinder finds from the hook: with the
// preload, the host's own __register_frame must still have happened.
std::atomic<int> libgcc_jit_frames{-1};

_Unwind_Reason_Code count_jit_frame(_Unwind_Context* ctx, void* arg) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(_Unwind_GetIP(ctx) - 1), &info) == 0)
    ++*static_cast<int*>(arg);
  return _URC_NO_REASON;
}

}  // namespace

extern "C" __attribute__((noinline, visibility("default"))) int64_t orcjit_hook(int64_t v) {
  if (libgcc_jit_frames.load(std::memory_order_relaxed) < 0) {
    int n = 0;
    _Unwind_Backtrace(&count_jit_frame, &n);
    libgcc_jit_frames.store(n);
  }
  asm volatile("" : "+r"(v));
  return v ^ (v >> 29);
}

constexpr const char* kUsage =
    "Usage: orc-jit-plain [--depth N] [--spin N] [--seconds S | --calls N] [--wait S] [--gdb 0|1] "
    "[--exit 0|1]\n";

int main(int argc, char** argv) {
  int depth = 12;
  long long spin = 200000;
  double seconds = 1;
  long long calls_wanted = 0;  // --calls: a fixed amount of work instead of --seconds of time
  double wait = 0;
  bool gdb = false;
  bool exit_early = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--depth")
      depth = std::atoi(argv[i + 1]);
    else if (a == "--spin")
      spin = std::atoll(argv[i + 1]);
    else if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--calls")
      calls_wanted = std::atoll(argv[i + 1]);
    else if (a == "--wait")
      wait = std::atof(argv[i + 1]);
    else if (a == "--gdb")
      gdb = std::string(argv[i + 1]) == "1";
    else if (a == "--exit")
      exit_early = std::string(argv[i + 1]) == "1";
    else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (argc % 2 == 0 || depth < 0 || depth > 500) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto fail = [](llvm::Error e) {
    std::fprintf(stderr, "orc-jit-plain: %s\n", llvm::toString(std::move(e)).c_str());
    return 1;
  };
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return fail(jit.takeError());
  if (gdb) {
    if (auto e = llvm::orc::enableDebuggerSupport(**jit)) return fail(std::move(e));
  }
  llvm::orc::SymbolMap natives;
  natives[(*jit)->mangleAndIntern("orcjit_hook")] = {
      llvm::orc::ExecutorAddr::fromPtr(&orcjit_hook),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (auto e = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(natives))))
    return fail(std::move(e));
  auto context = std::make_unique<llvm::LLVMContext>();
  const std::string ir = orcjit::module_ir(depth);
  llvm::SMDiagnostic diag;
  auto module = llvm::parseIR(llvm::MemoryBufferRef(ir, "orc-jit-plain"), diag, *context);
  if (!module) return 1;
  if (auto e =
          (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context))))
    return fail(std::move(e));
  auto entry = (*jit)->lookup("level_" + std::to_string(depth));
  if (!entry) return fail(entry.takeError());
  auto fn = entry->toPtr<int64_t (*)(int64_t)>();
  std::printf("orc-jit-plain: pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  // Time for a profiler started with the program to read the published code (--wait S).
  std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  const auto start = std::chrono::steady_clock::now();
  int64_t sum = 0;
  uint64_t calls = 0;
  do {
    sum += fn(spin);
    ++calls;
  } while (calls_wanted > 0
               ? static_cast<long long>(calls) < calls_wanted
               : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
                     seconds);
  std::printf("orc-jit-plain: %llu calls, result %lld; libgcc unwinds %d JIT frames\n",
              static_cast<unsigned long long>(calls), static_cast<long long>(sum),
              libgcc_jit_frames.load());
  std::fflush(stdout);
  if (exit_early) std::exit(0);
  return 0;
}
