#include "jitwalk/ehframe.hpp"

#include <cstring>
#include <map>
#include <optional>

namespace jitwalk {
namespace {

// A factored offset; hostile values saturate to something no row accepts (|offset| > 2^31).
int64_t factor(int64_t value, int64_t factor_by) {
  int64_t out = 0;
  if (__builtin_mul_overflow(value, factor_by, &out)) return INT64_MAX;
  return out;
}

// DWARF register numbers on x86-64.
constexpr uint64_t kRbp = 6, kRsp = 7, kRip = 16;
constexpr size_t kMaxRememberDepth = 64;
constexpr size_t kMaxProblems = 8;

// A bounds-checked cursor over the section. Any read past `end` sets `bad`.
struct cursor {
  const uint8_t* base;  // section start
  size_t pos;
  size_t end;
  uint64_t vaddr;  // of base
  bool bad = false;

  bool have(size_t n) {
    if (bad || n > end - pos) {
      bad = true;
      return false;
    }
    return true;
  }
  uint64_t le(size_t n) {
    if (!have(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{base[pos + i]} << (8 * i);
    pos += n;
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (!have(1) || shift >= 64) {
        bad = true;
        return 0;
      }
      uint8_t b = base[pos++];
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      if (!have(1) || shift >= 64) {
        bad = true;
        return 0;
      }
      b = base[pos++];
      v |= int64_t(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= static_cast<int64_t>(~uint64_t{0} << shift);
    return v;
  }
  std::string cstr() {
    std::string s;
    while (have(1)) {
      char c = static_cast<char>(base[pos++]);
      if (c == 0) return s;
      s.push_back(c);
      if (s.size() > 16) break;  // augmentation strings are short
    }
    bad = true;
    return s;
  }
  // DW_EH_PE_* pointer; nullopt for an unsupported encoding (also sets bad).
  std::optional<uint64_t> pointer(uint8_t enc) {
    if (enc == 0xff) return 0;  // omit
    const uint64_t field = vaddr + pos;
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00:
        v = le(8);
        break;
      case 0x01:
        v = uleb();
        break;
      case 0x02:
        v = le(2);
        break;
      case 0x03:
        v = le(4);
        break;
      case 0x04:
        v = le(8);
        break;
      case 0x09:
        v = static_cast<uint64_t>(sleb());
        break;
      case 0x0a:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(le(2))));
        break;
      case 0x0b:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(le(4))));
        break;
      case 0x0c:
        v = le(8);
        break;
      default:
        bad = true;
        return std::nullopt;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:
        v += field;
        break;  // pcrel
      default:
        bad = true;
        return std::nullopt;  // textrel/datarel/funcrel: not in .eh_frame of x86-64 objects
    }
    if (enc & 0x80) {  // indirect: would need a memory read of the loaded image
      bad = true;
      return std::nullopt;
    }
    if (bad) return std::nullopt;
    return v;
  }
};

struct cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = kRip;
  uint8_t fde_enc = 0;
  bool has_z = false;
  size_t insn_begin = 0, insn_end = 0;
};

enum class reg_rule : uint8_t { same, offset, undefined, other };

struct cfi_state {
  uint64_t cfa_reg = kRsp;
  int64_t cfa_off = 8;
  bool cfa_expr = false;
  reg_rule rbp = reg_rule::same;
  int64_t rbp_off = 0;
  reg_rule ra = reg_rule::offset;
  int64_t ra_off = -8;
  // != 0 with cfa_expr: the CFA is the lazy PLT's rsp + 8 + ((rip & 15) >= plt_threshold) * 8.
  uint8_t plt_threshold = 0;
};

// The one CFA expression linkers emit for a lazy .plt (x86-64 psABI; GNU ld and lld): every
// 16-byte entry has CFA = rsp + 8 up to its `push`, rsp + 16 after it. The threshold (the entry
// offset after the push) is the literal in the middle; returns it, or 0 for any other block.
uint8_t plt_expression_threshold(const uint8_t* b, uint64_t n) {
  // DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit<T>; DW_OP_ge; DW_OP_lit3;
  // DW_OP_shl; DW_OP_plus
  static constexpr uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
  static constexpr uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
  if (n != sizeof(head) + 1 + sizeof(tail)) return 0;
  if (std::memcmp(b, head, sizeof(head)) != 0) return 0;
  if (std::memcmp(b + sizeof(head) + 1, tail, sizeof(tail)) != 0) return 0;
  const uint8_t lit = b[sizeof(head)];
  if (lit <= 0x30 || lit > 0x3f) return 0;  // DW_OP_lit1..lit15
  return static_cast<uint8_t>(lit - 0x30);
}

