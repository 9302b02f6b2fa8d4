// Lookups in a validated section: binary search over the FDEs, then a scan of the function's
// FREs. `create` ran the full validation, so `find` reads without bounds checks.
#include <jitunwind/sframe.h>

#include "common/error.hpp"
#include "sframe/decoder.hpp"

#include <limits>

namespace jitunwind::sframe {

using jitunwind::detail::make_error;
using namespace detail;

result<table> table::create(std::span<const uint8_t> bytes, uint64_t section_address) {
  auto l = parse_header(bytes);
  if (!l) return std::move(l).error();
  auto walked = walk_section(bytes, section_address, *l, nullptr);
  if (!walked) return std::move(walked).error();
  if (!walked->sorted)
    return make_error(errc::unsupported,
                      "sframe: FDEs are not sorted by address (flags 0x%02x); lookups need a "
                      "sorted section (decode and re-encode it)",
                      l->info.flags);
  table t;
  t.bytes_ = bytes;
  t.section_address_ = section_address;
  t.info_ = l->info;
  t.pc_range_ = {walked->lowest, walked->highest_end};
  t.fde_base_ = l->fde_base;
  t.fre_base_ = l->fre_base;
  t.fde_size_ = static_cast<uint8_t>(l->fde_size);
  t.version_ = l->info.version;
  t.big_endian_ = l->big;
  if (t.pc_range_.second - t.pc_range_.first <= std::numeric_limits<uint32_t>::max()) {
    t.start_index_.resize(l->info.num_fdes);
    for (size_t i = 0; i < t.start_index_.size(); ++i)
      t.start_index_[i] = static_cast<uint32_t>(t.fde_start(i) - t.pc_range_.first);
  }
  return t;
}

uint64_t table::fde_start(size_t index) const noexcept {
  const size_t off = fde_base_ + index * fde_size_;
  const int64_t field =
      version_ >= version_3
          ? static_cast<int64_t>(load_as<uint64_t>(bytes_.data() + off, big_endian_))
          : static_cast<int32_t>(load_u32(bytes_.data() + off, big_endian_));
  uint64_t base = section_address_;
  if (info_.flags & flag_fde_func_start_pcrel) base += off;
  return base + static_cast<uint64_t>(field);
}

std::optional<lookup_result> table::find(uint64_t pc) const noexcept {
  std::optional<lookup_result> out(std::in_place);
  if (!find(pc, *out)) out.reset();
  return out;
}

bool table::find(uint64_t pc, lookup_result& r) const noexcept {
  if (pc < pc_range_.first || pc >= pc_range_.second) return false;
  // Number of FDEs starting at or before pc (upper bound).
  size_t first = 0, count = info_.num_fdes;
  if (!start_index_.empty()) {
    // Branch-free search (the comparison becomes a conditional move): on random PCs a
    // branching search mispredicts half of its ~log2(n) steps.
    const auto key = static_cast<uint32_t>(pc - pc_range_.first);
    const uint32_t* base = start_index_.data();
    size_t n = count;
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half] <= key ? base + half : base;
      n -= half;
    }
    first = static_cast<size_t>(base - start_index_.data()) + (*base <= key ? 1 : 0);
  } else {
    while (count > 0) {
      const size_t step = count / 2;
      if (fde_start(first + step) <= pc) {
        first += step + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
  }
  if (first == 0) return false;
  const size_t index = first - 1;
  const uint8_t* section = bytes_.data();
  const uint8_t* fde = section + fde_base_ + index * fde_size_;
  const uint64_t start =
      start_index_.empty() ? fde_start(index) : pc_range_.first + start_index_[index];
  uint32_t size, fre_offset, n_fres;
  uint8_t info, info2 = 0;
  uint32_t rep = 0;
  if (version_ >= version_3) {
    size = load_u32(fde + 8, big_endian_);
    const uint8_t* attr = section + fre_base_ + load_u32(fde + 12, big_endian_);
    n_fres = load_u16(attr, big_endian_);
    info = attr[2];
    info2 = attr[3];
    rep = attr[4];
    fre_offset = load_u32(fde + 12, big_endian_) + static_cast<uint32_t>(attr_size_v3);
  } else {
    size = load_u32(fde + 4, big_endian_);
    fre_offset = load_u32(fde + 8, big_endian_);
    n_fres = load_u32(fde + 12, big_endian_);
    info = fde[16];
    rep = info_.version == version_1 ? v1_pcmask_rep_size : fde[17];
  }
  if (pc - start >= size) return false;
  const bool flex = fde_type(info2) == fde_type_flex;
  r.function_index = index;
  r.function_start = start;
  r.function_size = size;
  r.signal_frame = version_ >= version_3 && fde_signal(info);
  if (n_fres == 0) {
    // v3: a DEFAULT FDE without FREs is an outermost frame; before v3 it says nothing.
    if (version_ < version_3 || flex) return false;
    r.row = outermost_row(0);
    return true;
  }
  uint32_t ip = static_cast<uint32_t>(pc - start);
  if (fde_pcmask(info)) ip %= rep;
  const size_t aw = fre_address_size(fde_fre_type(info));
  const uint8_t* p = section + fre_base_ + fre_offset;
  const uint8_t* match = nullptr;
  uint32_t match_start = 0;
  for (uint32_t j = 0; j < n_fres; ++j) {
    const auto fre_start = static_cast<uint32_t>(load(p, aw, big_endian_));
    if (fre_start > ip) break;
    match = p;
    match_start = fre_start;
    const uint8_t fi = p[aw];
    p += aw + 1 + fre_count(fi) * fre_offset_size(fre_size_code(fi));
  }
  if (match == nullptr) return false;
  const uint8_t fi = match[aw];
  const size_t osz = fre_offset_size(fre_size_code(fi));
  const unsigned n_words = fre_count(fi);
  if (flex || info_.target == abi::s390x) {
    // Checked by create(): cannot fail here.
    uint32_t raw[max_flex_words];
    int32_t words[max_flex_words];
    for (unsigned k = 0; k < n_words && k < max_flex_words; ++k) {
      raw[k] = static_cast<uint32_t>(load(match + aw + 1 + k * osz, osz, big_endian_));
      words[k] = load_signed(match + aw + 1 + k * osz, osz, big_endian_);
    }
    if (flex)
      (void)set_row_flex(r.row, info_.target, match_start, fi, raw, words);
    else
      (void)set_row_s390x(r.row, match_start, fi, words);
    return true;
  }
  int32_t offsets[3] = {0, 0, 0};
  for (unsigned k = 0; k < n_words; ++k)
    offsets[k] = load_signed(match + aw + 1 + k * osz, osz, big_endian_);
  set_row(r.row, info_.target, match_start, fi, offsets);
  return true;
}

}  // namespace jitunwind::sframe
