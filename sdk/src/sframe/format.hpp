// Private: the SFrame binary layout (v1 and v2) shared by the encoder, the decoder and the table.
//
// Layout (all multi-byte fields in the byte order of the target; AArch64 BE sections are
// big-endian, the magic 0xdee2 tells the reader which):
//   header (28 bytes): u16 magic, u8 version, u8 flags, u8 abi, i8 cfa_fixed_fp_offset,
//     i8 cfa_fixed_ra_offset, u8 auxhdr_len, u32 num_fdes, u32 num_fres, u32 fre_len,
//     u32 fdeoff, u32 freoff; then auxhdr_len bytes; both offsets count from there.
//   FDE v2 (20 bytes): i32 start, u32 size, u32 start_fre_off, u32 num_fres, u8 info,
//     u8 rep_size, u16 padding.   FDE v1 (17 bytes): the same without rep_size and padding.
//   FDE info: bits 0-3 FRE address type (0/1/2 = 1/2/4 bytes), bit 4 PCMASK, bit 5 PAC key B.
//   FRE: start offset (1/2/4 bytes), u8 info, then `count` signed offsets of 1/2/4 bytes.
//   FRE info: bit 0 CFA base (0 = FP, 1 = SP), bits 1-4 offset count, bits 5-6 offset size
//     (0/1/2 = 1/2/4 bytes), bit 7 RA mangled (AArch64 PAC).
//   Offsets: CFA, then RA (not on AMD64, where the header fixes it at CFA-8), then FP.
//   No offsets at all: the outermost frame (RA undefined).
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
inline constexpr uint8_t known_flags =
    flag_fde_sorted | flag_frame_pointer | flag_fde_func_start_pcrel;
inline constexpr uint8_t base_reg_fp = 0;
inline constexpr uint8_t base_reg_sp = 1;
/// v1 FDEs have no repetition size. binutils 2.40 emits PCMASK only for the x86-64 PLT, whose
/// entries are 16 bytes, and its readers assume that size.
inline constexpr uint32_t v1_pcmask_rep_size = 16;

inline bool big_endian(abi a) noexcept {
  return a == abi::aarch64_be;
}
inline bool known_abi(uint8_t id) noexcept {
  return id >= 1 && id <= 3;
}
/// AMD64 stores CFA[, FP]; AArch64 CFA[, RA[, FP]].
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

inline constexpr uint8_t fde_info(uint8_t fre_type, bool pcmask, uint8_t pauth_key) noexcept {
  return static_cast<uint8_t>((fre_type & 0xf) | (pcmask ? 0x10 : 0) | ((pauth_key & 1) << 5));
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

/// Sets `r` to the rules an FRE with this info byte and offsets describes (`offsets` holds
/// `fre_count(info)` values; the caller has checked the count for the ABI). Writes every field
/// in place: building a temporary and copying it made lookups stall on store forwarding.
inline void set_row(frame_row& r, abi a, uint32_t start, uint8_t info,
                    const int32_t* offsets) noexcept {
  const unsigned count = fre_count(info);
  r.pc_offset = start;
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

/// An FRE ready to be written: info byte, offsets, offset width.
struct fre_fields {
  uint8_t info = 0;
  unsigned count = 0;
  size_t offset_size = 1;
  int32_t offsets[3] = {0, 0, 0};
};

/// Maps a row onto the FRE layout of the ABI. Returns null on success, otherwise a static
/// string saying why SFrame cannot express the row.
inline const char* row_to_fre(abi a, const frame_row& r, fre_fields& out) noexcept {
  out = fre_fields{};
  if (r.ra == ra_rule::undefined) {
    out.info = fre_info(base_reg_fp, 0, 0, false);
    return nullptr;
  }
  const uint8_t base = r.cfa == cfa_base::fp ? base_reg_fp : base_reg_sp;
  out.offsets[0] = r.cfa_offset;
  unsigned n = 1;
  if (a == abi::amd64) {
    if (r.ra != ra_rule::saved || r.ra_offset != fixed_ra_offset(a))
      return "AMD64 SFrame fixes the return address at CFA-8";
    if (r.ra_mangled) return "RA mangling exists only on AArch64";
    if (r.fp == fp_rule::saved) out.offsets[n++] = r.fp_offset;
  } else if (r.ra == ra_rule::in_register) {
    if (r.fp == fp_rule::saved)
      return "AArch64 SFrame cannot say FP is saved while RA is in the link register";
  } else {
    out.offsets[n++] = r.ra_offset;
    if (r.fp == fp_rule::saved) out.offsets[n++] = r.fp_offset;
  }
  int32_t lo = 0, hi = 0;
  for (unsigned i = 0; i < n; ++i) {
    lo = out.offsets[i] < lo ? out.offsets[i] : lo;
    hi = out.offsets[i] > hi ? out.offsets[i] : hi;
  }
  uint8_t code = 2;
  if (lo >= -128 && hi <= 127) {
    code = 0;
  } else if (lo >= -32768 && hi <= 32767) {
    code = 1;
  }
  out.count = n;
  out.offset_size = fre_offset_size(code);
  out.info = fre_info(base, n, code, r.ra_mangled);
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

/// The raw fields of one FDE (bounds were checked by the header parse).
struct raw_fde {
  int32_t start_field = 0;
  uint32_t size = 0;
  uint32_t fre_offset = 0;
  uint32_t fre_count = 0;
  uint8_t info = 0;
  uint8_t rep_size = 0;
};

inline raw_fde read_fde(const section_layout& l, const uint8_t* section, size_t i) noexcept {
  const uint8_t* p = section + fde_offset(l, i);
  raw_fde f;
  f.start_field = static_cast<int32_t>(load_u32(p, l.big));
  f.size = load_u32(p + 4, l.big);
  f.fre_offset = load_u32(p + 8, l.big);
  f.fre_count = load_u32(p + 12, l.big);
  f.info = p[16];
  f.rep_size = l.info.version == version_1 ? 0 : p[17];
  return f;
}

/// Absolute start address of FDE `i` (modular arithmetic, like every reader of the format).
inline uint64_t fde_start(const section_layout& l, uint64_t section_address, size_t i,
                          int32_t start_field) noexcept {
  uint64_t base = section_address;
  if (l.info.flags & flag_fde_func_start_pcrel) base += fde_offset(l, i);
  return base + static_cast<uint64_t>(static_cast<int64_t>(start_field));
}

/// Repetition size of a PCMASK FDE (v1: implied).
inline uint32_t pcmask_rep(const section_layout& l, const raw_fde& f) noexcept {
  return l.info.version == version_1 ? v1_pcmask_rep_size : f.rep_size;
}

}  // namespace jitunwind::sframe::detail
