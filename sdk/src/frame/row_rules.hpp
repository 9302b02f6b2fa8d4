// Private: the per-row ABI rules shared by validate() and frame_builder.
#pragma once

#include <jitunwind/frame.h>

#include <optional>
#include <string>

namespace jitunwind::detail {

/// Why `r` cannot be right on ABI `a`, or nothing if it can.
std::optional<std::string> check_row_rules(abi a, const frame_row& r);

}  // namespace jitunwind::detail
