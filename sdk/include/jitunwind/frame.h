/// jitunwind/frame.h — the frame model: how to find a function's caller at every PC.
///
/// This is the single source of truth from which SFrame (`sframe.h`) and `.eh_frame` (`cfi.h`)
/// are generated. A code generator describes each function once, with a CFI-style
/// `frame_builder` driven while it emits instructions, or with a recipe for a common shape.
///
/// Ownership: all types here are plain values. Thread-safety: a `frame_builder` is used by one
/// thread at a time; the free functions are thread-safe. Errors: `validate` and
/// `frame_builder::finish` return `errc::invalid_argument` with a message naming the row and
/// the offending values (`errc::out_of_range` for a function whose range wraps the address
/// space).
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace jitunwind {

/// Target ABI. The numeric values are SFrame's ABI/arch identifiers. `s390x` is read as data
/// only (decoded, dumped, converted to JSON): nothing in the SDK generates or unwinds it.
enum class abi : uint8_t { aarch64_be = 1, aarch64_le = 2, amd64 = 3, s390x = 4 };

/// "amd64", "aarch64-le", "aarch64-be" or "s390x".
JITUNWIND_API const char* to_string(abi a) noexcept;
/// Inverse of `to_string(abi)`; `errc::invalid_argument` for anything else.
JITUNWIND_API result<abi> parse_abi(std::string_view name);

/// DWARF register numbers of the stack pointer, frame pointer and return-address register of an
/// ABI (AMD64: rsp 7, rbp 6, return address column 16; AArch64: sp 31, x29, x30; s390x: r15,
/// r11, r14). Rules naming other registers use these numbers too (`frame_row::cfa_reg` ...).
struct dwarf_regs {
  uint8_t sp, fp, ra;
};
JITUNWIND_API dwarf_regs dwarf_registers(abi a) noexcept;

/// Registers the frame rules talk about: the stack pointer (rsp / sp), the frame pointer
/// (rbp / x29) and the return address (on AArch64 the link register x30).
enum class reg : uint8_t { sp = 0, fp = 1, ra = 2 };

/// The register the CFA (canonical frame address: the caller's SP before the call) is computed
/// from.
enum class cfa_base : uint8_t {
  sp = 0,
  fp = 1,
  reg = 2,  ///< another register: DWARF number `frame_row::cfa_reg` (e.g. r10 under DRAP)
};

/// Where the return address is.
enum class ra_rule : uint8_t {
  saved = 0,        ///< in memory at CFA + ra_offset (AMD64: normally CFA - 8)
  in_register = 1,  ///< AArch64 only: still in the link register (leaf code, before it is saved)
  undefined = 2,    ///< outermost frame: there is no caller (thread entry points, `_start`)
  /// SFrame v3 (flexible FDE): the return address is the value of DWARF register `ra_reg`
  /// plus `ra_offset` (normally 0), e.g. kept in rbx across a sequence that clobbers the stack.
  register_value = 3,
  /// SFrame v3 (flexible FDE): in memory at (DWARF register `ra_reg`) + ra_offset.
  register_saved = 4,
};

/// Where the caller's frame pointer is.
enum class fp_rule : uint8_t {
  unchanged = 0,  ///< still in the FP register (not clobbered yet, or restored)
  saved = 1,      ///< in memory at CFA + fp_offset
  /// SFrame v3 (flexible FDE): the value of DWARF register `fp_reg` plus fp_offset.
  register_value = 2,
  /// SFrame v3 (flexible FDE): in memory at (DWARF register `fp_reg`) + fp_offset, e.g. rbp
  /// saved at *(rbp + 0) in a stack-realigning (DRAP) prologue.
  register_saved = 3,
};

/// The unwind rules that hold from `pc_offset` (relative to the function start, or to the start
/// of each repeated block for PCMASK functions) up to the next row.
///
/// The SFrame v3 register rules (`cfa_reg`, `cfa_deref`, `ra_reg`, `fp_reg` and the register
/// rule kinds) fit in what would otherwise be padding, so a row is 32 bytes with or without
/// them; the rows SFrame v2 can express have these fields 0.
struct frame_row {
  uint32_t pc_offset = 0;
  cfa_base cfa = cfa_base::sp;
  uint8_t cfa_reg = 0;     ///< DWARF register number, meaningful only when `cfa == cfa_base::reg`
  bool cfa_deref = false;  ///< CFA = *(base + cfa_offset) instead of base + cfa_offset (v3)
  int32_t cfa_offset = 8;
  ra_rule ra = ra_rule::saved;
  uint8_t ra_reg = 0;      ///< DWARF register number for the register_* RA rules
  int32_t ra_offset = -8;  ///< meaningful when `ra` is saved or a register_* rule
  fp_rule fp = fp_rule::unchanged;
  uint8_t fp_reg = 0;       ///< DWARF register number for the register_* FP rules
  int32_t fp_offset = 0;    ///< meaningful when `fp` is saved or a register_* rule
  bool ra_mangled = false;  ///< AArch64 pointer authentication: the saved RA is signed

  // Field by field (defaulted in the library: the header stays C++17).
  JITUNWIND_API bool operator==(const frame_row& other) const noexcept;
  bool operator!=(const frame_row& other) const noexcept { return !(*this == other); }
};

/// True if SFrame v1/v2 (and a v3 DEFAULT FDE) can hold the row on ABI `a`: CFA from SP or FP
/// without dereference, RA saved at the ABI's place (AMD64: CFA-8) or in the AArch64 link
/// register or undefined, FP unchanged or saved at CFA+offset (AArch64: only with the RA saved).
/// Other rows need a v3 flexible FDE.
JITUNWIND_API bool default_expressible(abi a, const frame_row& r) noexcept;

/// The rules at a function's first instruction: AMD64 CFA = SP + 8, RA at CFA - 8;
/// AArch64 CFA = SP + 0, RA in the link register. FP unchanged on both.
JITUNWIND_API frame_row entry_row(abi a) noexcept;

/// The canonical form of an outermost-frame row (RA undefined; no CFA, no FP).
JITUNWIND_API frame_row outermost_row(uint32_t pc_offset) noexcept;

/// What a callee-saved register other than SP, FP and RA holds for the caller (`.eh_frame`
/// publishers re-emit these, so debuggers show the caller's registers correctly; SFrame has no
/// place for them and ignores them).
enum class saved_rule : uint8_t {
  at_cfa = 0,     ///< the caller's value is in memory at CFA + `cfa_offset`
  unchanged = 1,  ///< back in (or never moved out of) the register: the entry rule
  undefined = 2,  ///< not recoverable here (e.g. the foreign CFI used a rule we do not carry)
};

/// From `pc_offset` on (until the next entry for the same register), register `dwarf_reg` of
/// the caller is found as `rule` says. Registers are DWARF numbers (AMD64: rbx 3, r12-r15
/// 12-15; AArch64: x19-x28 19-28, d8-d15 72-79); SP, FP and RA are described by the rows.
struct saved_register {
  uint32_t pc_offset = 0;
  uint16_t dwarf_reg = 0;
  saved_rule rule = saved_rule::at_cfa;
  int32_t cfa_offset = 0;  ///< meaningful only for `saved_rule::at_cfa`

  // Field by field (defaulted in the library: the header stays C++17).
  JITUNWIND_API bool operator==(const saved_register& other) const noexcept;
  bool operator!=(const saved_register& other) const noexcept { return !(*this == other); }
};

/// A function: its address range and rows.
struct function_desc {
  uint64_t start = 0;
  uint32_t size = 0;
  /// Sorted by strictly increasing `pc_offset`; the first row is at 0.
  std::vector<frame_row> rows;
  /// 0: rows are indexed by `pc - start` (SFrame PCINC). Otherwise the function is an array of
  /// identical blocks of this many bytes (PLT entries, trampolines) and rows are indexed by
  /// `(pc - start) % pcmask_rep` (SFrame PCMASK).
  uint32_t pcmask_rep = 0;
  /// The function is a signal trampoline (DWARF 'S' augmentation, SFrame v3 signal-frame bit):
  /// its caller's PC is an interrupted PC, not a return address, so it is looked up as it is.
  bool signal_frame = false;
  /// AArch64 pointer-authentication key that signs return addresses: 0 = A, 1 = B.
  uint8_t pauth_key = 0;
  /// Optional: callee-saved registers other than FP (sorted by `pc_offset`; at most one entry
  /// per register and offset; not for PCMASK functions). Only the `.eh_frame` publishers
  /// (jitdump, GDB) use them; empty means "the registers keep their values", which is right
  /// for code that saves nothing but the frame pointer.
  std::vector<saved_register> saved_registers;

  // Field by field (defaulted in the library: the header stays C++17).
  JITUNWIND_API bool operator==(const function_desc& other) const noexcept;
  bool operator!=(const function_desc& other) const noexcept { return !(*this == other); }
};

/// Checks a function against the rules of the ABI: non-empty range without overflow, rows
/// sorted and inside the function (or the repeated block), CFA/RA/FP offsets that can be right
/// (AMD64: CFA offsets multiples of 8, SP-based CFA >= SP + 8, RA at CFA - 8; FP saved below the
/// CFA and not in the RA slot; AArch64: FP saved only together with RA; PAC only on AArch64).
/// The v3 rules are accepted with their own checks: a register-based or dereferenced CFA needs
/// an offset that is a multiple of 8 (dereferenced: the slot is 8-byte aligned) and a register
/// that is not the one the rule already names (`cfa_base::reg` with the SP or FP number is
/// spelled `sp`/`fp`); register_* RA/FP rules name a register other than SP; AMD64 may save the
/// RA at another negative multiple of 8 (a v3 flexible FDE). s390x functions are refused (data
/// only).
JITUNWIND_API result<void> validate(abi a, const function_desc& f);

/// Builds rows the way `.cfi_*` directives do, while a code generator emits a function.
///
/// Every directive takes the code offset (`at`) of the first instruction the new rule applies
/// to, i.e. the offset right after the instruction that changed the frame. Offsets must not
/// decrease. Like `.cfi_*` directives, several directives at one offset together make one row,
/// and the row is checked against the ABI's rules only once it is complete: when a directive at
/// a later offset arrives, or at `finish`. So directives that change different parts of the row
/// (the CFA, the saved FP, the RA) can come in any order — `stack_free` then `restore(fp)` at a
/// `pop rbp` is the same row as `restore(fp)` then `stack_free`; directives that change the same
/// part apply in order, as in CFI. The first invalid directive or row makes the builder fail:
/// later directives are ignored, `ok()` turns false and `finish` returns that error, naming the
/// directive(s) with their positions and the offset, so a code generator can chain calls and
/// check once.
class JITUNWIND_API frame_builder {
 public:
  explicit frame_builder(abi a = abi::amd64);

  abi target() const noexcept { return abi_; }

  /// CFA = base + offset.
  frame_builder& def_cfa(uint32_t at, reg base, int32_t offset);
  /// CFA = (current base) + offset.
  frame_builder& def_cfa_offset(uint32_t at, int32_t offset);
  /// CFA offset += delta (`.cfi_adjust_cfa_offset`).
  frame_builder& adjust_cfa_offset(uint32_t at, int32_t delta);
  /// CFA = base + (current offset).
  frame_builder& def_cfa_register(uint32_t at, reg base);
  /// Register `r` (fp or ra) is saved at CFA + offset.
  frame_builder& offset(uint32_t at, reg r, int32_t cfa_relative);
  /// Register `r` (fp or ra) is back to its rule at function entry.
  frame_builder& restore(uint32_t at, reg r);
  /// The return address is undefined from here: this is an outermost frame.
  frame_builder& undefined(uint32_t at, reg r);
  /// AArch64: the saved return address is signed from here (`.cfi_negate_ra_state` toggles).
  frame_builder& negate_ra_state(uint32_t at);
  /// Callee-saved register `dwarf_reg` (not SP, FP or RA: use `offset` for those) is saved at
  /// CFA + offset (`.cfi_offset rbx, -24`). Kept in `function_desc::saved_registers`.
  frame_builder& save_register(uint32_t at, uint16_t dwarf_reg, int32_t cfa_relative);
  /// Callee-saved register `dwarf_reg` holds the caller's value again (`.cfi_restore rbx`).
  frame_builder& restore_register(uint32_t at, uint16_t dwarf_reg);
  /// Pushes the current rules (`.cfi_remember_state`), typically before a mid-function epilogue.
  frame_builder& remember_state();
  /// Pops the rules pushed by `remember_state` and makes them current at `at`.
  frame_builder& restore_state(uint32_t at);

  // ---- shapes of common instruction sequences ----

  /// AMD64 `push rbp` (ends at after_push) + `mov rbp, rsp` (ends at after_set_fp);
  /// AArch64 `stp x29, x30, [sp, #-16]!` + `mov x29, sp`. CFA becomes FP-based.
  frame_builder& push_frame_pointer(uint32_t after_push, uint32_t after_set_fp);
  /// AMD64 `leave` or `pop rbp`, AArch64 `ldp x29, x30, [sp], #16`, ending at after_pop:
  /// CFA = SP + entry offset, FP (and AArch64 RA) restored.
  frame_builder& pop_frame_pointer(uint32_t after_pop);
  /// SP moved down by `bytes` (push, `sub rsp, N`); only changes the CFA while it is SP-based.
  frame_builder& stack_alloc(uint32_t at, int32_t bytes);
  /// SP moved up by `bytes` (pop, `add rsp, N`); only changes the CFA while it is SP-based.
  frame_builder& stack_free(uint32_t at, int32_t bytes);

  /// False after an invalid directive, or when the rules at the last directive's offset, as
  /// they stand now, break the ABI's rules (a later directive at the same offset may fix them).
  bool ok() const noexcept;
  /// The first error (as `ok()` sees it), or null. Valid until the next call on the builder.
  const error* first_error() const noexcept;
  /// The rules in effect after the last directive.
  const frame_row& current() const noexcept { return current_; }

  /// Validates and returns the function. Rows at `size` (a directive after the last
  /// instruction) describe no code and are dropped; rows past `size` are an error. Consecutive
  /// rows with equal rules are merged. The builder is left unchanged.
  result<function_desc> finish(uint64_t start, uint32_t size) const;

  /// Back to the entry state of the ABI, errors cleared.
  void reset();

 private:
  bool begin(uint32_t at, const char* directive);
  bool begin(uint32_t at, const char* directive, reg r);  // also: r is sp, fp or ra
  void fail(const char* directive, uint32_t at, std::string message);
  // stack_alloc / stack_free under their own names.
  frame_builder& move_sp(uint32_t at, int32_t bytes, const char* directive);
  // The row at last_at_ (current_) checked as complete: its error, if any.
  std::optional<error> check_pending() const;

  abi abi_;
  frame_row current_;            // the rules from last_at_ on (the pending row)
  std::vector<frame_row> rows_;  // complete rows, before last_at_
  std::vector<frame_row> saved_states_;
  // Callee-saved registers: the rule in effect per register, the changes recorded for
  // finish(), and the rules at each remember_state (parallel to saved_states_).
  void set_saved(uint32_t at, const saved_register& rule);
  std::vector<saved_register> saved_now_;
  std::vector<saved_register> saved_changes_;
  std::vector<std::vector<saved_register>> saved_now_states_;
  std::optional<error> error_;
  mutable std::optional<error> pending_error_;  // first_error()'s answer for the pending row
  // The directives that made the pending row: (position, name), for messages.
  std::vector<std::pair<uint32_t, const char*>> pending_directives_;
  uint32_t last_at_ = 0;
  uint32_t directive_count_ = 0;
};

/// Whole-function rows for common shapes. Offsets are code offsets right after the named
/// instruction. All return `errc::invalid_argument` for offsets out of order or past `size`.
namespace recipes {

/// A function that never moves SP and calls nothing: the entry rules hold throughout.
JITUNWIND_API result<function_desc> leaf(abi a, uint64_t start, uint32_t size);

/// One epilogue inside or at the end of a function.
struct epilogue {
  uint32_t after_pop = 0;  ///< after `leave`/`pop rbp` (FP frame) or `add rsp, N` (SP frame)
  uint32_t after_ret = 0;  ///< after `ret`; if < size, the body's rules resume there
};

/// push rbp; mov rbp, rsp; [body]; (leave|pop rbp; ret)+ — or the AArch64 stp/mov/ldp/ret.
JITUNWIND_API result<function_desc> frame_pointer(abi a, uint64_t start, uint32_t size,
                                                  uint32_t after_push, uint32_t after_set_fp,
                                                  span<const epilogue> epilogues);

/// The same rows as `frame_pointer` above, written into `out` (start, size, rows, pcmask_rep
/// replaced) so that a JIT describing many functions can reuse one `function_desc` and its row
/// storage: no allocation once `out.rows` has the capacity. The caller owns `out`; no state is
/// kept; thread-safe for different `out`s. Errors: as above (`errc::invalid_argument` with the
/// same messages); `out` is unchanged on error.
JITUNWIND_API result<void> frame_pointer(function_desc& out, abi a, uint64_t start, uint32_t size,
                                         uint32_t after_push, uint32_t after_set_fp,
                                         span<const epilogue> epilogues);

/// sub rsp, frame_bytes; [body]; (add rsp, frame_bytes; ret)+ — no frame pointer.
JITUNWIND_API result<function_desc> sp_frame(abi a, uint64_t start, uint32_t size,
                                             uint32_t after_alloc, int32_t frame_bytes,
                                             span<const epilogue> epilogues);

/// A call trampoline: sub rsp, 8; call target; add rsp, 8; ret (an SP frame with one epilogue;
/// `frame_bytes` keeps the stack 16-byte aligned at the call).
JITUNWIND_API result<function_desc> trampoline(abi a, uint64_t start, uint32_t size,
                                               uint32_t after_alloc, int32_t frame_bytes,
                                               uint32_t after_free);

}  // namespace recipes
}  // namespace jitunwind
