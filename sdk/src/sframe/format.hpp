// Private: the SFrame binary layout (v1, v2 and v3) shared by the encoder, the decoder and the
// table.
//
// Layout (all multi-byte fields in the byte order of the target; AArch64 BE and s390x sections
// are big-endian, the magic 0xdee2 tells the reader which):
//   header (28 bytes): u16 magic, u8 version, u8 flags, u8 abi, i8 cfa_fixed_fp_offset,
//     i8 cfa_fixed_ra_offset, u8 auxhdr_len, u32 num_fdes, u32 num_fres, u32 fre_len,
//     u32 fdeoff, u32 freoff; then auxhdr_len bytes; both offsets count from there.
//   FDE v2 (20 bytes): i32 start, u32 size, u32 start_fre_off, u32 num_fres, u8 info,
//     u8 rep_size, u16 padding.   FDE v1 (17 bytes): the same without rep_size and padding.
//   v3: a 16-byte index entry per function (i64 start, u32 size, u32 offset of its attribute
//     record in the FRE sub-section), and in the FRE sub-section each function's 5-byte
//     attribute record (u16 num_fres, u8 info, u8 info2, u8 rep_size) followed by its FREs.
//   FDE info: bits 0-3 FRE address type (0/1/2 = 1/2/4 bytes), bit 4 PCMASK, bit 5 PAC key B,
//     bit 7 signal frame (v3). info2 (v3): bits 0-4 FDE type (0 DEFAULT, 1 FLEX).
//   FRE: start offset (1/2/4 bytes), u8 info, then `count` data words of 1/2/4 bytes.
//   FRE info: bit 0 CFA base (0 = FP, 1 = SP; 0 in FLEX FREs), bits 1-4 word count, bits 5-6
//     word size (0/1/2 = 1/2/4 bytes), bit 7 RA mangled (AArch64 PAC).
//   DEFAULT words: CFA offset, then RA (not on AMD64, where the header fixes it at CFA-8), then
//     FP; s390x stores the CFA offset as (offset - 160) / 8 and an odd RA/FP word as a register
//     number (word >> 1), a 0 RA word as padding before an FP word.
//   FLEX words: (control, offset) pairs for CFA, RA, FP; control = (DWARF reg << 3) |
//     (deref << 1) | reg_p; a lone 0 control is padding (RA: the ABI's default rule).
//   No words at all: the outermost frame (RA undefined). v3: a DEFAULT FDE without FREs too.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/sframe.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace jitunwind::sframe::detail {

inline constexpr size_t header_size = 28;
inline constexpr size_t fde_size_v1 = 17;
inline constexpr size_t fde_size_v2 = 20;
inline constexpr size_t fde_size_v3 = 16;  ///< the index entry
inline constexpr size_t attr_size_v3 = 5;  ///< the attribute record heading a function's FREs
inline constexpr uint8_t fde_type_default = 0;
inline constexpr uint8_t fde_type_flex = 1;
inline constexpr unsigned max_flex_words = 6;
/// v3 counts a function's FREs in 16 bits.
inline constexpr uint32_t max_fres_v3 = 0xffff;
inline constexpr uint8_t known_flags_v2 =
    flag_fde_sorted | flag_frame_pointer | flag_fde_func_start_pcrel;
inline constexpr uint8_t known_flags_v3 = flag_fde_sorted | flag_fde_func_start_pcrel;
inline constexpr uint8_t known_flags(uint8_t version) noexcept {
  return version >= version_3 ? known_flags_v3 : known_flags_v2;
}
inline constexpr size_t fde_size(uint8_t version) noexcept {
  return version == version_1 ? fde_size_v1 : version == version_2 ? fde_size_v2 : fde_size_v3;
}
/// s390x: CFA offsets are stored as (offset - 160) / 8 (the register save area is 160 bytes).
inline constexpr int32_t s390x_cfa_adjustment = 160;
inline constexpr int32_t s390x_cfa_alignment = 8;
inline constexpr uint8_t base_reg_fp = 0;
inline constexpr uint8_t base_reg_sp = 1;
/// v1 FDEs have no repetition size. binutils 2.40 emits PCMASK only for the x86-64 PLT, whose
/// entries are 16 bytes, and its readers assume that size.
inline constexpr uint32_t v1_pcmask_rep_size = 16;

