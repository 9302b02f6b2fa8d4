// `.eh_frame` / `.debug_frame` -> frame rows (see cfi.h): the one decoder of DWARF call frame
// information in the tree (the SDK's conversions, the CLI and jitwalk's native tables all use
// it). The CFA program of each FDE is run the way an unwinder runs it; at every location where
// the rules change, the DWARF state is turned into a `frame_row` and the callee-saved registers
// into `saved_register` changes. A state the frame model (or SFrame) cannot express opens a
// hole at that location, named with the rule: the whole function is left out
// (partial_input::whole_functions), or the rows around the hole are kept as pieces
// (partial_input::usable_rows). A hole of the lazy PLT's expression that runs to the FDE's end
// becomes a PCMASK function.
#include <jitunwind/cfi.h>

#include "cfi/reader.hpp"
#include "common/error.hpp"
#include "frame/row_rules.hpp"
#include "sframe/format.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

namespace jitunwind::cfi {

using detail::format;
using detail::make_error;

namespace {

using dwarf::reader;

// A hostile FDE may nest remember_state or name many registers; real code stays far below.
constexpr size_t max_remember_depth = 64;
constexpr size_t max_registers_with_rules = 64;
constexpr size_t max_augmentation_length = 16;

enum class rule_kind : uint8_t {
  unspecified,
  same,
  undefined,
  offset,
  val_offset,
  reg,
  expr,
  val_expr
};

struct reg_rule {
  uint64_t reg = 0;
  rule_kind kind = rule_kind::unspecified;
  int64_t value = 0;  // offset (factored already), or the other register
};

struct cfa_rule {
  bool expr = false;
  uint64_t reg = 0;
  int64_t offset = 0;
  // For messages: an expression of the form *(reg + off) (realigned stacks: CFA = *(rbp-8)).
  bool deref_form = false;
  // Not 0: the lazy PLT's expression, whose CFA grows by 8 at this entry offset.
  uint8_t plt_threshold = 0;
};

// The one CFA expression linkers write for a lazy .plt (x86-64 psABI; GNU ld and lld): in each
// 16-byte entry CFA = rsp + 8 up to its `push`, rsp + 16 after it, i.e.
// DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit<T>; DW_OP_ge; DW_OP_lit3;
// DW_OP_shl; DW_OP_plus. Returns T (the entry offset after the push), or 0 for any other block.
uint8_t plt_expression_threshold(std::span<const uint8_t> b) {
  static constexpr uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
  static constexpr uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
  if (b.size() != sizeof head + 1 + sizeof tail) return 0;
  if (!std::equal(std::begin(head), std::end(head), b.begin())) return 0;
  if (!std::equal(std::begin(tail), std::end(tail), b.begin() + sizeof head + 1)) return 0;
  const uint8_t lit = b[sizeof head];
  if (lit <= 0x30 || lit > 0x3f) return 0;  // DW_OP_lit1..lit15
  return static_cast<uint8_t>(lit - 0x30);
}

struct state {
  cfa_rule cfa;
  std::vector<reg_rule> regs;  // sorted by register; no `unspecified` entries
  bool ra_mangled = false;
};

struct cie_info {
  uint8_t version = 1;
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_column = 0;
  uint8_t fde_encoding = dwarf::pe_absptr;
  uint8_t address_size = 8;
  bool has_z = false;
  bool pac_key_b = false;
  size_t insn_begin = 0, insn_end = 0;
  errc problem_code = errc::ok;  // not ok: every FDE of this CIE is left out with `problem`
  std::string problem;
};

struct frame_regs {
  uint64_t sp, fp, ra;
};

frame_regs frame_registers(abi a) {
  if (a == abi::amd64) return {dwarf::amd64_rsp, dwarf::amd64_rbp, dwarf::amd64_rip};
  return {dwarf::aarch64_sp, dwarf::aarch64_x29, dwarf::aarch64_x30};
}

std::string reg_name(abi a, uint64_t r) {
  if (a == abi::amd64) {
    static const char* const names[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi",
                                        "rbp", "rsp", "r8",  "r9",  "r10", "r11",
                                        "r12", "r13", "r14", "r15", "rip"};
    if (r < std::size(names)) return names[r];
  } else {
    if (r <= 30) return "x" + std::to_string(r);
    if (r == 31) return "sp";
    if (r >= 64 && r <= 95) return "v" + std::to_string(r - 64);
  }
  return "DWARF register " + std::to_string(r);
}

std::string signed_text(int64_t v) {
  return v < 0 ? "- " + std::to_string(-static_cast<uint64_t>(v)) : "+ " + std::to_string(v);
}

const char* rule_text(rule_kind k) {
  switch (k) {
    case rule_kind::unspecified:
      return "no rule";
    case rule_kind::same:
      return "same value";
    case rule_kind::undefined:
      return "undefined";
    case rule_kind::offset:
      return "saved at an offset";
    case rule_kind::val_offset:
      return "CFA + offset (val_offset)";
    case rule_kind::reg:
      return "in another register";
    case rule_kind::expr:
      return "saved by a DWARF expression";
    case rule_kind::val_expr:
      return "a DWARF expression value";
  }
  return "?";
}

bool fits_int32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// Runs CFA programs and collects rows. One per FDE.
class evaluator {
 public:
  /// Rows of [begin, begin + f.size) of the FDE's code (f.start is left to the caller).
  struct piece {
    uint64_t begin = 0;
    function_desc f;
  };
  /// [begin, end) of the FDE's code whose rules cannot be expressed, and why (at `begin`).
  struct hole {
    uint64_t begin = 0, end = 0;
    std::string reason;
    bool plt = false;  // every location in it has the lazy PLT's expression, with `threshold`
    uint8_t threshold = 0;
  };

