#include "interp.h"

#include "builtins.h"
#include "probes.h"
#include "runtime.h"

#include <cstring>

namespace toyinterp {

namespace {
// Value stack: 4 Mi values (32 MiB of address space, touched only as deep as programs go).
constexpr size_t value_stack_size = size_t{1} << 22;
// Deeper than any native stack allows anyway; bounded so the array stays small.
constexpr size_t shadow_stack_size = size_t{1} << 20;
}  // namespace

interpreter::interpreter(const program& p, interp_options options, probes* probe_set)
    : program_(p),
      options_(std::move(options)),
      probes_(probe_set),
      calls_(p.functions.size(), 0),
      values_(new int64_t[value_stack_size]),
      values_end_(values_.get() + value_stack_size),
      shadow_(new uint64_t[shadow_stack_size]),
      shadow_top_(shadow_.get() + shadow_stack_size),
      shadow_end_(shadow_.get() + shadow_stack_size),
      stack_limit_(toylang::native_stack_limit()) {}

interpreter::~interpreter() = default;

std::span<const uint64_t> interpreter::ground_truth() const {
  return {shadow_top_, static_cast<size_t>(shadow_end_ - shadow_top_)};
}

int64_t interpreter::run_main(std::span<const int64_t> args) {
  const function& main = program_.functions[program_.main_index];
  int64_t* frame = values_.get();
  std::memcpy(frame, args.data(), args.size_bytes());
  return call(main, frame);
}

void interpreter::fail(const function& f, size_t pc, const char* message) const {
  const instruction& in = f.code[pc];
  toylang::runtime_error(program_.file, static_cast<uint32_t>(in.a), static_cast<uint32_t>(in.b),
                         message);
}

uint64_t interpreter::eval_entry(void* self, void* fn, void* frame) {
  return static_cast<uint64_t>(static_cast<interpreter*>(self)->eval(
      *static_cast<const function*>(fn), static_cast<int64_t*>(frame)));
}

// Calls `f` whose arguments are already in frame[0..arity). Goes through f's trampoline when
// there is one, so the native stack shows which toy function this eval invocation runs.
int64_t interpreter::call(const function& f, int64_t* frame) {
  ++calls_[f.index];
  if (options_.trampolines.empty()) return eval(f, frame);
  // The return address the hardware will push inside the trampoline is known in advance; it
  // stays on the shadow stack exactly while this call is active.
  *--shadow_top_ = options_.trampoline_return_addresses[f.index];
  const uint64_t result = options_.trampolines[f.index](this, const_cast<function*>(&f), frame,
                                                        &interpreter::eval_entry);
  ++shadow_top_;
  return static_cast<int64_t>(result);
}

int64_t interpreter::eval(const function& f, int64_t* frame) {
  // Native stack check (the address of a local is the current stack position, near enough).
  char here;
  if (reinterpret_cast<uint64_t>(&here) < stack_limit_ ||
      frame + f.num_slots + f.max_stack > values_end_ || shadow_top_ == shadow_.get()) {
    toylang::runtime_error(program_.file, 0, 0,
                           "stack overflow (toy recursion too deep) in '" + f.name + "'");
  }
  ++depth_;
#if TOYINTERP_PROBES
  if (probes_ != nullptr && probes_->entry_enabled())
    probes_->function_entry(f.name.c_str(), depth_);
#endif
  int64_t* const slots = frame;
  int64_t* sp = frame + f.num_slots;  // operand stack: sp points past the top
#if TOYINTERP_PROBES
  // The variant with `line` instructions only while someone traces lines (checked per call).
  const instruction* const code =
      probes_ != nullptr && probes_->line_enabled() && !f.code_with_lines.empty()
          ? f.code_with_lines.data()
          : f.code.data();
#else
  const instruction* const code = f.code.data();
#endif
  const int64_t* const constants = f.constants.data();
  size_t pc = 0;
  int64_t result = 0;
  for (;;) {
    const instruction& in = code[pc++];
    switch (in.op) {
      case opcode::constant:
        *sp++ = constants[in.a];
        break;
      case opcode::load:
        *sp++ = slots[in.a];
        break;
      case opcode::store:
        slots[in.a] = *--sp;
        break;
      case opcode::pop:
        --sp;
        break;
      case opcode::add:
        --sp;
        sp[-1] = toylang::wrap_add(sp[-1], *sp);
        break;
      case opcode::sub:
        --sp;
        sp[-1] = toylang::wrap_sub(sp[-1], *sp);
        break;
      case opcode::mul:
        --sp;
        sp[-1] = toylang::wrap_mul(sp[-1], *sp);
        break;
      case opcode::div:
        --sp;
        if (*sp == 0) fail(f, pc - 1, "division by zero");
        sp[-1] = toylang::wrap_div(sp[-1], *sp);
        break;
      case opcode::mod:
        --sp;
        if (*sp == 0) fail(f, pc - 1, "division by zero");
        sp[-1] = toylang::wrap_mod(sp[-1], *sp);
        break;
      case opcode::neg:
        sp[-1] = toylang::wrap_neg(sp[-1]);
        break;
      case opcode::logical_not:
        sp[-1] = sp[-1] == 0;
        break;
      case opcode::to_bool:
        sp[-1] = sp[-1] != 0;
        break;
      case opcode::lt:
        --sp;
        sp[-1] = sp[-1] < *sp;
        break;
      case opcode::le:
        --sp;
        sp[-1] = sp[-1] <= *sp;
        break;
      case opcode::gt:
        --sp;
        sp[-1] = sp[-1] > *sp;
        break;
      case opcode::ge:
        --sp;
        sp[-1] = sp[-1] >= *sp;
        break;
      case opcode::eq:
        --sp;
        sp[-1] = sp[-1] == *sp;
        break;
      case opcode::ne:
        --sp;
        sp[-1] = sp[-1] != *sp;
        break;
      case opcode::jump:
        pc = static_cast<size_t>(in.a);
        break;
      case opcode::jump_if_zero:
        if (*--sp == 0) pc = static_cast<size_t>(in.a);
        break;
      case opcode::jump_if_nonzero:
        if (*--sp != 0) pc = static_cast<size_t>(in.a);
        break;
      case opcode::call: {
        const function& callee = program_.functions[in.a];
        int64_t* callee_frame = sp - callee.arity;
        const int64_t value = call(callee, callee_frame);
        sp = callee_frame;
        *sp++ = value;
        break;
      }
      case opcode::builtin: {
        const auto id = static_cast<toylang::builtin>(in.a);
        if (id == toylang::builtin::checkpoint) {
          if (options_.on_checkpoint != nullptr)
            options_.on_checkpoint(options_.checkpoint_user, sp[-1], ground_truth());
          sp[-1] = 0;
        } else {
          sp[-1] = toylang::native_entry(id)(sp[-1]);
        }
        break;
      }
      case opcode::line:
#if TOYINTERP_PROBES
        if (probes_ != nullptr && probes_->line_enabled()) probes_->line(f.name.c_str(), in.a);
#endif
        break;
      case opcode::ret:
        result = *--sp;
        goto done;
    }
  }
done:
#if TOYINTERP_PROBES
  if (probes_ != nullptr && probes_->return_enabled())
    probes_->function_return(f.name.c_str(), depth_);
#endif
  --depth_;
  return result;
}

}  // namespace toyinterp
