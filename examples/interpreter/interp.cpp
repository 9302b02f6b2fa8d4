#include "interp.h"

#include "builtins.h"
#include "probes.h"
#include "runtime.h"

#include <cstring>
#include <iterator>

namespace toyinterp {

namespace {
const volatile uint16_t never_enabled = 0;
const uint64_t never_enabled_word = 0;

// One read of the word, compared in memory: the check is then three instructions per call
// (load the word's address, compare, branch) where a load into a register takes four.
[[gnu::always_inline]] inline bool any_enabled(const uint64_t* word) {
#if defined(__x86_64__)
  bool any;
  asm volatile("cmpq $0, %1" : "=@ccnz"(any) : "m"(*word));
  return any;
#else
  return __atomic_load_n(word, __ATOMIC_RELAXED) != 0;
#endif
}
// Value stack: 4 Mi values (32 MiB of address space, touched only as deep as programs go).
constexpr size_t value_stack_size = size_t{1} << 22;
// Deeper than any native stack allows (each toy call takes >= 3 native frames).
constexpr int64_t max_depth = int64_t{1} << 20;
}  // namespace

interpreter::interpreter(const program& p, interp_options options, probes* probe_set)
    : program_(p),
      options_(std::move(options)),
      probes_(probe_set),
      any_enabled_word_(probe_set ? probe_set->any_enabled_word() : &never_enabled_word),
      entry_semaphore_(probe_set ? probe_set->entry_semaphore() : &never_enabled),
      return_semaphore_(probe_set ? probe_set->return_semaphore() : &never_enabled),
      line_semaphore_(probe_set ? probe_set->line_semaphore() : &never_enabled),
      calls_(p.functions.size(), 0),
      values_(new int64_t[value_stack_size]),
      values_end_(values_.get() + value_stack_size),
      targets_(p.functions.size()),
      active_(new uint32_t[max_depth + 1]),
      stack_limit_(toylang::native_stack_limit()) {
  for (size_t i = 0; i < options_.trampolines.size() && i < targets_.size(); ++i) {
    targets_[i] = {options_.trampolines[i], options_.trampoline_return_addresses[i]};
  }
}

interpreter::~interpreter() = default;

std::span<const uint64_t> interpreter::ground_truth() {
  truth_.clear();
  if (options_.trampolines.empty()) return {};
  for (int64_t d = depth_; d >= 1; --d) truth_.push_back(targets_[active_[d]].return_address);
  return truth_;
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

// Calls `f` whose arguments are already in frame[0..arity). Goes through f's trampoline when
// there is one, so the native stack shows which toy function this eval invocation runs.
// Inlined into the eval loop: out of line, it sat between the caller and the stub as a tail
// jump, and fib ran 3-4 % slower with trampolines (1.09-1.12 against 1.03-1.09 inlined).
[[gnu::always_inline]] inline int64_t interpreter::call(const function& f, int64_t* frame) {
  ++calls_[f.index];
  const trampoline_fn trampoline = targets_[f.index].trampoline;
  // The only difference trampolines make is the stub's own call and return.
  if (trampoline == nullptr) {
    return static_cast<int64_t>(eval<false>(this, const_cast<function*>(&f), frame));
  }
  return static_cast<int64_t>(
      trampoline(this, const_cast<function*>(&f), frame, &interpreter::eval<false>));
}

template <bool traced>
uint64_t interpreter::eval(void* self_ptr, void* fn, void* frame_ptr) {
  interpreter& self = *static_cast<interpreter*>(self_ptr);
#if TOYINTERP_PROBES
  if constexpr (!traced) {
    // One load checks every probe (a tail call: the stack then shows eval<true> alone).
    if (any_enabled(self.any_enabled_word_)) [[unlikely]]
      return eval<true>(self_ptr, fn, frame_ptr);
  }
#endif
  const function& f = *static_cast<const function*>(fn);
  int64_t* const frame = static_cast<int64_t*>(frame_ptr);
  // Native stack check (the address of a local is the current stack position, near enough).
  char here;
  if (reinterpret_cast<uint64_t>(&here) < self.stack_limit_ ||
      frame + f.num_slots + f.max_stack > self.values_end_ || self.depth_ == max_depth) {
    toylang::runtime_error(self.program_.file, f.line, f.column,
                           "stack overflow (toy recursion too deep) in '" + f.name + "'");
  }
  self.active_[++self.depth_] = f.index;
  if (traced && *self.entry_semaphore_ != 0)
    self.probes_->function_entry(f.name.c_str(), self.depth_);
  int64_t* const slots = frame;
  int64_t* sp = frame + f.num_slots;  // operand stack: sp points past the top
  // The variant with `line` instructions only while someone traces lines (checked per call).
  const instruction* const code = traced && *self.line_semaphore_ != 0 && !f.code_with_lines.empty()
                                      ? f.code_with_lines.data()
                                      : f.code.data();
  const int64_t* const constants = f.constants.data();
  const instruction* ip = code;  // the next instruction
  const instruction* in = nullptr;
  int64_t result = 0;

  // Threaded dispatch (GCC's labels as values): every handler ends in its own indirect jump, so
  // the branch predictor sees one jump site per opcode instead of one shared `switch` jump,
  // which makes the loop's speed far less sensitive to code layout. Indexed by `opcode`.
  static void* const handlers[] = {
      &&op_constant, &&op_load,         &&op_store,
      &&op_pop,      &&op_add,          &&op_sub,
      &&op_mul,      &&op_div,          &&op_mod,
      &&op_neg,      &&op_logical_not,  &&op_to_bool,
      &&op_lt,       &&op_le,           &&op_gt,
      &&op_ge,       &&op_eq,           &&op_ne,
      &&op_jump,     &&op_jump_if_zero, &&op_jump_if_nonzero,
      &&op_call,     &&op_builtin,      &&op_line,
      &&op_ret,
  };
  static_assert(std::size(handlers) == static_cast<size_t>(opcode::ret) + 1);
#define TOY_NEXT()                                \
  do {                                            \
    in = ip++;                                    \
    goto* handlers[static_cast<uint8_t>(in->op)]; \
  } while (0)

  TOY_NEXT();
op_constant:
  *sp++ = constants[in->a];
  TOY_NEXT();
op_load:
  *sp++ = slots[in->a];
  TOY_NEXT();
op_store:
  slots[in->a] = *--sp;
  TOY_NEXT();
op_pop:
  --sp;
  TOY_NEXT();
op_add:
  --sp;
  sp[-1] = toylang::wrap_add(sp[-1], *sp);
  TOY_NEXT();
op_sub:
  --sp;
  sp[-1] = toylang::wrap_sub(sp[-1], *sp);
  TOY_NEXT();
op_mul:
  --sp;
  sp[-1] = toylang::wrap_mul(sp[-1], *sp);
  TOY_NEXT();
op_div:
  --sp;
  if (*sp == 0) self.fail(f, static_cast<size_t>(in - code), "division by zero");
  sp[-1] = toylang::wrap_div(sp[-1], *sp);
  TOY_NEXT();
op_mod:
  --sp;
  if (*sp == 0) self.fail(f, static_cast<size_t>(in - code), "division by zero");
  sp[-1] = toylang::wrap_mod(sp[-1], *sp);
  TOY_NEXT();
op_neg:
  sp[-1] = toylang::wrap_neg(sp[-1]);
  TOY_NEXT();
op_logical_not:
  sp[-1] = sp[-1] == 0;
  TOY_NEXT();
op_to_bool:
  sp[-1] = sp[-1] != 0;
  TOY_NEXT();
op_lt:
  --sp;
  sp[-1] = sp[-1] < *sp;
  TOY_NEXT();
op_le:
  --sp;
  sp[-1] = sp[-1] <= *sp;
  TOY_NEXT();
op_gt:
  --sp;
  sp[-1] = sp[-1] > *sp;
  TOY_NEXT();
op_ge:
  --sp;
  sp[-1] = sp[-1] >= *sp;
  TOY_NEXT();
op_eq:
  --sp;
  sp[-1] = sp[-1] == *sp;
  TOY_NEXT();
op_ne:
  --sp;
  sp[-1] = sp[-1] != *sp;
  TOY_NEXT();
op_jump:
  ip = code + in->a;
  TOY_NEXT();
op_jump_if_zero:
  if (*--sp == 0) ip = code + in->a;
  TOY_NEXT();
op_jump_if_nonzero:
  if (*--sp != 0) ip = code + in->a;
  TOY_NEXT();
op_call : {
  const function& callee = self.program_.functions[in->a];
  int64_t* callee_frame = sp - callee.arity;
  const int64_t value = self.call(callee, callee_frame);
  sp = callee_frame;
  *sp++ = value;
  TOY_NEXT();
}
op_builtin : {
  const auto id = static_cast<toylang::builtin>(in->a);
  if (id == toylang::builtin::checkpoint) {
    if (self.options_.on_checkpoint != nullptr)
      self.options_.on_checkpoint(self.options_.checkpoint_user, sp[-1], self.ground_truth());
    sp[-1] = 0;
  } else {
    sp[-1] = toylang::native_entry(id)(sp[-1]);
  }
  TOY_NEXT();
}
op_line:
  if (traced && *self.line_semaphore_ != 0) self.probes_->line(f.name.c_str(), in->a);
  TOY_NEXT();
op_ret:
  result = *--sp;
#undef TOY_NEXT
  if (traced && *self.return_semaphore_ != 0) [[unlikely]] {
    self.probes_->function_return(f.name.c_str(), self.depth_);
  }
  --self.depth_;
  return result;
}

template uint64_t interpreter::eval<false>(void*, void*, void*);
#if TOYINTERP_PROBES
template uint64_t interpreter::eval<true>(void*, void*, void*);
#endif

}  // namespace toyinterp
