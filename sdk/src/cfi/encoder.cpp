#include <jitunwind/cfi.h>

#include "cfi/dwarf.hpp"
#include "common/error.hpp"
#include "common/same_rows.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace jitunwind::cfi {

using detail::make_error;

namespace {

constexpr int32_t data_alignment = -8;  // every saved-register offset is a multiple of 8

struct registers {
  uint8_t sp, fp, ra;
};

registers cfi_registers(abi a) {
  if (a == abi::amd64) return {dwarf::amd64_rsp, dwarf::amd64_rbp, dwarf::amd64_rip};
  return {dwarf::aarch64_sp, dwarf::aarch64_x29, dwarf::aarch64_x30};
}

bool fits_int32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// Signed difference a - b of two addresses, if it fits in 32 bits.
std::optional<int32_t> delta32(uint64_t a, uint64_t b) {
  const auto d = static_cast<int64_t>(a - b);  // two's complement: exact for |a - b| < 2^63
  if (!fits_int32(d)) return std::nullopt;
  return static_cast<int32_t>(d);
}

void pad_to_8(std::vector<uint8_t>& out, size_t entry_start) {
  while ((out.size() - entry_start) % 8 != 0) dwarf::put_u8(out, dwarf::cfa_nop);
}

// Most bytes one row's transition can emit, even with 10-byte ULEB128 values: an advance (5) +
// def_cfa (1 + 1 + 10) + FP rule (1 + 10) + RA rule (1 + 10) + negate_ra_state (1).
constexpr size_t max_row_bytes = 40;

template <class Out>
void emit_advance(Out& out, uint32_t delta) {
  if (delta == 0) return;
  if (delta < 0x40) {
    dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_advance_loc | delta));
  } else if (delta <= 0xff) {
    dwarf::put_u8(out, dwarf::cfa_advance_loc1);
    dwarf::put_u8(out, static_cast<uint8_t>(delta));
  } else if (delta <= 0xffff) {
    dwarf::put_u8(out, dwarf::cfa_advance_loc2);
    dwarf::put_u8(out, static_cast<uint8_t>(delta));
    dwarf::put_u8(out, static_cast<uint8_t>(delta >> 8));
  } else {
    dwarf::put_u8(out, dwarf::cfa_advance_loc4);
    dwarf::put_u32(out, delta);
  }
}

// `offset` is negative and a multiple of 8 (validate() guarantees it), so the factored value
// is a positive ULEB128 and the compact DW_CFA_offset form always applies (registers < 64).
template <class Out>
void emit_saved_at(Out& out, uint8_t reg, int32_t offset) {
  dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_offset | reg));
  dwarf::put_uleb(out, static_cast<uint64_t>(offset / data_alignment));
}

