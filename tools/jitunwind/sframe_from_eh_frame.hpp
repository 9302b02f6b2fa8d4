// `jitunwind sframe build --from-eh-frame FILE (--raw OUT [--address A] | --elf OUT)`.
#pragma once

#include "cli.hpp"

#include <string>

namespace jitunwind::cli {

/// The options `sframe build` adds for the conversion (listed in its --help). Functions, not
/// variables: `sframe build`'s spec is built during static initialization of another file.
option_spec from_eh_frame_option();
option_spec cfi_section_option();

/// Runs the conversion (`args` holds --from-eh-frame). Exit status as every command.
int run_build_from_eh_frame(const std::string& program, const parsed_args& args);

}  // namespace jitunwind::cli
