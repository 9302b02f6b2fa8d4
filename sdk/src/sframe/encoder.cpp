// The SFrame v3 (and v2) encoder. FREs (v3: with each function's attribute record) are encoded
// once, when a function is appended; FDEs keep absolute start addresses and are serialized by
// `write`, so appending never re-encodes earlier functions and `relocate` only re-checks the
// ranges.
#include <jitunwind/sframe.h>

#include "common/error.hpp"
#include "common/same_rows.hpp"
#include "sframe/format.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace jitunwind::sframe {

using jitunwind::detail::make_error;
using namespace detail;

namespace {

using ull = unsigned long long;

bool known(abi a) {
  return a == abi::amd64 || a == abi::aarch64_le || a == abi::aarch64_be;
}

// The start field of FDE `index` for a function at `start`, if it fits (v2: an int32; v3: an
// int64, which any address does, modulo 2^64 like every reader computes it).
bool start_field(const encoder_options& o, size_t index, uint64_t start, int64_t& out) {
  const bool v3 = o.version >= version_3;
  uint64_t base = o.section_address;
  if (o.pcrel) base += header_size + index * (v3 ? fde_size_v3 : fde_size_v2);
  const auto delta = static_cast<int64_t>(start - base);
  if (!v3 &&
      (delta < std::numeric_limits<int32_t>::min() || delta > std::numeric_limits<int32_t>::max()))
    return false;
  out = delta;
  return true;
}

// The first row of `f` a DEFAULT FDE cannot hold, with why; nullptr if none.
const char* needs_flex(abi a, const function_desc& f, size_t& row) {
  for (size_t i = 0; i < f.rows.size(); ++i) {
    if (const char* why = default_unexpressible(a, f.rows[i])) {
      row = i;
      return why;
    }
  }
  return nullptr;
}

// What SFrame itself needs from a function (encoder_options::strict = false).
result<void> check_format(const function_desc& f) {
  if (f.start > std::numeric_limits<uint64_t>::max() - f.size)
    return make_error(errc::out_of_range, "function at 0x%llx: size %u wraps the address space",
                      static_cast<ull>(f.start), f.size);
  const uint32_t limit = f.pcmask_rep != 0 ? f.pcmask_rep : f.size;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    const uint32_t pc = f.rows[i].pc_offset;
    // gas gives an empty function (size 0) its one row at offset 0.
    if (pc >= limit && !(limit == 0 && pc == 0))
      return make_error(errc::invalid_argument,
                        "function at 0x%llx: row %zu at offset %u is past the %s end (%u)",
                        static_cast<ull>(f.start), i, pc,
                        f.pcmask_rep ? "repeated block's" : "function's", limit);
    if (i > 0 && pc <= f.rows[i - 1].pc_offset)
      return make_error(errc::invalid_argument,
                        "function at 0x%llx: row %zu at offset %u does not come after row %zu "
                        "(offset %u)",
                        static_cast<ull>(f.start), i, pc, i - 1, f.rows[i - 1].pc_offset);
  }
  return {};
}

}  // namespace

result<encoder> encoder::create(const encoder_options& options) {
  if (options.target == abi::s390x)
    return make_error(errc::invalid_argument,
                      "sframe encoder: s390x is read as data only; it cannot be encoded");
  if (!known(options.target))
    return make_error(errc::invalid_argument, "sframe encoder: unknown ABI id %d",
                      static_cast<int>(options.target));
  if (options.version != version_2 && options.version != version_3)
    return make_error(errc::invalid_argument,
                      "sframe encoder: version %u cannot be written (2 or 3)", options.version);
  if (options.version >= version_3 && options.frame_pointer.value_or(false))
    return make_error(errc::invalid_argument,
                      "sframe encoder: the FRAME_POINTER flag does not exist in SFrame v3");
  return encoder(options);
}

size_t encoder::fde_size() const noexcept {
  return options_.version >= version_3 ? fde_size_v3 : fde_size_v2;
}

