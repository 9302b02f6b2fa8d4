// Helpers for the tests of the `jitunwind` command-line tool: run the real binary, write
// inputs, parse JSON output and llvm-readobj-22's SFrame dump.
#pragma once

#include "support/process.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::test::cli {

/// Path of the jitunwind binary under test (JITUNWIND_CLI_PATH from CMake).
std::string tool_path();

/// Where the runtimes these tests start write their perf maps and jitdumps: JITUNWIND_DIR is
/// set to this scratch directory (removed at exit) for the whole test program, so that the
/// runs leave nothing in /tmp; the tool finds the maps through the runtimes' environment.
const std::string& runtime_dir();

/// Runs `jitunwind ARGS...`.
run_result run_tool(const std::vector<std::string>& args, const std::string& input = {});

/// A row as every SFrame reader shows it: PC offset in the function (or repeated block) and
/// the CFA/RA/FP rules; `ra_offset`/`fp_offset` are nullopt when not stored.
struct fre {
  uint64_t pc = 0;  ///< offset from the function start (PCMASK: in the block)
  bool outermost = false;
  std::string cfa_base;  ///< "sp" or "fp"
  int64_t cfa_offset = 0;
  std::optional<int64_t> ra_offset;
  std::optional<int64_t> fp_offset;
  bool ra_signed = false;
  bool operator==(const fre&) const = default;
};
struct fde {
  uint64_t start = 0;
  uint64_t size = 0;
  uint64_t rep_size = 0;        ///< 0 = PCINC
  unsigned fre_addr_bytes = 0;  ///< 1, 2, 4 (only from llvm-readobj)
  std::vector<fre> fres;
  std::vector<unsigned> offset_bytes;  ///< per FRE: 1, 2, 4 (only from llvm-readobj)
};
struct sframe_dump {
  unsigned version = 0;
  std::string abi;
  unsigned flags = 0;
  std::vector<fde> fdes;
};

/// Parses `llvm-readobj-22 --sframe PATH` (fails the test on a warning or error).
sframe_dump llvm_readobj_sframe(const std::string& path);

/// Converts our JSON description (dump output or build input) to the same structure.
/// Rows that omit the RA on AMD64 get the fixed -8 that SFrame stores in its header.
sframe_dump from_json(const nlohmann::json& doc);

/// The JSON of `jitunwind sframe dump --format json ARGS...` (fails the test on error).
nlohmann::json dump_json(const std::vector<std::string>& args);

/// Sorts functions by start and drops "name" keys (for comparing raw-section round trips).
nlohmann::json normalized(nlohmann::json doc, bool keep_names);

}  // namespace jitunwind::test::cli