  evaluator(abi a, const cie_info& cie, uint64_t start, uint64_t range, bool sframe_check,
            bool keep_pieces, const dwarf::pointer_bases& bases, uint64_t section_address,
            std::span<const uint8_t> section)
      : abi_(a),
        regs_(frame_registers(a)),
        cie_(cie),
        start_(start),
        range_(range),
        sframe_check_(sframe_check),
        keep_pieces_(keep_pieces),
        bases_(bases),
        section_address_(section_address),
        section_(section) {
    bases_.function = start;
  }

  // Runs [begin, end) of the section. `initial`: the CIE's instructions (no advances; their
  // result is what DW_CFA_restore goes back to).
  bool run(size_t begin, size_t end, bool initial) {
    reader r(section_, begin, end, section_address_);
    initial_ = initial;
    while (!r.at_end() && !done_) {
      const size_t at = r.pos();
      const uint8_t op = r.u8();
      if (!step(r, op)) return false;
      if (r.bad())
        return fail(errc::malformed, format("CFA instruction 0x%02x at section offset "
                                            "0x%zx runs past its entry",
                                            op, at));
    }
    if (initial) initial_state_ = s_;
    return true;
  }

  // The rows once the program ran (commits the last location). False when the function is
  // left out whole (failure() says why).
  bool finish() {
    if (!done_ && !commit()) return false;
    if (in_hole_) {
      holes_.back().end = range_;
      in_hole_ = false;
    } else {
      close_piece(range_);
    }
    if (!holes_.empty() && lazy_plt_entries(holes_.back())) {
      const hole h = std::move(holes_.back());
      holes_.pop_back();
      pieces_.push_back({h.begin, plt_function(h.threshold, range_ - h.begin)});
    }
    if (!holes_.empty() && !keep_pieces_) return unsupported(holes_.front().reason);
    return true;
  }

  std::vector<piece>& pieces() { return pieces_; }
  const std::vector<hole>& holes() const { return holes_; }
  errc failure_code() const { return failure_code_; }
  const std::string& failure() const { return failure_; }

 private:
  bool fail(errc code, std::string why) {
    if (failure_code_ == errc::ok) {
      failure_code_ = code;
      failure_ = std::move(why);
    }
    return false;
  }
  bool unsupported(std::string why) { return fail(errc::unsupported, std::move(why)); }
  bool malformed(std::string why) { return fail(errc::malformed, std::move(why)); }

  bool advance(uint64_t delta) {
    if (initial_) return malformed("a CIE's initial instructions advance the location");
    if (delta == 0) return true;
    if (!commit()) return false;
    if (delta >= range_ - loc_) {
      done_ = true;  // rows at or past the end describe no code
      return true;
    }
    loc_ += delta;
    return true;
  }

  reg_rule* find(uint64_t reg) {
    for (reg_rule& x : s_.regs)
      if (x.reg == reg) return &x;
    return nullptr;
  }
  reg_rule rule_of(const state& s, uint64_t reg) const {
    for (const reg_rule& x : s.regs)
      if (x.reg == reg) return x;
    return {reg, rule_kind::unspecified, 0};
  }

  bool set(uint64_t reg, rule_kind kind, int64_t value) {
    if (reg_rule* x = find(reg)) {
      if (kind == rule_kind::unspecified) {
        s_.regs.erase(s_.regs.begin() + (x - s_.regs.data()));
      } else {
        x->kind = kind;
        x->value = value;
      }
      return true;
    }
    if (kind == rule_kind::unspecified) return true;
    if (s_.regs.size() >= max_registers_with_rules)
      return unsupported(format("more than %zu registers with rules", max_registers_with_rules));
    auto it = std::lower_bound(s_.regs.begin(), s_.regs.end(), reg,
                               [](const reg_rule& a, uint64_t b) { return a.reg < b; });
    s_.regs.insert(it, reg_rule{reg, kind, value});
    return true;
  }

  bool restore(uint64_t reg) {
    if (initial_) return set(reg, rule_kind::unspecified, 0);
    const reg_rule r = rule_of(initial_state_, reg);
    return set(reg, r.kind, r.value);
  }