inline bool big_endian(abi a) noexcept {
  return a == abi::aarch64_be || a == abi::s390x;
}
inline bool known_abi(uint8_t id) noexcept {
  return id >= 1 && id <= 4;
}
/// DEFAULT FREs: AMD64 stores CFA[, FP]; AArch64 and s390x CFA[, RA[, FP]].
inline unsigned max_offsets(abi a) noexcept {
  return a == abi::amd64 ? 2 : 3;
}
inline int8_t fixed_ra_offset(abi a) noexcept {
  return a == abi::amd64 ? -8 : 0;
}

// ---- byte order ----
// Fixed-width loads and stores compile to one move (plus a byte swap for the other order).

template <class T>
inline T load_as(const uint8_t* p, bool big) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  const bool swap = big != (std::endian::native == std::endian::big);
  if constexpr (sizeof(T) == 2) return swap ? static_cast<T>(__builtin_bswap16(v)) : v;
  if constexpr (sizeof(T) == 4) return swap ? static_cast<T>(__builtin_bswap32(v)) : v;
  if constexpr (sizeof(T) == 8) return swap ? static_cast<T>(__builtin_bswap64(v)) : v;
  return v;
}
inline uint16_t load_u16(const uint8_t* p, bool big) noexcept {
  return load_as<uint16_t>(p, big);
}
inline uint32_t load_u32(const uint8_t* p, bool big) noexcept {
  return load_as<uint32_t>(p, big);
}
/// An unsigned value of 1, 2, 4 or 8 bytes.
inline uint64_t load(const uint8_t* p, size_t width, bool big) noexcept {
  switch (width) {
    case 1:
      return p[0];
    case 2:
      return load_u16(p, big);
    case 4:
      return load_u32(p, big);
    default:
      return load_as<uint64_t>(p, big);
  }
}
/// A signed offset of 1, 2 or 4 bytes.
inline int32_t load_signed(const uint8_t* p, size_t width, bool big) noexcept {
  switch (width) {
    case 1:
      return static_cast<int8_t>(p[0]);
    case 2:
      return static_cast<int16_t>(load_u16(p, big));
    default:
      return static_cast<int32_t>(load_u32(p, big));
  }
}

/// Stores the low `width` (1, 2, 4 or 8) bytes of `v`.
inline void store(uint8_t* p, uint64_t v, size_t width, bool big) noexcept {
  const bool swap = big != (std::endian::native == std::endian::big);
  switch (width) {
    case 1:
      p[0] = static_cast<uint8_t>(v);
      return;
    case 2: {
      auto x = static_cast<uint16_t>(v);
      if (swap) x = __builtin_bswap16(x);
      std::memcpy(p, &x, 2);
      return;
    }
    case 4: {
      auto x = static_cast<uint32_t>(v);
      if (swap) x = __builtin_bswap32(x);
      std::memcpy(p, &x, 4);
      return;
    }
    default: {
      if (swap) v = __builtin_bswap64(v);
      std::memcpy(p, &v, 8);
      return;
    }
  }
}

// ---- FDE and FRE info bytes ----

inline constexpr uint8_t fde_info(uint8_t fre_type, bool pcmask, uint8_t pauth_key,
                                  bool signal = false) noexcept {
  return static_cast<uint8_t>((fre_type & 0xf) | (pcmask ? 0x10 : 0) | ((pauth_key & 1) << 5) |
                              (signal ? 0x80 : 0));
}
inline constexpr bool fde_signal(uint8_t info) noexcept {
  return (info & 0x80) != 0;
}
inline constexpr uint8_t fde_type(uint8_t info2) noexcept {
  return info2 & 0x1f;
}
inline constexpr uint8_t fde_fre_type(uint8_t info) noexcept {
  return info & 0xf;
}
inline constexpr bool fde_pcmask(uint8_t info) noexcept {
  return (info & 0x10) != 0;
}
inline constexpr uint8_t fde_pauth_key(uint8_t info) noexcept {
  return (info >> 5) & 1;
}
/// Bytes of an FRE start address for FRE type 0/1/2; 0 for an invalid type.
inline constexpr size_t fre_address_size(uint8_t fre_type) noexcept {
  return fre_type == 0 ? 1 : fre_type == 1 ? 2 : fre_type == 2 ? 4 : 0;
}

