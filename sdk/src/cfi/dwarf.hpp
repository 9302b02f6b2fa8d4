// Private: the DWARF call-frame constants and byte helpers the `.eh_frame` encoder uses.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace jitunwind::cfi::dwarf {

// Call frame instructions (DWARF 5, section 6.4.2; AArch64 vendor extension).
inline constexpr uint8_t cfa_advance_loc = 0x40;  // | delta (6 bits)
inline constexpr uint8_t cfa_offset = 0x80;       // | register (6 bits), ULEB128 factored offset
inline constexpr uint8_t cfa_restore = 0xc0;      // | register (6 bits)
inline constexpr uint8_t cfa_nop = 0x00;
inline constexpr uint8_t cfa_advance_loc1 = 0x02;
inline constexpr uint8_t cfa_advance_loc2 = 0x03;
inline constexpr uint8_t cfa_advance_loc4 = 0x04;
inline constexpr uint8_t cfa_set_loc = 0x01;
inline constexpr uint8_t cfa_offset_extended = 0x05;
inline constexpr uint8_t cfa_restore_extended = 0x06;
inline constexpr uint8_t cfa_undefined = 0x07;
inline constexpr uint8_t cfa_same_value = 0x08;
inline constexpr uint8_t cfa_register = 0x09;
inline constexpr uint8_t cfa_remember_state = 0x0a;
inline constexpr uint8_t cfa_restore_state = 0x0b;
inline constexpr uint8_t cfa_def_cfa_expression = 0x0f;
inline constexpr uint8_t cfa_expression = 0x10;
inline constexpr uint8_t cfa_offset_extended_sf = 0x11;
inline constexpr uint8_t cfa_def_cfa_sf = 0x12;
inline constexpr uint8_t cfa_def_cfa_offset_sf = 0x13;
inline constexpr uint8_t cfa_val_offset = 0x14;
inline constexpr uint8_t cfa_val_offset_sf = 0x15;
inline constexpr uint8_t cfa_val_expression = 0x16;
inline constexpr uint8_t cfa_gnu_args_size = 0x2e;
inline constexpr uint8_t cfa_gnu_negative_offset_extended = 0x2f;
inline constexpr uint8_t cfa_def_cfa = 0x0c;
inline constexpr uint8_t cfa_def_cfa_register = 0x0d;
inline constexpr uint8_t cfa_def_cfa_offset = 0x0e;
inline constexpr uint8_t cfa_aarch64_negate_ra_state = 0x2d;

// Pointer encodings (LSB "DWARF Extensions"): a format in the low nibble, an application in
// bits 4-6, "indirect" in bit 7; 0xff means omitted.
inline constexpr uint8_t pe_absptr = 0x00;
inline constexpr uint8_t pe_uleb128 = 0x01;
inline constexpr uint8_t pe_udata2 = 0x02;
inline constexpr uint8_t pe_udata4 = 0x03;
inline constexpr uint8_t pe_udata8 = 0x04;
inline constexpr uint8_t pe_sleb128 = 0x09;
inline constexpr uint8_t pe_sdata2 = 0x0a;
inline constexpr uint8_t pe_sdata4 = 0x0b;
inline constexpr uint8_t pe_sdata8 = 0x0c;
inline constexpr uint8_t pe_pcrel = 0x10;
inline constexpr uint8_t pe_textrel = 0x20;
inline constexpr uint8_t pe_datarel = 0x30;
inline constexpr uint8_t pe_funcrel = 0x40;
inline constexpr uint8_t pe_aligned = 0x50;
inline constexpr uint8_t pe_indirect = 0x80;
inline constexpr uint8_t pe_omit = 0xff;

// DWARF register numbers.
inline constexpr uint8_t amd64_rbp = 6;
inline constexpr uint8_t amd64_rsp = 7;
inline constexpr uint8_t amd64_rip = 16;
inline constexpr uint8_t aarch64_x29 = 29;
inline constexpr uint8_t aarch64_x30 = 30;
inline constexpr uint8_t aarch64_sp = 31;

/// Little-endian append helpers.
inline void put_u8(std::vector<uint8_t>& out, uint8_t v) {
  out.push_back(v);
}
inline void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

inline void put_uleb(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out.push_back(byte);
  } while (v != 0);
}

inline void put_sleb(std::vector<uint8_t>& out, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t byte = v & 0x7f;
    v >>= 7;  // arithmetic shift: g++ and clang define it for signed values
    if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
      more = false;
    } else {
      byte |= 0x80;
    }
    out.push_back(byte);
  }
}

/// The same helpers writing through a raw pointer into memory the caller has sized (the hot
/// path of the encoder: no capacity check per byte).
struct raw_out {
  uint8_t* p;
  size_t size_from(const uint8_t* start) const { return static_cast<size_t>(p - start); }
};
inline void put_u8(raw_out& out, uint8_t v) {
  *out.p++ = v;
}
inline void put_u32(raw_out& out, uint32_t v) {
  store_u32(out.p, v);
  out.p += 4;
}
inline void put_u64(raw_out& out, uint64_t v) {
  store_u64(out.p, v);
  out.p += 8;
}
inline void put_sleb(raw_out& out, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
    *out.p++ = more ? (byte | 0x80) : byte;
  }
}
inline void put_uleb(raw_out& out, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    *out.p++ = byte;
  } while (v != 0);
}

}  // namespace jitunwind::cfi::dwarf
