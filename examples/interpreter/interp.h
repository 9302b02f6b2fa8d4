// The interpreter: a classic switch-dispatched eval loop over `bytecode.h`, recursing through
// `eval` for every toy call. With trampolines on, each call goes through that function's
// SDK trampoline, so the native stack carries one distinct return address per toy frame.
#pragma once

#include "bytecode.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace toyinterp {

/// What happens at `checkpoint(tag)`: the ground-truth addresses are the trampoline return
/// addresses of every active toy call, innermost first (empty without trampolines).
using checkpoint_handler = void (*)(void* user, int64_t tag, std::span<const uint64_t> addrs);

/// A native trampoline: calls `target(a, b, c)` and returns its result. Signature of the SDK's
/// trampolines (jitunwind/trampolines.h).
using trampoline_target = uint64_t (*)(void*, void*, void*);
using trampoline_fn = uint64_t (*)(void*, void*, void*, trampoline_target);

struct interp_options {
  /// Per function (indexed like program::functions): the trampoline to call it through and the
  /// return address inside it (trampoline + offset after its call). Empty: direct calls.
  std::vector<trampoline_fn> trampolines;
  std::vector<uint64_t> trampoline_return_addresses;
  checkpoint_handler on_checkpoint = nullptr;
  void* checkpoint_user = nullptr;
};

class probes;

class interpreter {
 public:
  interpreter(const program& p, interp_options options, probes* probe_set);
  ~interpreter();

  /// Runs main with the arguments (count checked by the caller).
  int64_t run_main(std::span<const int64_t> args);

  /// Address of the eval loop (where trampolines should be placed near).
  static uint64_t eval_address() { return reinterpret_cast<uint64_t>(&interpreter::eval<false>); }

  /// Calls per function, indexed like program::functions.
  const std::vector<uint64_t>& call_counts() const { return calls_; }

  /// The return addresses inside the trampolines of every active toy call, innermost first
  /// (empty without trampolines). Computed from the interpreter's call stack; the span stays
  /// valid until the next call of this function.
  std::span<const uint64_t> ground_truth();

 private:
  // The eval loop, with the trampolines' target signature so that a trampoline calls it
  // directly: (interpreter*, const function*, int64_t* frame) -> result. Calls enter
  // eval<false>, which has no probe sites; if any probe is enabled at entry it hands the call
  // to eval<true>, which checks each probe at its site. So an untraced call pays one check, and
  // a call entered while nobody traced fires no `line` or `return` events.
  template <bool traced>
  static uint64_t eval(void* self, void* fn, void* frame);
  int64_t call(const function& f, int64_t* frame);
  [[noreturn]] void fail(const function& f, size_t pc, const char* message) const;

  const program& program_;
  interp_options options_;
  probes* probes_;
  // The probes' semaphores (a constant zero without probes): each check is one load. The word
  // checks all of them at once (see probes::any_enabled_word).
  const uint64_t* any_enabled_word_;
  const volatile uint16_t* entry_semaphore_;
  const volatile uint16_t* return_semaphore_;
  const volatile uint16_t* line_semaphore_;
  std::vector<uint64_t> calls_;
  std::unique_ptr<int64_t[]> values_;  // the value stack: slots + operand stacks of all frames
  int64_t* values_end_ = nullptr;
  // How each function is called: its trampoline and the return address the trampoline leaves
  // on the stack (kept together: one cache line read per call).
  struct call_target {
    trampoline_fn trampoline = nullptr;
    uint64_t return_address = 0;
  };
  std::vector<call_target> targets_;
  // The interpreter's call stack: active_[1..depth_] are the functions of the active calls,
  // outermost first (one store per call; what real interpreters keep as their frame chain).
  std::unique_ptr<uint32_t[]> active_;
  std::vector<uint64_t> truth_;  // scratch for ground_truth()
  uint64_t stack_limit_ = 0;
  int64_t depth_ = 0;
};

}  // namespace toyinterp