  // offset * data alignment, or a value no row accepts when it overflows.
  int64_t factored(int64_t v) const {
    int64_t out = 0;
    if (__builtin_mul_overflow(v, cie_.data_align, &out))
      return std::numeric_limits<int64_t>::max();
    return out;
  }
  static int64_t as_signed(uint64_t v) {
    return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(v);
  }

  bool skip_block(reader& r, size_t* begin = nullptr, uint64_t* length = nullptr) {
    const uint64_t n = r.uleb();
    if (begin) *begin = r.pos();
    if (length) *length = n;
    return r.skip(n) || malformed("a DWARF expression runs past its entry");
  }

  // Recognizes DW_OP_breg<N> <sleb>; DW_OP_deref (what realigned stacks use for the CFA) and the
  // lazy PLT's expression.
  void classify_cfa_expression(size_t begin, uint64_t length) {
    s_.cfa.plt_threshold = plt_expression_threshold(section_.subspan(begin, length));
    reader e(section_, begin, begin + length, section_address_);
    const uint8_t op = e.u8();
    if (op >= 0x70 && op <= 0x8f) {
      const int64_t off = e.sleb();
      if (e.u8() == 0x06 && e.at_end() && !e.bad()) {
        s_.cfa.deref_form = true;
        s_.cfa.reg = op - 0x70u;
        s_.cfa.offset = off;
      }
    }
  }

