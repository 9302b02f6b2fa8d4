// .eh_frame (DWARF CFI as loaded into processes) -> walker rows, for native objects that have no
// .sframe (Debian's libc, libstdc++, ...), through the SDK's decoder (jitunwind::cfi::decode, the
// one decoder of DWARF CFI in the tree) with `partial_input::usable_rows`: what the walker can
// apply is kept (CFA = RSP or RBP + offset, RBP saved at CFA + n or unchanged, RA at CFA - 8 or
// undefined), every location whose rules SFrame cannot express (CFA expressions, registers saved
// in registers) becomes a gap row, i.e. the frame-pointer fallback, reported as such; the lazy
// PLT's CFA expression becomes a PCMASK function of 16-byte entries.
//
// The input is hostile: the decoder bounds every read by its entry and its work by the section;
// a bad FDE is skipped (counted, first messages kept); a bad entry length stops the walk with
// what was read before it.
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