// Emits the instructions that turn the rules in `s` into those of `to` and updates `s`.
// For an outermost row only "RA undefined" matters; the CFA rule is left as it was.
template <class Out>
void emit_transition(Out& out, abi a, frame_row& s, const frame_row& to) {
  const registers regs = cfi_registers(a);
  frame_row want = to;
  if (to.ra == ra_rule::undefined) {
    want.cfa = s.cfa;
    want.cfa_offset = s.cfa_offset;
  }

  const uint8_t want_cfa_reg = want.cfa == cfa_base::sp ? regs.sp : regs.fp;
  const bool reg_changes = want.cfa != s.cfa;
  const bool off_changes = want.cfa_offset != s.cfa_offset;
  if (reg_changes && off_changes) {
    dwarf::put_u8(out, dwarf::cfa_def_cfa);
    dwarf::put_uleb(out, want_cfa_reg);
    dwarf::put_uleb(out, static_cast<uint64_t>(want.cfa_offset));
  } else if (reg_changes) {
    dwarf::put_u8(out, dwarf::cfa_def_cfa_register);
    dwarf::put_uleb(out, want_cfa_reg);
  } else if (off_changes) {
    dwarf::put_u8(out, dwarf::cfa_def_cfa_offset);
    dwarf::put_uleb(out, static_cast<uint64_t>(want.cfa_offset));
  }

  if (want.fp == fp_rule::saved) {
    if (s.fp != fp_rule::saved || s.fp_offset != want.fp_offset)
      emit_saved_at(out, regs.fp, want.fp_offset);
  } else if (s.fp == fp_rule::saved) {
    dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_restore | regs.fp));
  }

  if (want.ra != s.ra || (want.ra == ra_rule::saved && want.ra_offset != s.ra_offset)) {
    const frame_row entry = entry_row(a);
    if (want.ra == ra_rule::undefined) {
      dwarf::put_u8(out, dwarf::cfa_undefined);
      dwarf::put_uleb(out, regs.ra);
    } else if (want.ra == entry.ra &&
               (want.ra != ra_rule::saved || want.ra_offset == entry.ra_offset)) {
      // Back to the CIE's rule (AMD64: saved at CFA-8; AArch64: in the link register).
      dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_restore | regs.ra));
    } else {
      emit_saved_at(out, regs.ra, want.ra_offset);
    }
  }

  if (want.ra_mangled != s.ra_mangled) dwarf::put_u8(out, dwarf::cfa_aarch64_negate_ra_state);

  s = want;
}

// Most bytes one saved-register change can emit: an advance (5) + an opcode, a register and a
// factored offset (1 + 10 + 10).
constexpr size_t max_saved_register_bytes = 26;

// The rule of a callee-saved register other than SP, FP and RA (see saved_register).
template <class Out>
void emit_saved_register(Out& out, const saved_register& s) {
  switch (s.rule) {
    case saved_rule::at_cfa: {
      const int64_t factored = s.cfa_offset / data_alignment;  // validate: a multiple of 8
      if (factored >= 0 && s.dwarf_reg < 64) {
        dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_offset | s.dwarf_reg));
        dwarf::put_uleb(out, static_cast<uint64_t>(factored));
      } else if (factored >= 0) {
        dwarf::put_u8(out, dwarf::cfa_offset_extended);
        dwarf::put_uleb(out, s.dwarf_reg);
        dwarf::put_uleb(out, static_cast<uint64_t>(factored));
      } else {
        dwarf::put_u8(out, dwarf::cfa_offset_extended_sf);
        dwarf::put_uleb(out, s.dwarf_reg);
        dwarf::put_sleb(out, factored);
      }
      break;
    }
    case saved_rule::unchanged:
      if (s.dwarf_reg < 64) {
        dwarf::put_u8(out, static_cast<uint8_t>(dwarf::cfa_restore | s.dwarf_reg));
      } else {
        dwarf::put_u8(out, dwarf::cfa_restore_extended);
        dwarf::put_uleb(out, s.dwarf_reg);
      }
      break;
    case saved_rule::undefined:
      dwarf::put_u8(out, dwarf::cfa_undefined);
      dwarf::put_uleb(out, s.dwarf_reg);
      break;
  }
}

void emit_cie(std::vector<uint8_t>& out, abi a, uint8_t fde_encoding) {
  const size_t start = out.size();
  const registers regs = cfi_registers(a);
  dwarf::put_u32(out, 0);  // length, patched below
  dwarf::put_u32(out, 0);  // CIE id (0 in .eh_frame)
  dwarf::put_u8(out, 1);   // version
  for (char c : {'z', 'R', '\0'}) dwarf::put_u8(out, static_cast<uint8_t>(c));
  dwarf::put_uleb(out, 1);  // code alignment factor
  dwarf::put_sleb(out, data_alignment);
  dwarf::put_uleb(out, regs.ra);
  dwarf::put_uleb(out, 1);  // augmentation data length
  dwarf::put_u8(out, fde_encoding);
  const frame_row entry = entry_row(a);
  dwarf::put_u8(out, dwarf::cfa_def_cfa);
  dwarf::put_uleb(out, regs.sp);
  dwarf::put_uleb(out, static_cast<uint64_t>(entry.cfa_offset));
  if (entry.ra == ra_rule::saved) emit_saved_at(out, regs.ra, entry.ra_offset);
  pad_to_8(out, start);
  dwarf::store_u32(out.data() + start, static_cast<uint32_t>(out.size() - start - 4));
}