inline constexpr uint8_t fre_info(uint8_t base, unsigned count, uint8_t size_code,
                                  bool mangled) noexcept {
  return static_cast<uint8_t>((base & 1) | ((count & 0xf) << 1) | ((size_code & 3) << 5) |
                              (mangled ? 0x80 : 0));
}
inline constexpr uint8_t fre_base(uint8_t info) noexcept {
  return info & 1;
}
inline constexpr unsigned fre_count(uint8_t info) noexcept {
  return (info >> 1) & 0xf;
}
inline constexpr uint8_t fre_size_code(uint8_t info) noexcept {
  return (info >> 5) & 3;
}
inline constexpr bool fre_mangled(uint8_t info) noexcept {
  return (info & 0x80) != 0;
}
/// Bytes per offset for size code 0/1/2; 0 for the invalid code 3.
inline constexpr size_t fre_offset_size(uint8_t size_code) noexcept {
  return size_code == 0 ? 1 : size_code == 1 ? 2 : size_code == 2 ? 4 : 0;
}

/// Sets `r` to the rules a DEFAULT FRE with this info byte and offsets describes on AMD64 or
/// AArch64 (`offsets` holds `fre_count(info)` values; the caller has checked the count for the
/// ABI). Writes every field in place: building a temporary and copying it made lookups stall on
/// store forwarding.
inline void set_row(frame_row& r, abi a, uint32_t start, uint8_t info,
                    const int32_t* offsets) noexcept {
  const unsigned count = fre_count(info);
  r.pc_offset = start;
  r.cfa_reg = 0;
  r.cfa_deref = false;
  r.ra_reg = 0;
  r.fp_reg = 0;
  if (count == 0) {  // outermost_row
    r.cfa = cfa_base::sp;
    r.cfa_offset = 0;
    r.ra = ra_rule::undefined;
    r.ra_offset = 0;
    r.fp = fp_rule::unchanged;
    r.fp_offset = 0;
    r.ra_mangled = false;
    return;
  }
  r.cfa = fre_base(info) == base_reg_fp ? cfa_base::fp : cfa_base::sp;
  r.cfa_offset = offsets[0];
  r.ra_mangled = fre_mangled(info);
  r.fp = fp_rule::unchanged;
  r.fp_offset = 0;
  if (a == abi::amd64) {
    r.ra = ra_rule::saved;
    r.ra_offset = fixed_ra_offset(a);
    if (count >= 2) {
      r.fp = fp_rule::saved;
      r.fp_offset = offsets[1];
    }
  } else {
    r.ra = count == 1 ? ra_rule::in_register : ra_rule::saved;
    r.ra_offset = count == 1 ? 0 : offsets[1];
    if (count >= 3) {
      r.fp = fp_rule::saved;
      r.fp_offset = offsets[2];
    }
  }
}

inline frame_row fre_to_row(abi a, uint32_t start, uint8_t info, const int32_t* offsets) noexcept {
  frame_row r;
  set_row(r, a, start, info, offsets);
  return r;
}

/// s390x DEFAULT FRE (data only): the CFA offset is scaled, odd RA/FP words name registers,
/// an RA word of 0 is padding before an FP word. Null on success, else why the words are bad.
inline const char* set_row_s390x(frame_row& r, uint32_t start, uint8_t info,
                                 const int32_t* w) noexcept {
  const unsigned count = fre_count(info);
  r = outermost_row(start);
  if (count == 0) return nullptr;
  const int64_t cfa = int64_t{w[0]} * s390x_cfa_alignment + s390x_cfa_adjustment;
  if (cfa < INT32_MIN || cfa > INT32_MAX) return "s390x CFA offset out of range";
  r.cfa = fre_base(info) == base_reg_fp ? cfa_base::fp : cfa_base::sp;
  r.cfa_offset = static_cast<int32_t>(cfa);
  r.ra = ra_rule::in_register;  // r14 until saved
  r.ra_offset = 0;
  r.ra_mangled = fre_mangled(info);
  if (count >= 2 && w[1] != 0) {
    if (w[1] & 1) {
      if ((w[1] >> 1) > 0xff || w[1] < 0) return "s390x RA register number out of range";
      r.ra = ra_rule::register_value;
      r.ra_reg = static_cast<uint8_t>(w[1] >> 1);
    } else {
      r.ra = ra_rule::saved;
      r.ra_offset = w[1];
    }
  }
  if (count >= 3) {
    if (w[2] & 1) {
      if ((w[2] >> 1) > 0xff || w[2] < 0) return "s390x FP register number out of range";
      r.fp = fp_rule::register_value;
      r.fp_reg = static_cast<uint8_t>(w[2] >> 1);
    } else {
      r.fp = fp_rule::saved;
      r.fp_offset = w[2];
    }
  } else if (count == 2 && w[1] == 0) {
    return "s390x RA padding word without an FP word";
  }
  return nullptr;
}