  bool step(reader& r, uint8_t op) {
    const uint8_t low = op & 0x3f;
    switch (op >> 6) {
      case 1:
        return advance(low * cie_.code_align);
      case 2:
        return set(low, rule_kind::offset, factored(as_signed(r.uleb())));
      case 3:
        return restore(low);
      default:
        break;
    }
    switch (op) {
      case dwarf::cfa_nop:
        return true;
      case dwarf::cfa_set_loc: {
        const char* why = nullptr;
        auto a = r.pointer(cie_.fde_encoding, cie_.address_size, bases_, why);
        if (r.bad()) return true;  // reported by run()
        if (!a) return unsupported(format("DW_CFA_set_loc: %s", why));
        if (*a < start_ + loc_)
          return malformed(format("DW_CFA_set_loc to 0x%llx moves back from +0x%llx",
                                  static_cast<unsigned long long>(*a),
                                  static_cast<unsigned long long>(loc_)));
        return advance(*a - start_ - loc_);
      }
      case dwarf::cfa_advance_loc1:
        return advance(r.uint(1) * cie_.code_align);
      case dwarf::cfa_advance_loc2:
        return advance(r.uint(2) * cie_.code_align);
      case dwarf::cfa_advance_loc4:
        return advance(r.uint(4) * cie_.code_align);
      case dwarf::cfa_offset_extended: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::offset, factored(as_signed(r.uleb())));
      }
      case dwarf::cfa_restore_extended:
        return restore(r.uleb());
      case dwarf::cfa_undefined:
        return set(r.uleb(), rule_kind::undefined, 0);
      case dwarf::cfa_same_value:
        return set(r.uleb(), rule_kind::same, 0);
      case dwarf::cfa_register: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::reg, as_signed(r.uleb()));
      }
      case dwarf::cfa_remember_state:
        if (stack_.size() >= max_remember_depth)
          return unsupported(
              format("DW_CFA_remember_state nested deeper than %zu", max_remember_depth));
        stack_.push_back(s_);
        return true;
      case dwarf::cfa_restore_state:
        if (stack_.empty()) return malformed("DW_CFA_restore_state without remember_state");
        // The CFA rule is part of the state (GCC's and LLVM's unwinders restore it too).
        s_ = std::move(stack_.back());
        stack_.pop_back();
        return true;
      case dwarf::cfa_def_cfa:
        s_.cfa = {false, r.uleb(), 0, false};
        s_.cfa.offset = as_signed(r.uleb());
        return true;
      case dwarf::cfa_def_cfa_sf:
        s_.cfa = {false, r.uleb(), 0, false};
        s_.cfa.offset = factored(r.sleb());
        return true;
      case dwarf::cfa_def_cfa_register:
        s_.cfa.reg = r.uleb();
        s_.cfa.expr = false;
        s_.cfa.deref_form = false;
        s_.cfa.plt_threshold = 0;
        return true;
      case dwarf::cfa_def_cfa_offset:
        s_.cfa.offset = as_signed(r.uleb());
        return true;
      case dwarf::cfa_def_cfa_offset_sf:
        s_.cfa.offset = factored(r.sleb());
        return true;
      case dwarf::cfa_def_cfa_expression: {
        size_t begin = 0;
        uint64_t length = 0;
        if (!skip_block(r, &begin, &length)) return false;
        s_.cfa = {true, 0, 0, false};
        classify_cfa_expression(begin, length);
        return true;
      }
      case dwarf::cfa_expression:
      case dwarf::cfa_val_expression: {
        const uint64_t reg = r.uleb();
        if (!skip_block(r)) return false;
        return set(reg, op == dwarf::cfa_expression ? rule_kind::expr : rule_kind::val_expr, 0);
      }
      case dwarf::cfa_offset_extended_sf: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::offset, factored(r.sleb()));
      }
      case dwarf::cfa_val_offset: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::val_offset, factored(as_signed(r.uleb())));
      }
      case dwarf::cfa_val_offset_sf: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::val_offset, factored(r.sleb()));
      }
      case dwarf::cfa_gnu_args_size:
        r.uleb();  // for exception handling only
        return true;
      case dwarf::cfa_gnu_negative_offset_extended: {
        const uint64_t reg = r.uleb();
        return set(reg, rule_kind::offset, factored(-as_signed(r.uleb())));
      }
      case dwarf::cfa_aarch64_negate_ra_state:
        if (abi_ == abi::amd64)
          return unsupported(
              "DW_CFA 0x2d (AArch64 negate_ra_state, SPARC GNU_window_save) on "
              "AMD64");
        s_.ra_mangled = !s_.ra_mangled;
        return true;
      default:
        return unsupported(format("unknown CFA instruction 0x%02x", op));
    }
  }

  std::string at_text() const {
    return format("at +0x%llx: ", static_cast<unsigned long long>(loc_));
  }

  // The DWARF state as a frame row, or false with the reason.
  bool to_row(frame_row& row) {
    const reg_rule ra = rule_of(s_, regs_.ra);
    if (ra.kind == rule_kind::undefined) {
      row = outermost_row(static_cast<uint32_t>(loc_));
      return true;
    }
    row = frame_row{};
    row.pc_offset = static_cast<uint32_t>(loc_);
    const cfa_rule& c = s_.cfa;
    if (c.expr) {
      if (c.deref_form)
        return unsupported(at_text() + "CFA = *(" + reg_name(abi_, c.reg) + " " +
                           signed_text(c.offset) +
                           ") (a DWARF expression; an SFrame v3 flexible FDE can express it, "
                           "SFrame v2 cannot)");
      return unsupported(at_text() + "CFA is a DWARF expression (SFrame cannot express it)");
    }
    if (c.reg == regs_.sp) {
      row.cfa = cfa_base::sp;
    } else if (c.reg == regs_.fp) {
      row.cfa = cfa_base::fp;
    } else {
      return unsupported(at_text() + "CFA = " + reg_name(abi_, c.reg) + " " +
                         signed_text(c.offset) + " (SFrame bases the CFA on SP or FP only)");
    }
    if (!fits_int32(c.offset))
      return unsupported(at_text() + format("CFA offset %lld does not fit 32 bits",
                                            static_cast<long long>(c.offset)));
    row.cfa_offset = static_cast<int32_t>(c.offset);

    const std::string ra_name = reg_name(abi_, regs_.ra);
    if (ra.kind == rule_kind::offset && fits_int32(ra.value)) {
      row.ra = ra_rule::saved;
      row.ra_offset = static_cast<int32_t>(ra.value);
    } else if (abi_ != abi::amd64 &&
               (ra.kind == rule_kind::unspecified || ra.kind == rule_kind::same)) {
      row.ra = ra_rule::in_register;
      row.ra_offset = 0;
    } else {
      return unsupported(at_text() + "return address (" + ra_name + ") " + rule_text(ra.kind));
    }
    if (s_.ra_mangled) row.ra_mangled = true;  // with the CIE's key (function_desc::pauth_key)

    const reg_rule fp = rule_of(s_, regs_.fp);
    if (fp.kind == rule_kind::offset && fits_int32(fp.value)) {
      row.fp = fp_rule::saved;
      row.fp_offset = static_cast<int32_t>(fp.value);
    } else if (fp.kind != rule_kind::unspecified && fp.kind != rule_kind::same) {
      return unsupported(at_text() + "frame pointer (" + reg_name(abi_, regs_.fp) + ") " +
                         rule_text(fp.kind));
    }
    // After an epilogue's `pop rbp` GCC's and LLVM's CFI still say "rbp at CFA-16" until the
    // return (they emit no .cfi_restore): the slot is below the stack pointer, dead, and rbp holds
    // that value again.
    if (restore_popped_fp && row.fp == fp_rule::saved && row.cfa == cfa_base::sp &&
        !row.cfa_deref && row.fp_offset < -row.cfa_offset) {
      row.fp = fp_rule::unchanged;
      row.fp_offset = 0;
    }
    const reg_rule sp = rule_of(s_, regs_.sp);
    if (sp.kind != rule_kind::unspecified && !(sp.kind == rule_kind::val_offset && sp.value == 0))
      return unsupported(at_text() + "stack pointer (" + reg_name(abi_, regs_.sp) + ") " +
                         rule_text(sp.kind) + " (SFrame takes the caller's SP to be the CFA)");
    if (sframe_check_) {
      sframe::detail::fre_fields unused;
      if (const char* why = sframe::detail::row_to_fre(abi_, row, unused))
        return unsupported(at_text() + why);
    }
    return true;
  }

  // The callee-saved registers' rules now, sorted by register (those not "unchanged").
  void saved_view(std::vector<saved_register>& out) const {
    out.clear();
    for (const reg_rule& x : s_.regs) {
      if (x.reg == regs_.sp || x.reg == regs_.fp || x.reg == regs_.ra || x.reg > 0xffff) continue;
      saved_register s{static_cast<uint32_t>(loc_), static_cast<uint16_t>(x.reg),
                       saved_rule::undefined, 0};
      if (x.kind == rule_kind::same) continue;
      if (x.kind == rule_kind::offset && fits_int32(x.value) && x.value % 8 == 0) {
        s.rule = saved_rule::at_cfa;
        s.cfa_offset = static_cast<int32_t>(x.value);
      }
      out.push_back(s);
    }
  }

  // Records the rules in effect at loc_ (called once per location).
  bool commit() {
    frame_row row;
    if (!to_row(row)) return enter_hole();
    if (in_hole_) {
      holes_.back().end = loc_;
      in_hole_ = false;
      // Without pieces the function is left out at its first hole (a PLT one included).
      if (!keep_pieces_) return unsupported(holes_.front().reason);
      piece_begin_ = loc_;
    }
    if (f_.rows.empty() || !same_rules(f_.rows.back(), row)) f_.rows.push_back(row);
    saved_view(view_);
    // Changes against the previous location's view (both sorted by register).
    size_t i = 0, j = 0;
    while (i < prev_view_.size() || j < view_.size()) {
      if (j == view_.size() ||
          (i < prev_view_.size() && prev_view_[i].dwarf_reg < view_[j].dwarf_reg)) {
        f_.saved_registers.push_back(
            {static_cast<uint32_t>(loc_), prev_view_[i].dwarf_reg, saved_rule::unchanged, 0});
        ++i;
      } else if (i == prev_view_.size() || view_[j].dwarf_reg < prev_view_[i].dwarf_reg) {
        f_.saved_registers.push_back(view_[j++]);
      } else {
        if (view_[j].rule != prev_view_[i].rule || view_[j].cfa_offset != prev_view_[i].cfa_offset)
          f_.saved_registers.push_back(view_[j]);
        ++i;
        ++j;
      }
    }
    std::swap(prev_view_, view_);
    return true;
  }

  // The rules at loc_ cannot be expressed (to_row failed): a hole starts here, or goes on. A
  // malformed program still leaves the whole function out.
  bool enter_hole() {
    if (failure_code_ != errc::unsupported) return false;
    const bool plt = abi_ == abi::amd64 && s_.cfa.expr && s_.cfa.plt_threshold != 0;
    std::string why = std::move(failure_);
    failure_code_ = errc::ok;
    failure_.clear();
    if (in_hole_) {
      hole& h = holes_.back();
      h.plt = h.plt && plt && h.threshold == s_.cfa.plt_threshold;
    } else {
      close_piece(loc_);
      holes_.push_back(
          {loc_, range_, std::move(why), plt, plt ? s_.cfa.plt_threshold : uint8_t{0}});
      in_hole_ = true;
    }
    // Without pieces, only the lazy PLT's expression may go on (to the FDE's end).
    return keep_pieces_ || holes_.back().plt || unsupported(holes_.front().reason);
  }

  // The open piece ends at `end` (offsets become the piece's own).
  void close_piece(uint64_t end) {
    if (!f_.rows.empty()) {
      const auto base = static_cast<uint32_t>(piece_begin_);
      for (frame_row& r : f_.rows) r.pc_offset -= base;
      for (saved_register& r : f_.saved_registers) r.pc_offset -= base;
      f_.size = static_cast<uint32_t>(end - piece_begin_);
      pieces_.push_back({piece_begin_, std::move(f_)});
    }
    f_ = function_desc{};
    prev_view_.clear();
  }

  // The hole is the lazy PLT's entries: its expression from a 16-byte boundary to the FDE's
  // end, with the return address at CFA - 8 and the frame pointer untouched.
  bool lazy_plt_entries(const hole& h) const {
    if (!h.plt || h.end != range_ || (start_ + h.begin) % 16 != 0) return false;
    const reg_rule ra = rule_of(s_, regs_.ra), fp = rule_of(s_, regs_.fp);
    return ra.kind == rule_kind::offset && ra.value == -8 &&
           (fp.kind == rule_kind::unspecified || fp.kind == rule_kind::same);
  }

  // Every 16-byte entry: CFA = rsp + 8, then rsp + 16 from `threshold` on.
  static function_desc plt_function(uint8_t threshold, uint64_t size) {
    function_desc f;
    f.size = static_cast<uint32_t>(size);
    f.pcmask_rep = 16;
    frame_row before;  // CFA = SP + 8, RA at CFA - 8, FP unchanged
    before.pc_offset = 0;
    frame_row after = before;
    after.pc_offset = threshold;
    after.cfa_offset = 16;
    f.rows = {before, after};
    return f;
  }

  static bool same_rules(const frame_row& a, const frame_row& b) {
    frame_row x = a;
    x.pc_offset = b.pc_offset;
    return x == b;
  }

  abi abi_;
  frame_regs regs_;
  const cie_info& cie_;

 public:
  bool restore_popped_fp = false;  // decoder_options::restore_popped_fp

 private:
  uint64_t start_, range_;
  bool sframe_check_;
  bool keep_pieces_;
  dwarf::pointer_bases bases_;
  uint64_t section_address_;
  std::span<const uint8_t> section_;

  bool initial_ = false;
  bool done_ = false;
  uint64_t loc_ = 0;
  state s_;
  state initial_state_;
  std::vector<state> stack_;
  function_desc f_;  // the open piece, from piece_begin_
  uint64_t piece_begin_ = 0;
  std::vector<piece> pieces_;
  std::vector<hole> holes_;
  bool in_hole_ = false;
  std::vector<saved_register> view_, prev_view_;
  errc failure_code_ = errc::ok;
  std::string failure_;
};

