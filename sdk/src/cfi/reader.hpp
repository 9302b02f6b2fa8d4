// Private: a bounds-checked little-endian reader over DWARF call frame information (hostile
// input: every read is checked against the end of the current entry; a failed read sets `bad`
// and returns 0, so a parser checks once after a group of reads).
#pragma once

#include "cfi/dwarf.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace jitunwind::cfi::dwarf {

/// Bases of the relative pointer encodings that are not relative to the field itself.
struct pointer_bases {
  std::optional<uint64_t> text;      ///< DW_EH_PE_textrel
  std::optional<uint64_t> data;      ///< DW_EH_PE_datarel
  std::optional<uint64_t> function;  ///< DW_EH_PE_funcrel (the FDE's start, once known)
};

/// The low nibble of a DW_EH_PE encoding names a format we can read.
inline bool known_pointer_format(uint8_t encoding) noexcept {
  switch (encoding & 0x0f) {
    case pe_absptr:
    case pe_uleb128:
    case pe_udata2:
    case pe_udata4:
    case pe_udata8:
    case pe_sleb128:
    case pe_sdata2:
    case pe_sdata4:
    case pe_sdata8:
      return true;
    default:
      return false;
  }
}

class reader {
 public:
  /// Reads `bytes[pos, end)`; `address` is where `bytes[0]` lives (for pcrel pointers).
  reader(std::span<const uint8_t> bytes, size_t pos, size_t end, uint64_t address)
      : bytes_(bytes),
        pos_(pos),
        end_(end > bytes.size() ? bytes.size() : end),
        address_(address) {}

  bool bad() const noexcept { return bad_; }
  size_t pos() const noexcept { return pos_; }
  size_t end() const noexcept { return end_; }
  bool at_end() const noexcept { return pos_ >= end_; }
  size_t left() const noexcept { return pos_ < end_ ? end_ - pos_ : 0; }

  /// Skips `n` bytes (fails past the end).
  bool skip(uint64_t n) noexcept {
    if (bad_ || n > left()) return fail();
    pos_ += static_cast<size_t>(n);
    return true;
  }

  uint64_t uint(size_t width) noexcept {
    if (bad_ || width > left()) return fail();
    uint64_t v = 0;
    for (size_t i = 0; i < width; ++i) v |= uint64_t{bytes_[pos_ + i]} << (8 * i);
    pos_ += width;
    return v;
  }
  uint8_t u8() noexcept { return static_cast<uint8_t>(uint(1)); }

  uint64_t uleb() noexcept {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (bad_ || pos_ >= end_) return fail();
      const uint8_t b = bytes_[pos_++];
      if (shift >= 64 || (shift == 63 && (b & 0x7e) != 0)) return fail();  // does not fit
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
  }

  int64_t sleb() noexcept {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      if (bad_ || pos_ >= end_ || shift >= 64) return static_cast<int64_t>(fail());
      b = bytes_[pos_++];
      v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }

  /// A NUL-terminated string of at most `max` characters.
  std::string_view cstr(size_t max) noexcept {
    const size_t start = pos_;
    while (!bad_ && pos_ < end_) {
      if (bytes_[pos_] == 0) {
        std::string_view s(reinterpret_cast<const char*>(bytes_.data()) + start, pos_ - start);
        ++pos_;
        return s;
      }
      if (pos_ - start >= max) break;
      ++pos_;
    }
    fail();
    return {};
  }

  /// The value of the format part of a DW_EH_PE encoding (`address_size` bytes for absptr).
  /// nullopt for an unknown format (`bad` is not set: the caller names the encoding).
  std::optional<uint64_t> pointer_value(uint8_t encoding, size_t address_size) noexcept {
    switch (encoding & 0x0f) {
      case pe_absptr:
        return uint(address_size);
      case pe_uleb128:
        return uleb();
      case pe_udata2:
        return uint(2);
      case pe_udata4:
        return uint(4);
      case pe_udata8:
        return uint(8);
      case pe_sleb128:
        return static_cast<uint64_t>(sleb());
      case pe_sdata2:
        return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(uint(2))));
      case pe_sdata4:
        return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(uint(4))));
      case pe_sdata8:
        return uint(8);
      default:
        return std::nullopt;
    }
  }

  /// A DW_EH_PE-encoded pointer with its application (pcrel, textrel, datarel, funcrel,
  /// aligned). nullopt for an encoding we cannot resolve (unknown format or application, a
  /// base not given, indirect): `why` says which. Read errors set `bad` (and return nullopt).
  std::optional<uint64_t> pointer(uint8_t encoding, size_t address_size, const pointer_bases& b,
                                  const char*& why) noexcept {
    if (encoding & pe_indirect) {
      why = "indirect pointer (needs the target's memory)";
      return std::nullopt;
    }
    const uint64_t field = address_ + pos_;
    uint64_t base = 0;
    switch (encoding & 0x70) {
      case pe_absptr:
        break;
      case pe_pcrel:
        base = field;
        break;
      case pe_textrel:
        if (!b.text) return missing(why, "text-relative pointer without a text base");
        base = *b.text;
        break;
      case pe_datarel:
        if (!b.data) return missing(why, "data-relative pointer without a data base");
        base = *b.data;
        break;
      case pe_funcrel:
        if (!b.function) return missing(why, "function-relative pointer outside an FDE");
        base = *b.function;
        break;
      case pe_aligned: {
        const size_t aligned = (pos_ + address_size - 1) / address_size * address_size;
        if (!skip(aligned - pos_)) return std::nullopt;
        break;
      }
      default:
        return missing(why, "unknown pointer application");
    }
    auto v = pointer_value(encoding, address_size);
    if (!v) return missing(why, "unknown pointer format");
    if (bad_) return std::nullopt;
    return base + *v;  // modular, as the address arithmetic of the target
  }

 private:
  uint64_t fail() noexcept {
    bad_ = true;
    return 0;
  }
  static std::optional<uint64_t> missing(const char*& why, const char* what) noexcept {
    why = what;
    return std::nullopt;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_;
  size_t end_;
  uint64_t address_;
  bool bad_ = false;
};

}  // namespace jitunwind::cfi::dwarf