uint8_t fde_pointer_encoding(address_encoding e) {
  return e == address_encoding::pcrel_sdata4 ? (dwarf::pe_pcrel | dwarf::pe_sdata4)
                                             : dwarf::pe_absptr;
}

}  // namespace

result<encoder> encoder::create(const encoder_options& options) {
  if (options.target == abi::aarch64_be)
    return make_error(errc::unsupported,
                      "cfi: big-endian AArch64 .eh_frame is not implemented (amd64 and "
                      "aarch64-le are)");
  if (options.target != abi::amd64 && options.target != abi::aarch64_le)
    return make_error(errc::invalid_argument, "cfi: unknown ABI id %d",
                      static_cast<int>(options.target));
  if (options.encoding != address_encoding::pcrel_sdata4 &&
      options.encoding != address_encoding::absolute)
    return make_error(errc::invalid_argument, "cfi: unknown address encoding %d",
                      static_cast<int>(options.encoding));
  if (options.max_fdes_per_function == 0)
    return make_error(errc::invalid_argument, "cfi: max_fdes_per_function must be at least 1");
  encoder e(options);
  emit_cie(e.bytes_, options.target, fde_pointer_encoding(options.encoding));
  e.cie_size_ = e.bytes_.size();
  return e;
}

void encoder::clear(uint64_t eh_frame_address) {
  bytes_.resize(cie_size_);
  fdes_.clear();
  options_.eh_frame_address = eh_frame_address;
}

size_t encoder::size() const noexcept {
  return bytes_.size() + (options_.terminator ? 4 : 0);
}

std::vector<uint8_t> encoder::bytes() const {
  std::vector<uint8_t> out = bytes_;
  if (options_.terminator) dwarf::put_u32(out, 0);
  return out;
}

