// Seeded generators of valid frame descriptions (tests, benchmarks and fuzz seeds share them).
#pragma once

#include <jitunwind/frame.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace jitunwind::test {

/// Random rows that satisfy `jitunwind::validate` for `a`, with offsets of every width. With
/// `v3_rules`, some rows use the rules only SFrame v3 can hold (a CFA from another register or
/// from memory, RA/FP rules naming registers, ...) and some functions are signal frames or use
/// the AArch64 B key.
class frame_gen {
 public:
  explicit frame_gen(abi a, uint64_t seed, bool v3_rules = false)
      : abi_(a), rng_(seed), v3_(v3_rules) {}

  uint32_t pick(uint32_t lo, uint32_t hi) {  // inclusive
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_);
  }
  bool chance(unsigned percent) { return pick(0, 99) < percent; }

  /// A function at `start`: size classes that need 1-, 2- and 4-byte FRE addresses, some PCMASK.
  function_desc function(uint64_t start) {
    function_desc f;
    f.start = start;
    const unsigned cls = pick(0, 99);
    f.size = cls < 70 ? pick(1, 256) : cls < 95 ? pick(257, 70000) : pick(65537, 3000000);
    if (chance(5)) {
      f.pcmask_rep = pick(1, std::min<uint32_t>(255, f.size));
    }
    const uint32_t limit = f.pcmask_rep ? f.pcmask_rep : f.size;
    const uint32_t max_rows = std::min<uint32_t>(limit, chance(90) ? 6 : 40);
    const uint32_t nrows = pick(1, max_rows);
    std::vector<uint32_t> pcs{0};
    while (pcs.size() < nrows) {
      const uint32_t pc = pick(1, limit - 1);
      bool dup = false;
      for (uint32_t p : pcs) dup |= p == pc;
      if (!dup) pcs.push_back(pc);
    }
    std::sort(pcs.begin(), pcs.end());
    for (uint32_t pc : pcs) f.rows.push_back(row(pc));
    if (v3_) {
      f.signal_frame = chance(5);
      f.pauth_key = abi_ != abi::amd64 && chance(20) ? 1 : 0;
    }
    return f;
  }

  /// A row only SFrame v3 (a FLEX FDE) can hold.
  frame_row v3_row(uint32_t pc) {
    frame_row r = entry_row(abi_);
    r.pc_offset = pc;
    const bool amd64 = abi_ == abi::amd64;
    const uint8_t other = amd64 ? (chance(50) ? 10 : 3) : (chance(50) ? 16 : 9);  // r10/rbx, x16/x9
    const dwarf_regs regs = dwarf_registers(abi_);
    switch (pick(0, 5)) {
      case 0:  // CFA from another register (DRAP, s390x stack clash)
        r.cfa = cfa_base::reg;
        r.cfa_reg = other;
        r.cfa_offset = 8 * static_cast<int32_t>(pick(0, 6)) - (chance(10) ? 8 * 40000 : 0);
        break;
      case 1:  // CFA = *(fp - 8), FP = *(fp + 0): a realigned stack
        r.cfa = cfa_base::fp;
        r.cfa_deref = true;
        r.cfa_offset = -8 * static_cast<int32_t>(pick(1, 4));
        r.fp = chance(50) ? fp_rule::register_saved : fp_rule::unchanged;
        r.fp_reg = r.fp == fp_rule::register_saved ? regs.fp : 0;
        break;
      case 2:  // RA kept in a register
        r.cfa_offset = amd64 ? 8 * static_cast<int32_t>(pick(1, 8)) : 0;
        r.ra = ra_rule::register_value;
        r.ra_reg = other;
        r.ra_offset = 0;
        break;
      case 3:  // RA saved relative to a register
        r.cfa_offset = 8 * static_cast<int32_t>(pick(2, 8));
        r.ra = ra_rule::register_saved;
        r.ra_reg = regs.fp;
        r.ra_offset = 8 * static_cast<int32_t>(pick(0, 4)) - 16;
        break;
      case 4:  // AMD64: RA saved away from CFA-8; AArch64: FP saved, RA still in LR
        r.cfa_offset = 8 * static_cast<int32_t>(pick(3, 20));
        if (amd64) {
          r.ra_offset = -8 * static_cast<int32_t>(pick(2, 3));
        } else {
          r.fp = fp_rule::saved;
          r.fp_offset = -8 * static_cast<int32_t>(pick(1, 2));
        }
        break;
      default:  // FP kept in another register
        r.cfa_offset = amd64 ? 16 : 16;
        r.fp = fp_rule::register_value;
        r.fp_reg = other;
        r.fp_offset = chance(80) ? 0 : 8 * static_cast<int32_t>(pick(1, 40));
        break;
    }
    return r;
  }

  frame_row row(uint32_t pc) {
    if (chance(3)) return outermost_row(pc);
    if (v3_ && chance(12)) return v3_row(pc);
    frame_row r;
    r.pc_offset = pc;
    const bool amd64 = abi_ == abi::amd64;
    const int32_t scale = magnitude();
    r.cfa = chance(40) ? cfa_base::fp : cfa_base::sp;
    r.cfa_offset = 8 * static_cast<int32_t>(pick(amd64 ? 1 : 0, scale / 8 + 1));
    if (r.cfa == cfa_base::fp && r.cfa_offset == 0) r.cfa_offset = 16;
    const int32_t room = r.cfa == cfa_base::sp ? r.cfa_offset : 1 << 30;  // slots above SP
    if (amd64) {
      r.ra = ra_rule::saved;
      r.ra_offset = -8;
      if (room >= 16 && chance(50)) {
        r.fp = fp_rule::saved;
        r.fp_offset = -8 * static_cast<int32_t>(pick(2, std::min(room, scale + 16) / 8));
      }
      return r;
    }
    r.ra_mangled = chance(20);
    if (room < 8 || chance(30)) {
      r.ra = ra_rule::in_register;
      r.ra_offset = 0;
      return r;
    }
    r.ra = ra_rule::saved;
    const int32_t max_slot = std::min(room, scale + 16) / 8;
    r.ra_offset = -8 * static_cast<int32_t>(pick(1, max_slot));
    if (max_slot >= 2 && chance(70)) {
      do {
        r.fp_offset = -8 * static_cast<int32_t>(pick(1, max_slot));
      } while (r.fp_offset == r.ra_offset);
      r.fp = fp_rule::saved;
    }
    return r;
  }

  /// A whole section's worth of functions in address order (with gaps) from `base`.
  std::vector<function_desc> functions(uint64_t base, size_t n) {
    std::vector<function_desc> out;
    uint64_t at = base;
    for (size_t i = 0; i < n; ++i) {
      at += chance(50) ? 0 : pick(1, 64);
      out.push_back(function(at));
      at += out.back().size;
    }
    return out;
  }

 private:
  // Offsets that need 1, 2 or 4 bytes.
  int32_t magnitude() {
    const unsigned c = pick(0, 99);
    return c < 70 ? 112 : c < 95 ? 30000 : 1 << 20;
  }

  abi abi_;
  std::mt19937_64 rng_;
  bool v3_ = false;
};

/// The row covering `pc` by a linear search of the model (reference for table::find). With
/// `rowless_outermost` (v3 DEFAULT FDEs), a function without rows is an outermost frame.
inline const frame_row* model_find(const std::vector<function_desc>& fs, uint64_t pc,
                                   size_t* index = nullptr, bool rowless_outermost = false) {
  static const frame_row outermost = outermost_row(0);
  for (size_t i = 0; i < fs.size(); ++i) {
    const auto& f = fs[i];
    if (pc < f.start || pc - f.start >= f.size) continue;
    if (f.rows.empty() && rowless_outermost) {
      if (index) *index = i;
      return &outermost;
    }
    uint64_t off = pc - f.start;
    if (f.pcmask_rep) off %= f.pcmask_rep;
    const frame_row* best = nullptr;
    for (const auto& r : f.rows)
      if (r.pc_offset <= off) best = &r;
    if (index) *index = i;
    return best;
  }
  return nullptr;
}

}  // namespace jitunwind::test
