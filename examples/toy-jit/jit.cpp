#include "jit.h"

#include "builtins.h"
#include "runtime.h"

#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace toyjit {

namespace {
uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The native helpers below are plain C functions called from JIT code; they find the runtime
// here. One JIT per process is all this example needs.
jit* current = nullptr;
// Deep enough for any recursion an 8 MiB native stack allows (each JIT frame is >= 16 bytes);
// deeper recursion on a bigger stack stops at the shadow stack's bounds check instead.
constexpr size_t shadow_stack_entries = size_t{1} << 20;

#if defined(__aarch64__)
// Checkpoints in AArch64 leaf functions are `brk #checkpoint_trap_immediate` with the tag in x0
// (a call would make the function a non-leaf). This handler turns one into a checkpoint with
// the interrupted registers, as a sampling profiler's signal would see them, returns 0 in x0
// and resumes after the brk. Other traps go to the handler installed before (the
// --verify-unwind checker's), or take the default action.
struct sigaction previous_sigtrap = {};
bool sigtrap_installed = false;

void on_sigtrap(int sig, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  const uint64_t pc = uc->uc_mcontext.pc;
  uint32_t insn = 0;
  std::memcpy(&insn, reinterpret_cast<const void*>(pc), sizeof insn);
  const uint32_t checkpoint_brk = 0xd4200000u | (uint32_t{checkpoint_trap_immediate} << 5);
  if (insn == checkpoint_brk && current != nullptr) {
    jitunwind::sframe::regs r;
    r.pc = pc;
    r.sp = uc->uc_mcontext.sp;
    r.fp = uc->uc_mcontext.regs[29];
    r.lr = uc->uc_mcontext.regs[30];
    jit::checkpoint_trap(static_cast<int64_t>(uc->uc_mcontext.regs[0]), r);
    uc->uc_mcontext.regs[0] = 0;
    uc->uc_mcontext.pc = pc + 4;
    return;
  }
  if ((previous_sigtrap.sa_flags & SA_SIGINFO) != 0 && previous_sigtrap.sa_sigaction != nullptr) {
    previous_sigtrap.sa_sigaction(sig, info, context);
  } else if (previous_sigtrap.sa_handler != SIG_DFL && previous_sigtrap.sa_handler != SIG_IGN) {
    previous_sigtrap.sa_handler(sig);
  } else {
    signal(SIGTRAP, SIG_DFL);  // the brk runs again and ends the process as it would have
  }
}

bool install_trap_handler(std::string& error) {
  if (sigtrap_installed) return true;
  struct sigaction sa = {};
  sa.sa_sigaction = &on_sigtrap;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTRAP, &sa, &previous_sigtrap) != 0) {
    error = std::string("sigaction(SIGTRAP): ") + std::strerror(errno);
    return false;
  }
  sigtrap_installed = true;
  return true;
}

void remove_trap_handler() {
  if (!sigtrap_installed) return;
  sigaction(SIGTRAP, &previous_sigtrap, nullptr);
  sigtrap_installed = false;
}
#else
bool install_trap_handler(std::string&) {
  return true;
}
void remove_trap_handler() {}
#endif
}  // namespace

jit::jit(const toylang::program& p, const jit_options& options, std::unique_ptr<code_placer> placer)
    : program_(p),
      options_(options),
      placer_(std::move(placer)),
      functions_(p.functions.size()),
      entry_table_(new uint64_t[p.functions.size()]()),
      counters_(new int64_t[p.functions.size()]()) {
  if (options_.shadow_stack) {
    shadow_.reset(new uint64_t[shadow_stack_entries]);
    shadow_end_ = shadow_.get() + shadow_stack_entries;
    shadow_top_ = shadow_end_;
  }
  stack_limit_ = toylang::native_stack_limit();
  for (size_t i = 0; i < p.functions.size(); ++i) {
    counters_[i] = static_cast<int64_t>(options_.recompile_every);
  }
  addresses_.entry_table = reinterpret_cast<uint64_t>(entry_table_.get());
  addresses_.counters = reinterpret_cast<uint64_t>(counters_.get());
  addresses_.shadow_top = reinterpret_cast<uint64_t>(&shadow_top_);
  addresses_.shadow_base = reinterpret_cast<uint64_t>(shadow_.get());
  addresses_.stack_limit = reinterpret_cast<uint64_t>(&stack_limit_);
  addresses_.print = reinterpret_cast<uint64_t>(toylang::native_entry(toylang::builtin::print));
  addresses_.checkpoint = reinterpret_cast<uint64_t>(&jit::checkpoint_helper);
  addresses_.native_fp =
      reinterpret_cast<uint64_t>(toylang::native_entry(toylang::builtin::native_fp));
  addresses_.native_nofp =
      reinterpret_cast<uint64_t>(toylang::native_entry(toylang::builtin::native_nofp));
  addresses_.division_by_zero = reinterpret_cast<uint64_t>(&jit::division_by_zero);
  addresses_.stack_overflow = reinterpret_cast<uint64_t>(&jit::stack_overflow);
  addresses_.recompile_hook = reinterpret_cast<uint64_t>(&jit::recompile_hook);
  codegen_.frame_pointers = options_.frame_pointers;
  codegen_.save_lr_only = options_.save_lr_only;
  codegen_.pauth = options_.pauth;
  codegen_.wrong = options_.wrong_rows;
  codegen_.shadow_stack = options_.shadow_stack;
  codegen_.recompile_counter = options_.recompile_every != 0;
}

jit::~jit() {
  if (current == this) {
    remove_trap_handler();
    current = nullptr;
  }
}

