/// jitunwind/sframe.h — SFrame: encoder (v3, v2 on request), decoder/validator (v1, v2, v3),
/// lookup, unwinder.
///
/// SFrame is the compact "how to find the CFA, return address and saved FP at this PC" table
/// that the kernel's user-space unwinder, our eBPF walker and binutils/LLVM tools read. The SDK
/// produces one section per code window from `function_desc` values (`frame.h`).
///
/// Everything read from outside (a file, another process, a section a JIT wrote) is treated as
/// hostile: `decode` and `table::create` check every count, offset and enum against the section
/// size and return `errc::malformed` with a message naming the structure, its index and the
/// offending values ("sframe: FDE 12: first FRE offset 4096 past FRE sub-section (len 312)").
///
/// Thread-safety: `encoder` is used by one thread at a time; `table` is immutable after
/// `create` and may be shared; free functions are thread-safe.
#pragma once

// A tooling header: C++20 (std::span). C++17 code reaches the same operations through the C API
// (jitunwind/jitunwind.h); the embedding headers (window.h, frame.h, ...) are C++17.
#if __cplusplus < 202002L
#error "jitunwind/sframe.h needs C++20; from C++17 use the C API in jitunwind/jitunwind.h"
#endif

#include <jitunwind/config.h>
#include <jitunwind/frame.h>
#include <jitunwind/result.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace jitunwind::sframe {

inline constexpr uint16_t magic = 0xdee2;
inline constexpr uint8_t version_1 = 1;
inline constexpr uint8_t version_2 = 2;
/// What binutils 2.46 writes and the kernel's SFrame series (since v13) reads; our default.
inline constexpr uint8_t version_3 = 3;

/// Header flags.
inline constexpr uint8_t flag_fde_sorted = 0x1;
/// v1 and v2 only (undefined in v3).
inline constexpr uint8_t flag_frame_pointer = 0x2;
inline constexpr uint8_t flag_fde_func_start_pcrel = 0x4;

/// The decoded header of a section.
struct section_info {
  uint8_t version = 0;
  uint8_t flags = 0;
  abi target = abi::amd64;
  int8_t cfa_fixed_fp_offset = 0;
  int8_t cfa_fixed_ra_offset = 0;
  uint8_t aux_header_len = 0;
  uint32_t num_fdes = 0;
  uint32_t num_fres = 0;
  uint32_t fre_len = 0;  ///< bytes of the FRE sub-section
  uint32_t fde_off = 0;  ///< offset of the FDE sub-section after the header
  uint32_t fre_off = 0;  ///< offset of the FRE sub-section after the header

  bool operator==(const section_info&) const = default;
};

// ---------------------------------------------------------------------------------------------
// Encoding

struct encoder_options {
  abi target = abi::amd64;
  /// Address of the section's first byte where it will be used (in the process, or in the ELF
  /// image). FDE start addresses are stored as offsets from it (or from each FDE's own start
  /// field with `pcrel`): 32-bit in v2, so every function must lie within ±2 GiB of the
  /// section; 64-bit in v3.
  uint64_t section_address = 0;
  /// Set FDE_FUNC_START_PCREL (start offsets relative to the FDE field; the default, required
  /// by the newer kernel series). false: offsets relative to the section start.
  bool pcrel = true;
  /// v2 only: FRAME_POINTER flag: unset = automatic (set when every function establishes an
  /// FP-based CFA in some row, i.e. the whole section keeps frame pointers). v3 has no such
  /// flag: `true` is refused there.
  std::optional<bool> frame_pointer;
  /// true: every function must pass `jitunwind::validate` (what a code generator should
  /// produce). false: accept any function SFrame can express on the ABI (rows sorted and inside
  /// the function, offsets that fit the FRE layout), e.g. to re-encode a foreign section whose
  /// rows our stricter rules reject (see `decoded_section::nonconforming`).
  bool strict = true;
  /// SFrame version to write: 3 (the default: binutils 2.46, the kernel series since v13) or 2
  /// (binutils 2.41-2.45, LLVM, kernels before v13).
  uint8_t version = version_3;
  /// v3: a function with a row that a DEFAULT FDE cannot hold (CFA from another register or
  /// from memory, RA/FP rules naming registers, AMD64 RA not at CFA-8) is written as a FLEX FDE.
  /// false: such a function is refused (`invalid_argument` naming the function, the row and what
  /// needs FLEX) — for runtimes that register with kernels whose v3 reader drops a whole
  /// section when it meets a FLEX FDE. v2 cannot express these rows at all.
  bool allow_flex = true;
};

