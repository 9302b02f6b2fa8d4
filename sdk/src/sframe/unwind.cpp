// One unwind step and the multi-table unwinder. Every value read from the target may be
// garbage: the step only computes addresses with modular arithmetic, reads through the caller's
// reader, and refuses to go anywhere but strictly up the stack, so a walk always ends.
#include <jitunwind/sframe.h>

#include "common/error.hpp"
#include "sframe/format.hpp"

namespace jitunwind::sframe {

using jitunwind::detail::make_error;

namespace {

// AArch64 pointer authentication puts the signature in the bits above the virtual address
// size. Linux user space uses 48-bit addresses by default (bit 55 selects the lower half), so
// clearing bits 48..63 recovers the return address. 52-bit user address spaces (opt-in with
// mmap hints) would need the real mask from the target's NT_ARM_PAC_MASK.
constexpr uint64_t pac_strip_mask = (uint64_t{1} << 48) - 1;

bool read_word(const memory_reader& reader, uint64_t address, bool big, uint64_t& out) {
  if (reader.read == nullptr) return false;
  uint8_t buf[8];
  if (!reader.read(reader.user, address, buf, sizeof buf)) return false;
  out = detail::load(buf, 8, big);
  return true;
}

step_result stop(const regs& callee, stop_reason why) {
  step_result r;
  r.ok = false;
  r.caller = callee;
  r.reason = why;
  return r;
}

}  // namespace

const char* to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::outermost:
      return "outermost";
    case stop_reason::no_table:
      return "no_table";
    case stop_reason::unreadable:
      return "unreadable";
    case stop_reason::no_progress:
      return "no_progress";
    case stop_reason::depth_limit:
      return "depth_limit";
    case stop_reason::bad_rule:
      return "bad_rule";
    case stop_reason::zero_pc:
      return "zero_pc";
    case stop_reason::unsupported_rule:
      return "unsupported_rule";
  }
  return "unknown";
}

namespace {

// The value of DWARF register `n` in the callee's frame, if the step has it: SP, FP, and the
// AArch64 link register in the innermost frame (further up it was overwritten by calls).
bool register_value(abi target, uint8_t n, const regs& callee, bool innermost, uint64_t& out) {
  const dwarf_regs r = dwarf_registers(target);
  if (n == r.sp) {
    out = callee.sp;
  } else if (n == r.fp) {
    out = callee.fp;
  } else if (target != abi::amd64 && n == r.ra && innermost) {
    out = callee.lr;
  } else {
    return false;
  }
  return true;
}

uint64_t plus(uint64_t base, int32_t offset) {
  return base + static_cast<uint64_t>(static_cast<int64_t>(offset));
}

// A v3 rule naming a register (RA or FP): its value plus `offset`, or the word there when
// `saved`. Nothing (and `why`) if the step lacks the register or cannot read the word.
bool register_rule(abi target, uint8_t reg, int32_t offset, bool saved, const regs& callee,
                   bool innermost, const memory_reader& reader, uint64_t& out, stop_reason& why) {
  uint64_t base = 0;
  if (!register_value(target, reg, callee, innermost, base)) {
    why = stop_reason::unsupported_rule;
    return false;
  }
  out = plus(base, offset);
  if (saved && !read_word(reader, out, detail::big_endian(target), out)) {
    why = stop_reason::unreadable;
    return false;
  }
  return true;
}

}  // namespace

