// The JSON form of an SFrame description (docs/sframe-json.md): input of `sframe build`,
// output of `sframe dump --format json`, so that dump(build(x)) gives x back.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/result.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::cli {

/// A set of functions of one ABI, plus the section-level facts a dump reports.
struct sframe_description {
  abi target = abi::amd64;
  std::vector<function_desc> functions;
  /// Optional per-function names (same length as `functions` or empty); from "name" keys or
  /// from ELF symbols. An empty string means no name.
  std::vector<std::string> names;
  /// "version": 2 or 3 on input (absent: 3); the section's version on output.
  std::optional<uint8_t> version;
  /// "flags": SFrame header flags (SFRAME_F_* bits), when given / known.
  std::optional<uint8_t> flags;
};

/// Parses and strictly validates a description. Errors (`invalid_argument`) name the JSON path
/// and the offending value, e.g.
/// `functions[3].rows[1].cfa: expected "sp+N" or "fp+N", got "x+1"`; frame-model errors come
/// from `jitunwind::validate`, prefixed with the function's path.
result<sframe_description> parse_sframe_json(const std::string& text);

/// Receives output text as it is made (and clears what it took): large sections are written
/// piece by piece instead of being held whole.
using text_sink = std::function<void(std::string& text)>;

/// Renders a description as JSON (2-space indentation, trailing newline).
std::string to_sframe_json(const sframe_description& d);
/// The same, given to `sink` one function at a time.
void write_sframe_json(const sframe_description& d, const text_sink& sink);

/// Names of header flags: "FDE_SORTED", "FRAME_POINTER", "FDE_FUNC_START_PCREL"; unknown bits
/// as "0xNN".
std::vector<std::string> sframe_flag_names(uint8_t flags);

/// "sp+16", "fp-8", "r10+0", "*(fp-8)" (v3: loaded from memory), …
std::string cfa_text(abi target, const frame_row& r);

/// "sp", "fp" (the ABI's), else "rN" with the DWARF number.
std::string register_text(abi target, uint8_t reg);

/// An RA/FP rule naming a register: "r3+0", "*(fp+0)".
std::string register_rule_text(abi target, uint8_t reg, int32_t offset, bool deref);

}  // namespace jitunwind::cli