/// Builds a v3 (or v2) section incrementally: functions are appended in address order and the
/// section can be serialized at any time without re-encoding what was appended before.
///
/// Widths: each FDE uses the smallest FRE start-address width (1, 2 or 4 bytes) that fits the
/// function's (or repeated block's) size, and each FRE the smallest data-word width that fits
/// its offsets (and, in FLEX FREs, its control words), as gas does. v3 functions are DEFAULT
/// FDEs unless a row needs FLEX (see `allow_flex`); a v3 function without rows is an outermost
/// frame (a DEFAULT FDE without FREs).
class JITUNWIND_API encoder {
 public:
  /// `errc::invalid_argument` for an unknown ABI (or s390x, which is read only), a version other
  /// than 2 and 3, or `frame_pointer = true` with version 3.
  static result<encoder> create(const encoder_options& options);

  /// Validates `f` (`jitunwind::validate`; in v3 a function without rows is checked as an
  /// outermost function) and appends it. Errors: `invalid_argument` for bad
  /// rows, a row the version cannot express (v2: the v3 rules and signal frames; v3 without
  /// `allow_flex`: rows that need FLEX; v3: more than 65535 rows), or a function that starts
  /// before the end of the previous one (overlap / out of order); `out_of_range` when (v2) its
  /// start cannot be expressed as a 32-bit offset from the section. Nothing is appended on
  /// error.
  result<void> append(const function_desc& f);

  /// Number of bytes `write` produces now.
  size_t size() const noexcept;
  size_t function_count() const noexcept;
  const encoder_options& options() const noexcept { return options_; }

  /// Writes the complete section (header, sorted FDEs, FREs). `out` must hold `size()` bytes
  /// (`errc::invalid_argument` otherwise).
  result<void> write(std::span<uint8_t> out) const;
  /// The complete section as a new vector.
  std::vector<uint8_t> bytes() const;

  /// Removes every function; the options and the allocated storage stay, so an encoder used
  /// for one code window can serve the next without growing its buffers again.
  void clear() noexcept;

  /// Takes out the function that starts at `start` (its FDE and FREs; O(functions + FRE
  /// bytes)). Sections written before no longer match: write the next one whole
  /// (`write_update` with `written` 0). `not_found` if no function starts there.
  result<void> remove(uint64_t start);

  /// The section will live at another address: recompute FDE start offsets (O(functions)).
  /// `out_of_range` if (v2) some function is then out of reach; the encoder is unchanged then.
  result<void> relocate(uint64_t new_section_address);

  /// Brings a section up to date in place, for a runtime that republishes a growing section:
  /// `out` (at `section_address`) must hold what `write` produced there when this encoder had
  /// its first `written` functions (0: anything). Writes the header, moves the FRE
  /// sub-section behind the new FDEs (one memmove) and adds the new FDEs and FREs — O(FRE
  /// bytes written before + new functions) instead of `write`'s O(functions). The bytes equal
  /// `relocate(section_address)` + `write(out)`; `options().section_address` is not changed.
  /// Errors: `invalid_argument` (out smaller than size(), written > function_count()),
  /// `out_of_range` (a new function out of reach of section_address). On error `out` is
  /// unchanged.
  result<void> write_update(std::span<uint8_t> out, uint64_t section_address, size_t written) const;

  /// The same for a section laid out with room for `fde_room` FDEs (at least
  /// `function_count()`): the FRE sub-section starts behind the room (header field `freoff` =
  /// `fde_room` × FDE size), so the functions added since `written` go behind the others and
  /// nothing moves — O(new functions). `out` must hold what this call produced there with the
  /// same `fde_room` when the encoder had its first `written` functions (0: anything; a new
  /// `fde_room` needs 0), and `size_with_room(fde_room)` bytes. The section is valid SFrame
  /// (the format locates each sub-section by its offset), but the bytes between the FDEs and
  /// the FREs are unused: readers that assume the FREs follow the FDEs (libsframe up to
  /// binutils 2.45 ignores `freoff`) misread it; `write`'s layout is `fde_room` =
  /// `function_count()`. Errors as for the other write_update, and `invalid_argument` when
  /// `fde_room` is too small.
  result<void> write_update(std::span<uint8_t> out, uint64_t section_address, size_t written,
                            size_t fde_room) const;
  /// Bytes of the section laid out with room for `fde_room` FDEs.
  size_t size_with_room(size_t fde_room) const noexcept;

