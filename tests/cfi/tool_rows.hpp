// Test helpers: wrap generated .eh_frame/.eh_frame_hdr in an ELF object and read the unwind rows
// back with real tools (llvm-dwarfdump-22, readelf, llvm-readobj-22).
#pragma once

#include <jitunwind/cfi.h>
#include <jitunwind/frame.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::test {

/// One FDE as a tool printed it, with its rows converted to the frame model.
struct tool_fde {
  uint64_t start = 0;
  uint64_t end = 0;
  std::vector<frame_row> rows;  ///< pc_offset relative to `start`; consecutive equal rows merged
};

/// Writes an ELF object with `.text` (NOBITS over [text_start, text_end)), `.eh_frame` at
/// `sections.eh_frame_address`... and `.eh_frame_hdr` with a PT_GNU_EH_FRAME header.
void write_unwind_object(const std::string& path, abi target, uint64_t text_start,
                         uint64_t text_end, uint64_t eh_frame_address,
                         const cfi::sections& sections);

/// `llvm-dwarfdump-22 --eh-frame` rows; fails the test (REQUIRE) if the tool fails.
std::vector<tool_fde> dwarfdump_fdes(const std::string& object, abi target);
/// `readelf --debug-dump=frames-interp` rows (AMD64 only: readelf prints "u" both for an
/// undefined RA and for AArch64's in-register RA).
std::vector<tool_fde> readelf_fdes(const std::string& object);

struct hdr_entry {
  uint64_t initial_location = 0;
  uint64_t fde_address = 0;
};
/// The `.eh_frame_hdr` table as `llvm-readobj-22 --unwind` decodes it.
std::vector<hdr_entry> readobj_hdr_entries(const std::string& object, uint64_t* eh_frame_ptr);

/// What the tools must print for `f`: one expected FDE per block for PCMASK functions.
std::vector<tool_fde> expected_fdes(abi target, const function_desc& f);

/// Merges consecutive rows with equal rules (keeps the first's pc_offset).
std::vector<frame_row> merged(const std::vector<frame_row>& rows);

std::string describe(const std::vector<frame_row>& rows);

}  // namespace jitunwind::test