bool encoder::has_last_shape(const function_desc& f, uint8_t fre_type) const noexcept {
  if (last_type_ != fre_type || f.pcmask_rep != last_rep_ || f.signal_frame != last_signal_ ||
      f.pauth_key != last_pauth_ || !jitunwind::detail::same_rows(f.rows, last_rows_))
    return false;
  // What `validate` / `check_format` check beyond the rows themselves (equal to rows that
  // passed, sorted and with the first at 0) and the repetition size (equal too).
  const uint32_t limit = f.pcmask_rep != 0 ? f.pcmask_rep : f.size;
  return f.size != 0 && f.pcmask_rep <= f.size &&
         f.start <= std::numeric_limits<uint64_t>::max() - f.size &&
         (f.rows.empty() || f.rows.back().pc_offset < limit);
}

result<void> encoder::append(const function_desc& f) {
  const abi a = options_.target;
  const bool v3 = options_.version >= version_3;
  const uint8_t type = fre_type_for(f.pcmask_rep != 0 ? f.pcmask_rep : f.size);
  // A function shaped like the last one (most functions of a JIT share their prologue shape):
  // the row checks passed for these rows and their FRE bytes are already encoded. Only what
  // depends on the start address and size is checked (in has_last_shape; order and reach
  // below, as for any function).
  const bool same_shape = has_last_shape(f, type);
  if (!same_shape) {
    if (options_.strict && v3 && f.rows.empty()) {
      // v3: a function without rows is an outermost frame; check it as one.
      function_desc outermost = f;
      outermost.rows.push_back(outermost_row(0));
      if (auto v = validate(a, outermost); !v) return v;
    } else if (options_.strict) {
      if (auto v = validate(a, f); !v) return v;
    } else if (auto v = check_format(f); !v) {
      return v;
    }
  }
  if (f.pcmask_rep > 0xff)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: repetition size %u does not fit SFrame's 8-bit field",
                      static_cast<ull>(f.start), f.pcmask_rep);
  if (f.pauth_key > 1)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx: pointer-authentication key %u (0 = A, 1 = B)",
                      static_cast<ull>(f.start), f.pauth_key);
  if (!v3 && f.signal_frame)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx is a signal frame: SFrame v2 has no signal-frame bit "
                      "(write version 3)",
                      static_cast<ull>(f.start));
  if (v3 && f.rows.size() > max_fres_v3)
    return make_error(errc::invalid_argument,
                      "function at 0x%llx has %zu rows; SFrame v3 stores at most %u per function",
                      static_cast<ull>(f.start), f.rows.size(), max_fres_v3);
  if (!fdes_.empty()) {
    const fde_entry& prev = fdes_.back();
    // Strictly after the previous start too: an empty function must not share it (readers
    // binary-search on the starts).
    if (f.start < prev.start + prev.size || f.start <= prev.start)
      return make_error(errc::invalid_argument,
                        "function at 0x%llx starts before the end of the previous one "
                        "[0x%llx, +%u): append functions in address order without overlap",
                        static_cast<ull>(f.start), static_cast<ull>(prev.start), prev.size);
  }
  int64_t field = 0;
  if (!start_field(options_, fdes_.size(), f.start, field))
    return make_error(errc::out_of_range,
                      "function at 0x%llx is out of the ±2 GiB reach of the SFrame section at "
                      "0x%llx",
                      static_cast<ull>(f.start), static_cast<ull>(options_.section_address));
  if (f.rows.size() > std::numeric_limits<uint32_t>::max() - fre_total_)
    return make_error(errc::limit_exceeded, "sframe encoder: more than 2^32 FREs");

  const size_t old_size = fres_.size();
  if (same_shape) {
    if (old_size + last_fre_bytes_ > std::numeric_limits<uint32_t>::max())
      return make_error(errc::limit_exceeded, "sframe encoder: FRE sub-section over 4 GiB");
    // (Functions without rows, which the non-strict format check accepts, have no bytes: and
    // an empty vector's data() may be null, which memcpy must not get.)
    if (last_fre_bytes_ != 0) {
      fres_.resize(old_size + last_fre_bytes_);
      std::memcpy(fres_.data() + old_size, fres_.data() + last_fre_offset_, last_fre_bytes_);
    }
    fdes_.push_back(fde_entry{f.start, f.size, static_cast<uint32_t>(old_size),
                              static_cast<uint32_t>(f.rows.size()),
                              fde_info(type, f.pcmask_rep != 0, f.pauth_key, f.signal_frame),
                              static_cast<uint8_t>(f.pcmask_rep)});
    fre_total_ += static_cast<uint32_t>(f.rows.size());
    all_keep_fp_ &= last_uses_fp_;
    return {};
  }
  size_t flex_row = 0;
  const char* flex_why = needs_flex(a, f, flex_row);
  if (flex_why != nullptr && (!v3 || !options_.allow_flex))
    return make_error(errc::invalid_argument, "function at 0x%llx: row %zu (offset %u): %s: %s",
                      static_cast<ull>(f.start), flex_row, f.rows[flex_row].pc_offset, flex_why,
                      v3 ? "needs a flexible (FLEX) FDE, which this encoder is set to refuse "
                           "(allow_flex = false)"
                         : "SFrame v2 cannot express it (write version 3)");
  if (auto r = encode_rows(f, type, flex_why != nullptr); !r) return r;
  fdes_.push_back(fde_entry{f.start, f.size, static_cast<uint32_t>(old_size),
                            static_cast<uint32_t>(f.rows.size()),
                            fde_info(type, f.pcmask_rep != 0, f.pauth_key, f.signal_frame),
                            static_cast<uint8_t>(f.pcmask_rep)});
  fre_total_ += static_cast<uint32_t>(f.rows.size());
  last_rows_.assign(f.rows.begin(), f.rows.end());
  last_rep_ = f.pcmask_rep;
  last_type_ = type;
  last_signal_ = f.signal_frame;
  last_pauth_ = f.pauth_key;
  last_fre_offset_ = static_cast<uint32_t>(old_size);
  last_fre_bytes_ = static_cast<uint32_t>(fres_.size() - old_size);
  all_keep_fp_ &= last_uses_fp_;
  return {};
}

