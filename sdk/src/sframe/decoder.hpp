// Private: the validating walk over a section shared by decode, check and table::create.
#pragma once

#include "sframe/format.hpp"

#include <jitunwind/result.h>

#include <optional>
#include <span>

namespace jitunwind::sframe::detail {

/// Checks the header and the placement of the sub-sections.
result<section_layout> parse_header(std::span<const uint8_t> bytes);

/// How many bytes of a section its header says are used (header, auxiliary header, FDE and FRE
/// sub-sections), from the section's first `header_size` bytes, so that a reader of another
/// process copies those rather than the size the process claims. Bytes without SFrame magic
/// need only the header (the decoder refuses them from it); nothing for a version this function
/// does not know (read the claimed size then).
std::optional<uint64_t> used_size(std::span<const uint8_t> head);

/// What the walk learned about the function ranges.
struct walk_summary {
  bool sorted = true;  ///< FDE starts strictly increase and functions do not overlap
  uint64_t lowest = 0, highest_end = 0;
};

/// Validates every FDE and FRE. When `out` is given, also decodes into it (functions, layout
/// and the `validate` verdict of each function).
result<walk_summary> walk_section(std::span<const uint8_t> bytes, uint64_t section_address,
                                  const section_layout& layout, decoded_section* out);

}  // namespace jitunwind::sframe::detail
