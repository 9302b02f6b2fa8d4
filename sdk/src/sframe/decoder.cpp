// Decoding and validation of SFrame v1/v2/v3 sections. Every count and offset is checked against
// the section size before it is used; the work is bounded by the section size (each FRE takes at
// least 2 bytes and the FDEs' FRE counts must add up to the header's count).
#include "sframe/decoder.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <limits>

namespace jitunwind::sframe {

using jitunwind::detail::make_error;

namespace detail {

namespace {

using ull = unsigned long long;

const char* endian_name(bool big) {
  return big ? "big" : "little";
}

}  // namespace

result<section_layout> parse_header(std::span<const uint8_t> bytes) {
  const size_t size = bytes.size();
  if (size == 0)
    return make_error(errc::malformed, "sframe: empty section (0 bytes): there is no SFrame data");
  if (size < 4)
    return make_error(errc::malformed,
                      "sframe: section of %zu bytes is too short for the 4-byte preamble", size);
  const uint8_t* b = bytes.data();
  section_layout l;
  if (b[0] == 0xe2 && b[1] == 0xde) {
    l.big = false;
  } else if (b[0] == 0xde && b[1] == 0xe2) {
    l.big = true;
  } else {
    return make_error(errc::malformed,
                      "sframe: bad magic bytes %02x %02x (expected 0xdee2 in either byte order)",
                      b[0], b[1]);
  }
  section_info& h = l.info;
  h.version = b[2];
  if (h.version < version_1 || h.version > version_3)
    return make_error(
        errc::unsupported,
        "sframe: version %u is not supported (this decoder reads versions 1, 2 and 3)", h.version);
  if (size < header_size)
    return make_error(errc::malformed,
                      "sframe: section of %zu bytes is shorter than the %zu-byte header", size,
                      header_size);
  h.flags = b[3];
  if (h.flags & ~known_flags(h.version))
    return make_error(errc::unsupported,
                      "sframe: header flags 0x%02x have bits 0x%02x undefined in version %u",
                      h.flags, h.flags & ~known_flags(h.version), h.version);
  if (!known_abi(b[4]))
    return make_error(errc::unsupported,
                      "sframe: ABI/arch id %u is not supported (1 = AArch64 BE, 2 = AArch64 LE, "
                      "3 = AMD64, 4 = s390x)",
                      b[4]);
  h.target = static_cast<abi>(b[4]);
  if (l.big != big_endian(h.target))
    return make_error(errc::malformed, "sframe: ABI %s is %s-endian but the magic is %s-endian",
                      to_string(h.target), endian_name(big_endian(h.target)), endian_name(l.big));
  h.cfa_fixed_fp_offset = static_cast<int8_t>(b[5]);
  h.cfa_fixed_ra_offset = static_cast<int8_t>(b[6]);
  if (h.cfa_fixed_fp_offset != 0)
    return make_error(errc::unsupported,
                      "sframe: fixed FP offset %d in the header is not supported (binutils and "
                      "LLVM write 0: FP tracked per FRE)",
                      h.cfa_fixed_fp_offset);
  if (h.cfa_fixed_ra_offset != fixed_ra_offset(h.target))
    return make_error(errc::unsupported, "sframe: fixed RA offset %d in the header; %s uses %d",
                      h.cfa_fixed_ra_offset, to_string(h.target), fixed_ra_offset(h.target));
  h.aux_header_len = b[7];
  h.num_fdes = load_u32(b + 8, l.big);
  h.num_fres = load_u32(b + 12, l.big);
  h.fre_len = load_u32(b + 16, l.big);
  h.fde_off = load_u32(b + 20, l.big);
  h.fre_off = load_u32(b + 24, l.big);
  l.fde_size = fde_size(h.version);

  const size_t base = header_size + h.aux_header_len;
  if (base > size)
    return make_error(errc::malformed,
                      "sframe: auxiliary header (%u bytes) past end of section (%zu bytes)",
                      h.aux_header_len, size);
  const uint64_t avail = size - base;
  const uint64_t fde_bytes = uint64_t{h.num_fdes} * l.fde_size;
  if (h.fde_off > avail || fde_bytes > avail - h.fde_off)
    return make_error(errc::malformed,
                      "sframe: FDE sub-section (%u FDEs of %zu bytes at offset %u) past end of "
                      "section (%llu bytes after the header)",
                      h.num_fdes, l.fde_size, h.fde_off, static_cast<ull>(avail));
  if (h.fre_off > avail || h.fre_len > avail - h.fre_off)
    return make_error(errc::malformed,
                      "sframe: FRE sub-section (%u bytes at offset %u) past end of section (%llu "
                      "bytes after the header)",
                      h.fre_len, h.fre_off, static_cast<ull>(avail));
  if (fde_bytes > 0 && h.fre_len > 0 && h.fde_off < uint64_t{h.fre_off} + h.fre_len &&
      h.fre_off < h.fde_off + fde_bytes)
    return make_error(errc::malformed,
                      "sframe: FDE sub-section [%u, +%llu) overlaps FRE sub-section [%u, +%u)",
                      h.fde_off, static_cast<ull>(fde_bytes), h.fre_off, h.fre_len);
  if (h.num_fres > h.fre_len / 2)
    return make_error(errc::malformed,
                      "sframe: %u FREs cannot fit in an FRE sub-section of %u bytes (2 bytes "
                      "at least each)",
                      h.num_fres, h.fre_len);
  l.fde_base = base + h.fde_off;
  l.fre_base = base + h.fre_off;
  return l;
}

namespace {

// One FRE's words, read both zero- and sign-extended (FLEX control words are unsigned).
struct fre_words {
  uint32_t raw[max_flex_words];
  int32_t value[max_flex_words];
};

void read_words(const uint8_t* p, unsigned count, size_t width, bool big, fre_words& w) {
  for (unsigned k = 0; k < count; ++k) {
    w.raw[k] = static_cast<uint32_t>(load(p + k * width, width, big));
    w.value[k] = load_signed(p + k * width, width, big);
  }
}

}  // namespace

std::optional<uint64_t> used_size(std::span<const uint8_t> head) {
  if (head.size() < header_size) return std::nullopt;
  const uint8_t* b = head.data();
  bool big = false;
  if (b[0] == 0xde && b[1] == 0xe2) {
    big = true;
  } else if (b[0] != 0xe2 || b[1] != 0xde) {
    return header_size;
  }
  if (b[2] != version_1 && b[2] != version_2 && b[2] != version_3) return std::nullopt;
  const uint64_t fde_bytes = uint64_t{load_u32(b + 8, big)} * fde_size(b[2]);
  const uint64_t fdes_end = uint64_t{load_u32(b + 20, big)} + fde_bytes;
  const uint64_t fres_end = uint64_t{load_u32(b + 24, big)} + load_u32(b + 16, big);
  return header_size + b[7] + std::max(fdes_end, fres_end);
}

result<walk_summary> walk_section(std::span<const uint8_t> bytes, uint64_t section_address,
                                  const section_layout& l, decoded_section* out) {
  const section_info& h = l.info;
  const abi a = h.target;
  const bool v3 = h.version >= version_3;
  const uint8_t* section = bytes.data();
  const uint8_t* fres = section + l.fre_base;
  const bool flagged_sorted = (h.flags & flag_fde_sorted) != 0;
  walk_summary sum;
  uint64_t fre_total = 0;
  uint64_t prev_start = 0, prev_end = 0;
  uint32_t prev_size = 0;
  if (out != nullptr) {
    out->info = h;
    out->functions.clear();
    out->layout.clear();
    out->nonconforming.clear();
    out->functions.reserve(h.num_fdes);
    out->layout.reserve(h.num_fdes);
  }
  for (size_t i = 0; i < h.num_fdes; ++i) {
    raw_fde f = read_fde(l, section, i);
    uint64_t first_fre = f.fre_offset;
    if (v3) {
      if (uint64_t{f.fre_offset} + attr_size_v3 > h.fre_len)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: attribute record at offset %u runs past the FRE "
                          "sub-section (len %u)",
                          i, f.fre_offset, h.fre_len);
      read_attr_v3(f, fres + f.fre_offset, l.big);
      first_fre += attr_size_v3;
      if (f.info & 0x40)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: reserved bit 6 of the info byte set "
                          "(info 0x%02x)",
                          i, f.info);
      if (fde_type(f.info2) > fde_type_flex || (f.info2 & ~0x1f) != 0)
        return make_error(errc::unsupported,
                          "sframe: FDE %zu: FDE type %u is not supported (0 DEFAULT, 1 FLEX; "
                          "info2 0x%02x)",
                          i, fde_type(f.info2), f.info2);
    }
    const bool flex = v3 && fde_type(f.info2) == fde_type_flex;
    if (flex && a == abi::s390x)
      return make_error(errc::unsupported,
                        "sframe: FDE %zu: flexible FDEs on s390x are not supported", i);
    const uint8_t type = fde_fre_type(f.info);
    const size_t aw = fre_address_size(type);
    if (aw == 0)
      return make_error(errc::malformed, "sframe: FDE %zu: FRE address type %u is invalid (0-2)", i,
                        type);
    const bool pcmask = fde_pcmask(f.info);
    const uint32_t rep = pcmask ? pcmask_rep(l, f) : 0;
    if (pcmask && rep == 0)
      return make_error(errc::malformed, "sframe: FDE %zu: PCMASK with repetition size 0", i);
    const uint32_t limit = pcmask ? rep : f.size;
    const uint64_t start = fde_start(l, section_address, i, f.start_field);
    // The section address plus a signed 32-bit offset must stay inside the address space (a
    // section placed near its top, or a start before 0): a wrapped start is no address at all.
    const uint64_t base = start - static_cast<uint64_t>(static_cast<int64_t>(f.start_field));
    if (base < section_address || (f.start_field >= 0 ? start < base : start > base))
      return make_error(errc::malformed,
                        "sframe: FDE %zu: function start %+lld from 0x%llx wraps the address space",
                        i, static_cast<long long>(f.start_field), static_cast<ull>(base));
    if (start > std::numeric_limits<uint64_t>::max() - f.size)
      return make_error(errc::malformed,
                        "sframe: FDE %zu: function at 0x%llx of %u bytes wraps the address space",
                        i, static_cast<ull>(start), f.size);
    const uint64_t end = start + f.size;
    if (i > 0 && (start <= prev_start || start < prev_end)) {
      sum.sorted = false;
      if (flagged_sorted)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: function [0x%llx, +%u) does not come after FDE %zu "
                          "[0x%llx, +%u) in a section flagged sorted",
                          i, static_cast<ull>(start), f.size, i - 1, static_cast<ull>(prev_start),
                          prev_size);
    }
    if (i == 0 || start < sum.lowest) sum.lowest = start;
    if (i == 0 || end > sum.highest_end) sum.highest_end = end;
    prev_start = start;
    prev_end = end;
    prev_size = f.size;

