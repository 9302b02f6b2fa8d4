// Private: the on-ramp as its C and C++ doors call it. `c_names`: messages name the C functions
// (jitunwind_name_code), as the caller knows them.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>

#include <string_view>

namespace jitunwind::detail {

result<void> onramp_name_code(const void* code, size_t size, std::string_view name,
                              span<const frame_row> rows, bool c_names);
result<void> onramp_name_function(std::string_view name, const function_desc& f,
                                  bool c_names);
result<void> onramp_forget_code(const void* code, bool c_names);
/// The default session's warnings name C functions from now on.
void onramp_use_c_names();

}  // namespace jitunwind::detail
