// The checks the kernel's SFrame unwinder series (v13 and later: SFrame v3) applies when a
// section is registered, done before the call so that a section the kernel would refuse (or,
// at unwind time, drop) is reported by name instead of as a bare EINVAL. The list, in this
// order, is docs/kernel-registration.md's checklist; each failure names its check.
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace jitunwind::detail::kernel {

/// One mapping of the process (a line of /proc/self/maps).
struct vma {
  uint64_t start = 0, end = 0;
  bool readable = false, executable = false;
};

/// The process's mappings from /proc/self/maps; `io_error` if it cannot be read.
result<std::vector<vma>> read_own_mappings();

struct text_range {
  uint64_t start = 0, end = 0;
};

/// The registration checklist. Identifiers as in docs/kernel-registration.md.
enum class registration_check : uint8_t {
  nonzero = 1,         ///< addresses and sizes non-zero, ranges do not wrap
  sframe_mapping = 2,  ///< the section inside one readable mapping
  text_mapping = 3,    ///< the text inside one executable mapping
  text_overlap = 4,    ///< the text overlaps no registered text range
  header = 5,          ///< magic 0xdee2 (native byte order), version 3, header complete
  sorted = 6,          ///< flag FDE_SORTED
  pcrel = 7,           ///< flag FDE_FUNC_START_PCREL
  flags = 8,           ///< no flag bits undefined in v3
  aux_header = 9,      ///< auxiliary header length 0
  counts = 10,         ///< at least one FDE and one FRE
  subsections = 11,    ///< FDE index and FRE sub-section inside the section, not overlapping
  fde_order = 12,      ///< function starts strictly increasing
  fde_in_text = 13,    ///< every function inside the text range
  fre_bounds = 14,     ///< attribute records and FREs inside the FRE sub-section, FDE types known
  fre_order = 15,      ///< FRE starts strictly increasing and inside their function
};

const char* to_string(registration_check c) noexcept;

/// Why a registration would be refused: the first failed check and what was found.
struct registration_failure {
  registration_check check;
  std::string message;  ///< "check 7 (FDE_FUNC_START_PCREL): flags 0x01 lack 0x04"
};

/// Applies the checklist to the `sframe_size` bytes at `sframe_address` (the caller passes them
/// as `section`; they must be those bytes) for the text [text_start, +text_size). Empty optional
/// if every check passes. Reads nothing but its arguments; the work is linear in the section.
std::optional<registration_failure> check_registration(uint64_t sframe_address,
                                                       std::span<const uint8_t> section,
                                                       uint64_t text_start, uint64_t text_size,
                                                       std::span<const vma> mappings,
                                                       std::span<const text_range> registered);

}  // namespace jitunwind::detail::kernel
