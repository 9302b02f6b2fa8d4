// toy-jit's AArch64 code generator (asmjit's A64 backend): the same language, runtime helpers
// and ground truth as the x86-64 generator in codegen.cpp, with the frame shapes codegen.h lists.
#include "codegen.h"

#include "builtins.h"
#include "codegen_shared.h"

// Debian's asmjit (a 2022 snapshot) has no <asmjit/a64.h> umbrella header yet.
#include <asmjit/arm.h>
#include <asmjit/arm/a64assembler.h>
#include <jitunwind/asmjit.h>

#include <algorithm>
#include <vector>

namespace toyjit {

namespace {

using namespace asmjit;
using jitunwind::frame_builder;
using jitunwind::reg;
using toylang::binary_op;
using toylang::expr;
using toylang::stmt;

using detail::align16;
using detail::ends_in_return;
using detail::is_simple;
using detail::temps_needed;

const a64::Gp arg_regs[8] = {a64::x0, a64::x1, a64::x2, a64::x3,
                             a64::x4, a64::x5, a64::x6, a64::x7};
// Registers with a fixed job (all caller-saved, none an argument register): x16/x17 (IP0/IP1)
// hold addresses and call targets, x9 the shadow stack's new entry and stack arguments in
// transit, x11 a quotient, x14/x15 slot addresses beyond an immediate offset. x10 is the right
// operand of binary operators, except in the stp-without-frame-pointer shape, where x29 is.

// HINT-space pointer-authentication instructions: NOPs on cores without FEAT_PAuth.
constexpr uint32_t hint_paciasp = 25, hint_pacibsp = 27, hint_autiasp = 29, hint_autibsp = 31;

bool calls_anything(const expr& e) {
  if (e.k == expr::kind::call &&
      (e.callee != toylang::callee_kind::builtin ||
       e.callee_index != static_cast<uint32_t>(toylang::builtin::checkpoint))) {
    return true;
  }
  return std::any_of(e.operands.begin(), e.operands.end(),
                     [](const auto& o) { return calls_anything(*o); });
}

bool calls_anything(const toylang::block& b) {
  return std::any_of(b.begin(), b.end(), [](const auto& s) {
    return (s->value && calls_anything(*s->value)) || calls_anything(s->body) ||
           calls_anything(s->else_body);
  });
}

enum class frame_shape {
  leaf,     // the return address stays in x30
  record,   // stp x29, x30 + mov x29, sp: a frame record, x29 the frame pointer
  pair,     // stp x29, x30: x29 saved, then a scratch register
  lr_only,  // str x30: x29 untouched
};

class generator final : public generated_function,
                        private detail::statement_emitter<generator> {
 public:
  generator(const toylang::function& f, const codegen_options& o, const runtime_addresses& rt)
      : f_(f), o_(o), rt_(rt) {
    code_.init(Environment::host());
    code_.setErrorHandler(&errors_);
    code_.attach(&a_);
    stack_overflow_ = a_.newLabel();
    hot_ = a_.newLabel();
    hot_done_ = a_.newLabel();
  }

  bool run(std::string& error) {
    if (Environment::host().arch() != Arch::kAArch64) {
      error = "toy-jit's AArch64 code generator runs on AArch64 only";
      return false;
    }
    temps_base_ = f_.num_slots;
    frame_bytes_ = align16(8 * (f_.num_slots + temps_needed(f_.body)));
    shape_ = !calls_anything(f_.body) ? frame_shape::leaf
             : o_.frame_pointers      ? frame_shape::record
             : o_.save_lr_only        ? frame_shape::lr_only
                                      : frame_shape::pair;
    saved_bytes_ = shape_ == frame_shape::leaf ? 0 : 16;
    scratch_ = shape_ == frame_shape::pair ? a64::x29 : a64::x10;
    signs_ = o_.pauth != 0 && shape_ != frame_shape::leaf;
    prologue();
    block(f_.body);
    if (!ends_in_return(f_.body)) {
      a_.mov(a64::x0, a64::xzr);  // falling off the end returns 0
      epilogue();
    }
    cold_paths();
    size_ = here();
    if (!errors_.first.empty()) {
      error = "asmjit: " + errors_.first + " (function '" + f_.name + "')";
      return false;
    }
    if (!frames_.ok()) {
      error = "frame rows of '" + f_.name + "': " + frames_.first_error()->message();
      return false;
    }
    return true;
  }

  uint32_t size() const override { return size_; }
  std::span<const uint32_t> return_offsets() const override { return return_offsets_; }

  jitunwind::result<jitunwind::function_desc> place(uint64_t address,
                                                    std::span<uint8_t> writable) override {
    if (auto r = detail::copy_placed(code_, address, writable, f_.name, size_); !r)
      return r.error();
    auto desc = frames_.finish(address, size_);
    if (desc && signs_ && describes_signing()) desc->pauth_key = o_.pauth == 'b' ? 1 : 0;
    return desc;
  }

 private:
  uint32_t here() { return static_cast<uint32_t>(a_.offset()); }
  bool describes_signing() const { return o_.wrong != codegen_options::wrong_rows::unsigned_ra; }

  // movz + movk: any 64-bit value in at most four instructions.
  void load_imm(const a64::Gp& dst, uint64_t value) {
    a_.movz(dst, imm(value & 0xffff), imm(0));
    for (uint32_t shift = 16; shift < 64; shift += 16) {
      const uint64_t part = (value >> shift) & 0xffff;
      if (part != 0) a_.movk(dst, imm(part), imm(shift));
    }
  }

  // [sp + offset]; offsets beyond ldr/str's scaled 12-bit immediate go through x15.
  a64::Mem stack_at(uint32_t offset) {
    if (offset <= 32760) return a64::ptr(a64::sp, static_cast<int32_t>(offset));
    load_imm(a64::x14, offset);
    a_.mov(a64::x15, a64::sp);
    a_.add(a64::x15, a64::x15, a64::x14);
    return a64::ptr(a64::x15);
  }
  a64::Mem slot(uint32_t i) { return stack_at(sp_extra_ + 8 * i); }
  a64::Mem temp(uint32_t depth) { return slot(temps_base_ + depth); }
  // Where the caller left stack argument i (i >= 8): at the CFA upwards.
  a64::Mem incoming_stack_arg(uint32_t i) {
    return stack_at(frame_bytes_ + saved_bytes_ + 8 * (i - 8));
  }

  // sp -= bytes (or += for a negative count).
  void move_sp(int64_t bytes) {
    const uint64_t n = static_cast<uint64_t>(bytes < 0 ? -bytes : bytes);
    if (n <= 4095) {
      if (bytes > 0) a_.sub(a64::sp, a64::sp, imm(n));
      if (bytes < 0) a_.add(a64::sp, a64::sp, imm(n));
      return;
    }
    load_imm(a64::x16, n);
    if (bytes > 0) a_.sub(a64::sp, a64::sp, a64::x16);
    if (bytes < 0) a_.add(a64::sp, a64::sp, a64::x16);
  }

  // ---- prologue / epilogue ----

  // As in codegen.cpp: a frame beyond the stack limit's margin is checked before it is
  // allocated. Nothing is saved yet, so the error path is a tail call (x30 still holds the
  // caller's return address).
  static constexpr uint32_t big_frame_bytes = 16 * 1024;
  void check_big_frame() {
    if (frame_bytes_ <= big_frame_bytes) return;
    Label fits = a_.newLabel();
    load_imm(a64::x16, frame_bytes_ + saved_bytes_);
    a_.mov(a64::x17, a64::sp);
    a_.sub(a64::x17, a64::x17, a64::x16);
    load_imm(a64::x16, rt_.stack_limit);
    a_.ldr(a64::x16, a64::ptr(a64::x16));
    a_.cmp(a64::x17, a64::x16);
    a_.b_hs(fits);
    load_imm(a64::x0, f_.index);
    load_imm(a64::x16, rt_.stack_overflow);
    a_.br(a64::x16);
    a_.bind(fits);
  }

  void prologue() {
    check_big_frame();
    if (signs_) {
      a_.hint(imm(o_.pauth == 'b' ? hint_pacibsp : hint_paciasp));
      if (describes_signing()) frames_.negate_ra_state(here());
    }
    switch (shape_) {
      case frame_shape::leaf:
        break;
      case frame_shape::record:
      case frame_shape::pair: {
        a_.stp(a64::x29, a64::x30, a64::ptr_pre(a64::sp, -16));
        const uint32_t after_stp = here();
        // The pair: x29 at CFA-16, x30 at CFA-8 (the wrong rows swap them).
        const bool swap = o_.wrong == codegen_options::wrong_rows::ra_slot;
        const int32_t fp_at = swap ? -8 : -16, ra_at = swap ? -16 : -8;
        if (shape_ == frame_shape::record && !swap) {
          a_.mov(a64::x29, a64::sp);
          frames_.push_frame_pointer(after_stp, here());
        } else {
          frames_.def_cfa_offset(after_stp, 16)
              .offset(after_stp, reg::fp, fp_at)
              .offset(after_stp, reg::ra, ra_at);
          if (shape_ == frame_shape::record) {
            a_.mov(a64::x29, a64::sp);
            frames_.def_cfa_register(here(), reg::fp);
          }
        }
        break;
      }
      case frame_shape::lr_only:
        // x30 in the lower word of a 16-byte slot (SP stays 16-byte aligned); the wrong rows
        // name the upper word, which nothing writes.
        a_.str(a64::x30, a64::ptr_pre(a64::sp, -16));
        frames_.def_cfa_offset(here(), 16)
            .offset(here(), reg::ra, o_.wrong == codegen_options::wrong_rows::ra_slot ? -8 : -16);
        break;
    }
    if (frame_bytes_ != 0) {
      move_sp(frame_bytes_);
      frames_.stack_alloc(here(), static_cast<int32_t>(frame_bytes_));
    }
    for (uint32_t i = 0; i < f_.params.size(); ++i) {
      if (i < 8) {
        a_.str(arg_regs[i], slot(i));
      } else {
        a_.ldr(a64::x9, incoming_stack_arg(i));
        a_.str(a64::x9, slot(i));
      }
    }
    // Stack guard, as in codegen.cpp.
    load_imm(a64::x16, rt_.stack_limit);
    a_.ldr(a64::x16, a64::ptr(a64::x16));
    a_.mov(a64::x17, a64::sp);
    a_.cmp(a64::x17, a64::x16);
    a_.b_lo(stack_overflow_);
    if (o_.recompile_counter) {
      load_imm(a64::x16, rt_.counters + 8 * f_.index);
      a_.ldr(a64::x17, a64::ptr(a64::x16));
      a_.subs(a64::x17, a64::x17, imm(1));
      a_.str(a64::x17, a64::ptr(a64::x16));
      a_.b_eq(hot_);
      a_.bind(hot_done_);
    }
  }

  // SP back to its value at entry (a leaf's tail calls to the error helpers need it too).
  void free_frame() {
    if (frame_bytes_ == 0) return;
    move_sp(-static_cast<int64_t>(frame_bytes_));
    frames_.stack_free(here(), static_cast<int32_t>(frame_bytes_));
  }

  void epilogue() {
    frames_.remember_state();
    free_frame();  // with a frame record the CFA stays x29-based: no new row
    switch (shape_) {
      case frame_shape::leaf:
        break;
      case frame_shape::record:
        a_.ldp(a64::x29, a64::x30, a64::ptr_post(a64::sp, 16));
        frames_.pop_frame_pointer(here());
        break;
      case frame_shape::pair:
        a_.ldp(a64::x29, a64::x30, a64::ptr_post(a64::sp, 16));
        frames_.restore(here(), reg::fp).restore(here(), reg::ra).stack_free(here(), 16);
        break;
      case frame_shape::lr_only:
        a_.ldr(a64::x30, a64::ptr_post(a64::sp, 16));
        frames_.restore(here(), reg::ra).stack_free(here(), 16);
        break;
    }
    if (signs_) {
      a_.hint(imm(o_.pauth == 'b' ? hint_autibsp : hint_autiasp));
      if (describes_signing()) frames_.negate_ra_state(here());
    }
    a_.ret(a64::x30);
    // Code after a mid-function `ret` runs with the body's frame again.
    frames_.restore_state(here());
  }

  // A call to a [[noreturn]] helper (arguments already in x0/x1). A leaf frees its frame and
  // tail-calls it: x30 still holds its caller's return address.
  void call_noreturn(uint64_t target) {
    load_imm(a64::x16, target);
    if (shape_ == frame_shape::leaf) {
      a_.br(a64::x16);
    } else {
      a_.blr(a64::x16);
      a_.brk(imm(0));  // not reached
    }
  }

  // Out-of-line paths after the last epilogue; they run with the body's rules.
  void cold_paths() {
    const bool leaf = shape_ == frame_shape::leaf;
    a_.bind(stack_overflow_);
    if (leaf) frames_.remember_state();
    if (leaf) free_frame();
    load_imm(a64::x0, f_.index);
    call_noreturn(rt_.stack_overflow);
    if (leaf) frames_.restore_state(here());
    if (o_.recompile_counter) {
      a_.bind(hot_);
      if (leaf) {
        // Shrink-wrapped: only this rare path saves the return address around its call.
        frames_.remember_state();
        a_.str(a64::x30, a64::ptr_pre(a64::sp, -16));
        frames_.stack_alloc(here(), 16)
            .offset(here(), reg::ra, -static_cast<int32_t>(frame_bytes_ + 16));
      }
      load_imm(a64::x0, f_.index);
      call_native(rt_.recompile_hook);
      if (leaf) {
        a_.ldr(a64::x30, a64::ptr_post(a64::sp, 16));
        frames_.restore(here(), reg::ra).stack_free(here(), 16);
      }
      a_.b(hot_done_);
      if (leaf) frames_.restore_state(here());
    }
    for (const auto& d : division_checks_) {
      a_.bind(d.label);
      if (leaf) frames_.remember_state();
      if (leaf) free_frame();
      load_imm(a64::x0, d.where.line);
      load_imm(a64::x1, d.where.column);
      call_noreturn(rt_.division_by_zero);
      if (leaf) frames_.restore_state(here());
    }
  }

  // ---- calls ----

  // Emits the call instruction itself (`emit_target`), bracketed by the shadow-stack push of its
  // return address and the pop after it returns (as in codegen.cpp).
  template <class EmitTarget>
  void call_with_shadow(EmitTarget emit_target) {
    Label after_call = a_.newLabel();
    if (o_.shadow_stack) {
      load_imm(a64::x16, rt_.shadow_top);
      a_.ldr(a64::x17, a64::ptr(a64::x16));
      load_imm(a64::x9, rt_.shadow_base + 8);
      a_.cmp(a64::x17, a64::x9);
      a_.b_lo(stack_overflow_);
      a_.adr(a64::x9, after_call);
      a_.str(a64::x9, a64::ptr_pre(a64::x17, -8));
      a_.str(a64::x17, a64::ptr(a64::x16));
    }
    emit_target();
    a_.bind(after_call);
    return_offsets_.push_back(here());
    if (o_.shadow_stack) {
      load_imm(a64::x16, rt_.shadow_top);
      a_.ldr(a64::x17, a64::ptr(a64::x16));
      a_.add(a64::x17, a64::x17, imm(8));
      a_.str(a64::x17, a64::ptr(a64::x16));
    }
  }

  void call_native(uint64_t target) {
    call_with_shadow([&] {
      load_imm(a64::x16, target);
      a_.blr(a64::x16);
    });
  }

  void gen_call(const expr& e, uint32_t depth) {
    if (e.callee == toylang::callee_kind::builtin) {
      gen(*e.operands[0], depth);  // the argument in x0
      const auto id = static_cast<toylang::builtin>(e.callee_index);
      if (id == toylang::builtin::checkpoint && shape_ == frame_shape::leaf) {
        a_.brk(imm(checkpoint_trap_immediate));  // the handler sets x0 = 0
      } else {
        call_native(detail::builtin_address(rt_, id));
      }
      return;
    }
    const auto n = static_cast<uint32_t>(e.operands.size());
    for (uint32_t i = 0; i < n; ++i) {
      gen(*e.operands[i], depth + i);
      a_.str(a64::x0, temp(depth + i));
    }
    // Arguments 9.. go on the stack: SP moves for the duration of the call (the rows follow it
    // while the CFA is SP-based).
    const uint32_t stack_args = n > 8 ? n - 8 : 0;
    const uint32_t adjust = align16(8 * stack_args);
    if (adjust != 0) {
      move_sp(adjust);
      frames_.stack_alloc(here(), static_cast<int32_t>(adjust));
      sp_extra_ = adjust;
      for (uint32_t j = 0; j < stack_args; ++j) {
        a_.ldr(a64::x9, temp(depth + 8 + j));
        a_.str(a64::x9, stack_at(8 * j));
      }
    }
    for (uint32_t i = 0; i < std::min(n, 8u); ++i) a_.ldr(arg_regs[i], temp(depth + i));
    call_with_shadow([&] {
      load_imm(a64::x16, rt_.entry_table + 8 * e.callee_index);
      a_.ldr(a64::x16, a64::ptr(a64::x16));
      a_.blr(a64::x16);
    });
    if (adjust != 0) {
      move_sp(-static_cast<int64_t>(adjust));
      frames_.stack_free(here(), static_cast<int32_t>(adjust));
      sp_extra_ = 0;
    }
  }

  // ---- expressions: value in x0; temporaries depth.. are free ----

  void load_simple(const a64::Gp& dst, const expr& e) {
    if (e.k == expr::kind::integer) {
      load_imm(dst, static_cast<uint64_t>(e.value));
    } else {
      a_.ldr(dst, slot(e.slot));
    }
  }

  void set_bool(a64::CondCode cc) { a_.cset(a64::x0, imm(static_cast<uint32_t>(cc))); }

  void compare(const a64::Gp& right, a64::CondCode cc) {
    a_.cmp(a64::x0, right);
    set_bool(cc);
  }

  void gen(const expr& e, uint32_t depth) {
    switch (e.k) {
      case expr::kind::integer:
      case expr::kind::variable:
        load_simple(a64::x0, e);
        return;
      case expr::kind::unary:
        gen(*e.operands[0], depth);
        if (e.uop == toylang::unary_op::neg) {
          a_.neg(a64::x0, a64::x0);
        } else {
          compare(a64::xzr, a64::CondCode::kEQ);
        }
        return;
      case expr::kind::call:
        gen_call(e, depth);
        return;
      case expr::kind::binary:
        break;
    }
    if (e.bop == binary_op::logical_and || e.bop == binary_op::logical_or) {
      const bool is_and = e.bop == binary_op::logical_and;
      Label short_circuit = a_.newLabel();
      Label done = a_.newLabel();
      gen(*e.operands[0], depth);
      if (is_and) {
        a_.cbz(a64::x0, short_circuit);
      } else {
        a_.cbnz(a64::x0, short_circuit);
      }
      gen(*e.operands[1], depth);
      compare(a64::xzr, a64::CondCode::kNE);
      a_.b(done);
      a_.bind(short_circuit);
      load_imm(a64::x0, is_and ? 0 : 1);
      a_.bind(done);
      return;
    }
    // Left into x0, right into the scratch register.
    const expr& right = *e.operands[1];
    gen(*e.operands[0], depth);
    if (is_simple(right)) {
      load_simple(scratch_, right);
    } else {
      a_.str(a64::x0, temp(depth));
      gen(right, depth + 1);
      a_.mov(scratch_, a64::x0);
      a_.ldr(a64::x0, temp(depth));
    }
    switch (e.bop) {
      case binary_op::add:
        a_.add(a64::x0, a64::x0, scratch_);
        break;
      case binary_op::sub:
        a_.sub(a64::x0, a64::x0, scratch_);
        break;
      case binary_op::mul:
        a_.mul(a64::x0, a64::x0, scratch_);
        break;
      case binary_op::div:
      case binary_op::mod:
        divide(e);
        break;
      case binary_op::lt:
        compare(scratch_, a64::CondCode::kLT);
        break;
      case binary_op::le:
        compare(scratch_, a64::CondCode::kLE);
        break;
      case binary_op::gt:
        compare(scratch_, a64::CondCode::kGT);
        break;
      case binary_op::ge:
        compare(scratch_, a64::CondCode::kGE);
        break;
      case binary_op::eq:
        compare(scratch_, a64::CondCode::kEQ);
        break;
      case binary_op::ne:
        compare(scratch_, a64::CondCode::kNE);
        break;
      case binary_op::logical_and:
      case binary_op::logical_or:
        break;
    }
  }

  // x0 = x0 / scratch or x0 % scratch with the language's rules. sdiv does not trap: a zero
  // divisor is checked (a runtime error), and INT64_MIN / -1 already wraps to INT64_MIN (the
  // remainder then is 0), which is what the language says.
  void divide(const expr& e) {
    division_checks_.push_back({a_.newLabel(), e.loc});
    a_.cbz(scratch_, division_checks_.back().label);
    a_.sdiv(a64::x11, a64::x0, scratch_);
    if (e.bop == binary_op::mod) {
      a_.msub(a64::x0, a64::x11, scratch_, a64::x0);
    } else {
      a_.mov(a64::x0, a64::x11);
    }
  }

  // ---- the machine's part of statements (detail::statement_emitter) ----

  friend class detail::statement_emitter<generator>;
  Label new_label() { return a_.newLabel(); }
  void bind(const Label& l) { a_.bind(l); }
  void store_result(uint32_t slot_index) { a_.str(a64::x0, slot(slot_index)); }
  void branch_if_zero(const Label& l) { a_.cbz(a64::x0, l); }
  void jump(const Label& l) { a_.b(l); }
  void zero_result() { a_.mov(a64::x0, a64::xzr); }

  const toylang::function& f_;
  codegen_options o_;
  runtime_addresses rt_;
  detail::error_recorder errors_;
  CodeHolder code_;
  a64::Assembler a_;
  frame_builder frames_{jitunwind::abi::aarch64_le};
  frame_shape shape_ = frame_shape::leaf;
  bool signs_ = false;
  a64::Gp scratch_;
  uint32_t saved_bytes_ = 0;  // between the CFA and the frame: the saved x29/x30 slot
  uint32_t temps_base_ = 0;
  uint32_t frame_bytes_ = 0;
  uint32_t sp_extra_ = 0;  // bytes SP is below its body position (stack arguments being passed)
  uint32_t size_ = 0;
  Label stack_overflow_;
  Label hot_;
  Label hot_done_;
  std::vector<detail::division_check> division_checks_;
  std::vector<uint32_t> return_offsets_;
};

}  // namespace

std::unique_ptr<generated_function> generate(const toylang::function& f,
                                             const codegen_options& options,
                                             const runtime_addresses& rt, std::string& error) {
  auto g = std::make_unique<generator>(f, options, rt);
  if (!g->run(error)) return nullptr;
  return g;
}

}  // namespace toyjit
