// Unwind tables of native objects: .sframe (v1 from binutils 2.40, v2 from binutils >= 2.41 and
// LLVM) first, .eh_frame for every function the .sframe does not cover (e.g. crt1's _start, or
// libraries built without --gsframe such as Debian's libc). Laid out as one range per executable
// mapping.
#pragma once

#include "jitwalk/elf_file.hpp"
#include "jitwalk/rows.hpp"

#include <string>
#include <vector>

namespace jitwalk {

struct native_policy {
  bool use_sframe = true;
  bool use_eh_frame = true;
};

/// The --native-tables value: "sframe,eh_frame" (either order), "sframe", "eh_frame" or "none";
/// `invalid_argument` naming the value for anything else.
result<native_policy> parse_native_policy(const std::string& value);

struct native_table {
  range_rows rows;
  size_t sframe_functions = 0;
  size_t eh_frame_functions = 0;
  int sframe_version = 0;             ///< 0 = no .sframe
  std::vector<std::string> problems;  ///< tables or entries rejected, with reasons
};

/// What a native table says about itself, without its rows (kept for tables shared by several
/// processes, table_store's shared rows).
struct native_summary {
  table_source source = table_source::eh_frame;
  size_t sframe_functions = 0;
  size_t eh_frame_functions = 0;
  int sframe_version = 0;
  size_t rows = 0;
};

/// All functions of `obj`'s tables (SFrame first, .eh_frame for what it does not cover), in the
/// object's addresses. `not_found` if none.
struct native_functions {
  std::vector<unwind_function> functions;
  size_t sframe_functions = 0;
  size_t eh_frame_functions = 0;
  int sframe_version = 0;
  std::vector<std::string> problems;
};
result<native_functions> collect_native_functions(const elf_file& obj, const native_policy& policy);

/// The rows of the part of an object mapped executable at [lo, hi) with load `bias` (`path`
/// names it in errors). `not_found` if no function lies there.
result<native_table> lay_out_native_table(const native_functions& fns, const std::string& path,
                                          uint64_t bias, uint64_t lo, uint64_t hi);

/// Builds the rows for the part of `obj` mapped executable at [lo, hi) with load `bias`.
/// `not_found` if no usable table covers that part.
result<native_table> build_native_table(const elf_file& obj, uint64_t bias, uint64_t lo,
                                        uint64_t hi, const native_policy& policy);

/// Decodes and validates a window's or object's SFrame section (hostile-input rules of the SDK
/// decoder) into walker functions. `section_address` is where the section lives (FDE addresses
/// are relative to it). `version_out` receives the section's version. `check_rules`: also apply
/// the frame model's ABI rules to every function (jitunwind::validate) — for JIT windows, whose
/// tables come from a process we do not trust.
result<std::vector<unwind_function>> sframe_functions(std::span<const uint8_t> bytes,
                                                      uint64_t section_address, table_source source,
                                                      int* version_out, bool check_rules = false);

}  // namespace jitwalk