class section_decoder {
 public:
  section_decoder(std::span<const uint8_t> bytes, const decoder_options& o) : b_(bytes), o_(o) {}

  result<decoded_cfi> run() {
    size_t off = 0;
    const bool eh = o_.kind == section_kind::eh_frame;
    std::optional<error> broken;  // an entry the walk cannot get past
    while (off < b_.size()) {
      reader r(b_, off, b_.size(), o_.section_address);
      if (b_.size() - off < 4) {
        broken = make_error(errc::malformed,
                            "cfi: entry at offset 0x%zx: %zu trailing bytes, too short for a length",
                            off, b_.size() - off);
        break;
      }
      uint64_t length = r.uint(4);
      if (length == 0) {  // terminator
        off += 4;
        break;
      }
      bool dwarf64 = false;
      if (length == 0xffffffff) {
        dwarf64 = true;
        length = r.uint(8);
        if (r.bad()) {
          broken = make_error(errc::malformed,
                              "cfi: entry at offset 0x%zx: 64-bit length truncated", off);
          break;
        }
      }
      const size_t content = r.pos();
      const size_t id_size = dwarf64 && !eh ? 8 : 4;
      if (length > b_.size() - content) {
        broken = make_error(errc::malformed,
                            "cfi: entry at offset 0x%zx: length %llu runs past the section (%zu "
                            "bytes)",
                            off, static_cast<unsigned long long>(length), b_.size());
        break;
      }
      if (length < id_size) {
        broken = make_error(errc::malformed,
                            "cfi: entry at offset 0x%zx: length %llu leaves no room for its CIE id",
                            off, static_cast<unsigned long long>(length));
        break;
      }
      const size_t end = content + static_cast<size_t>(length);
      reader e(b_, content, end, o_.section_address);
      const uint64_t id = e.uint(id_size);
      const uint64_t cie_id = eh ? 0 : (id_size == 8 ? ~uint64_t{0} : 0xffffffffu);
      if (id == cie_id) {
        ++out_.cie_count;
      } else {
        ++out_.fde_count;
        decode_fde(off, content, id, e, end);
      }
      off = end;
    }
    if (broken) {
      // Keeping what came before is for readers that use what they can (usable_rows).
      if (o_.partial != partial_input::usable_rows || out_.fde_count == 0) return *broken;
      leave_out(off, 0, 0, errc::malformed, broken->message());
    }
    out_.section_size = off;
    finish();
    return std::move(out_);
  }

