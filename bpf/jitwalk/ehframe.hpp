// .eh_frame (DWARF CFI as loaded into processes) -> walker rows, for native objects that have no
// .sframe (Debian's libc, libstdc++, ...). Only what the walker can apply is kept: CFA = RSP or
// RBP + offset, RBP saved at CFA + n or unchanged, RA at CFA - 8 or undefined (outermost);
// everything else (CFA expressions such as the PLT's, registers saved in registers) becomes a gap
// row, i.e. the frame-pointer fallback, reported as such.
//
// The input is hostile: every length, offset, pointer encoding, LEB128 and CFA instruction is
// bounds-checked; a bad FDE is skipped (counted, first messages kept); a bad entry length stops
// the parse with what was read so far.
#pragma once

#include "jitwalk/rows.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace jitwalk {

struct eh_frame_result {
  std::vector<unwind_function> functions;  ///< ELF virtual addresses (no load bias)
  size_t fdes = 0;                         ///< FDEs seen
  size_t skipped = 0;                      ///< FDEs rejected
  std::vector<std::string> problems;       ///< the first few rejection reasons
};

/// Parses a whole .eh_frame section whose first byte is at `section_vaddr`.
/// `malformed` only if nothing at all could be read.
result<eh_frame_result> parse_eh_frame(std::span<const uint8_t> section, uint64_t section_vaddr);

}  // namespace jitwalk