// ---- FLEX control words ----

inline constexpr uint32_t flex_control(uint32_t reg, bool deref, bool reg_p) noexcept {
  return (reg << 3) | (deref ? 2u : 0u) | (reg_p ? 1u : 0u);
}
inline constexpr bool flex_reg_p(uint32_t c) noexcept {
  return (c & 1) != 0;
}
inline constexpr bool flex_deref(uint32_t c) noexcept {
  return (c & 2) != 0;
}
inline constexpr uint32_t flex_regnum(uint32_t c) noexcept {
  return c >> 3;
}

/// Decodes a FLEX FRE's words (`raw`: the words zero-extended, `w`: sign-extended) into `r`.
/// Null on success, else a static string saying what is wrong.
inline const char* set_row_flex(frame_row& r, abi a, uint32_t start, uint8_t info,
                                const uint32_t* raw, const int32_t* w) noexcept {
  const unsigned count = fre_count(info);
  r = outermost_row(start);
  if (count == 0) return nullptr;
  if (count < 2)
    return "flexible FRE with 1 data word (the CFA rule needs a control and an offset)";
  const dwarf_regs regs = dwarf_registers(a);
  const uint32_t c = raw[0];
  if (!flex_reg_p(c)) return "flexible CFA rule does not name a register (reg_p = 0)";
  if (c & 4) return "flexible control word has reserved bit 2 set";
  if (flex_regnum(c) > 0xff) return "flexible CFA rule names a register number above 255";
  const auto creg = static_cast<uint8_t>(flex_regnum(c));
  r.cfa = creg == regs.sp ? cfa_base::sp : creg == regs.fp ? cfa_base::fp : cfa_base::reg;
  r.cfa_reg = r.cfa == cfa_base::reg ? creg : 0;
  r.cfa_deref = flex_deref(c);
  r.cfa_offset = w[1];
  r.ra = a == abi::amd64 ? ra_rule::saved : ra_rule::in_register;
  r.ra_offset = a == abi::amd64 ? fixed_ra_offset(a) : 0;
  r.ra_mangled = fre_mangled(info);
  unsigned i = 2;
  // RA, then FP: a lone 0 is padding (the default rule), otherwise a (control, offset) pair.
  for (int which = 0; which < 2 && i < count; ++which) {
    const uint32_t ctl = raw[i];
    if (ctl == 0) {
      ++i;
      continue;
    }
    if (i + 1 >= count) return "flexible rule's control word has no offset word after it";
    if (ctl & 4) return "flexible control word has reserved bit 2 set";
    if (flex_regnum(ctl) > 0xff) return "flexible rule names a register number above 255";
    const int32_t off = w[i + 1];
    const auto reg = static_cast<uint8_t>(flex_regnum(ctl));
    i += 2;
    if (!flex_reg_p(ctl)) {
      if (!flex_deref(ctl) || reg != 0)
        return "flexible RA/FP rule based on the CFA must dereference and name no register";
      if (which == 0) {
        r.ra = ra_rule::saved;
        r.ra_offset = off;
      } else {
        r.fp = fp_rule::saved;
        r.fp_offset = off;
      }
      continue;
    }
    const bool deref = flex_deref(ctl);
    if (which == 0) {
      if (!deref && off == 0 && a != abi::amd64 && reg == regs.ra) {
        r.ra = ra_rule::in_register;
        r.ra_offset = 0;
      } else {
        r.ra = deref ? ra_rule::register_saved : ra_rule::register_value;
        r.ra_reg = reg;
        r.ra_offset = off;
      }
    } else if (!deref && off == 0 && reg == regs.fp) {
      r.fp = fp_rule::unchanged;
    } else {
      r.fp = deref ? fp_rule::register_saved : fp_rule::register_value;
      r.fp_reg = reg;
      r.fp_offset = off;
    }
  }
  if (i != count) return "flexible FRE has data words after the FP rule";
  return nullptr;
}

/// An FRE ready to be written: info byte, data words, word width.
struct fre_fields {
  uint8_t info = 0;
  unsigned count = 0;
  size_t offset_size = 1;
  int32_t offsets[max_flex_words] = {0, 0, 0, 0, 0, 0};
};

/// Smallest word size code (0/1/2 = 1/2/4 bytes) for signed values in [lo, hi] and unsigned
/// control words up to `umax`.
inline uint8_t word_size_code(int32_t lo, int32_t hi, uint32_t umax = 0) noexcept {
  if (lo >= -128 && hi <= 127 && umax <= 0xff) return 0;
  if (lo >= -32768 && hi <= 32767 && umax <= 0xffff) return 1;
  return 2;
}

