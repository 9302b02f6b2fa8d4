// The comparisons of the frame model's values, defaulted here (C++20) so that frame.h compares
// every field without listing them and stays C++17 for embedders.
#include <jitunwind/frame.h>

namespace jitunwind {

bool frame_row::operator==(const frame_row&) const noexcept = default;
bool saved_register::operator==(const saved_register&) const noexcept = default;
bool function_desc::operator==(const function_desc&) const noexcept = default;

}  // namespace jitunwind