// Appends `f`'s FRE bytes (v3: after its attribute record) to fres_; on error fres_ is as it
// was. Sets last_uses_fp_.
result<void> encoder::encode_rows(const function_desc& f, uint8_t type, bool flex) {
  const abi a = options_.target;
  const bool v3 = options_.version >= version_3;
  const bool big = big_endian(a);
  const size_t old_size = fres_.size();
  const size_t aw = fre_address_size(type);
  // Worst case per row: 4-byte address, info, six 4-byte words; v3: the attribute record.
  fres_.resize(old_size + (v3 ? attr_size_v3 : 0) + f.rows.size() * (aw + 1 + 24));
  uint8_t* p = fres_.data() + old_size;
  if (v3) {
    store(p, f.rows.size(), 2, big);
    p[2] = fde_info(type, f.pcmask_rep != 0, f.pauth_key, f.signal_frame);
    p[3] = flex ? fde_type_flex : fde_type_default;
    p[4] = static_cast<uint8_t>(f.pcmask_rep);
    p += attr_size_v3;
  }
  bool uses_fp = false;
  fre_fields ff;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    const frame_row& r = f.rows[i];
    if (const char* why = flex ? row_to_flex(a, r, ff) : row_to_fre(a, r, ff)) {
      fres_.resize(old_size);
      return make_error(errc::invalid_argument, "function at 0x%llx: row %zu (offset %u): %s",
                        static_cast<ull>(f.start), i, r.pc_offset, why);
    }
    uses_fp |= r.cfa == cfa_base::fp && r.ra != ra_rule::undefined;
    store(p, r.pc_offset, aw, big);
    p += aw;
    *p++ = ff.info;
    for (unsigned k = 0; k < ff.count; ++k, p += ff.offset_size)
      store(p, static_cast<uint32_t>(ff.offsets[k]), ff.offset_size, big);
  }
  const size_t new_size = static_cast<size_t>(p - fres_.data());
  if (new_size > std::numeric_limits<uint32_t>::max()) {
    fres_.resize(old_size);
    return make_error(errc::limit_exceeded, "sframe encoder: FRE sub-section over 4 GiB");
  }
  fres_.resize(new_size);
  last_uses_fp_ = uses_fp;
  return {};
}

size_t encoder::size() const noexcept {
  return header_size + fdes_.size() * fde_size() + fres_.size();
}

size_t encoder::function_count() const noexcept {
  return fdes_.size();
}