 private:
  void leave_out(size_t fde, uint64_t start, uint64_t size, errc code, std::string why) {
    out_.left_out.push_back({start, size, static_cast<uint32_t>(fde), code, std::move(why)});
  }

  // The CIE at `off`, parsed once.
  const cie_info& cie_at(size_t off) {
    auto it = cies_.find(off);
    if (it != cies_.end()) return it->second;
    cie_info c;
    parse_cie(off, c);
    return cies_.emplace(off, std::move(c)).first->second;
  }

  void parse_cie(size_t off, cie_info& c) {
    auto bad = [&](errc code, std::string why) {
      c.problem_code = code;
      c.problem = format("CIE at offset 0x%zx: ", off) + why;
    };
    const bool eh = o_.kind == section_kind::eh_frame;
    reader r(b_, off, b_.size(), o_.section_address);
    uint64_t length = r.uint(4);
    bool dwarf64 = false;
    if (length == 0xffffffff) {
      dwarf64 = true;
      length = r.uint(8);
    }
    if (r.bad() || length == 0 || length > r.left())
      return bad(errc::malformed, "not an entry inside the section");
    reader e(b_, r.pos(), r.pos() + static_cast<size_t>(length), o_.section_address);
    const size_t id_size = dwarf64 && !eh ? 8 : 4;
    const uint64_t id = e.uint(id_size);
    const uint64_t cie_id = eh ? 0 : (id_size == 8 ? ~uint64_t{0} : 0xffffffffu);
    if (e.bad() || id != cie_id)
      return bad(errc::malformed, "the FDE's CIE pointer leads to an FDE");
    c.version = e.u8();
    if (eh ? (c.version != 1 && c.version != 3)
           : (c.version != 1 && c.version != 3 && c.version != 4))
      return bad(errc::unsupported, format("version %u", c.version));
    const std::string_view aug = e.cstr(max_augmentation_length);
    if (e.bad()) return bad(errc::malformed, "augmentation string unterminated or too long");
    if (c.version == 4) {
      c.address_size = e.u8();
      const uint8_t segment_size = e.u8();
      if (c.address_size != 4 && c.address_size != 8)
        return bad(errc::unsupported, format("address size %u", c.address_size));
      if (segment_size != 0)
        return bad(errc::unsupported, format("segment selector size %u", segment_size));
    }
    c.code_align = e.uleb();
    c.data_align = e.sleb();
    c.ra_column = c.version == 1 ? e.u8() : e.uleb();
    if (e.bad()) return bad(errc::malformed, "truncated");
    if (c.code_align == 0 || c.code_align > 0xffff)
      return bad(errc::unsupported, format("code alignment factor %llu",
                                           static_cast<unsigned long long>(c.code_align)));
    if (c.data_align == 0 || c.data_align < -0xffff || c.data_align > 0xffff)
      return bad(errc::unsupported,
                 format("data alignment factor %lld", static_cast<long long>(c.data_align)));
    if (c.ra_column != frame_registers(o_.target).ra)
      return bad(errc::unsupported,
                 format("return address column %llu (expected %llu on %s)",
                        static_cast<unsigned long long>(c.ra_column),
                        static_cast<unsigned long long>(frame_registers(o_.target).ra),
                        to_string(o_.target)));
    if (!eh && aug.empty()) c.fde_encoding = dwarf::pe_absptr;
    if (!aug.empty()) {
      if (aug[0] != 'z') return bad(errc::unsupported, "augmentation \"" + std::string(aug) + "\"");
      c.has_z = true;
      const uint64_t aug_length = e.uleb();
      if (e.bad() || aug_length > e.left())
        return bad(errc::malformed, "augmentation data past the entry");
      reader a(b_, e.pos(), e.pos() + static_cast<size_t>(aug_length), o_.section_address);
      for (char ch : aug.substr(1)) {
        switch (ch) {
          case 'R':
            c.fde_encoding = a.u8();
            break;
          case 'L':
            a.u8();
            break;  // the LSDA pointer's encoding; FDEs skip it through 'z'
          case 'P': {
            // The personality routine: only its size matters here (its value, often indirect,
            // is for exception handling).
            const uint8_t enc = a.u8();
            if (enc == dwarf::pe_omit) break;
            if ((enc & 0x70) == dwarf::pe_aligned || !dwarf::known_pointer_format(enc))
              return bad(errc::unsupported, format("personality pointer encoding 0x%02x", enc));
            a.pointer_value(enc, c.address_size);
            break;
          }
          case 'S':
            break;  // signal frame: the rows are read as usual
          case 'B':
            c.pac_key_b = true;
            break;
          case 'G':
            break;  // MTE-tagged stack frames: no effect on unwinding rules
          default:
            return bad(errc::unsupported, format("augmentation character '%c'", ch));
        }
        if (a.bad()) return bad(errc::malformed, "augmentation data truncated");
      }
      e.skip(aug_length);
    }
    if (c.fde_encoding != dwarf::pe_omit && !dwarf::known_pointer_format(c.fde_encoding))
      return bad(errc::unsupported, format("FDE pointer encoding 0x%02x", c.fde_encoding));
    c.insn_begin = e.pos();
    c.insn_end = e.end();
  }