result<void> encoder::append_fde(uint64_t start, uint64_t size, const function_desc& f,
                                 uint32_t block_size, uint32_t repeat,
                                 const std::vector<uint8_t>* cached_body) {
  const size_t fde_start = bytes_.size();
  uint64_t field = 0;
  int32_t rel = 0;
  if (options_.encoding == address_encoding::pcrel_sdata4) {
    field = options_.eh_frame_address + fde_start + 8;
    const auto r = delta32(start, field);
    if (!r)
      return make_error(errc::out_of_range,
                        "cfi: function at 0x%llx is more than 2 GiB away from its FDE at 0x%llx "
                        "(PC-relative 32-bit start)",
                        static_cast<unsigned long long>(start),
                        static_cast<unsigned long long>(field - 8));
    rel = *r;
  }
  // Room for the worst case, written through a raw pointer, then trimmed.
  const size_t bound =
      4 + 4 + 16 + 1 +
      (cached_body != nullptr ? cached_body->size()
                              : static_cast<size_t>(repeat) * f.rows.size() * max_row_bytes +
                                    f.saved_registers.size() * max_saved_register_bytes + 7);
  bytes_.resize(fde_start + bound);
  uint8_t* const begin = bytes_.data() + fde_start;
  dwarf::raw_out out{begin};
  dwarf::put_u32(out, 0);                                     // length, patched below
  dwarf::put_u32(out, static_cast<uint32_t>(fde_start + 4));  // back to the CIE at 0
  if (options_.encoding == address_encoding::pcrel_sdata4) {
    dwarf::put_u32(out, static_cast<uint32_t>(rel));
    dwarf::put_u32(out, static_cast<uint32_t>(size));
  } else {
    dwarf::put_u64(out, start);
    dwarf::put_u64(out, size);
  }
  dwarf::put_uleb(out, 0);  // augmentation data length

  const size_t header = out.size_from(begin);
  if (cached_body != nullptr) {
    // The header's size is fixed by the encoding, so the padding is the cached one too.
    // (A body can be empty: rows that only restate the CIE's state, header already aligned;
    // an empty vector's data() may be null, which memcpy must not get.)
    if (!cached_body->empty())
      std::memcpy(begin + header, cached_body->data(), cached_body->size());
  } else {
    frame_row state = entry_row(options_.target);
    uint64_t at = 0;
    // Saved registers exist only on plain functions (validate), so they interleave with the
    // rows of the one block: at one offset the row's transition comes first.
    const saved_register* saved = f.saved_registers.data();
    const saved_register* const saved_end = saved + f.saved_registers.size();
    auto emit_saved_before = [&](uint64_t limit) {
      for (; saved != saved_end && saved->pc_offset < limit; ++saved) {
        emit_advance(out, static_cast<uint32_t>(saved->pc_offset - at));
        at = saved->pc_offset;
        emit_saved_register(out, *saved);
      }
    };
    for (uint32_t k = 0; k < repeat; ++k) {
      const uint64_t base = static_cast<uint64_t>(k) * block_size;
      for (const frame_row& r : f.rows) {
        if (r.pc_offset >= block_size || base + r.pc_offset >= size) break;
        emit_saved_before(base + r.pc_offset);
        emit_advance(out, static_cast<uint32_t>(base + r.pc_offset - at));
        at = base + r.pc_offset;
        emit_transition(out, options_.target, state, r);
      }
    }
    emit_saved_before(size);
    while (out.size_from(begin) % 8 != 0) dwarf::put_u8(out, dwarf::cfa_nop);
  }
  const size_t length =
      cached_body != nullptr ? header + cached_body->size() : out.size_from(begin);
  dwarf::store_u32(begin, static_cast<uint32_t>(length - 4));
  bytes_.resize(fde_start + length);
  fdes_.push_back({start, size, static_cast<uint32_t>(fde_start)});
  return {};
}

