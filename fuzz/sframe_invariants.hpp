// Invariants the SFrame decoder fuzz targets (sframe_decode, sframe_decode_v3) share.
#pragma once

#include <jitunwind/sframe.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>

namespace sframe_fuzz {

[[noreturn]] inline void broken_invariant() {
  std::abort();
}

/// decode() and check() agree: both refuse with the same message, or both accept and describe
/// the same section. Returns the decoded section, or nothing when both refused.
inline std::optional<jitunwind::sframe::decoded_section> decode_agreeing(
    std::span<const uint8_t> bytes, uint64_t address) {
  auto d = jitunwind::sframe::decode(bytes, address);
  auto c = jitunwind::sframe::check(bytes, address);
  if (d.ok() != c.ok()) broken_invariant();
  if (!d.ok()) {
    if (d.error().message() != c.error().message()) broken_invariant();
    return std::nullopt;
  }
  if (!(*c == d->info)) broken_invariant();
  return std::move(d).value();
}

/// What decoded re-encodes (same version, v1 as v2; format rules only) to the same functions,
/// in address order. Returns the re-encoded section decoded again, or nothing when the encoder
/// refused (s390x is read as data only).
inline std::optional<jitunwind::sframe::decoded_section> reencode_agreeing(
    const jitunwind::sframe::decoded_section& d, uint64_t address) {
  using namespace jitunwind::sframe;
  if (d.info.target == jitunwind::abi::s390x) return std::nullopt;
  encoder_options o;
  o.target = d.info.target;
  o.version = d.info.version == version_1 ? version_2 : d.info.version;
  o.section_address = address;
  o.pcrel = (d.info.flags & flag_fde_func_start_pcrel) != 0;
  o.strict = false;
  auto again = encode(o, d.functions);
  if (!again.ok()) return std::nullopt;
  auto d2 = decode(*again, address);
  if (!d2.ok()) broken_invariant();
  auto sorted = d.functions;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& x, const auto& y) { return x.start < y.start; });
  if (d2->functions != sorted) broken_invariant();
  return std::move(d2).value();
}

}  // namespace sframe_fuzz
