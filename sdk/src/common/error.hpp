// Private: what every SDK module uses to build its errors. The SDK's private code (namespace
// jitunwind::detail) sees the toolkit's names (jitunwind/toolkit/, the hostile-input library the
// SDK, jitwalk and the CLI share) as its own: format, make_error, guarded_file, elf_image, ...
#pragma once

#include <jitunwind/result.h>
#include <jitunwind/toolkit/format.hpp>

namespace jitunwind::detail {
using namespace jitunwind::toolkit;
}  // namespace jitunwind::detail
