// What perf sees of LLVM ORC code (docs/integrating.md, "What perf sees"): the perf_paths
// protocol of tests/support/perf_view.hpp over an LLJIT that links with JITLink.
//
//   main -> drive -> jit_f0 -> jit_f1 -> jit_f2 -> jit_f3 -> spin_a     (packed: one module)
//   main -> drive -> jit_g_a -> spin_a, ResourceTracker::remove, a new module
//   main -> drive -> jit_g_b -> spin_b                                   (reused)
//
// Built twice: orc_perf_paths publishes through jitunwind::orc::plugin (a session from the
// environment); orc_perf_paths_plain (PLAIN) knows nothing of jitunwind — an unchanged runtime
// for libjitunwind_preload.so — and turns on LLVM's debugger support so the preload finds the
// names (the GDB JIT interface). Prints "pid N", "fn NAME 0xSTART 0 from T" per function,
// "gone 0xSTART at T" per removed one and "phase F0 ... from T" when a chain starts running.
//
// usage: orc_perf_paths --shape packed|reused [--ms N] [--fp] [--no-sections]
//   --ms N          milliseconds of this thread's CPU time per phase (default 300)
//   --fp            the JIT functions keep a frame pointer (for perf -g)
//   --no-sections   one text section for the module (default: one per function, which the
//                   plugin spaces out for perf inject --jit)
#ifndef PLAIN
#include <jitunwind/orc.h>
#include <jitunwind/window.h>
#endif

#include <llvm/ExecutionEngine/Orc/Debugging/DebuggerSupport.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>

#include <unistd.h>

#include "support/phase_clock.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

uint64_t g_spin_iterations = 5000;

}  // namespace

// A frame of their own (a counter on the stack), so that perf -g finds their JIT caller.
extern "C" __attribute__((noinline, visibility("default"))) void spin_a() {
  volatile uint64_t i = 0;
  while (i < g_spin_iterations) i = i + 1;
}
extern "C" __attribute__((noinline, visibility("default"))) void spin_b() {
  volatile uint64_t i = 0;
  while (i < g_spin_iterations) i = i + 1;
}

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "orc_perf_paths: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T must(llvm::Expected<T> v, const char* what) {
  if (!v) die(std::string(what) + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

void must(llvm::Error e, const char* what) {
  if (e) die(std::string(what) + ": " + llvm::toString(std::move(e)));
}

using jitunwind::test::thread_cpu_ms;

double now() {
  return jitunwind::test::monotonic_seconds();
}

// A chain of functions, each spinning a little before it calls the next; the last calls `leaf`.
std::string chain_ir(const std::vector<std::string>& names, const std::string& leaf, bool fp) {
  std::string ir = "declare void @" + leaf + "()\n";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string call = i + 1 < names.size() ? "call i64 @" + names[i + 1] + "(i64 %n)"
                                                  : "call void @" + leaf + "()";
    ir += "define i64 @" + names[i] + "(i64 %n) #0 {\n"
          "entry:\n  br label %loop\n"
          "loop:\n"
          "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]\n"
          "  %acc = phi i64 [ 1, %entry ], [ %acc.next, %loop ]\n"
          "  %m = mul i64 %acc, 6364136223846793005\n"
          "  %acc.next = add i64 %m, 1442695040888963407\n"
          "  %i.next = add i64 %i, 1\n"
          "  %c = icmp ult i64 %i.next, 4000\n"
          "  br i1 %c, label %loop, label %done\n"
          "done:\n";
    if (i + 1 < names.size()) {
      ir += "  %r = " + call + "\n  %s = add i64 %r, %acc.next\n  ret i64 %s\n}\n";
    } else {
      ir += "  " + call + "\n  %s = add i64 %acc.next, %n\n  ret i64 %s\n}\n";
    }
  }
  ir += std::string("attributes #0 = { noinline uwtable \"frame-pointer\"=\"") +
        (fp ? "all" : "none") + "\" }\n";
  return ir;
}

using entry_fn = int64_t (*)(int64_t);

__attribute__((noinline)) void drive(entry_fn f, double ms) {
  const double until = thread_cpu_ms() + ms;
  int64_t sum = 0;
  while (thread_cpu_ms() < until) sum += f(1);
  asm volatile("" : : "r"(sum) : "memory");  // keeps drive a frame of its own
}

void announce_phase(const std::vector<std::string>& chain) {
  std::string line = "phase";
  for (const std::string& n : chain) line += " " + n;
  std::printf("%s from %.9f\n", line.c_str(), now());
  std::fflush(stdout);
}