void encoder::write_header(uint8_t* h, size_t fde_room) const {
  const abi a = options_.target;
  const bool big = big_endian(a);
  uint8_t flags = flag_fde_sorted;
  const bool v3 = options_.version >= version_3;
  const bool fp = !v3 && options_.frame_pointer.value_or(!fdes_.empty() && all_keep_fp_);
  if (fp) flags |= flag_frame_pointer;
  if (options_.pcrel) flags |= flag_fde_func_start_pcrel;
  store(h, magic, 2, big);
  h[2] = options_.version;
  h[3] = flags;
  h[4] = static_cast<uint8_t>(a);
  h[5] = 0;
  h[6] = static_cast<uint8_t>(fixed_ra_offset(a));
  h[7] = 0;
  store(h + 8, fdes_.size(), 4, big);
  store(h + 12, fre_total_, 4, big);
  store(h + 16, fres_.size(), 4, big);
  store(h + 20, 0, 4, big);
  store(h + 24, fde_room * fde_size(), 4, big);
}

// FDEs [from, to) into their places in the FDE sub-section starting at `fde_area`.
void encoder::write_fdes(uint8_t* fde_area, uint64_t section_address, size_t from,
                         size_t to) const {
  encoder_options at = options_;
  at.section_address = section_address;
  const bool big = big_endian(options_.target);
  const size_t n = fde_size();
  uint8_t* p = fde_area + from * n;
  for (size_t i = from; i < to; ++i, p += n) {
    const fde_entry& e = fdes_[i];
    int64_t field = 0;
    // Checked by the callers; cannot fail for a consistent encoder.
    (void)start_field(at, i, e.start, field);
    if (n == fde_size_v3) {
      store(p, static_cast<uint64_t>(field), 8, big);
      store(p + 8, e.size, 4, big);
      store(p + 12, e.fre_offset, 4, big);
      continue;
    }
    store(p, static_cast<uint32_t>(field), 4, big);
    store(p + 4, e.size, 4, big);
    store(p + 8, e.fre_offset, 4, big);
    store(p + 12, e.fre_count, 4, big);
    p[16] = e.info;
    p[17] = e.rep_size;
    p[18] = p[19] = 0;
  }
}

result<void> encoder::write(std::span<uint8_t> out) const {
  const size_t total = size();
  if (out.size() < total)
    return make_error(errc::invalid_argument,
                      "sframe encoder: output buffer of %zu bytes, the section needs %zu",
                      out.size(), total);
  write_header(out.data(), fdes_.size());
  uint8_t* fde_area = out.data() + header_size;
  write_fdes(fde_area, options_.section_address, 0, fdes_.size());
  if (!fres_.empty()) std::memcpy(fde_area + fdes_.size() * fde_size(), fres_.data(), fres_.size());
  return {};
}

namespace {

// What both write_updates refuse: a short buffer, more functions written than there are, a new
// function out of reach of the buffer's address.
template <class Fdes>
result<void> check_update(const encoder_options& options, const Fdes& fdes,
                          std::span<const uint8_t> out, uint64_t section_address, size_t written,
                          size_t total) {
  if (out.size() < total)
    return make_error(errc::invalid_argument,
                      "sframe encoder: output buffer of %zu bytes, the section needs %zu",
                      out.size(), total);
  if (written > fdes.size())
    return make_error(errc::invalid_argument,
                      "sframe encoder: update of a section with %zu functions, the encoder has %zu",
                      written, fdes.size());
  encoder_options at = options;
  at.section_address = section_address;
  for (size_t i = written; i < fdes.size(); ++i) {
    int64_t field = 0;
    if (!start_field(at, i, fdes[i].start, field))
      return make_error(errc::out_of_range,
                        "function %zu at 0x%llx is out of the ±2 GiB reach of the SFrame section "
                        "at 0x%llx",
                        i, static_cast<ull>(fdes[i].start), static_cast<ull>(section_address));
  }
  return {};
}

}  // namespace

result<void> encoder::write_update(std::span<uint8_t> out, uint64_t section_address,
                                   size_t written) const {
  if (auto ok = check_update(options_, fdes_, out, section_address, written, size()); !ok)
    return ok;
  uint8_t* fde_area = out.data() + header_size;
  uint8_t* fre_area = fde_area + fdes_.size() * fde_size();
  // FRE bytes of the first `written` functions are already in `out`, behind their FDEs.
  const size_t old_fre_bytes = written < fdes_.size() ? fdes_[written].fre_offset : fres_.size();
  if (written != fdes_.size()) {
    if (old_fre_bytes != 0) std::memmove(fre_area, fde_area + written * fde_size(), old_fre_bytes);
    if (fres_.size() > old_fre_bytes)
      std::memcpy(fre_area + old_fre_bytes, fres_.data() + old_fre_bytes,
                  fres_.size() - old_fre_bytes);
    write_fdes(fde_area, section_address, written, fdes_.size());
  }
  write_header(out.data(), fdes_.size());
  return {};
}