 private:
  explicit encoder(const encoder_options& options) : options_(options) {}
  void write_header(uint8_t* h, size_t fde_room) const;
  void write_fdes(uint8_t* fde_area, uint64_t section_address, size_t from, size_t to) const;

  size_t fde_size() const noexcept;
  result<void> encode_rows(const function_desc& f, uint8_t type, bool flex);

  encoder_options options_;
  // FDEs are kept with absolute start addresses and encoded on write; FRE bytes are final. In
  // v3 each function's bytes in `fres_` begin with its attribute record, and `fre_offset` is
  // the record's offset.
  struct fde_entry {
    uint64_t start;
    uint32_t size;
    uint32_t fre_offset;
    uint32_t fre_count;
    uint8_t info;
    uint8_t rep_size;
  };
  std::vector<fde_entry> fdes_;
  std::vector<uint8_t> fres_;
  uint32_t fre_total_ = 0;
  bool all_keep_fp_ = true;
  // The row shape of the last function appended through the full path and where its FRE bytes
  // are: most JIT functions share their shape, and one with the same rows, repetition size and
  // FRE address width passes the same row checks and encodes to the same bytes (see append).
  bool has_last_shape(const function_desc& f, uint8_t fre_type) const noexcept;
  std::vector<frame_row> last_rows_;
  uint32_t last_rep_ = 0;
  uint32_t last_fre_offset_ = 0;
  uint32_t last_fre_bytes_ = 0;
  uint8_t last_type_ = 0xff;  // 0xff: no shape cached
  bool last_signal_ = false;
  uint8_t last_pauth_ = 0;
  bool last_uses_fp_ = false;
};

/// One-shot: sorts `functions` by address and encodes them.
JITUNWIND_API result<std::vector<uint8_t>> encode(const encoder_options& options,
                                                  std::span<const function_desc> functions);

// ---------------------------------------------------------------------------------------------
// Decoding

/// How one FDE and its FREs are laid out in the bytes (for dumps and tests).
struct fde_layout {
  uint32_t offset = 0;           ///< of the FDE (v3: its index entry), from the section start
  int64_t start_field = 0;       ///< raw start offset (32 bits in v1/v2, 64 in v3)
  uint8_t info = 0;              ///< raw function info byte
  uint8_t info2 = 0;             ///< raw second info byte (v3; 0 before)
  uint8_t fde_type = 0;          ///< v3 FDE type: 0 DEFAULT, 1 FLEX (0 before v3)
  uint8_t fre_address_size = 1;  ///< 1, 2 or 4 bytes per FRE start address
  bool pcmask = false;
  bool signal = false;             ///< v3 signal-frame bit
  uint8_t pauth_key = 0;           ///< AArch64 pointer-authentication key: 0 = A, 1 = B
  uint8_t rep_size = 0;            ///< raw repetition size (v2, v3); v1 PCMASK: implied 16
  uint32_t attr_offset = 0;        ///< v3: the attribute record, from the FRE sub-section
  uint32_t fre_offset = 0;         ///< first FRE, from the start of the FRE sub-section
  uint32_t fre_bytes = 0;          ///< bytes taken by this FDE's FREs
  std::vector<uint8_t> fre_infos;  ///< raw `sfre_info` byte of each FRE (offset size, count, ...)
};

/// A function that decodes cleanly but that `jitunwind::validate` rejects: legal SFrame that
/// our code-generation rules would not produce (e.g. LLVM keeps "FP saved at CFA-16" after the
/// epilogue's `pop rbp`, which puts the slot below SP). Such functions are still returned.
struct nonconforming_function {
  size_t index = 0;    ///< into `decoded_section::functions`
  std::string reason;  ///< the `validate` message
};

/// A whole section decoded into the frame model.
struct decoded_section {
  section_info info;
  /// In FDE order, with absolute start addresses (section_address applied).
  std::vector<function_desc> functions;
  /// Parallel to `functions`: the encoding of each FDE.
  std::vector<fde_layout> layout;
  /// Functions that are valid SFrame but fail `jitunwind::validate` (empty for our own output).
  std::vector<nonconforming_function> nonconforming;
};

