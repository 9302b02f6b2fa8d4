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

  /// Calls per function, indexed like program::functions.
  const std::vector<uint64_t>& call_counts() const { return calls_; }

  /// The trampoline-return-address shadow stack, innermost first.
  std::span<const uint64_t> ground_truth() const;

 private:
  static uint64_t eval_entry(void* self, void* fn, void* frame);
  int64_t eval(const function& f, int64_t* frame);
  int64_t call(const function& f, int64_t* frame);
  [[noreturn]] void fail(const function& f, size_t pc, const char* message) const;

  const program& program_;
  interp_options options_;
  probes* probes_;
  std::vector<uint64_t> calls_;
  std::unique_ptr<int64_t[]> values_;  // the value stack: slots + operand stacks of all frames
  int64_t* values_end_ = nullptr;
  // Shadow stack of trampoline return addresses, growing down so that [top, end) is innermost
  // first, exactly the array the checkpoint probe passes.
  std::unique_ptr<uint64_t[]> shadow_;
  uint64_t* shadow_top_ = nullptr;
  uint64_t* shadow_end_ = nullptr;
  uint64_t stack_limit_ = 0;
  int64_t depth_ = 0;
};

}  // namespace toyinterp