    fre_total += f.fre_count;
    if (fre_total > h.num_fres)
      return make_error(errc::malformed,
                        "sframe: FDE %zu: FRE counts add up to more than the header's %u FREs", i,
                        h.num_fres);
    if (f.fre_count > 0 && first_fre >= h.fre_len)
      return make_error(errc::malformed,
                        "sframe: FDE %zu: first FRE offset %llu past FRE sub-section (len %u)", i,
                        static_cast<ull>(first_fre), h.fre_len);

    function_desc* fd = nullptr;
    fde_layout* fl = nullptr;
    if (out != nullptr) {
      fd = &out->functions.emplace_back();
      fd->start = start;
      fd->size = f.size;
      fd->pcmask_rep = rep;
      fd->signal_frame = v3 && fde_signal(f.info);
      fd->pauth_key = fde_pauth_key(f.info);
      fd->rows.reserve(f.fre_count);
      fl = &out->layout.emplace_back();
      fl->offset = static_cast<uint32_t>(fde_offset(l, i));
      fl->start_field = f.start_field;
      fl->info = f.info;
      fl->info2 = f.info2;
      fl->fde_type = v3 ? fde_type(f.info2) : 0;
      fl->fre_address_size = static_cast<uint8_t>(aw);
      fl->pcmask = pcmask;
      fl->signal = fd->signal_frame;
      fl->pauth_key = fde_pauth_key(f.info);
      fl->rep_size = static_cast<uint8_t>(pcmask ? rep : f.rep_size);
      fl->attr_offset = v3 ? f.fre_offset : 0;
      fl->fre_offset = static_cast<uint32_t>(first_fre);
      fl->fre_infos.reserve(f.fre_count);
    }