/// Validates and decodes a v1, v2 or v3 section that lives at `section_address`.
/// `errc::malformed` with a precise message for any inconsistency; `errc::unsupported` for a
/// well-formed section of a version, ABI or FDE type this decoder does not know, or with a
/// non-zero fixed FP offset. Unsorted sections (as in relocatable objects) are accepted; rows
/// that are legal SFrame but fail `jitunwind::validate` are returned and listed in
/// `nonconforming`. s390x sections are decoded as data (every function is nonconforming). A
/// v3 DEFAULT FDE without FREs (an outermost function) decodes to a function without rows. The
/// rules are listed in docs/sframe.md.
JITUNWIND_API result<decoded_section> decode(std::span<const uint8_t> bytes,
                                             uint64_t section_address);

/// Only validates (same rules and messages as `decode`, no allocation of rows).
JITUNWIND_API result<section_info> check(std::span<const uint8_t> bytes, uint64_t section_address);

/// Re-encodes a section (v1, v2 or v3, at `section_address`) as `options.version`, for
/// `options.section_address`, with `options.target` taken from the section. Rows are kept as
/// they are (`strict` is ignored: the encoding is non-strict, so foreign rows such as gas's
/// "FP saved" after an epilogue survive). A function without rows means "outermost frame" in v3
/// and nothing before v3, so going to v2 it becomes one outermost row, and coming from v1/v2 it
/// is left out. Errors: the decoder's for the input; `unsupported` for
/// s390x; the encoder's for what the target version cannot express (naming the function and
/// row: v3 rules or signal frames in v2, FLEX with `allow_flex = false`, more than 65535 rows in
/// v3) or cannot reach (v2: ±2 GiB).
JITUNWIND_API result<std::vector<uint8_t>> convert(std::span<const uint8_t> bytes,
                                                   uint64_t section_address,
                                                   const encoder_options& options);

// ---------------------------------------------------------------------------------------------
// Lookup

/// What `table::find` returns for a PC.
struct lookup_result {
  size_t function_index = 0;
  uint64_t function_start = 0;
  uint32_t function_size = 0;
  bool signal_frame = false;  ///< the function is a signal trampoline (v3)
  frame_row row;              ///< v3 DEFAULT FDE without FREs: `outermost_row(0)`
};

/// A validated, read-only view of a section for fast lookups. It does not copy the bytes: they
/// must outlive the table and must not change.
class JITUNWIND_API table {
 public:
  /// Validates the whole section once (as `check`), so lookups need no further checks.
  /// Also `errc::unsupported` if the FDEs are not sorted by address (binary search needs it).
  /// Costs 4 bytes per function for an index of the starts.
  static result<table> create(std::span<const uint8_t> bytes, uint64_t section_address);

  const section_info& info() const noexcept { return info_; }
  uint64_t section_address() const noexcept { return section_address_; }
  /// Lowest start and highest end of the functions ([begin, end)); {0,0} if empty.
  std::pair<uint64_t, uint64_t> pc_range() const noexcept { return pc_range_; }

  /// The row covering `pc`: binary search over FDEs, then a scan of the FDE's FREs (PCINC: by
  /// pc - start; PCMASK: by (pc - start) % repetition size). Nothing if no function covers it
  /// or pc comes before the function's first FRE.
  std::optional<lookup_result> find(uint64_t pc) const noexcept;
  /// The same, filling `out` in place (true if found; `out` is unspecified otherwise). For hot
  /// loops: it avoids materializing and copying the optional.
  bool find(uint64_t pc, lookup_result& out) const noexcept;

 private:
  table() = default;
  uint64_t fde_start(size_t index) const noexcept;

  std::span<const uint8_t> bytes_;
  uint64_t section_address_ = 0;
  section_info info_;
  std::pair<uint64_t, uint64_t> pc_range_{0, 0};
  // From the validated header: where the sub-sections are and how to read them.
  size_t fde_base_ = 0;
  size_t fre_base_ = 0;
  uint8_t fde_size_ = 20;
  uint8_t version_ = 2;
  bool big_endian_ = false;
  // Function starts as offsets from pc_range_.first (4 bytes per function), so the binary
  // search touches a small dense array instead of the 20-byte FDEs. Empty when the range does
  // not fit 32 bits; the search then reads the FDEs.
  std::vector<uint32_t> start_index_;
};