struct options {
  std::string shape = "packed";
  double ms = 300;
  bool fp = false, sections = true;
};

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shape" && i + 1 < argc) {
      o.shape = argv[++i];
    } else if (a == "--ms" && i + 1 < argc) {
      o.ms = std::atof(argv[++i]);
    } else if (a == "--fp") {
      o.fp = true;
    } else if (a == "--no-sections") {
      o.sections = false;
    } else {
      std::fprintf(stderr,
                   "usage: orc_perf_paths --shape packed|reused [--ms N] [--fp] [--no-sections]\n");
      return 2;
    }
  }
  if (o.shape != "packed" && o.shape != "reused") die("--shape packed|reused");
  std::printf("pid %d\n", static_cast<int>(::getpid()));
  std::fflush(stdout);

#ifndef PLAIN
  // Before the JIT: the plugin uses it until the JIT (and its linking layer) is gone.
  auto session_options = jitunwind::session_options::from_env();
  if (!session_options) die(session_options.error().message());
  auto session = jitunwind::session::create(*session_options);
  if (!session) die(session.error().message());
#endif
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto machine = must(llvm::orc::JITTargetMachineBuilder::detectHost(), "host target");
  machine.getOptions().FunctionSections = o.sections;
  auto jit = must(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(machine)).create(),
                  "creating LLJIT");
#ifdef PLAIN
  // The GDB JIT interface: where the preload finds the functions' names.
  must(llvm::orc::enableDebuggerSupport(*jit), "debugger support");
#else
  auto* linking = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit->getObjLinkingLayer());
  if (linking == nullptr) die("LLJIT does not link with JITLink here");
  auto plugin = std::make_shared<jitunwind::orc::plugin>(**session);
  linking->addPlugin(plugin);
#endif
  llvm::orc::JITDylib& jd = jit->getMainJITDylib();
  llvm::orc::SymbolMap natives;
  for (auto [name, fn] : {std::pair{"spin_a", &spin_a}, std::pair{"spin_b", &spin_b}})
    natives[jit->mangleAndIntern(name)] = {
        llvm::orc::ExecutorAddr::fromPtr(fn),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  must(jd.define(llvm::orc::absoluteSymbols(std::move(natives))), "defining the leaves");

  // Compiles one chain in a module of its own; returns its tracker and the entry.
  auto compile = [&](const std::vector<std::string>& names, const std::string& leaf) {
    auto context = std::make_unique<llvm::LLVMContext>();
    const std::string ir = chain_ir(names, leaf, o.fp);
    llvm::SMDiagnostic diag;
    auto module = llvm::parseIR(llvm::MemoryBufferRef(ir, "orc_perf_paths"), diag, *context);
    if (!module) die("IR: " + diag.getMessage().str());
    auto tracker = jd.createResourceTracker();
    must(jit->addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(module),
                                                                std::move(context))),
         "adding the module");
    entry_fn entry = nullptr;
    for (const std::string& n : names) {
      const auto at = must(jit->lookup(n), "lookup");
      if (entry == nullptr) entry = at.toPtr<entry_fn>();
      std::printf("fn %s 0x%llx 0 from %.9f\n", n.c_str(),
                  static_cast<unsigned long long>(at.getValue()), now());
    }
    std::fflush(stdout);
    return std::make_pair(tracker, entry);
  };

  if (o.shape == "packed") {
    const std::vector<std::string> names = {"jit_f0", "jit_f1", "jit_f2", "jit_f3"};
    auto [tracker, entry] = compile(names, "spin_a");
    announce_phase(names);
    drive(entry, o.ms);
  } else {
    auto [tracker, entry] = compile({"jit_g_a"}, "spin_a");
    announce_phase({"jit_g_a"});
    drive(entry, o.ms);
    must(tracker->remove(), "removing the module");
    std::printf("gone 0x%llx at %.9f\n",
                static_cast<unsigned long long>(reinterpret_cast<uint64_t>(entry)), now());
    auto [tracker_b, entry_b] = compile({"jit_g_b"}, "spin_b");
    announce_phase({"jit_g_b"});
    drive(entry_b, o.ms);
  }
#ifndef PLAIN
  const auto stats = plugin->stats();
  std::printf("plugin: %zu functions published, %zu left out%s%s\n", stats.functions_published,
              stats.functions_left_out, stats.last_problem.empty() ? "" : "; last problem: ",
              stats.last_problem.c_str());
#endif
  return 0;
}