unwind_row to_row(const cfi_state& s, uint32_t loc) {
  unwind_row r;
  r.pc_off = loc;
  if (s.ra == reg_rule::undefined) {
    r.kind = rule::outermost;
    r.cfa_off = 0;
    return r;
  }
  const bool cfa_ok = !s.cfa_expr && (s.cfa_reg == kRsp || s.cfa_reg == kRbp) && s.cfa_off > 0 &&
                      s.cfa_off <= INT32_MAX;
  const bool ra_ok = s.ra == reg_rule::offset && s.ra_off == -8;
  const bool rbp_ok = s.rbp == reg_rule::same ||
                      (s.rbp == reg_rule::offset && s.rbp_off >= INT32_MIN && s.rbp_off < 0);
  if (!cfa_ok || !ra_ok || !rbp_ok) {
    r.kind = rule::gap;
    r.cfa_off = 0;
    return r;
  }
  r.kind = s.cfa_reg == kRsp ? rule::cfa_sp : rule::cfa_fp;
  r.cfa_off = static_cast<int32_t>(s.cfa_off);
  r.fp_saved = s.rbp == reg_rule::offset;
  r.fp_off = r.fp_saved ? static_cast<int32_t>(s.rbp_off) : 0;
  return r;
}

class evaluator {
 public:
  evaluator(const cie& c, uint64_t pc_begin, uint64_t pc_range)
      : c_(c), pc_begin_(pc_begin), pc_range_(pc_range) {}

