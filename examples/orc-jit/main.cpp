// orc-jit: a small LLVM ORC (LLJIT) program whose JIT code is visible to profilers and
// debuggers through jitunwind::orc, without describing a single frame by hand.
//
// It builds an LLVM IR module at run time: a call chain level_N -> ... -> level_0 -> spin, where
// spin is a hot loop that ends in a call to the native hook orcjit_hook. Every function has
// "frame-pointer"="none" and keeps a value across its call in a callee-saved register, so
// frame-pointer walks cannot see the JIT frames and debuggers need the saved registers. LLJIT
// compiles and links it with JITLink; the plugin publishes the callable symbols with the rows
// of the graph's .eh_frame into code windows of a jitunwind session configured from the
// environment (JITUNWIND_PUBLISH, JITUNWIND_DIR, ...).
//
//   orc-jit [--depth N] [--spin N] [--seconds S] [--calls N] [--wait S] [--unload]
#include <jitunwind/orc.h>
#include <jitunwind/usdt.h>
#include <cmdline/cmdline.hpp>

#include "module_ir.h"

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>

#include <dlfcn.h>
#include <unwind.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

struct options {
  int depth = 12;
  uint64_t spin = 200000;
  double seconds = 0;
  double wait = 0;
  uint64_t calls = 1;
  bool unload = false;
};

// The command line, read with the repository's command-line layer (cmdline/: --help from this
// table, durations with units: --seconds 1.5, --wait 500ms).
const cmdline::command command_line{
    .summary =
        "Compiles, with LLVM's LLJIT, a chain of N+1 frame-pointer-less functions (level_N "
        "... level_0) ending in a hot loop (spin) that calls the native orcjit_hook, "
        "publishes them through jitunwind::orc, and calls level_N repeatedly.",
    .options =
        {
            {"depth", 0, "N", "Levels in the call chain (default 12).", cmdline::kind::whole, 0,
             500},
            {"spin", 0, "N", "Iterations of the hot loop per call (default 200000).",
             cmdline::kind::whole},
            {"seconds", 0, "S", "Keep calling for S seconds (default: --calls times).",
             cmdline::kind::duration},
            {"calls", 0, "N", "Calls of level_N when --seconds is not given (default 1).",
             cmdline::kind::whole},
            {"wait", 0, "S",
             "Sleep S seconds after publishing, before the first call (time for a tool to "
             "attach, e.g. jitunwind unwind check --pid).",
             cmdline::kind::duration},
            {"unload", 0, "", "Remove the module at the end (its windows are retired)."},
        },
    .max_operands = 0,
    .notes =
        "The session is configured from the environment (JITUNWIND_PUBLISH, JITUNWIND_DIR, "
        "...).",
};

// Parses the command line into `o`: false with `*status` set when the program should not run
// (--help printed: 0; a usage error reported: 2).
bool parse(int argc, char** argv, options& o, int* status) {
  cmdline::parsed a;
  if (!cmdline::parse_or_exit_status(command_line, "orc-jit", argc, argv, 1, a, status))
    return false;
  o.depth = static_cast<int>(a.whole("depth", static_cast<uint64_t>(o.depth)));
  o.spin = a.whole("spin", o.spin);
  o.seconds = a.decimal("seconds", o.seconds);
  o.calls = a.whole("calls", o.calls);
  o.wait = a.decimal("wait", o.wait);
  o.unload = a.flag("unload");
  return true;
}

template <class T>
T exit_on_error(llvm::Expected<T> v, const char* what) {
  if (!v) {
    std::fprintf(stderr, "orc-jit: %s: %s\n", what, llvm::toString(v.takeError()).c_str());
    std::exit(1);
  }
  return std::move(*v);
}

void exit_on_error(llvm::Error e, const char* what) {
  if (e) {
    std::fprintf(stderr, "orc-jit: %s: %s\n", what, llvm::toString(std::move(e)).c_str());
    std::exit(1);
  }
}

void log_to_stderr(void*, jitunwind::log_level level, std::string_view message) {
  std::fprintf(stderr, "orc-jit: %s: %.*s\n", jitunwind::to_string(level),
               static_cast<int>(message.size()), message.data());
}

}  // namespace

namespace {

// Ground truth for `jitwalk verify` (docs/ground-truth.md): the probe orcjit:checkpoint(tag,
// count, addrs) lists the return addresses inside JIT code, innermost first. They come from an
// unwinder that does not use jitunwind at all: libgcc's _Unwind_Backtrace, over the .eh_frame
// that LLJIT registers with __register_frame. JIT code is what no loaded object contains
// (dladdr fails).
jitunwind::usdt::probe checkpoint_probe;
std::atomic<int64_t> checkpoint_tag{0};

struct backtrace_state {
  std::array<uint64_t, 512> pcs{};
  size_t count = 0;
};

_Unwind_Reason_Code collect(_Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<backtrace_state*>(arg);
  if (s->count == s->pcs.size()) return _URC_END_OF_STACK;
  s->pcs[s->count++] = _Unwind_GetIP(ctx);
  return _URC_NO_REASON;
}

bool in_jit_code(uint64_t pc) {
  Dl_info info;
  return dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0;
}

__attribute__((noinline)) void fire_checkpoint() {
  backtrace_state s;
  _Unwind_Backtrace(&collect, &s);
  size_t first = 0;
  while (first < s.count && !in_jit_code(s.pcs[first])) ++first;
  size_t end = first;
  while (end < s.count && in_jit_code(s.pcs[end])) ++end;
  checkpoint_probe.fire(checkpoint_tag.fetch_add(1), static_cast<uint64_t>(end - first),
                        s.pcs.data() + first);
}

}  // namespace