step_result step(abi target, const frame_row& row, const regs& callee, bool innermost,
                 const memory_reader& reader) noexcept {
  if (target == abi::s390x) return stop(callee, stop_reason::unsupported_rule);
  if (row.ra == ra_rule::undefined) return stop(callee, stop_reason::outermost);
  // The link register only holds this frame's return address in the interrupted frame; further
  // up it has been overwritten by calls.
  if (row.ra == ra_rule::in_register && (!innermost || target == abi::amd64))
    return stop(callee, stop_reason::bad_rule);
  const bool big = detail::big_endian(target);
  uint64_t cfa = 0;
  if (row.cfa == cfa_base::reg) {
    if (!register_value(target, row.cfa_reg, callee, innermost, cfa))
      return stop(callee, stop_reason::unsupported_rule);
    cfa = plus(cfa, row.cfa_offset);
  } else {
    cfa = plus(row.cfa == cfa_base::sp ? callee.sp : callee.fp, row.cfa_offset);
  }
  if (row.cfa_deref && !read_word(reader, cfa, big, cfa))
    return stop(callee, stop_reason::unreadable);
  // The caller's SP is the CFA: it must be strictly above the callee's SP, or a corrupt table
  // or stack could make the walk loop. The one exception is an AArch64 leaf interrupted before
  // it moved SP (CFA = SP, RA still in the link register): that happens only for the innermost
  // frame, so it cannot repeat. A misaligned CFA cannot be a real frame either.
  const bool leaf_in_lr = innermost && row.ra == ra_rule::in_register;
  if (cfa < callee.sp || (cfa == callee.sp && !leaf_in_lr))
    return stop(callee, stop_reason::no_progress);
  if (cfa % 8 != 0) return stop(callee, stop_reason::bad_rule);

  uint64_t ra = 0;
  switch (row.ra) {
    case ra_rule::saved:
      if (!read_word(reader, plus(cfa, row.ra_offset), big, ra))
        return stop(callee, stop_reason::unreadable);
      break;
    case ra_rule::in_register:
      ra = callee.lr;
      break;
    case ra_rule::register_value:
    case ra_rule::register_saved: {
      stop_reason why = stop_reason::bad_rule;
      if (!register_rule(target, row.ra_reg, row.ra_offset, row.ra == ra_rule::register_saved,
                         callee, innermost, reader, ra, why))
        return stop(callee, why);
      break;
    }
    case ra_rule::undefined:
      break;
  }
  if (row.ra_mangled) ra &= pac_strip_mask;

  uint64_t fp = callee.fp;
  switch (row.fp) {
    case fp_rule::unchanged:
      break;
    case fp_rule::saved:
      if (!read_word(reader, plus(cfa, row.fp_offset), big, fp))
        return stop(callee, stop_reason::unreadable);
      break;
    case fp_rule::register_value:
    case fp_rule::register_saved: {
      stop_reason why = stop_reason::bad_rule;
      if (!register_rule(target, row.fp_reg, row.fp_offset, row.fp == fp_rule::register_saved,
                         callee, innermost, reader, fp, why))
        return stop(callee, why);
      break;
    }
  }
  if (ra == 0) return stop(callee, stop_reason::zero_pc);

  step_result r;
  r.ok = true;
  r.caller.pc = ra;
  r.caller.sp = cfa;
  r.caller.fp = fp;
  r.caller.lr = callee.lr;
  return r;
}

result<void> unwinder::add(const table* t) {
  if (t == nullptr) return make_error(errc::invalid_argument, "sframe unwinder: null table");
  if (t->info().target != abi_)
    return make_error(errc::invalid_argument,
                      "sframe unwinder: table for %s added to an unwinder for %s",
                      to_string(t->info().target), to_string(abi_));
  tables_.push_back(t);
  return {};
}

std::optional<lookup_result> unwinder::find(uint64_t pc) const noexcept {
  std::optional<lookup_result> out(std::in_place);
  if (!find(pc, *out)) out.reset();
  return out;
}

bool unwinder::find(uint64_t pc, lookup_result& out) const noexcept {
  for (const table* t : tables_) {
    const auto range = t->pc_range();
    if (pc < range.first || pc >= range.second) continue;
    if (t->find(pc, out)) return true;
  }
  return false;
}

unwinder::trace unwinder::unwind(const regs& start, const memory_reader& reader,
                                 size_t max_frames) const {
  trace t;
  t.reason = stop_reason::depth_limit;
  if (max_frames == 0) return t;
  t.pcs.reserve(max_frames < 64 ? max_frames : 64);
  t.pcs.push_back(start.pc);
  regs cur = start;
  lookup_result hit;
  bool below_signal = false;
  for (bool innermost = true;; innermost = false) {
    if (t.pcs.size() >= max_frames) {
      t.reason = stop_reason::depth_limit;
      break;
    }
    // A return address points after the call; the call itself (pc - 1) is what belongs to the
    // caller's function, which matters when the call was the function's last instruction. Not
    // so for the frame below a signal frame (its PC is the interrupted instruction) and for a
    // signal trampoline, entered at its first byte by the kernel's fake return address.
    const bool exact = innermost || below_signal;
    bool found = find(exact ? cur.pc : cur.pc - 1, hit);
    if (!exact && (!found || cur.pc - hit.function_start >= hit.function_size)) {
      lookup_result at_pc;
      if (find(cur.pc, at_pc) && at_pc.signal_frame) {
        hit = at_pc;
        found = true;
      }
    }
    if (!found) {
      t.reason = stop_reason::no_table;
      break;
    }
    const step_result s = step(abi_, hit.row, cur, innermost, reader);
    if (!s.ok) {
      t.reason = s.reason;
      break;
    }
    t.pcs.push_back(s.caller.pc);
    cur = s.caller;
    below_signal = hit.signal_frame;
  }
  return t;
}

}  // namespace jitunwind::sframe