  // Runs the instructions in [cur.pos, cur.end). `initial`: these are the CIE's initial
  // instructions (their result is what DW_CFA_restore goes back to). Returns an error or "".
  std::string run(cursor cur, bool initial) {
    cur_ = cur;
    while (cur_.pos < cur_.end && !cur_.bad) {
      uint8_t op = cur_.u8();
      uint8_t low = op & 0x3f;
      switch (op >> 6) {
        case 1:
          if (auto e = advance(low * c_.code_align); !e.empty()) return e;
          continue;
        case 2:
          set_offset(low, factor(static_cast<int64_t>(cur_.uleb()), c_.data_align));
          continue;
        case 3:
          restore(low);
          continue;
        default:
          break;
      }
      switch (op) {
        case 0x00:
          break;      // nop
        case 0x01: {  // set_loc
          auto a = cur_.pointer(c_.fde_enc);
          if (!a || *a < pc_begin_ + loc_) return "DW_CFA_set_loc moves backwards or is unreadable";
          if (auto e = advance(*a - pc_begin_ - loc_); !e.empty()) return e;
          break;
        }
        case 0x02:
          if (auto e = advance(cur_.le(1) * c_.code_align); !e.empty()) return e;
          break;
        case 0x03:
          if (auto e = advance(cur_.le(2) * c_.code_align); !e.empty()) return e;
          break;
        case 0x04:
          if (auto e = advance(cur_.le(4) * c_.code_align); !e.empty()) return e;
          break;
        case 0x05: {
          uint64_t r = cur_.uleb();
          set_offset(r, factor(static_cast<int64_t>(cur_.uleb()), c_.data_align));
          break;
        }
        case 0x06:
          restore(cur_.uleb());
          break;
        case 0x07:
          set_rule(cur_.uleb(), reg_rule::undefined);
          break;
        case 0x08:
          set_rule(cur_.uleb(), reg_rule::same);
          break;
        case 0x09: {
          uint64_t r = cur_.uleb();
          cur_.uleb();
          set_rule(r, reg_rule::other);
          break;
        }
        case 0x0a:
          if (stack_.size() >= kMaxRememberDepth) return "DW_CFA_remember_state nested too deep";
          stack_.push_back(s_);
          break;
        case 0x0b:
          if (stack_.empty()) return "DW_CFA_restore_state without remember_state";
          {
            // The CFA rule is part of the remembered state too (GCC relies on it).
            s_ = stack_.back();
            stack_.pop_back();
          }
          break;
        case 0x0c:
          s_.cfa_reg = cur_.uleb();
          s_.cfa_off = static_cast<int64_t>(cur_.uleb());
          s_.cfa_expr = false;
          break;
        case 0x0d:
          s_.cfa_reg = cur_.uleb();
          s_.cfa_expr = false;
          break;
        case 0x0e:
          s_.cfa_off = static_cast<int64_t>(cur_.uleb());
          break;
        case 0x0f: {
          const uint64_t n = cur_.uleb();
          if (!cur_.have(n)) break;  // cur_.bad: reported after the loop
          s_.cfa_expr = true;
          s_.plt_threshold = plt_expression_threshold(cur_.base + cur_.pos, n);
          if (s_.plt_threshold != 0 && !plt_from_) plt_from_ = loc_;
          cur_.pos += n;
          break;
        }
        case 0x10: {
          uint64_t r = cur_.uleb();
          skip_block();
          set_rule(r, reg_rule::other);
          break;
        }
        case 0x11: {
          uint64_t r = cur_.uleb();
          set_offset(r, factor(cur_.sleb(), c_.data_align));
          break;
        }
        case 0x12:
          s_.cfa_reg = cur_.uleb();
          s_.cfa_off = factor(cur_.sleb(), c_.data_align);
          s_.cfa_expr = false;
          break;
        case 0x13:
          s_.cfa_off = factor(cur_.sleb(), c_.data_align);
          break;
        case 0x14: {
          uint64_t r = cur_.uleb();
          cur_.uleb();
          set_rule(r, reg_rule::other);
          break;
        }
        case 0x15: {
          uint64_t r = cur_.uleb();
          cur_.sleb();
          set_rule(r, reg_rule::other);
          break;
        }
        case 0x16: {
          uint64_t r = cur_.uleb();
          skip_block();
          set_rule(r, reg_rule::other);
          break;
        }
        case 0x2e:
          cur_.uleb();
          break;  // GNU_args_size
        case 0x2f: {
          uint64_t r = cur_.uleb();
          set_offset(r, factor(factor(static_cast<int64_t>(cur_.uleb()), -1), c_.data_align));
          break;
        }
        default:
          return format("unknown CFA instruction 0x%02x", op);
      }
    }
    if (cur_.bad) return "CFA instructions run past their entry";
    if (initial) initial_ = s_;
    return {};
  }

  std::vector<unwind_row> finish() {
    commit();
    return std::move(rows_);
  }

  /// Where the lazy-PLT CFA expression took effect, if it did and still holds at the end of the
  /// instructions (the linker's .plt FDE: PLT0's rows, then the expression for every entry).
  std::optional<uint64_t> plt_from() const {
    if (!plt_from_ || !s_.cfa_expr || s_.plt_threshold == 0) return std::nullopt;
    return plt_from_;
  }
  uint8_t plt_threshold() const { return s_.plt_threshold; }
  bool plt_rbp_same() const { return s_.rbp == reg_rule::same; }

 private:
  std::string advance(uint64_t delta) {
    if (delta == 0) return {};
    if (delta > pc_range_ || loc_ + delta > pc_range_) {
      // Rows at or past the function end describe nothing; stop emitting.
      commit();
      loc_ = pc_range_;
      return {};
    }
    commit();
    loc_ += delta;
    return {};
  }
  void commit() {
    if (loc_ >= pc_range_) return;
    unwind_row r = to_row(s_, static_cast<uint32_t>(loc_));
    if (!rows_.empty() && rows_.back().pc_off == r.pc_off) {
      rows_.back() = r;
    } else {
      rows_.push_back(r);
    }
  }
  void set_offset(uint64_t reg, int64_t off) {
    if (reg == kRbp) {
      s_.rbp = reg_rule::offset;
      s_.rbp_off = off;
    } else if (reg == c_.ra_reg) {
      s_.ra = reg_rule::offset;
      s_.ra_off = off;
    }
  }
  void set_rule(uint64_t reg, reg_rule r) {
    if (reg == kRbp) s_.rbp = r;
    if (reg == c_.ra_reg) s_.ra = r;
  }
  void restore(uint64_t reg) {
    if (reg == kRbp) {
      s_.rbp = initial_.rbp;
      s_.rbp_off = initial_.rbp_off;
    } else if (reg == c_.ra_reg) {
      s_.ra = initial_.ra;
      s_.ra_off = initial_.ra_off;
    }
  }
  void skip_block() {
    uint64_t n = cur_.uleb();
    if (!cur_.have(n)) return;
    cur_.pos += n;
  }