// The native function the hot loop ends in (a breakpoint for gdb, a leaf for profilers, the
// ground-truth checkpoint when a tracer is attached).
extern "C" __attribute__((noinline, visibility("default"))) int64_t orcjit_hook(int64_t v) {
  if (checkpoint_probe.enabled()) fire_checkpoint();
  asm volatile("" : "+r"(v));
  return v ^ (v >> 29);
}

int main(int argc, char** argv) {
  options o;
  if (int status = 0; !parse(argc, argv, o, &status)) return status;
  auto so = jitunwind::session_options::from_env();
  if (!so) {
    std::fprintf(stderr, "orc-jit: %s\n", so.error().message().c_str());
    return 2;
  }
  so->log = {&log_to_stderr, nullptr, jitunwind::log_level::warning};
  auto session = jitunwind::session::create(*so);
  if (!session) {
    std::fprintf(stderr, "orc-jit: %s\n", session.error().message().c_str());
    return 1;
  }

  // The ground-truth probe (optional: without it the program runs the same).
  auto provider = jitunwind::usdt::provider::create("orcjit");
  if (provider) {
    static constexpr jitunwind::usdt::arg_type args[] = {jitunwind::usdt::arg_type::i64,
                                                         jitunwind::usdt::arg_type::u64,
                                                         jitunwind::usdt::arg_type::pointer};
    auto p = provider->add_probe("checkpoint", args);
    if (p && provider->load()) checkpoint_probe = *p;
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // One section per function: JITLink then keeps each function in a block of its own, which
  // the plugin can space out for perf's jitdump injection (see jitunwind/orc.h).
  auto machine = exit_on_error(llvm::orc::JITTargetMachineBuilder::detectHost(), "host target");
  machine.getOptions().FunctionSections = true;
  auto jit = exit_on_error(
      llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(machine)).create(),
      "creating LLJIT");
  auto* linking = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit->getObjLinkingLayer());
  if (linking == nullptr) {
    std::fprintf(stderr, "orc-jit: LLJIT does not link with JITLink on this target\n");
    return 1;
  }
  auto plugin = std::make_shared<jitunwind::orc::plugin>(**session);
  linking->addPlugin(plugin);

  llvm::orc::JITDylib& jd = jit->getMainJITDylib();
  llvm::orc::SymbolMap natives;
  natives[jit->mangleAndIntern("orcjit_hook")] = {
      llvm::orc::ExecutorAddr::fromPtr(&orcjit_hook),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  exit_on_error(jd.define(llvm::orc::absoluteSymbols(std::move(natives))), "defining the hook");

  auto context = std::make_unique<llvm::LLVMContext>();
  const std::string ir = orcjit::module_ir(o.depth);
  llvm::SMDiagnostic diag;
  auto module = llvm::parseIR(llvm::MemoryBufferRef(ir, "orc-jit"), diag, *context);
  if (!module) {
    std::fprintf(stderr, "orc-jit: IR: %s\n", diag.getMessage().str().c_str());
    return 1;
  }
  auto tracker = jd.createResourceTracker();
  exit_on_error(
      jit->addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(module), std::move(context))),
      "adding the module");
  const std::string entry_name = "level_" + std::to_string(o.depth);
  auto entry =
      exit_on_error(jit->lookup(entry_name), "looking up the entry").toPtr<int64_t (*)(int64_t)>();

  const auto stats = plugin->stats();
  std::printf("orc-jit: pid %d: %zu functions published, %zu left out%s%s\n",
              static_cast<int>(getpid()), stats.functions_published, stats.functions_left_out,
              stats.last_problem.empty() ? "" : " (last: ", stats.last_problem.empty() ? "" : ")");
  if (!stats.last_problem.empty()) std::printf("orc-jit: %s\n", stats.last_problem.c_str());
  std::fflush(stdout);
  if (o.wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.wait));

  const auto start = std::chrono::steady_clock::now();
  int64_t sum = 0;
  uint64_t calls = 0;
  for (;;) {
    sum += entry(static_cast<int64_t>(o.spin));
    ++calls;
    if (o.seconds > 0) {
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
      if (t.count() >= o.seconds) break;
    } else if (calls >= o.calls) {
      break;
    }
  }
  std::printf("orc-jit: %llu calls of %s, result %lld\n", static_cast<unsigned long long>(calls),
              entry_name.c_str(), static_cast<long long>(sum));
  if (o.unload) {
    exit_on_error(tracker->remove(), "removing the module");
    std::printf("orc-jit: module removed, %zu windows retired\n", plugin->stats().windows_retired);
  }
  return 0;
}