result<void> encoder::append(const function_desc& f) {
  // A plain function with the rows of the last one (most JIT functions share their shape):
  // those rows passed validate and their instructions are known; what validate checks beyond
  // the rows is checked here, the reach of the start in append_fde as for any function.
  if (f.pcmask_rep == 0 && has_last_body_ && f.size != 0 && f.saved_registers.empty() &&
      f.start <= std::numeric_limits<uint64_t>::max() - f.size && !f.rows.empty() &&
      f.rows.back().pc_offset < f.size && detail::same_rows(f.rows, last_rows_)) {
    const size_t old_bytes = bytes_.size();
    if (auto r = append_fde(f.start, f.size, f, f.size, 1, &last_body_); !r) {
      bytes_.resize(old_bytes);
      return r;
    }
    return {};
  }
  if (auto v = validate(options_.target, f); !v) return std::move(v).error();
  // The SFrame v3 rules that name registers (a CFA from another register or from memory, RA/FP
  // in or relative to a register) would need DWARF expressions this encoder does not write yet:
  // refuse them by name rather than describe the function wrongly. (An RA saved at another CFA
  // offset is a plain DW_CFA_offset.)
  const auto names_registers = [](const frame_row& r) {
    return r.cfa == cfa_base::reg || r.cfa_deref || r.ra == ra_rule::register_value ||
           r.ra == ra_rule::register_saved || r.fp == fp_rule::register_value ||
           r.fp == fp_rule::register_saved;
  };
  for (size_t i = 0; i < f.rows.size(); ++i)
    if (names_registers(f.rows[i]))
      return make_error(errc::unsupported,
                        "cfi: function at 0x%llx: row %zu (offset %u) uses an SFrame v3 rule "
                        "(register or dereference) that the .eh_frame encoder does not write",
                        static_cast<unsigned long long>(f.start), i, f.rows[i].pc_offset);
  const size_t old_bytes = bytes_.size();
  const size_t old_fdes = fdes_.size();
  auto rollback = [&](error e) -> result<void> {
    bytes_.resize(old_bytes);
    fdes_.resize(old_fdes);
    return e;
  };

  if (f.pcmask_rep == 0 || f.rows.size() == 1) {
    // A single row holds in every block, so one FDE covers the whole PCMASK range too.
    if (auto r = append_fde(f.start, f.size, f, f.size, 1); !r)
      return rollback(std::move(r).error());
    if (f.pcmask_rep == 0 && f.saved_registers.empty()) {
      // Remember the instructions and padding (after the length, CIE pointer, start, size
      // and augmentation length) for the next function of this shape.
      const size_t header =
          4 + 4 + (options_.encoding == address_encoding::pcrel_sdata4 ? 8 : 16) + 1;
      last_rows_.assign(f.rows.begin(), f.rows.end());
      last_body_.assign(bytes_.begin() + static_cast<ptrdiff_t>(old_bytes + header), bytes_.end());
      has_last_body_ = true;
    }
  } else {
    const uint64_t blocks = (static_cast<uint64_t>(f.size) + f.pcmask_rep - 1) / f.pcmask_rep;
    if (blocks > options_.max_fdes_per_function)
      return make_error(errc::limit_exceeded,
                        "cfi: PCMASK function at 0x%llx (size %u, block %u) needs %llu FDEs, "
                        "more than max_fdes_per_function (%u)",
                        static_cast<unsigned long long>(f.start), f.size, f.pcmask_rep,
                        static_cast<unsigned long long>(blocks), options_.max_fdes_per_function);
    if (options_.pcmask_single_fde) {
      if (auto r = append_fde(f.start, f.size, f, f.pcmask_rep, static_cast<uint32_t>(blocks)); !r)
        return rollback(std::move(r).error());
      return {};
    }
    for (uint64_t k = 0; k < blocks; ++k) {
      const uint64_t offset = k * f.pcmask_rep;
      const auto block = static_cast<uint32_t>(std::min<uint64_t>(f.pcmask_rep, f.size - offset));
      if (auto r = append_fde(f.start + offset, block, f, block, 1); !r)
        return rollback(std::move(r).error());
    }
  }
  return {};
}

result<void> encoder::relocate(uint64_t new_eh_frame_address) {
  if (options_.encoding != address_encoding::pcrel_sdata4) {
    options_.eh_frame_address = new_eh_frame_address;
    return {};
  }
  std::vector<int32_t> values;
  values.reserve(fdes_.size());
  for (const fde_info& d : fdes_) {
    const uint64_t field = new_eh_frame_address + d.offset + 8;
    const auto rel = delta32(d.start, field);
    if (!rel)
      return make_error(errc::out_of_range,
                        "cfi: relocating .eh_frame to 0x%llx puts function 0x%llx more than "
                        "2 GiB from its FDE",
                        static_cast<unsigned long long>(new_eh_frame_address),
                        static_cast<unsigned long long>(d.start));
    values.push_back(*rel);
  }
  for (size_t i = 0; i < fdes_.size(); ++i)
    dwarf::store_u32(bytes_.data() + fdes_[i].offset + 8, static_cast<uint32_t>(values[i]));
  options_.eh_frame_address = new_eh_frame_address;
  return {};
}

result<std::vector<uint8_t>> encoder::build_hdr(uint64_t hdr_address) const {
  std::vector<uint8_t> out;
  out.reserve(eh_frame_hdr_size(fdes_.size()));
  if (auto r = append_hdr(hdr_address, out); !r) return std::move(r).error();
  return out;
}

