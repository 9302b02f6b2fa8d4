#include <jitunwind/frame.h>

#include "common/error.hpp"
#include "frame/row_rules.hpp"

#include <algorithm>
#include <limits>

namespace jitunwind {

using detail::format;

namespace {

const char* reg_name(abi a, reg r) {
  const bool amd64 = a == abi::amd64;
  switch (r) {
    case reg::sp:
      return amd64 ? "rsp" : "sp";
    case reg::fp:
      return amd64 ? "rbp" : "x29";
    case reg::ra:
      return amd64 ? "rip" : "x30";
  }
  return "?";
}

bool add_overflows(int32_t a, int32_t b) {
  const int64_t s = static_cast<int64_t>(a) + b;
  return s > std::numeric_limits<int32_t>::max() || s < std::numeric_limits<int32_t>::min();
}

}  // namespace

frame_builder::frame_builder(abi a) : abi_(a) {
  // Typical functions have 3-6 rows: one allocation instead of a growth sequence.
  rows_.reserve(8);
  reset();
}

void frame_builder::reset() {
  current_ = entry_row(abi_);
  rows_.clear();
  saved_states_.clear();
  saved_now_.clear();
  saved_changes_.clear();
  saved_now_states_.clear();
  error_.reset();
  pending_error_.reset();
  pending_directives_.clear();
  last_at_ = 0;
  directive_count_ = 0;
}

void frame_builder::fail(const char* directive, uint32_t at, std::string message) {
  if (error_) return;
  error_.emplace(errc::invalid_argument, format("frame directive #%u %s at offset %u: %s",
                                                directive_count_, directive, at, message.c_str()));
}

// The rules at last_at_ are one row made by every directive at that offset, in any order (as
// with .cfi_* directives); only the complete row must satisfy the ABI's rules. An RA made
// undefined marks an outermost frame whatever else the row says (canonicalized on completion).
std::optional<error> frame_builder::check_pending() const {
  if (current_.ra == ra_rule::undefined) return std::nullopt;
  if (abi_ == abi::amd64 && detail::amd64_row_obviously_valid(current_)) return std::nullopt;
  auto why = detail::check_row_rules(abi_, current_);
  if (!why) return std::nullopt;
  std::string who;
  for (const auto& [position, name] : pending_directives_) {
    who += who.empty() ? "" : ", ";
    who += format("#%u %s", position, name);
  }
  if (who.empty()) who = "entry rules";  // cannot fail: entry_row is valid
  return error(errc::invalid_argument, format("frame directive%s %s at offset %u: %s",
                                              pending_directives_.size() > 1 ? "s" : "",
                                              who.c_str(), last_at_, why->c_str()));
}

bool frame_builder::ok() const noexcept {
  if (error_) return false;
  try {
    return !check_pending().has_value();
  } catch (...) {
    return false;  // out of memory while formatting the message
  }
}

const error* frame_builder::first_error() const noexcept {
  if (error_) return &*error_;
  try {
    pending_error_ = check_pending();
  } catch (...) {
    pending_error_.reset();
  }
  return pending_error_ ? &*pending_error_ : nullptr;
}

bool frame_builder::begin(uint32_t at, const char* directive) {
  if (error_) return false;
  ++directive_count_;
  if (at < last_at_) {
    fail(directive, at, format("offsets must not decrease (previous directive at %u)", last_at_));
    return false;
  }
  if (at > last_at_) {
    // The row at last_at_ is complete: check it, keep it, start the row at `at` from it.
    if (auto e = check_pending()) {
      error_ = std::move(e);
      return false;
    }
    if (current_.ra == ra_rule::undefined) current_ = outermost_row(last_at_);
    current_.pc_offset = last_at_;
    rows_.push_back(current_);
    pending_directives_.clear();
    last_at_ = at;
  }
  current_.pc_offset = at;
  pending_directives_.emplace_back(directive_count_, directive);
  return true;
}

bool frame_builder::begin(uint32_t at, const char* directive, reg r) {
  if (!begin(at, directive)) return false;
  // A C caller (or a cast) can pass any number: never let it reach the rules below.
  if (static_cast<uint8_t>(r) > static_cast<uint8_t>(reg::ra)) {
    fail(directive, at,
         format("unknown register %u (expected sp, fp or ra)", static_cast<unsigned>(r)));
    return false;
  }
  return true;
}

frame_builder& frame_builder::def_cfa(uint32_t at, reg base, int32_t offset) {
  if (!begin(at, "def_cfa", base)) return *this;
  if (base == reg::ra) {
    fail("def_cfa", at, format("the CFA cannot be based on %s", reg_name(abi_, base)));
    return *this;
  }
  current_.cfa = base == reg::sp ? cfa_base::sp : cfa_base::fp;
  current_.cfa_offset = offset;
  return *this;
}

frame_builder& frame_builder::def_cfa_offset(uint32_t at, int32_t offset) {
  if (!begin(at, "def_cfa_offset")) return *this;
  current_.cfa_offset = offset;
  return *this;
}

frame_builder& frame_builder::adjust_cfa_offset(uint32_t at, int32_t delta) {
  if (!begin(at, "adjust_cfa_offset")) return *this;
  if (add_overflows(current_.cfa_offset, delta)) {
    fail("adjust_cfa_offset", at,
         format("CFA offset %d + %d overflows", current_.cfa_offset, delta));
    return *this;
  }
  current_.cfa_offset += delta;
  return *this;
}

frame_builder& frame_builder::def_cfa_register(uint32_t at, reg base) {
  if (!begin(at, "def_cfa_register", base)) return *this;
  if (base == reg::ra) {
    fail("def_cfa_register", at, format("the CFA cannot be based on %s", reg_name(abi_, base)));
    return *this;
  }
  current_.cfa = base == reg::sp ? cfa_base::sp : cfa_base::fp;
  return *this;
}

frame_builder& frame_builder::offset(uint32_t at, reg r, int32_t cfa_relative) {
  if (!begin(at, "offset", r)) return *this;
  if (r == reg::sp) {
    fail("offset", at, format("%s is not saved in memory; use def_cfa", reg_name(abi_, r)));
    return *this;
  }
  if (r == reg::fp) {
    current_.fp = fp_rule::saved;
    current_.fp_offset = cfa_relative;
  } else {
    current_.ra = ra_rule::saved;
    current_.ra_offset = cfa_relative;
  }
  return *this;
}

frame_builder& frame_builder::restore(uint32_t at, reg r) {
  if (!begin(at, "restore", r)) return *this;
  const frame_row entry = entry_row(abi_);
  if (r == reg::fp) {
    current_.fp = entry.fp;
    current_.fp_offset = entry.fp_offset;
  } else if (r == reg::ra) {
    current_.ra = entry.ra;
    current_.ra_offset = entry.ra_offset;
  } else {
    fail("restore", at, format("%s has no saved rule to restore; use def_cfa", reg_name(abi_, r)));
    return *this;
  }
  return *this;
}

frame_builder& frame_builder::undefined(uint32_t at, reg r) {
  if (!begin(at, "undefined", r)) return *this;
  if (r != reg::ra) {
    fail("undefined", at,
         format("only the return address can be undefined, not %s", reg_name(abi_, r)));
    return *this;
  }
  current_.ra = ra_rule::undefined;  // the whole row becomes outermost once complete
  return *this;
}

frame_builder& frame_builder::negate_ra_state(uint32_t at) {
  if (!begin(at, "negate_ra_state")) return *this;
  if (abi_ == abi::amd64) {
    fail("negate_ra_state", at, "return-address signing exists only on AArch64");
    return *this;
  }
  current_.ra_mangled = !current_.ra_mangled;
  return *this;
}

// Records `rule` for its register from `at` on (a change only if it differs from the rule in
// effect).
void frame_builder::set_saved(uint32_t at, const saved_register& rule) {
  auto it = std::find_if(saved_now_.begin(), saved_now_.end(), [&](const saved_register& s) {
    return s.dwarf_reg == rule.dwarf_reg;
  });
  saved_register now = rule;
  now.pc_offset = 0;
  if (it != saved_now_.end()) {
    if (*it == now) return;
    *it = now;
  } else {
    if (rule.rule == saved_rule::unchanged) return;  // the entry rule already
    saved_now_.push_back(now);
  }
  now.pc_offset = at;
  // A second change of the same register at the same offset replaces the first.
  for (auto c = saved_changes_.rbegin(); c != saved_changes_.rend() && c->pc_offset == at; ++c) {
    if (c->dwarf_reg == now.dwarf_reg) {
      *c = now;
      return;
    }
  }
  saved_changes_.push_back(now);
}

frame_builder& frame_builder::save_register(uint32_t at, uint16_t dwarf_reg,
                                            int32_t cfa_relative) {
  if (!begin(at, "save_register")) return *this;
  if (detail::is_frame_register(abi_, dwarf_reg)) {
    fail("save_register", at,
         format("DWARF register %u is SP, FP or RA; use offset/def_cfa", dwarf_reg));
    return *this;
  }
  if (cfa_relative % 8 != 0) {
    fail("save_register", at, format("offset %d is not a multiple of 8", cfa_relative));
    return *this;
  }
  set_saved(at, {at, dwarf_reg, saved_rule::at_cfa, cfa_relative});
  return *this;
}

frame_builder& frame_builder::restore_register(uint32_t at, uint16_t dwarf_reg) {
  if (!begin(at, "restore_register")) return *this;
  if (detail::is_frame_register(abi_, dwarf_reg)) {
    fail("restore_register", at,
         format("DWARF register %u is SP, FP or RA; use restore/def_cfa", dwarf_reg));
    return *this;
  }
  set_saved(at, {at, dwarf_reg, saved_rule::unchanged, 0});
  return *this;
}

frame_builder& frame_builder::remember_state() {
  if (error_) return *this;
  ++directive_count_;
  saved_states_.push_back(current_);
  saved_now_states_.push_back(saved_now_);
  return *this;
}

frame_builder& frame_builder::restore_state(uint32_t at) {
  if (!begin(at, "restore_state")) return *this;
  if (saved_states_.empty()) {
    fail("restore_state", at, "no state was remembered");
    return *this;
  }
  current_ = saved_states_.back();
  saved_states_.pop_back();
  // Saved registers go back to their remembered rules (as changes at `at`).
  std::vector<saved_register> then = std::move(saved_now_states_.back());
  saved_now_states_.pop_back();
  for (const saved_register& now : std::vector<saved_register>(saved_now_)) {
    const bool kept = std::any_of(then.begin(), then.end(), [&](const saved_register& t) {
      return t.dwarf_reg == now.dwarf_reg;
    });
    if (!kept) set_saved(at, {at, now.dwarf_reg, saved_rule::unchanged, 0});
  }
  for (const saved_register& t : then) set_saved(at, t);
  return *this;
}

frame_builder& frame_builder::push_frame_pointer(uint32_t after_push, uint32_t after_set_fp) {
  if (!begin(after_push, "push_frame_pointer")) return *this;
  if (current_.cfa != cfa_base::sp) {
    fail("push_frame_pointer", after_push, "the CFA must be SP-based before the frame is set up");
    return *this;
  }
  const int32_t pushed = abi_ == abi::amd64 ? 8 : 16;
  current_.cfa_offset += pushed;
  current_.fp = fp_rule::saved;
  current_.fp_offset = -current_.cfa_offset;
  if (abi_ != abi::amd64) {
    current_.ra = ra_rule::saved;
    current_.ra_offset = -current_.cfa_offset + 8;
  }
  return def_cfa_register(after_set_fp, reg::fp);
}

frame_builder& frame_builder::pop_frame_pointer(uint32_t after_pop) {
  if (!begin(after_pop, "pop_frame_pointer")) return *this;
  const frame_row entry = entry_row(abi_);
  const bool mangled = current_.ra_mangled;
  current_ = entry;
  current_.ra_mangled = mangled && abi_ != abi::amd64;
  return *this;
}

frame_builder& frame_builder::move_sp(uint32_t at, int32_t bytes, const char* directive) {
  if (!begin(at, directive)) return *this;
  if (current_.cfa == cfa_base::sp) {
    if (add_overflows(current_.cfa_offset, bytes)) {
      fail(directive, at, format("CFA offset %d + %d overflows", current_.cfa_offset, bytes));
      return *this;
    }
    current_.cfa_offset += bytes;
  }
  return *this;
}

frame_builder& frame_builder::stack_alloc(uint32_t at, int32_t bytes) {
  return move_sp(at, bytes, "stack_alloc");
}

frame_builder& frame_builder::stack_free(uint32_t at, int32_t bytes) {
  if (bytes == std::numeric_limits<int32_t>::min()) {
    if (begin(at, "stack_free")) fail("stack_free", at, "byte count out of range");
    return *this;
  }
  return move_sp(at, -bytes, "stack_free");
}

result<function_desc> frame_builder::finish(uint64_t start, uint32_t size) const {
  if (error_) return *error_;
  if (auto e = check_pending()) return *std::move(e);
  frame_row last = current_.ra == ra_rule::undefined ? outermost_row(last_at_) : current_;
  last.pc_offset = last_at_;
  function_desc f;
  f.start = start;
  f.size = size;
  f.rows.reserve(rows_.size() + 1);
  for (size_t i = 0; i <= rows_.size(); ++i) {
    const frame_row& r = i < rows_.size() ? rows_[i] : last;
    if (r.pc_offset > size)
      return detail::make_error(errc::invalid_argument,
                                "function at 0x%llx: a directive at offset %u is past the "
                                "function end (size %u)",
                                static_cast<unsigned long long>(start), r.pc_offset, size);
    if (r.pc_offset == size) continue;  // describes no instruction
    if (!f.rows.empty()) {
      frame_row same = r;
      same.pc_offset = f.rows.back().pc_offset;
      if (same == f.rows.back()) continue;
    }
    f.rows.push_back(r);
  }
  for (const saved_register& c : saved_changes_) {
    if (c.pc_offset > size)
      return detail::make_error(errc::invalid_argument,
                                "function at 0x%llx: a register save at offset %u is past the "
                                "function end (size %u)",
                                static_cast<unsigned long long>(start), c.pc_offset, size);
    if (c.pc_offset < size) f.saved_registers.push_back(c);
  }
  if (auto v = validate(abi_, f); !v) return std::move(v).error();
  return f;
}

namespace recipes {

result<function_desc> leaf(abi a, uint64_t start, uint32_t size) {
  return frame_builder(a).finish(start, size);
}

namespace {

// Emits each epilogue with remember/restore so the body's rules resume after a mid-function ret.
template <class Pop>
void add_epilogues(frame_builder& b, uint32_t size, span<const epilogue> epilogues, Pop pop) {
  for (const epilogue& e : epilogues) {
    b.remember_state();
    pop(e.after_pop);
    if (e.after_ret < size) b.restore_state(e.after_ret);
  }
}

}  // namespace

namespace {

// Every shape, through the directives (with their checks and error messages).
result<function_desc> frame_pointer_general(abi a, uint64_t start, uint32_t size,
                                            uint32_t after_push, uint32_t after_set_fp,
                                            span<const epilogue> epilogues) {
  frame_builder b(a);
  b.push_frame_pointer(after_push, after_set_fp);
  add_epilogues(b, size, epilogues, [&](uint32_t at) { b.pop_frame_pointer(at); });
  return b.finish(start, size);
}

// The rows frame_pointer() gives for the usual AMD64 shape — offsets strictly increasing, every
// epilogue inside the function — built directly: a JIT calls this for every function it
// compiles, and the builder (directive checks, several allocations) costs several times more.
// Returns false for any other shape (then the builder decides, with its error messages).
// The rows it builds are valid by construction (offsets checked here, each rule one
// `validate` accepts: a test compares with the builder, which validates), so the caller does
// not validate them again.
bool amd64_frame_pointer_rows(uint64_t start, uint32_t size, uint32_t after_push,
                              uint32_t after_set_fp, span<const epilogue> epilogues,
                              function_desc& f) {
  if (!(0 < after_push && after_push < after_set_fp && after_set_fp < size)) return false;
  if (start > std::numeric_limits<uint64_t>::max() - size) return false;
  uint32_t last = after_set_fp;
  size_t n = 3;
  for (size_t i = 0; i < epilogues.size(); ++i) {
    const epilogue& e = epilogues[i];
    if (!(last < e.after_pop && e.after_pop < e.after_ret && e.after_ret <= size)) return false;
    last = e.after_ret;
    n += e.after_ret < size ? 2 : 1;
  }
  f.start = start;
  f.size = size;
  f.pcmask_rep = 0;
  // Rows are written in place, field by field (building them on the stack and copying them in
  // costs a store-forwarding stall per row). resize() keeps the capacity of a reused desc.
  f.rows.resize(n);
  frame_row* r = f.rows.data();
  // Entry (CFA = SP + 8, RA at CFA - 8), after `push rbp` (CFA = SP + 16, FP at CFA - 16) and
  // the body (CFA = FP + 16): the rules that validate() accepts for AMD64.
  const auto set = [](frame_row& row, uint32_t at, cfa_base cfa, int32_t cfa_offset, bool fp) {
    row.pc_offset = at;
    row.cfa = cfa;
    row.cfa_offset = cfa_offset;
    row.ra = ra_rule::saved;
    row.ra_offset = -8;
    row.fp = fp ? fp_rule::saved : fp_rule::unchanged;
    row.fp_offset = fp ? -16 : 0;
    row.ra_mangled = false;
  };
  set(*r++, 0, cfa_base::sp, 8, false);
  set(*r++, after_push, cfa_base::sp, 16, true);
  set(*r++, after_set_fp, cfa_base::fp, 16, true);
  for (const epilogue& e : epilogues) {
    set(*r++, e.after_pop, cfa_base::sp, 8, false);
    if (e.after_ret < size) set(*r++, e.after_ret, cfa_base::fp, 16, true);
  }
  return true;
}

}  // namespace

result<function_desc> frame_pointer(abi a, uint64_t start, uint32_t size, uint32_t after_push,
                                    uint32_t after_set_fp, span<const epilogue> epilogues) {
  if (a == abi::amd64) {
    function_desc f;
    if (amd64_frame_pointer_rows(start, size, after_push, after_set_fp, epilogues, f)) return f;
  }
  return frame_pointer_general(a, start, size, after_push, after_set_fp, epilogues);
}

result<void> frame_pointer(function_desc& out, abi a, uint64_t start, uint32_t size,
                           uint32_t after_push, uint32_t after_set_fp,
                           span<const epilogue> epilogues) {
  if (a == abi::amd64 &&
      amd64_frame_pointer_rows(start, size, after_push, after_set_fp, epilogues, out))
    return {};
  auto f = frame_pointer_general(a, start, size, after_push, after_set_fp, epilogues);
  if (!f) return std::move(f).error();
  out = std::move(f).value();
  return {};
}

result<function_desc> sp_frame(abi a, uint64_t start, uint32_t size, uint32_t after_alloc,
                               int32_t frame_bytes, span<const epilogue> epilogues) {
  frame_builder b(a);
  b.stack_alloc(after_alloc, frame_bytes);
  add_epilogues(b, size, epilogues, [&](uint32_t at) { b.stack_free(at, frame_bytes); });
  return b.finish(start, size);
}

result<function_desc> trampoline(abi a, uint64_t start, uint32_t size, uint32_t after_alloc,
                                 int32_t frame_bytes, uint32_t after_free) {
  if (a != abi::amd64) {
    // AArch64 must save the link register before calling: stp x29, x30 / ldp x29, x30.
    frame_builder b(a);
    b.push_frame_pointer(after_alloc, after_alloc);
    b.def_cfa_register(after_alloc, reg::sp);
    b.pop_frame_pointer(after_free);
    return b.finish(start, size);
  }
  const epilogue e{after_free, size};
  return sp_frame(a, start, size, after_alloc, frame_bytes, span<const epilogue>(&e, 1));
}

}  // namespace recipes
}  // namespace jitunwind