/// Why SFrame v1/v2 (and a v3 DEFAULT FDE) cannot hold the row, or null.
inline const char* default_unexpressible(abi a, const frame_row& r) noexcept {
  if (r.ra == ra_rule::undefined) return nullptr;
  if (r.cfa == cfa_base::reg) return "the CFA is based on a register other than SP and FP";
  if (r.cfa_deref) return "the CFA is loaded from memory (CFA = *(base + offset))";
  if (r.fp == fp_rule::register_value || r.fp == fp_rule::register_saved)
    return "the FP rule names a register";
  if (r.ra == ra_rule::register_value || r.ra == ra_rule::register_saved)
    return "the RA rule names a register";
  if (a == abi::amd64) {
    if (r.ra != ra_rule::saved || r.ra_offset != fixed_ra_offset(a))
      return "AMD64 SFrame fixes the return address at CFA-8";
  } else if (r.ra == ra_rule::in_register && r.fp == fp_rule::saved) {
    return "AArch64 SFrame cannot say FP is saved while RA is in the link register";
  }
  return nullptr;
}

/// Maps a row onto a DEFAULT FRE of the ABI (AMD64, AArch64). Returns null on success,
/// otherwise a static string saying why it cannot.
inline const char* row_to_fre(abi a, const frame_row& r, fre_fields& out) noexcept {
  out = fre_fields{};
  if (r.ra == ra_rule::undefined) {
    out.info = fre_info(base_reg_fp, 0, 0, false);
    return nullptr;
  }
  if (const char* why = default_unexpressible(a, r)) return why;
  if (r.ra_mangled && a == abi::amd64) return "RA mangling exists only on AArch64";
  const uint8_t base = r.cfa == cfa_base::fp ? base_reg_fp : base_reg_sp;
  out.offsets[0] = r.cfa_offset;
  unsigned n = 1;
  if (a == abi::amd64) {
    if (r.fp == fp_rule::saved) out.offsets[n++] = r.fp_offset;
  } else if (r.ra == ra_rule::saved) {
    out.offsets[n++] = r.ra_offset;
    if (r.fp == fp_rule::saved) out.offsets[n++] = r.fp_offset;
  }
  int32_t lo = 0, hi = 0;
  for (unsigned i = 0; i < n; ++i) {
    lo = out.offsets[i] < lo ? out.offsets[i] : lo;
    hi = out.offsets[i] > hi ? out.offsets[i] : hi;
  }
  const uint8_t code = word_size_code(lo, hi);
  out.count = n;
  out.offset_size = fre_offset_size(code);
  out.info = fre_info(base, n, code, r.ra_mangled);
  return nullptr;
}

/// Maps a row onto a FLEX FRE: (control, offset) for the CFA; for RA and FP a pair, or nothing
/// for the default rule (a 0 padding word for RA when an FP pair follows). Words are as small as
/// the largest signed offset and unsigned control need, like gas.
inline const char* row_to_flex(abi a, const frame_row& r, fre_fields& out) noexcept {
  out = fre_fields{};
  if (r.ra == ra_rule::undefined) {
    out.info = fre_info(base_reg_fp, 0, 0, false);
    return nullptr;
  }
  if (r.ra_mangled && a == abi::amd64) return "RA mangling exists only on AArch64";
  const dwarf_regs regs = dwarf_registers(a);
  const uint32_t cfa_reg = r.cfa == cfa_base::sp   ? regs.sp
                           : r.cfa == cfa_base::fp ? regs.fp
                                                   : r.cfa_reg;
  uint32_t umax = 0;
  unsigned n = 0;
  const auto pair = [&](uint32_t control, int32_t offset) {
    out.offsets[n++] = static_cast<int32_t>(control);
    out.offsets[n++] = offset;
    umax = control > umax ? control : umax;
  };
  pair(flex_control(cfa_reg, r.cfa_deref, true), r.cfa_offset);
  const bool ra_default = a == abi::amd64
                              ? (r.ra == ra_rule::saved && r.ra_offset == fixed_ra_offset(a))
                              : r.ra == ra_rule::in_register;
  const bool fp_default = r.fp == fp_rule::unchanged;
  if (!ra_default) {
    switch (r.ra) {
      case ra_rule::saved:
        pair(flex_control(0, true, false), r.ra_offset);
        break;
      case ra_rule::register_value:
      case ra_rule::register_saved:
        pair(flex_control(r.ra_reg, r.ra == ra_rule::register_saved, true), r.ra_offset);
        break;
      case ra_rule::in_register:
        return "AMD64 has no link register";
      case ra_rule::undefined:
        break;
    }
  } else if (!fp_default) {
    out.offsets[n++] = 0;  // RA padding
  }
  if (!fp_default) {
    if (r.fp == fp_rule::saved)
      pair(flex_control(0, true, false), r.fp_offset);
    else
      pair(flex_control(r.fp_reg, r.fp == fp_rule::register_saved, true), r.fp_offset);
  }
  // Signed sizes for the offsets, unsigned for the controls (a 1-byte control reaches 255). A
  // control word is never 0 except as padding, which has no offset after it.
  int32_t lo = 0, hi = 0;
  for (unsigned i = 0; i < n;) {
    if (out.offsets[i] == 0) {
      ++i;
      continue;
    }
    const int32_t off = out.offsets[i + 1];
    lo = off < lo ? off : lo;
    hi = off > hi ? off : hi;
    i += 2;
  }
  const uint8_t code = word_size_code(lo, hi, umax);
  out.count = n;
  out.offset_size = fre_offset_size(code);
  out.info = fre_info(base_reg_fp, n, code, r.ra_mangled);
  return nullptr;
}

