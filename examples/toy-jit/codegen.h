// toy-jit's code generators: one toylang function -> machine code (asmjit) plus the frame rows
// that describe it at the exact offsets of its prologue, epilogues and stack adjustments
// (jitunwind::frame_builder, CFI-style). codegen.cpp emits x86-64, codegen_a64.cpp AArch64
// (docs/aarch64.md); the build picks the one of the target machine.
//
// x86-64
// ------
// Calling convention: System V x86-64 for every call (JIT -> JIT, JIT -> native, runner -> JIT):
// arguments in rdi, rsi, rdx, rcx, r8, r9, then on the stack; result in rax. So a toy function
// is an ordinary C function pointer for the runner, and native helpers are plain C functions.
//
// Frame of a toy function (FRAME = 8 * slots rounded up to 16; slots = locals + temporaries):
//   frame pointers on:   push rbp; mov rbp, rsp; sub rsp, FRAME   slot i at [rsp + FRAME - 8(i+1)]
//                        ... add rsp, FRAME; pop rbp; ret         CFA = rbp + 16
//   frame pointers off:  push rbp; sub rsp, FRAME                 slot i at [rsp + 8i]
//                        ... add rsp, FRAME; pop rbp; ret         CFA = rsp + 16 + FRAME
// With frame pointers off, rbp is saved like any callee-saved register and then used as a
// general scratch register, so frame-pointer walks through JIT code fail by construction.
//
// Every `return` emits its own epilogue (remember/restore state around it). Calls with more
// than six arguments move rsp (sub before, add after), which with frame pointers off changes
// the CFA offset for the instructions in between, including the call's return address.
//
// The code calls other toy functions indirectly through an entry table (so recompiled code
// takes effect without patching callers) and native helpers through absolute addresses loaded
// into rax; everything else is rip-relative, so the code runs correctly at any address.
//
// AArch64
// -------
// AAPCS64 (arguments in x0-x7, then on the stack; result in x0), slot i at [sp + 8i], and four
// frame shapes (CFA = the caller's SP; rows as .cfi_* directives would say):
//   leaf (calls nothing but checkpoint):  [sub sp, FRAME] ... [add sp, FRAME]; ret
//       the return address stays in x30; checkpoint(tag) is a `brk` the runtime's SIGTRAP
//       handler turns into a checkpoint with the interrupted registers (jit.cpp)
//   frame pointers on:   stp x29, x30, [sp, #-16]!; mov x29, sp; sub sp, FRAME   CFA = x29 + 16
//   frame pointers off:  stp x29, x30, [sp, #-16]!; sub sp, FRAME; x29 is a scratch register
//   --save-lr-only:      str x30, [sp, #-16]!; sub sp, FRAME; x29 untouched
// With --pauth=a|b, non-leaf functions sign x30 (paciasp/pacibsp, HINT space) before saving it
// and authenticate it (autiasp/autibsp) after reloading it: the rows mark the saved return
// address as mangled and the function's SFrame FDE names the key.
#pragma once

#include "toylang.h"

#include <jitunwind/frame.h>
#include <jitunwind/result.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace toyjit {

struct codegen_options {
  bool frame_pointers = true;
  /// Push/pop every call's return address on the ground-truth shadow stack.
  bool shadow_stack = false;
  /// Count calls down and call the recompile hook when the counter reaches zero.
  bool recompile_counter = false;
  /// AArch64: non-leaf functions without frame pointers save only x30 (and keep x29).
  bool save_lr_only = false;
  /// AArch64: sign return addresses in non-leaf functions with key 'a' or 'b' (0: do not).
  char pauth = 0;
  /// AArch64, negative controls for --verify-unwind: rows that are wrong while the code is right.
  enum class wrong_rows : uint8_t {
    none,
    ra_slot,      ///< the saved return address in the other word of its 16-byte slot
    unsigned_ra,  ///< with pauth: rows that do not say the saved return address is signed
  } wrong = wrong_rows::none;
};

/// AArch64: the immediate of the `brk` that a checkpoint in a leaf function executes (the tag
/// in x0); the runtime's SIGTRAP handler recognizes it, reports the checkpoint, sets x0 = 0 and
/// resumes after it.
inline constexpr uint16_t checkpoint_trap_immediate = 0x7c;

/// Absolute addresses the generated code uses.
struct runtime_addresses {
  uint64_t entry_table = 0;  ///< uint64_t[functions]: where each function currently starts
  uint64_t counters = 0;     ///< int64_t[functions]: recompile countdowns
  uint64_t shadow_top = 0;   ///< uint64_t*: top of the shadow stack (grows down)
  uint64_t shadow_base = 0;  ///< lowest address of the shadow stack (a push below it overflows)
  uint64_t stack_limit = 0;  ///< uint64_t: lowest rsp toy code may use
  uint64_t print = 0;        ///< int64_t(int64_t) for each builtin
  uint64_t checkpoint = 0;
  uint64_t native_fp = 0;
  uint64_t native_nofp = 0;
  uint64_t division_by_zero = 0;  ///< [[noreturn]] void(int64_t line, int64_t column)
  uint64_t stack_overflow = 0;    ///< [[noreturn]] void(int64_t function_index)
  uint64_t recompile_hook = 0;    ///< void(int64_t function_index)
};

/// Generated code that is not placed anywhere yet.
class generated_function {
 public:
  virtual ~generated_function() = default;
  /// Bytes of machine code.
  virtual uint32_t size() const = 0;
  /// Copies the code to `writable` (at least size() bytes) for execution at `address` and
  /// returns its frame description there.
  virtual jitunwind::result<jitunwind::function_desc> place(uint64_t address,
                                                            std::span<uint8_t> writable) = 0;
  /// Offsets (from the function start) of the instructions right after each emitted call,
  /// i.e. every return address this function can leave on a stack. For tests.
  virtual std::span<const uint32_t> return_offsets() const = 0;
};

/// Generates `f`. Returns null and sets `error` if asmjit or the frame builder reports an error
/// (which would be a bug in this generator).
std::unique_ptr<generated_function> generate(const toylang::function& f,
                                             const codegen_options& options,
                                             const runtime_addresses& rt, std::string& error);

}  // namespace toyjit