  void decode_fde(size_t off, size_t content, uint64_t id, reader& e, size_t end) {
    const bool eh = o_.kind == section_kind::eh_frame;
    size_t cie_off = 0;
    if (eh) {
      if (id > content) {
        return leave_out(off, 0, 0, errc::malformed,
                         format("FDE at offset 0x%zx: CIE pointer %llu leads before the section",
                                off, static_cast<unsigned long long>(id)));
      }
      cie_off = content - static_cast<size_t>(id);
    } else {
      if (id >= b_.size())
        return leave_out(off, 0, 0, errc::malformed,
                         format("FDE at offset 0x%zx: CIE offset 0x%llx past the section", off,
                                static_cast<unsigned long long>(id)));
      cie_off = static_cast<size_t>(id);
    }
    const cie_info& c = cie_at(cie_off);
    const std::string where = format("FDE at offset 0x%zx: ", off);
    if (c.problem_code != errc::ok) return leave_out(off, 0, 0, c.problem_code, where + c.problem);
    if (c.fde_encoding == dwarf::pe_omit)
      return leave_out(off, 0, 0, errc::malformed, where + "the CIE omits FDE addresses");

    dwarf::pointer_bases bases{o_.text_address, o_.data_address, std::nullopt};
    const char* why = nullptr;
    const auto start = e.pointer(c.fde_encoding, c.address_size, bases, why);
    if (e.bad()) return leave_out(off, 0, 0, errc::malformed, where + "address truncated");
    if (!start) return leave_out(off, 0, 0, errc::unsupported, where + "address: " + why);
    // The range has the format of the encoding, never an application.
    const auto range = e.pointer_value(c.fde_encoding & 0x0f, c.address_size);
    if (e.bad() || !range)
      return leave_out(off, *start, 0, errc::malformed, where + "address range truncated");
    if (c.has_z) {
      const uint64_t aug = e.uleb();
      if (!e.skip(aug))
        return leave_out(off, *start, *range, errc::malformed,
                         where + "augmentation data past the entry");
    }
    if (*range == 0)
      return leave_out(off, *start, 0, errc::unsupported, where + "empty address range");
    if (*range > std::numeric_limits<uint32_t>::max())
      return leave_out(
          off, *start, *range, errc::unsupported,
          where + format("address range %llu over 4 GiB", static_cast<unsigned long long>(*range)));
    if (*start > std::numeric_limits<uint64_t>::max() - *range)
      return leave_out(off, *start, *range, errc::malformed, where + "address range wraps");

    evaluator ev(o_.target, c, *start, *range, o_.sframe_expressible,
                 o_.partial == partial_input::usable_rows, bases, o_.section_address, b_);
    ev.restore_popped_fp = o_.restore_popped_fp;
    bool ok = ev.run(c.insn_begin, c.insn_end, true);
    if (!ok)
      return leave_out(off, *start, *range, ev.failure_code(),
                       where + "CIE instructions: " + ev.failure());
    ok = ev.run(e.pos(), end, false) && ev.finish();
    if (!ok) return leave_out(off, *start, *range, ev.failure_code(), where + ev.failure());
    for (evaluator::piece& p : ev.pieces()) {
      p.f.start = *start + p.begin;
      p.f.pauth_key = c.pac_key_b ? 1 : 0;  // 'B' augmentation: return addresses signed with key B
      out_.functions.push_back(std::move(p.f));
      out_.fde_offsets.push_back(static_cast<uint32_t>(off));
    }
    for (const evaluator::hole& h : ev.holes()) {
      leave_out(off, *start + h.begin, h.end - h.begin, errc::unsupported, where + h.reason);
      out_.left_out.back().part = true;
    }
  }

