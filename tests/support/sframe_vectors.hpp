// The SFrame test vectors of ../shared/sframe-vectors (binutils 2.40-2.46 sections with the
// `objdump --sframe` text that binutils version printed for each), and a reader of that text.
// The vectors are never copied into the repository: tests read them where CI has them.
#pragma once

#include <jitunwind/frame.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jitunwind::test {

struct sframe_vector {
  std::string name;      ///< file name without ".json", e.g. "cfi-sframe-common-1-2.46"
  std::string stem;      ///< the test program: name without the binutils version
  std::string binutils;  ///< "2.46", or "" for the files without a version in their name
  uint64_t section_base = 0;
  std::vector<uint8_t> content;  ///< empty: gas emitted no section
  std::string groundtruth;       ///< objdump --sframe output
};

/// $JITUNWIND_SFRAME_VECTORS, else JITUNWIND_SOURCE_DIR/../shared/sframe-vectors, if it exists.
/// Otherwise prints why and returns nothing — or fails the test under JITUNWIND_REQUIRE_BPF=1.
std::optional<std::string> sframe_vectors_dir();

/// Every *.json of `dir`, sorted by name. Throws nothing; a file that does not parse fails the
/// current test (the vectors are ground truth, a broken one must be noticed).
std::vector<sframe_vector> load_sframe_vectors(const std::string& dir);

// ---- objdump --sframe text ----

struct oracle_row {
  uint64_t pc = 0;         ///< STARTPC column (PCMASK: the offset in the block)
  bool undefined = false;  ///< "RA undefined"
  std::string cfa, fp, ra;
};

struct oracle_function {
  uint64_t pc = 0;
  uint32_t size = 0;
  bool signal = false;  ///< attr "S"
  bool flex = false;    ///< attr "F"
  bool pauth_b = false;
  bool pcmask = false;  ///< STARTPC[m]
  std::vector<oracle_row> rows;
};

struct oracle_section {
  int version = 0;
  std::vector<std::string> flags;  ///< "SFRAME_F_FDE_SORTED", ...
  int fixed_ra = 0;
  uint32_t num_fdes = 0, num_fres = 0;
  std::vector<oracle_function> functions;
};

/// Nothing if the text has no "Contents of the SFrame section" (no section); otherwise the
/// parsed section, or a failed test if a line does not parse.
std::optional<oracle_section> parse_objdump_sframe(const std::string& text);

/// The row objdump's columns describe, in the frame model (RA "f"/"U" and AMD64 "u": the ABI's
/// fixed/default rule; "c-16": saved at CFA-16; "r3+0": the value of register 3; "(fp+0)": in
/// memory at fp+0; "[s]": mangled). Empty optional + `why` if a token is not understood.
std::optional<frame_row> oracle_to_row(abi a, const oracle_function& f, const oracle_row& r,
                                       std::string& why);

}  // namespace jitunwind::test
