// Private: the validating walk over a section shared by decode, check and table::create.
#pragma once

#include "sframe/format.hpp"

#include <jitunwind/result.h>

#include <span>

namespace jitunwind::sframe::detail {

/// Checks the header and the placement of the sub-sections.
result<section_layout> parse_header(std::span<const uint8_t> bytes);

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
