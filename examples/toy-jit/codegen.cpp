#include "codegen.h"

#include "builtins.h"
#include "codegen_shared.h"

#include <asmjit/x86.h>
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

const x86::Gp arg_regs[6] = {x86::rdi, x86::rsi, x86::rdx, x86::rcx, x86::r8, x86::r9};

class generator final : public generated_function,
                        private detail::statement_emitter<generator> {
 public:
  generator(const toylang::function& f, const codegen_options& o, const runtime_addresses& rt)
      : f_(f), o_(o), rt_(rt) {
    code_.init(Environment::host());
    code_.setErrorHandler(&errors_);
    code_.attach(&a_);
    scratch_ = o_.frame_pointers ? x86::rcx : x86::rbp;
    stack_overflow_ = a_.newLabel();
    hot_ = a_.newLabel();
    hot_done_ = a_.newLabel();
  }

  bool run(std::string& error) {
    temps_base_ = f_.num_slots;
    frame_bytes_ = align16(8 * (f_.num_slots + temps_needed(f_.body)));
    prologue();
    block(f_.body);
    if (!ends_in_return(f_.body)) {
      a_.xor_(x86::eax, x86::eax);  // falling off the end returns 0
      epilogue();
    }
    cold_paths();
    size_ = static_cast<uint32_t>(a_.offset());
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
    return frames_.finish(address, size_);
  }

 private:
  uint32_t here() { return static_cast<uint32_t>(a_.offset()); }

  // Slots are addressed from rsp in both modes (with frame pointers, slot i is also
  // [rbp - 8(i+1)]): on the AMD EPYC machine of the benchmarks, rbp-relative slots and `leave`
  // made fib 30 % slower than the same code without frame pointers; rsp-relative slots and
  // `add rsp; pop rbp` cost nothing measurable. The frame pointer itself is cheap; how code
  // uses it is not (docs/performance.md).
  x86::Mem slot(uint32_t i) const {
    if (o_.frame_pointers) {
      return x86::qword_ptr(x86::rsp, static_cast<int32_t>(sp_extra_ + frame_bytes_) -
                                          8 * static_cast<int32_t>(i + 1));
    }
    return x86::qword_ptr(x86::rsp, static_cast<int32_t>(sp_extra_ + 8 * i));
  }
  x86::Mem temp(uint32_t depth) const { return slot(temps_base_ + depth); }

  // Where the caller left stack argument i (i >= 6), addressed from this frame.
  x86::Mem incoming_stack_arg(uint32_t i) const {
    const int32_t above_cfa = static_cast<int32_t>(8 * (i - 6));
    if (o_.frame_pointers) return x86::qword_ptr(x86::rbp, 16 + above_cfa);
    return x86::qword_ptr(x86::rsp, static_cast<int32_t>(frame_bytes_) + 16 + above_cfa);
  }

  // ---- prologue / epilogue ----

  // The guard at the end of the prologue leaves room for the frame and the cold path's call
  // only within the stack limit's margin (>= 100 KiB): a bigger frame could reach past the
  // stack before the guard runs. Such frames check first, with the error call inline, where
  // the rows are the prologue's so far.
  static constexpr uint32_t big_frame_bytes = 16 * 1024;
  void check_big_frame() {
    if (frame_bytes_ <= big_frame_bytes) return;
    Label fits = a_.newLabel();
    a_.lea(x86::rax, x86::ptr(x86::rsp, -static_cast<int32_t>(frame_bytes_)));
    a_.mov(x86::r11, imm(rt_.stack_limit));
    a_.cmp(x86::rax, x86::qword_ptr(x86::r11));
    a_.jae(fits);
    a_.mov(x86::edi, imm(f_.index));
    a_.mov(x86::rax, imm(rt_.stack_overflow));
    a_.call(x86::rax);  // does not return
    a_.int3();
    a_.bind(fits);
  }

  void prologue() {
    a_.push(x86::rbp);
    const uint32_t after_push = here();
    if (o_.frame_pointers) {
      a_.mov(x86::rbp, x86::rsp);
      frames_.push_frame_pointer(after_push, here());
      check_big_frame();
      if (frame_bytes_ != 0) a_.sub(x86::rsp, imm(frame_bytes_));
    } else {
      // rbp is callee-saved: keep the caller's value (the rows say where) and reuse the register.
      frames_.stack_alloc(after_push, 8).offset(after_push, reg::fp, -16);
      check_big_frame();
      if (frame_bytes_ != 0) {
        a_.sub(x86::rsp, imm(frame_bytes_));
        frames_.stack_alloc(here(), static_cast<int32_t>(frame_bytes_));
      }
    }
    for (uint32_t i = 0; i < f_.params.size(); ++i) {
      if (i < 6) {
        a_.mov(slot(i), arg_regs[i]);
      } else {
        a_.mov(x86::rax, incoming_stack_arg(i));
        a_.mov(slot(i), x86::rax);
      }
    }
    // Stack guard, as real JITs do at function entry: runaway recursion becomes a runtime error.
    a_.mov(x86::r11, imm(rt_.stack_limit));
    a_.cmp(x86::rsp, x86::qword_ptr(x86::r11));
    a_.jb(stack_overflow_);
    if (o_.recompile_counter) {
      a_.mov(x86::r11, imm(rt_.counters + 8 * f_.index));
      a_.sub(x86::qword_ptr(x86::r11), imm(1));
      a_.jz(hot_);
      a_.bind(hot_done_);
    }
  }

  void epilogue() {
    frames_.remember_state();
    if (o_.frame_pointers) {
      // The CFA stays rbp-based until rbp is popped.
      if (frame_bytes_ != 0) a_.add(x86::rsp, imm(frame_bytes_));
      a_.pop(x86::rbp);
      frames_.pop_frame_pointer(here());
    } else {
      if (frame_bytes_ != 0) {
        a_.add(x86::rsp, imm(frame_bytes_));
        frames_.stack_free(here(), static_cast<int32_t>(frame_bytes_));
      }
      a_.pop(x86::rbp);
      frames_.restore(here(), reg::fp).stack_free(here(), 8);
    }
    a_.ret();
    // Code after a mid-function `ret` runs with the body's frame again.
    frames_.restore_state(here());
  }

  // Out-of-line paths after the last epilogue; they run with the body's rules.
  void cold_paths() {
    a_.bind(stack_overflow_);
    a_.mov(x86::edi, imm(f_.index));
    a_.mov(x86::rax, imm(rt_.stack_overflow));
    a_.call(x86::rax);  // does not return
    a_.int3();
    if (o_.recompile_counter) {
      a_.bind(hot_);
      a_.mov(x86::edi, imm(f_.index));
      call_native(rt_.recompile_hook);
      a_.jmp(hot_done_);
    }
    for (const auto& d : division_checks_) {
      a_.bind(d.label);
      a_.mov(x86::edi, imm(d.where.line));
      a_.mov(x86::esi, imm(d.where.column));
      a_.mov(x86::rax, imm(rt_.division_by_zero));
      a_.call(x86::rax);  // does not return
      a_.int3();
    }
  }

  // ---- calls ----

  // Emits the call instruction itself (`emit_target`), bracketed by the shadow-stack push of its
  // return address and the pop after it returns.
  template <class EmitTarget>
  void call_with_shadow(EmitTarget emit_target) {
    Label after_call = a_.newLabel();
    if (o_.shadow_stack) {
      a_.mov(x86::r11, imm(rt_.shadow_top));
      a_.mov(x86::r10, x86::qword_ptr(x86::r11));
      // A full shadow stack is a stack overflow (a native stack above 8 MiB allows more
      // frames than it holds); the check runs in the body, whose rules the cold path has.
      a_.mov(x86::rax, imm(rt_.shadow_base + 8));
      a_.cmp(x86::r10, x86::rax);
      a_.jb(stack_overflow_);
      a_.lea(x86::rax, x86::ptr(after_call));
      a_.mov(x86::qword_ptr(x86::r10, -8), x86::rax);
      a_.sub(x86::r10, imm(8));
      a_.mov(x86::qword_ptr(x86::r11), x86::r10);
    }
    emit_target();
    a_.bind(after_call);
    return_offsets_.push_back(here());
    if (o_.shadow_stack) {
      a_.mov(x86::r11, imm(rt_.shadow_top));
      a_.add(x86::qword_ptr(x86::r11), imm(8));
    }
  }

  void call_native(uint64_t target) {
    call_with_shadow([&] {
      a_.mov(x86::rax, imm(target));
      a_.call(x86::rax);
    });
  }

  void gen_call(const expr& e, uint32_t depth) {
    if (e.callee == toylang::callee_kind::builtin) {
      gen(*e.operands[0], depth);
      a_.mov(x86::rdi, x86::rax);
      call_native(detail::builtin_address(rt_, static_cast<toylang::builtin>(e.callee_index)));
      return;
    }
    const auto n = static_cast<uint32_t>(e.operands.size());
    for (uint32_t i = 0; i < n; ++i) {
      gen(*e.operands[i], depth + i);
      a_.mov(temp(depth + i), x86::rax);
    }
    // Arguments 7.. go on the stack: rsp moves for the duration of the call (the "non-default
    // stack adjustment" the rows must follow when the CFA is rsp-based).
    const uint32_t stack_args = n > 6 ? n - 6 : 0;
    const uint32_t adjust = align16(8 * stack_args);
    if (adjust != 0) {
      a_.sub(x86::rsp, imm(adjust));
      frames_.stack_alloc(here(), static_cast<int32_t>(adjust));
      sp_extra_ = adjust;
      for (uint32_t j = 0; j < stack_args; ++j) {
        a_.mov(x86::rax, temp(depth + 6 + j));
        a_.mov(x86::qword_ptr(x86::rsp, static_cast<int32_t>(8 * j)), x86::rax);
      }
    }
    for (uint32_t i = 0; i < std::min(n, 6u); ++i) a_.mov(arg_regs[i], temp(depth + i));
    call_with_shadow([&] {
      a_.mov(x86::rax, imm(rt_.entry_table + 8 * e.callee_index));
      a_.call(x86::qword_ptr(x86::rax));
    });
    if (adjust != 0) {
      a_.add(x86::rsp, imm(adjust));
      frames_.stack_free(here(), static_cast<int32_t>(adjust));
      sp_extra_ = 0;
    }
  }

  // ---- expressions: value in rax; temporaries depth.. are free ----

  void load_simple(const x86::Gp& dst, const expr& e) {
    if (e.k == expr::kind::integer) {
      a_.mov(dst, imm(e.value));
    } else {
      a_.mov(dst, slot(e.slot));
    }
  }

  void set_bool(x86::CondCode cc) {
    a_.set(cc, x86::al);
    a_.movzx(x86::eax, x86::al);
  }

  void gen(const expr& e, uint32_t depth) {
    switch (e.k) {
      case expr::kind::integer:
      case expr::kind::variable:
        load_simple(x86::rax, e);
        return;
      case expr::kind::unary:
        gen(*e.operands[0], depth);
        if (e.uop == toylang::unary_op::neg) {
          a_.neg(x86::rax);
        } else {
          a_.test(x86::rax, x86::rax);
          set_bool(x86::CondCode::kZero);
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
      a_.test(x86::rax, x86::rax);
      if (is_and) {
        a_.jz(short_circuit);
      } else {
        a_.jnz(short_circuit);
      }
      gen(*e.operands[1], depth);
      a_.test(x86::rax, x86::rax);
      set_bool(x86::CondCode::kNotZero);
      a_.jmp(done);
      a_.bind(short_circuit);
      a_.mov(x86::eax, imm(is_and ? 0 : 1));
      a_.bind(done);
      return;
    }
    // Left into rax, right into the scratch register (rcx, or rbp without frame pointers).
    const expr& right = *e.operands[1];
    gen(*e.operands[0], depth);
    if (is_simple(right)) {
      load_simple(scratch_, right);
    } else {
      a_.mov(temp(depth), x86::rax);
      gen(right, depth + 1);
      a_.mov(scratch_, x86::rax);
      a_.mov(x86::rax, temp(depth));
    }
    switch (e.bop) {
      case binary_op::add:
        a_.add(x86::rax, scratch_);
        break;
      case binary_op::sub:
        a_.sub(x86::rax, scratch_);
        break;
      case binary_op::mul:
        a_.imul(x86::rax, scratch_);
        break;
      case binary_op::div:
      case binary_op::mod:
        divide(e);
        break;
      case binary_op::lt:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kSignedLT);
        break;
      case binary_op::le:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kSignedLE);
        break;
      case binary_op::gt:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kSignedGT);
        break;
      case binary_op::ge:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kSignedGE);
        break;
      case binary_op::eq:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kEqual);
        break;
      case binary_op::ne:
        a_.cmp(x86::rax, scratch_);
        set_bool(x86::CondCode::kNotEqual);
        break;
      case binary_op::logical_and:
      case binary_op::logical_or:
        break;
    }
  }

  // rax = rax / scratch or rax % scratch with the language's rules (zero divisor: runtime
  // error; divisor -1: wrapping negation / 0, where idiv would trap on INT64_MIN).
  void divide(const expr& e) {
    division_checks_.push_back({a_.newLabel(), e.loc});
    Label minus_one = a_.newLabel();
    Label done = a_.newLabel();
    a_.test(scratch_, scratch_);
    a_.jz(division_checks_.back().label);
    a_.cmp(scratch_, imm(-1));
    a_.je(minus_one);
    a_.cqo();
    a_.idiv(scratch_);
    if (e.bop == binary_op::mod) a_.mov(x86::rax, x86::rdx);
    a_.jmp(done);
    a_.bind(minus_one);
    if (e.bop == binary_op::div) {
      a_.neg(x86::rax);
    } else {
      a_.xor_(x86::eax, x86::eax);
    }
    a_.bind(done);
  }

  // ---- the machine's part of statements (detail::statement_emitter) ----

  friend class detail::statement_emitter<generator>;
  Label new_label() { return a_.newLabel(); }
  void bind(const Label& l) { a_.bind(l); }
  void store_result(uint32_t slot_index) { a_.mov(slot(slot_index), x86::rax); }
  void branch_if_zero(const Label& l) {
    a_.test(x86::rax, x86::rax);
    a_.jz(l);
  }
  void jump(const Label& l) { a_.jmp(l); }
  void zero_result() { a_.xor_(x86::eax, x86::eax); }

  const toylang::function& f_;
  codegen_options o_;
  runtime_addresses rt_;
  detail::error_recorder errors_;
  CodeHolder code_;
  x86::Assembler a_;
  frame_builder frames_{jitunwind::abi::amd64};
  x86::Gp scratch_;
  uint32_t temps_base_ = 0;
  uint32_t frame_bytes_ = 0;
  uint32_t sp_extra_ = 0;  // bytes rsp is below its body position (stack arguments being passed)
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