  // Sorted by address; overlapping FDEs (after the first in address order) are left out.
  void finish() {
    std::vector<size_t> order(out_.functions.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return out_.functions[a].start < out_.functions[b].start;
    });
    std::vector<function_desc> functions;
    std::vector<uint32_t> offsets;
    functions.reserve(order.size());
    offsets.reserve(order.size());
    for (size_t i : order) {
      function_desc& f = out_.functions[i];
      if (!functions.empty()) {
        const function_desc& p = functions.back();
        if (f.start < p.start + p.size) {
          leave_out(out_.fde_offsets[i], f.start, f.size, errc::unsupported,
                    format("FDE at offset 0x%x: [0x%llx, 0x%llx) overlaps the FDE at offset "
                           "0x%x [0x%llx, 0x%llx)",
                           out_.fde_offsets[i], static_cast<unsigned long long>(f.start),
                           static_cast<unsigned long long>(f.start + f.size), offsets.back(),
                           static_cast<unsigned long long>(p.start),
                           static_cast<unsigned long long>(p.start + p.size)));
          continue;
        }
      }
      functions.push_back(std::move(f));
      offsets.push_back(out_.fde_offsets[i]);
    }
    out_.functions = std::move(functions);
    out_.fde_offsets = std::move(offsets);
    std::stable_sort(out_.left_out.begin(), out_.left_out.end(),
                     [](const left_out_function& a, const left_out_function& b) {
                       return a.fde_offset < b.fde_offset;
                     });
    for (size_t i = 0; i < out_.functions.size(); ++i) {
      if (auto v = validate(o_.target, out_.functions[i]); !v)
        out_.nonconforming.push_back({i, v.error().message()});
    }
  }

  std::span<const uint8_t> b_;
  const decoder_options& o_;
  decoded_cfi out_;
  std::map<size_t, cie_info> cies_;
};

}  // namespace

result<decoded_cfi> decode(std::span<const uint8_t> section, const decoder_options& options) {
  if (options.target != abi::amd64 && options.target != abi::aarch64_le)
    return make_error(errc::unsupported,
                      "cfi: decoding CFI for %s is not implemented (amd64 "
                      "and aarch64-le are)",
                      to_string(options.target));
  if (options.kind != section_kind::eh_frame && options.kind != section_kind::debug_frame)
    return make_error(errc::invalid_argument, "cfi: unknown section kind %d",
                      static_cast<int>(options.kind));
  return section_decoder(section, options).run();
}

}  // namespace jitunwind::cfi
