// In-process ground-truth check with the SDK's SFrame unwinder (used by --verify-unwind of both
// example runtimes).
//
// At a checkpoint the runtime calls `check`: it executes a trap (`int3`, AArch64 `brk`) in a
// function of this file; the SIGTRAP handler takes the interrupted registers from the signal
// context (as a sampling profiler would) and walks the stack with `jitunwind::sframe::unwinder`
// over
//   - the .sframe section (PT_GNU_SFRAME) of every loaded ELF object that has one — the example
//     binaries are assembled with `as --gsframe`, libc and libstdc++ are not — and
//   - the SFrame sections of the runtime's code windows (what the SDK published),
// reading memory directly (only the current thread's stack is ever read). No frame pointer is
// used: the unwinder follows SFrame rows only.
//
// What is compared ("exact chain"): the return addresses after the first frame that lie inside
// JIT code must equal the runtime's ground truth, in order and in number. "Complete" means the
// walk also went on through the native frames below the outermost JIT frame up to `main` of the
// executable (the walk ends in libc's __libc_start_call_main, which has no SFrame).
//
// The trap is synchronous (our own instruction, never inside malloc), so the handler may
// allocate. Not thread-safe: one checking thread per process.
#pragma once

#include <jitunwind/sframe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace toylang {

/// One SFrame section describing JIT code, as published (bytes valid during `check`).
struct jit_sframe {
  std::span<const uint8_t> bytes;
  uint64_t section_address = 0;
  uint64_t text_start = 0;  ///< the window's code range: PCs in it count as JIT frames
  uint64_t text_end = 0;
};

struct unwind_outcome {
  bool exact = false;             ///< JIT return addresses == ground truth
  bool complete = false;          ///< the walk reached main
  std::vector<uint64_t> pcs;      ///< the whole walk (pcs[0] is the trap site)
  std::vector<uint64_t> jit_pcs;  ///< pcs[1..] that lie in JIT code
  jitunwind::sframe::stop_reason reason{};
  std::string message;  ///< why not exact / complete, or empty
};

class unwind_checker {
 public:
  /// Installs the SIGTRAP handler and loads the .sframe sections of the loaded objects.
  /// Null with `error` set if the executable has no .sframe (built without `as --gsframe`).
  static std::unique_ptr<unwind_checker> create(std::string& error);
  ~unwind_checker();

  /// Traps, unwinds and compares. `sections` describe every live JIT window.
  unwind_outcome check(std::span<const uint64_t> truth, std::span<const jit_sframe> sections);
  /// Makes the next `check` start from registers already interrupted (a trap in JIT code, from
  /// its SIGTRAP handler; the return address may still be in the link register) instead of
  /// trapping. (Not a parameter of `check`: a seventh argument word would go on the x86-64
  /// stack, and gas 2.40's --gsframe leaves out functions with such calls: .cfi_GNU_args_size.)
  void start_from(const jitunwind::sframe::regs& interrupted) { start_ = interrupted; }

  /// Totals over every check so far.
  uint64_t checks() const { return checks_; }
  uint64_t exact() const { return exact_; }
  uint64_t complete() const { return complete_; }
  /// Checks that started from interrupted registers (start_from).
  uint64_t interrupted() const { return interrupted_; }
  /// One line: "verify-unwind: N checkpoints, N exact, N complete", followed by
  /// ", N from a trap in JIT code" when some were.
  std::string summary() const;
  /// Symbol name (via dladdr) of an address, or "?".
  static std::string symbol(uint64_t address);

 private:
  unwind_checker() = default;
  std::optional<jitunwind::sframe::regs> start_;
  struct native_table;
  std::vector<std::unique_ptr<native_table>> natives_;
  uint64_t stack_low_ = 0, stack_high_ = 0;
  uint64_t checks_ = 0, exact_ = 0, complete_ = 0, interrupted_ = 0;
};

}  // namespace toylang
