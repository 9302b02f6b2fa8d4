// The human-readable form of `jitunwind sframe dump` (in the spirit of
// `llvm-readobj --sframe`: header fields, then each function with its rows).
#pragma once

#include "sframe_input.hpp"
#include "sframe_json.hpp"

#include <jitunwind/sframe.h>

#include <string>

namespace jitunwind::cli {

std::string render_sframe_text(const std::string& path, const sframe_source& source,
                               const sframe::decoded_section& section);
/// The same, given to `sink` one function at a time (a large section is never held as text).
void write_sframe_text(const std::string& path, const sframe_source& source,
                       const sframe::decoded_section& section, const text_sink& sink);

}  // namespace jitunwind::cli