  const cie& c_;
  cursor cur_{};
  uint64_t pc_begin_, pc_range_;
  uint64_t loc_ = 0;
  cfi_state s_;
  cfi_state initial_;
  std::vector<cfi_state> stack_;
  std::vector<unwind_row> rows_;
  std::optional<uint64_t> plt_from_;
};

// Replaces the gap rows the PLT expression produced from `plt` on with a PCMASK function.
void split_plt(unwind_function& f, uint64_t plt, uint8_t threshold,
               std::vector<unwind_function>& out) {
  unwind_function entries;
  entries.start = f.start + plt;
  entries.size = f.size - static_cast<uint32_t>(plt);
  entries.source = table_source::eh_frame;
  entries.pcmask_rep = 16;
  unwind_row before, after;
  before.kind = after.kind = rule::cfa_sp;
  before.pc_off = 0;
  before.cfa_off = 8;
  after.pc_off = threshold;
  after.cfa_off = 16;
  entries.rows = {before, after};
  std::erase_if(f.rows, [&](const unwind_row& r) { return r.pc_off >= plt; });
  f.size = static_cast<uint32_t>(plt);
  if (!f.rows.empty() && f.size != 0) out.push_back(std::move(f));
  out.push_back(std::move(entries));
}

std::string parse_cie(cursor c, size_t content_end, cie& out) {
  c.end = content_end;
  uint8_t version = c.u8();
  if (version != 1 && version != 3) return format("CIE version %u unsupported", version);
  std::string aug = c.cstr();
  if (aug.find("eh") != std::string::npos) return "CIE augmentation \"eh\" unsupported";
  out.code_align = c.uleb();
  out.data_align = c.sleb();
  out.ra_reg = version == 1 ? c.u8() : c.uleb();
  if (!aug.empty() && aug[0] == 'z') {
    out.has_z = true;
    uint64_t len = c.uleb();
    size_t aug_end = c.pos + len;
    if (!c.have(len)) return "CIE augmentation data past the entry";
    for (size_t i = 1; i < aug.size(); ++i) {
      switch (aug[i]) {
        case 'R':
          out.fde_enc = c.u8();
          break;
        case 'L':
          c.u8();
          break;
        case 'P': {
          uint8_t enc = c.u8();
          if (!c.pointer(enc & 0x7f)) return "CIE personality pointer unreadable";
          break;
        }
        case 'S':
        case 'B':
        case 'G':
          break;
        default:
          return format("CIE augmentation '%c' unsupported", aug[i]);
      }
    }
    c.pos = aug_end;
  } else if (!aug.empty()) {
    return format("CIE augmentation \"%s\" unsupported", aug.c_str());
  }
  if (c.bad) return "CIE truncated";
  if (out.code_align == 0 || out.code_align > 0xffff) {
    return format("CIE code alignment %llu", static_cast<unsigned long long>(out.code_align));
  }
  if (out.data_align < -0xffff || out.data_align > 0xffff) {
    return format("CIE data alignment %lld", static_cast<long long>(out.data_align));
  }
  out.insn_begin = c.pos;
  out.insn_end = content_end;
  return {};
}

}  // namespace