result<void> encoder::append_hdr(uint64_t hdr_address, std::vector<uint8_t>& out) const {
  // FDEs are usually appended in address order: sort a copy only when they are not.
  std::span<const fde_info> sorted = fdes_;
  std::vector<fde_info> copy;
  if (!std::is_sorted(fdes_.begin(), fdes_.end(),
                      [](const fde_info& a, const fde_info& b) { return a.start < b.start; })) {
    copy.assign(fdes_.begin(), fdes_.end());
    std::sort(copy.begin(), copy.end(),
              [](const fde_info& a, const fde_info& b) { return a.start < b.start; });
    sorted = copy;
  }
  for (size_t i = 1; i < sorted.size(); ++i) {
    const fde_info& prev = sorted[i - 1];
    if (sorted[i].start < prev.start + prev.size)
      return make_error(errc::invalid_argument,
                        "cfi: FDEs overlap: [0x%llx, 0x%llx) and [0x%llx, 0x%llx)",
                        static_cast<unsigned long long>(prev.start),
                        static_cast<unsigned long long>(prev.start + prev.size),
                        static_cast<unsigned long long>(sorted[i].start),
                        static_cast<unsigned long long>(sorted[i].start + sorted[i].size));
  }
  auto out_of_reach = [&](const char* what, uint64_t address) {
    return make_error(errc::out_of_range,
                      "cfi: %s at 0x%llx is more than 2 GiB from .eh_frame_hdr at 0x%llx", what,
                      static_cast<unsigned long long>(address),
                      static_cast<unsigned long long>(hdr_address));
  };
  if (sorted.size() > std::numeric_limits<uint32_t>::max())
    return make_error(errc::limit_exceeded, "cfi: %zu FDEs do not fit a 32-bit count",
                      sorted.size());
  const auto frame_ptr = delta32(options_.eh_frame_address, hdr_address + 4);
  if (!frame_ptr) return out_of_reach(".eh_frame", options_.eh_frame_address);
  // Check every entry before touching `out`.
  for (const fde_info& d : sorted) {
    if (!delta32(d.start, hdr_address)) return out_of_reach("function", d.start);
    const uint64_t fde_address = options_.eh_frame_address + d.offset;
    if (!delta32(fde_address, hdr_address)) return out_of_reach("FDE", fde_address);
  }
  const size_t at = out.size();
  out.resize(at + eh_frame_hdr_size(sorted.size()));
  uint8_t* p = out.data() + at;
  p[0] = 1;  // version
  p[1] = dwarf::pe_pcrel | dwarf::pe_sdata4;
  p[2] = dwarf::pe_udata4;
  p[3] = dwarf::pe_datarel | dwarf::pe_sdata4;
  dwarf::store_u32(p + 4, static_cast<uint32_t>(*frame_ptr));
  dwarf::store_u32(p + 8, static_cast<uint32_t>(sorted.size()));
  p += 12;
  for (const fde_info& d : sorted) {
    const uint64_t fde_address = options_.eh_frame_address + d.offset;
    dwarf::store_u32(p, static_cast<uint32_t>(*delta32(d.start, hdr_address)));
    dwarf::store_u32(p + 4, static_cast<uint32_t>(*delta32(fde_address, hdr_address)));
    p += 8;
  }
  return {};
}

result<sections> encode(const encoder_options& options, std::span<const function_desc> functions,
                        std::optional<uint64_t> hdr_address) {
  auto enc = encoder::create(options);
  if (!enc) return std::move(enc).error();
  std::vector<const function_desc*> order;
  order.reserve(functions.size());
  for (const function_desc& f : functions) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const function_desc* a, const function_desc* b) {
    return a->start < b->start;
  });
  for (const function_desc* f : order) {
    if (auto r = enc->append(*f); !r) return std::move(r).error();
  }
  sections s;
  s.eh_frame = enc->bytes();
  s.eh_frame_hdr_address = hdr_address.value_or(options.eh_frame_address + s.eh_frame.size());
  auto hdr = enc->build_hdr(s.eh_frame_hdr_address);
  if (!hdr) return std::move(hdr).error();
  s.eh_frame_hdr = std::move(*hdr);
  return s;
}

}  // namespace jitunwind::cfi