/// Smallest FRE address type (0/1/2) whose start offsets can address `limit - 1`.
inline constexpr uint8_t fre_type_for(uint32_t limit) noexcept {
  const uint32_t max_offset = limit == 0 ? 0 : limit - 1;
  return max_offset <= 0xff ? 0 : max_offset <= 0xffff ? 1 : 2;
}

/// The parsed, bounds-checked header of a section (decoder and table).
struct section_layout {
  section_info info;
  bool big = false;
  size_t fde_size = fde_size_v2;
  size_t fde_base = 0;  ///< section offset of FDE 0
  size_t fre_base = 0;  ///< section offset of the FRE sub-section
};

/// Offset of FDE `i`'s start field from the section start.
inline size_t fde_offset(const section_layout& l, size_t i) noexcept {
  return l.fde_base + i * l.fde_size;
}

/// The fields of one FDE. For v3 the index entry is read here; `info`, `info2`, `rep_size` and
/// `fre_count` come from the attribute record (read_attr_v3) and `fre_offset` is the offset of
/// the attribute record.
struct raw_fde {
  int64_t start_field = 0;
  uint32_t size = 0;
  uint32_t fre_offset = 0;
  uint32_t fre_count = 0;
  uint8_t info = 0;
  uint8_t info2 = 0;
  uint8_t rep_size = 0;
};

inline raw_fde read_fde(const section_layout& l, const uint8_t* section, size_t i) noexcept {
  const uint8_t* p = section + fde_offset(l, i);
  raw_fde f;
  if (l.info.version >= version_3) {
    f.start_field = static_cast<int64_t>(load_as<uint64_t>(p, l.big));
    f.size = load_u32(p + 8, l.big);
    f.fre_offset = load_u32(p + 12, l.big);
    return f;
  }
  f.start_field = static_cast<int32_t>(load_u32(p, l.big));
  f.size = load_u32(p + 4, l.big);
  f.fre_offset = load_u32(p + 8, l.big);
  f.fre_count = load_u32(p + 12, l.big);
  f.info = p[16];
  f.rep_size = l.info.version == version_1 ? 0 : p[17];
  return f;
}

/// Fills the v3 fields of `f` from its attribute record at `attr` (5 bytes, bounds checked by
/// the caller).
inline void read_attr_v3(raw_fde& f, const uint8_t* attr, bool big) noexcept {
  f.fre_count = load_u16(attr, big);
  f.info = attr[2];
  f.info2 = attr[3];
  f.rep_size = attr[4];
}

/// Absolute start address of FDE `i` (modular arithmetic, like every reader of the format).
inline uint64_t fde_start(const section_layout& l, uint64_t section_address, size_t i,
                          int64_t start_field) noexcept {
  uint64_t base = section_address;
  if (l.info.flags & flag_fde_func_start_pcrel) base += fde_offset(l, i);
  return base + static_cast<uint64_t>(start_field);
}

/// Repetition size of a PCMASK FDE (v1: implied).
inline uint32_t pcmask_rep(const section_layout& l, const raw_fde& f) noexcept {
  return l.info.version == version_1 ? v1_pcmask_rep_size : f.rep_size;
}

}  // namespace jitunwind::sframe::detail