result<eh_frame_result> parse_eh_frame(std::span<const uint8_t> section, uint64_t section_vaddr) {
  eh_frame_result out;
  std::map<size_t, std::optional<cie>> cies;  // by entry offset; nullopt = bad CIE
  auto problem = [&](size_t off, const std::string& what) {
    ++out.skipped;
    if (out.problems.size() < kMaxProblems) {
      out.problems.push_back(format("entry at offset 0x%zx: %s", off, what.c_str()));
    }
  };
  size_t off = 0;
  const size_t size = section.size();
  while (off + 4 <= size) {
    cursor c{section.data(), off, size, section_vaddr};
    uint64_t len = c.le(4);
    if (len == 0) break;  // terminator
    if (len == 0xffffffff) len = c.le(8);
    const size_t content = c.pos;
    if (c.bad || len > size - content || len < 4) {
      problem(off, format("length %llu runs past the section (%zu bytes)",
                          static_cast<unsigned long long>(len), size));
      break;
    }
    const size_t entry_end = content + static_cast<size_t>(len);
    c.end = entry_end;
    const uint64_t id = c.le(4);
    if (id == 0) {  // CIE (parsed when an FDE needs it)
      off = entry_end;
      continue;
    }
    ++out.fdes;
    // The CIE pointer is relative to the field itself.
    if (id > content) {
      problem(off, "CIE pointer before the section start");
      off = entry_end;
      continue;
    }
    const size_t cie_off = content - static_cast<size_t>(id);
    auto it = cies.find(cie_off);
    if (it == cies.end()) {
      cursor cc{section.data(), cie_off, size, section_vaddr};
      uint64_t clen = cc.le(4);
      std::optional<cie> parsed;
      if (!cc.bad && clen != 0 && clen != 0xffffffff && clen <= size - cc.pos && clen >= 4 &&
          cc.le(4) == 0) {
        cie ci;
        std::string e = parse_cie(cc, cc.pos - 4 + static_cast<size_t>(clen), ci);
        if (e.empty()) parsed = ci;
      }
      it = cies.emplace(cie_off, parsed).first;
    }
    if (!it->second) {
      problem(off, format("CIE at offset 0x%zx unusable", cie_off));
      off = entry_end;
      continue;
    }
    const cie& ci = *it->second;
    auto begin = c.pointer(ci.fde_enc);
    auto range = c.pointer(ci.fde_enc & 0x0f);
    if (!begin || !range || c.bad) {
      problem(off, "FDE address range unreadable");
      off = entry_end;
      continue;
    }
    if (ci.has_z) {
      uint64_t alen = c.uleb();
      if (!c.have(alen)) {
        problem(off, "FDE augmentation data past the entry");
        off = entry_end;
        continue;
      }
      c.pos += alen;
    }
    if (*range == 0 || *range > UINT32_MAX || *begin + *range < *begin) {
      if (*range != 0) problem(off, "FDE range empty, huge or wrapping");
      off = entry_end;
      continue;
    }
    // Initial instructions of the CIE, then the FDE's.
    evaluator ev(ci, *begin, *range);
    std::string e = ev.run(cursor{section.data(), ci.insn_begin, ci.insn_end, section_vaddr}, true);
    if (!e.empty()) {
      problem(off, "CIE instructions: " + e);
      off = entry_end;
      continue;
    }
    e = ev.run(cursor{section.data(), c.pos, entry_end, section_vaddr}, false);
    if (!e.empty()) {
      problem(off, "FDE instructions: " + e);
      off = entry_end;
      continue;
    }
    unwind_function f;
    f.start = *begin;
    f.size = static_cast<uint32_t>(*range);
    f.source = table_source::eh_frame;
    const std::optional<uint64_t> plt = ev.plt_from();
    f.rows = ev.finish();
    if (plt && (*begin + *plt) % 16 == 0 && *plt < *range && ev.plt_rbp_same()) {
      // The lazy PLT: the rows before the expression (PLT0) stay as they are; the entries get
      // a PCMASK function of 16-byte blocks, as binutils writes for .sframe.
      split_plt(f, *plt, ev.plt_threshold(), out.functions);
    } else if (!f.rows.empty()) {
      out.functions.push_back(std::move(f));
    }
    off = entry_end;
  }
  if (out.fdes == 0 && out.skipped > 0) {
    return make_error(errc::malformed, "eh_frame: nothing readable (%s)",
                      out.problems.front().c_str());
  }
  return out;
}

}  // namespace jitwalk