size_t encoder::size_with_room(size_t fde_room) const noexcept {
  return header_size + std::max(fde_room, fdes_.size()) * fde_size() + fres_.size();
}

result<void> encoder::write_update(std::span<uint8_t> out, uint64_t section_address,
                                   size_t written, size_t fde_room) const {
  if (fde_room < fdes_.size())
    return make_error(errc::invalid_argument,
                      "sframe encoder: room for %zu FDEs, the encoder has %zu functions", fde_room,
                      fdes_.size());
  if (auto ok = check_update(options_, fdes_, out, section_address, written,
                               size_with_room(fde_room)); !ok)
    return ok;
  uint8_t* fde_area = out.data() + header_size;
  uint8_t* fre_area = fde_area + fde_room * fde_size();
  const size_t old_fre_bytes = written < fdes_.size() ? fdes_[written].fre_offset : fres_.size();
  if (fres_.size() > old_fre_bytes)
    std::memcpy(fre_area + old_fre_bytes, fres_.data() + old_fre_bytes,
                fres_.size() - old_fre_bytes);
  write_fdes(fde_area, section_address, written, fdes_.size());
  write_header(out.data(), fde_room);
  return {};
}

std::vector<uint8_t> encoder::bytes() const {
  std::vector<uint8_t> out(size());
  (void)write(out);
  return out;
}

void encoder::clear() noexcept {
  fdes_.clear();
  fres_.clear();
  fre_total_ = 0;
  all_keep_fp_ = true;
  last_rows_.clear();
  last_rep_ = 0;
  last_fre_offset_ = 0;
  last_fre_bytes_ = 0;
  last_type_ = 0xff;
  last_signal_ = false;
  last_pauth_ = 0;
  last_uses_fp_ = false;
}

result<void> encoder::remove(uint64_t start) {
  auto it = std::lower_bound(fdes_.begin(), fdes_.end(), start,
                             [](const fde_entry& e, uint64_t a) { return e.start < a; });
  if (it == fdes_.end() || it->start != start)
    return make_error(errc::not_found, "sframe encoder: no function starts at 0x%llx",
                      static_cast<ull>(start));
  // FRE bytes are laid out in FDE order (append copies a shared shape): cut this function's
  // and move the later functions' offsets down.
  const uint32_t from = it->fre_offset;
  const uint32_t to =
      it + 1 != fdes_.end() ? (it + 1)->fre_offset : static_cast<uint32_t>(fres_.size());
  fres_.erase(fres_.begin() + from, fres_.begin() + to);
  fre_total_ -= it->fre_count;
  for (auto later = it + 1; later != fdes_.end(); ++later) later->fre_offset -= to - from;
  fdes_.erase(it);
  last_type_ = 0xff;  // the cached shape's bytes may have moved
  // all_keep_fp_ stays: it can only be too cautious (FRAME_POINTER flag not set).
  return {};
}

result<void> encoder::relocate(uint64_t new_section_address) {
  encoder_options moved = options_;
  moved.section_address = new_section_address;
  for (size_t i = 0; i < fdes_.size(); ++i) {
    int64_t field = 0;
    if (!start_field(moved, i, fdes_[i].start, field))
      return make_error(errc::out_of_range,
                        "function %zu at 0x%llx would be out of the ±2 GiB reach of the SFrame "
                        "section at 0x%llx",
                        i, static_cast<ull>(fdes_[i].start), static_cast<ull>(new_section_address));
  }
  options_.section_address = new_section_address;
  return {};
}

result<std::vector<uint8_t>> encode(const encoder_options& options,
                                    std::span<const function_desc> functions) {
  auto enc = encoder::create(options);
  if (!enc) return std::move(enc).error();
  std::vector<const function_desc*> order;
  order.reserve(functions.size());
  for (const auto& f : functions) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const function_desc* x, const function_desc* y) {
    return x->start < y->start;
  });
  for (const function_desc* f : order)
    if (auto r = enc->append(*f); !r) return std::move(r).error();
  return enc->bytes();
}

}  // namespace jitunwind::sframe