std::unique_ptr<jit> jit::create(const toylang::program& p, const jit_options& options,
                                 std::unique_ptr<code_placer> placer, std::string& error) {
  if (current != nullptr) {
    error = "only one toy-jit runtime per process";
    return nullptr;
  }
  std::unique_ptr<jit> j(new jit(p, options, std::move(placer)));
  current = j.get();
  if (!install_trap_handler(error)) return nullptr;
  if (!j->compile_all(error)) return nullptr;
  return j;
}

bool jit::compile(uint32_t index, bool recompiling, std::string& error) {
  const toylang::function& f = program_.functions[index];
  const uint64_t t0 = now_ns();
  auto generated = generate(f, codegen_, addresses_, error);
  if (!generated) return false;
  const uint64_t t1 = now_ns();
  placed_function placed;
  if (!placer_->place("toy:" + f.name, *generated, recompiling ? &functions_[index] : nullptr,
                      placed, error)) {
    return false;
  }
  const uint64_t placed_at = now_ns();
  timings_.generate_ns += t1 - t0 + placed.place_ns;
  timings_.publish_ns += placed_at - t1 - std::min(placed.place_ns, placed_at - t1);
  ++timings_.functions;
  placed.return_offsets.assign(generated->return_offsets().begin(),
                               generated->return_offsets().end());
  functions_[index] = std::move(placed);
  return true;
}

bool jit::compile_all(std::string& error) {
  for (uint32_t i = 0; i < program_.functions.size(); ++i) {
    if (!compile(i, false, error)) return false;
  }
  const uint64_t t0 = now_ns();
  if (!placer_->publish(error)) return false;
  timings_.publish_ns += now_ns() - t0;
  for (uint32_t i = 0; i < program_.functions.size(); ++i) {
    entry_table_[i] = functions_[i].start;
  }
  return true;
}

std::span<const uint64_t> jit::ground_truth() const {
  if (shadow_top_ == nullptr) return {};
  return {shadow_top_, static_cast<size_t>(shadow_end_ - shadow_top_)};
}

int64_t jit::run_main(std::span<const int64_t> a) {
  const uint64_t entry = entry_table_[*program_.find("main")];
  using i = int64_t;
  // main takes at most 8 arguments (checked by the front end).
  switch (a.size()) {
    case 0:
      return reinterpret_cast<i (*)()>(entry)();
    case 1:
      return reinterpret_cast<i (*)(i)>(entry)(a[0]);
    case 2:
      return reinterpret_cast<i (*)(i, i)>(entry)(a[0], a[1]);
    case 3:
      return reinterpret_cast<i (*)(i, i, i)>(entry)(a[0], a[1], a[2]);
    case 4:
      return reinterpret_cast<i (*)(i, i, i, i)>(entry)(a[0], a[1], a[2], a[3]);
    case 5:
      return reinterpret_cast<i (*)(i, i, i, i, i)>(entry)(a[0], a[1], a[2], a[3], a[4]);
    case 6:
      return reinterpret_cast<i (*)(i, i, i, i, i, i)>(entry)(a[0], a[1], a[2], a[3], a[4], a[5]);
    case 7:
      return reinterpret_cast<i (*)(i, i, i, i, i, i, i)>(entry)(a[0], a[1], a[2], a[3], a[4], a[5],
                                                                 a[6]);
    default:
      return reinterpret_cast<i (*)(i, i, i, i, i, i, i, i)>(entry)(a[0], a[1], a[2], a[3], a[4],
                                                                    a[5], a[6], a[7]);
  }
}

// ---- native helpers called from JIT code ----

// checkpoint(tag): hands the ground truth to the embedder (main.cpp fires the toyjit:checkpoint
// probe and runs --verify-unwind). The shadow stack grows down, so [top, end) is already
// innermost first and stays unchanged while the callback runs.
int64_t jit::checkpoint_helper(int64_t tag) {
  if (current->options_.on_checkpoint != nullptr) {
    current->options_.on_checkpoint(current->options_.checkpoint_user, tag,
                                    current->ground_truth(), nullptr);
  }
  return 0;
}

void jit::checkpoint_trap(int64_t tag, const jitunwind::sframe::regs& interrupted) {
  if (current->options_.on_checkpoint != nullptr) {
    current->options_.on_checkpoint(current->options_.checkpoint_user, tag,
                                    current->ground_truth(), &interrupted);
  }
}

void jit::division_by_zero(int64_t line, int64_t column) {
  toylang::runtime_error(current->program_.file, static_cast<uint32_t>(line),
                         static_cast<uint32_t>(column), "division by zero");
}

void jit::stack_overflow(int64_t function_index) {
  const toylang::function& f = current->program_.functions[static_cast<size_t>(function_index)];
  toylang::runtime_error(current->program_.file, f.loc.line, f.loc.column,
                         "stack overflow (toy recursion too deep) in '" + f.name + "'");
}

void jit::recompile_hook(int64_t function_index) {
  jit& j = *current;
  const auto index = static_cast<uint32_t>(function_index);
  j.counters_[index] = static_cast<int64_t>(j.options_.recompile_every);
  std::string error;
  bool ok = j.compile(index, true, error);
  if (ok) {
    const uint64_t t0 = now_ns();
    ok = j.placer_->publish(error);
    j.timings_.publish_ns += now_ns() - t0;
  }
  if (!ok) {
    // The old code stays in use; a runtime that cannot recompile keeps running what it has.
    std::fprintf(stderr, "toy-jit: warning: recompiling '%s' failed: %s\n",
                 j.program_.functions[index].name.c_str(), error.c_str());
    return;
  }
  j.entry_table_[index] = j.functions_[index].start;
  ++j.recompilations_;
  j.placer_->poll();
}

}  // namespace toyjit