// ---------------------------------------------------------------------------------------------
// Unwinding

/// The registers an unwind step needs. `lr` is the AArch64 link register (used only while the
/// RA is still in it, i.e. in the innermost frame).
struct regs {
  uint64_t pc = 0;
  uint64_t sp = 0;
  uint64_t fp = 0;
  uint64_t lr = 0;
};

/// Reads `len` bytes of the target's memory at `address` into `out`; false if unreadable.
/// Called synchronously; may be called many times per step.
struct memory_reader {
  bool (*read)(void* user, uint64_t address, void* out, size_t len) = nullptr;
  void* user = nullptr;
};

/// Why an unwind stopped.
enum class stop_reason : uint8_t {
  outermost = 0,    ///< reached a frame whose RA is undefined (a proper end)
  no_table = 1,     ///< no table covers the PC
  unreadable = 2,   ///< the reader could not read the RA or saved FP
  no_progress = 3,  ///< the caller's SP is not above the callee's (corrupt table or stack)
  depth_limit = 4,  ///< the frame cap was reached
  bad_rule = 5,     ///< the row cannot be applied (e.g. RA in register past frame 0)
  zero_pc = 6,      ///< the return address read was 0 (end of the stack by convention)
  /// The row has a rule this unwinder cannot apply: it needs a register other than SP, FP and
  /// the AArch64 link register (`regs` has no others), or the ABI is s390x.
  unsupported_rule = 7,
};

JITUNWIND_API const char* to_string(stop_reason r) noexcept;

/// One step: applies `row` (the row covering callee.pc) to the callee's registers and returns
/// the caller's: SP = CFA, PC = the RA (read at CFA + ra_offset, or taken from lr when
/// `innermost` and the RA is in the link register), FP = saved FP or unchanged. The v3 rules
/// it follows: CFA = *(SP|FP + offset); RA or FP read at (SP|FP|LR) + offset or taken from one
/// of those registers (+ offset); a register the step does not have gives `unsupported_rule`.
/// `ra_undefined` rows give `stop_reason::outermost`. The caller's SP must be strictly above
/// the callee's (`no_progress` otherwise) — except for an innermost AArch64 leaf whose RA is
/// still in the link register, where CFA = SP is legitimate; the CFA must be 8-byte aligned
/// (`bad_rule`). A mangled (PAC-signed) AArch64 RA is stripped to its low 48 bits (Linux's
/// default user address size). Memory is read in the ABI's byte order.
struct step_result {
  bool ok = false;
  regs caller;
  stop_reason reason = stop_reason::outermost;  ///< meaningful when !ok
};
JITUNWIND_API step_result step(abi target, const frame_row& row, const regs& callee, bool innermost,
                               const memory_reader& reader) noexcept;

/// Finds the row for a PC across any number of tables (one per code window or ELF object).
/// Tables are not owned; they must outlive the unwinder. Thread-safety: `add`/`clear` are not
/// thread-safe; concurrent `unwind` calls on a constant unwinder are.
class JITUNWIND_API unwinder {
 public:
  explicit unwinder(abi target = abi::amd64) : abi_(target) {}
  /// `invalid_argument` if the table's ABI differs from the unwinder's.
  result<void> add(const table* t);
  void clear() noexcept { tables_.clear(); }

  /// The row covering pc, from the first table whose range contains it.
  std::optional<lookup_result> find(uint64_t pc) const noexcept;
  /// The same, filling `out` in place (true if found).
  bool find(uint64_t pc, lookup_result& out) const noexcept;

  struct trace {
    std::vector<uint64_t> pcs;  ///< pcs[0] = start pc, then the return addresses
    stop_reason reason = stop_reason::outermost;
  };
  /// Walks from `start` until a stop reason, at most `max_frames` PCs. For frames after the
  /// first, the row is looked up at pc - 1 (the return address may be past the function's end
  /// when the call was its last instruction) — except below a signal frame, whose caller's PC
  /// is the interrupted instruction itself, and at a signal trampoline found only at pc.
  trace unwind(const regs& start, const memory_reader& reader, size_t max_frames = 128) const;

 private:
  abi abi_;
  std::vector<const table*> tables_;
};

}  // namespace jitunwind::sframe