    uint64_t pos = first_fre;
    uint32_t prev_fre_start = 0;
    const unsigned max_words = flex ? max_flex_words : max_offsets(a);
    for (uint32_t j = 0; j < f.fre_count; ++j) {
      if (pos + aw + 1 > h.fre_len)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u at offset %llu runs past FRE sub-section (len "
                          "%u)",
                          i, j, static_cast<ull>(pos), h.fre_len);
      const uint8_t* p = fres + pos;
      const uint32_t fre_start = static_cast<uint32_t>(load(p, aw, l.big));
      const uint8_t info = p[aw];
      const size_t osz = fre_offset_size(fre_size_code(info));
      if (osz == 0)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u: data word size code 3 is invalid (info 0x%02x)",
                          i, j, info);
      const unsigned count = fre_count(info);
      if (count > max_words)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u: %u data words (%s %s FREs have at most %u)", i,
                          j, count, to_string(a), flex ? "FLEX" : "DEFAULT", max_words);
      if (a == abi::amd64 && fre_mangled(info))
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u: RA-mangled bit set on AMD64 (info 0x%02x)", i,
                          j, info);
      const size_t total = aw + 1 + count * osz;
      if (pos + total > h.fre_len)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u at offset %llu (%zu bytes) runs past FRE "
                          "sub-section (len %u)",
                          i, j, static_cast<ull>(pos), total, h.fre_len);
      // A function of size 0 (gas emits them for empty .cfi_startproc/.cfi_endproc pairs) has
      // its one row at offset 0.
      if (fre_start >= limit && !(limit == 0 && fre_start == 0))
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u starts at offset %u, past the end of the %s "
                          "(%u bytes)",
                          i, j, fre_start, pcmask ? "repeated block" : "function", limit);
      if (j > 0 && fre_start <= prev_fre_start)
        return make_error(errc::malformed,
                          "sframe: FDE %zu: FRE %u start offset %u does not come after FRE %u "
                          "(%u)",
                          i, j, fre_start, j - 1, prev_fre_start);
      prev_fre_start = fre_start;
      // FLEX and s390x words are checked for meaning here, also when only validating.
      frame_row row;
      const char* bad = nullptr;
      if (flex || a == abi::s390x) {
        fre_words w;
        read_words(p + aw + 1, count, osz, l.big, w);
        bad = flex ? set_row_flex(row, a, fre_start, info, w.raw, w.value)
                   : set_row_s390x(row, fre_start, info, w.value);
      } else if (fd != nullptr) {
        int32_t offsets[3] = {0, 0, 0};
        for (unsigned k = 0; k < count; ++k)
          offsets[k] = load_signed(p + aw + 1 + k * osz, osz, l.big);
        set_row(row, a, fre_start, info, offsets);
      }
      if (bad != nullptr)
        return make_error(errc::malformed, "sframe: FDE %zu: FRE %u: %s (info 0x%02x)", i, j, bad,
                          info);
      if (fd != nullptr) {
        fd->rows.push_back(row);
        fl->fre_infos.push_back(info);
      }
      pos += total;
    }
    if (fl != nullptr) fl->fre_bytes = static_cast<uint32_t>(pos - first_fre);
  }
  if (fre_total != h.num_fres)
    return make_error(errc::malformed, "sframe: FDEs reference %llu FREs but the header says %u",
                      static_cast<ull>(fre_total), h.num_fres);
  if (h.num_fdes == 0) sum.lowest = sum.highest_end = 0;
  return sum;
}

}  // namespace detail

result<decoded_section> decode(std::span<const uint8_t> bytes, uint64_t section_address) {
  auto l = detail::parse_header(bytes);
  if (!l) return std::move(l).error();
  decoded_section out;
  auto walked = detail::walk_section(bytes, section_address, *l, &out);
  if (!walked) return std::move(walked).error();
  for (size_t i = 0; i < out.functions.size(); ++i) {
    auto v = validate(out.info.target, out.functions[i]);
    if (!v) out.nonconforming.push_back({i, v.error().message()});
  }
  return out;
}

result<section_info> check(std::span<const uint8_t> bytes, uint64_t section_address) {
  auto l = detail::parse_header(bytes);
  if (!l) return std::move(l).error();
  auto walked = detail::walk_section(bytes, section_address, *l, nullptr);
  if (!walked) return std::move(walked).error();
  return l->info;
}

}  // namespace jitunwind::sframe
