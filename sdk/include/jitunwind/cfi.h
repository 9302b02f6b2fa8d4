/// jitunwind/cfi.h — `.eh_frame` (DWARF call frame information) and `.eh_frame_hdr` from the
/// frame model.
///
/// The same `function_desc` rows that produce SFrame (`sframe.h`) are translated into one CIE
/// plus FDEs, so that tools which only understand DWARF CFI also unwind through JIT code: perf's
/// `--call-graph dwarf` (through jitdump `CODE_UNWINDING_INFO`), gdb (through the GDB JIT
/// interface) and in-process unwinders.
///
/// Row translation (AMD64 and little-endian AArch64; big-endian AArch64 is rejected):
/// - the CIE holds the ABI's entry rules (AMD64: `def_cfa rsp+8`, `offset rip at cfa-8`;
///   AArch64: `def_cfa sp+0`, return address in x30);
/// - each row becomes `advance_loc` + the smallest set of `def_cfa` / `def_cfa_offset` /
///   `def_cfa_register`, `offset rbp|x29`, `offset x30`, `restore`, `undefined rip|x30`
///   (outermost rows) and `AARCH64_negate_ra_state` (ra_mangled changes) that turns the
///   previous row's rules into this row's;
/// - a PCMASK function (`pcmask_rep != 0`, an array of identical blocks) becomes one FDE per
///   block (DWARF has no "PC modulo" rule; lookups stay O(log n) through the header), or, with
///   `pcmask_single_fde`, one FDE whose instructions repeat the rows for every block (fewer
///   FDEs, but an unwinder executes O(blocks) instructions to reach a late block). A PCMASK
///   function with a single row always becomes one FDE.
///
/// Thread-safety: `encoder` is used by one thread at a time; free functions are thread-safe.
/// Errors: `invalid_argument` for rows `validate` rejects or overlapping functions,
/// `out_of_range` for addresses a 32-bit PC-relative field cannot reach, `unsupported` for
/// big-endian AArch64, `limit_exceeded` when a PCMASK function would need too many FDEs.
#pragma once

// A tooling header: C++20 (std::span). C++17 code reaches the same operations through the C API
// (jitunwind/jitunwind.h); the embedding headers (window.h, frame.h, ...) are C++17.
#if __cplusplus < 202002L
#error "jitunwind/cfi.h needs C++20; from C++17 use the C API in jitunwind/jitunwind.h"
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

namespace jitunwind::cfi {

/// How each FDE stores the address of the code it describes (the CIE's 'R' augmentation).
enum class address_encoding : uint8_t {
  /// `DW_EH_PE_pcrel | DW_EH_PE_sdata4`: a signed 32-bit offset from the field itself, as
  /// linkers emit. The bytes depend on where the section lives (`eh_frame_address`) and every
  /// function must lie within ±2 GiB of it. Needed by perf's jitdump injection.
  pcrel_sdata4 = 0,
  /// `DW_EH_PE_absptr` (8 bytes): the absolute address. The bytes do not depend on where the
  /// section lives (used for GDB JIT objects).
  absolute = 1,
};

struct encoder_options {
  abi target = abi::amd64;
  /// Address of the section's first byte where its reader will see it (in the process, or in
  /// the ELF image a tool builds from it). Used only by `pcrel_sdata4`.
  uint64_t eh_frame_address = 0;
  address_encoding encoding = address_encoding::pcrel_sdata4;
  /// Append a 4-byte zero terminator (libgcc's `__register_frame` walks until it; inside an ELF
  /// section it is optional).
  bool terminator = false;
  /// Upper bound of blocks one PCMASK function may expand to (FDEs, or row repetitions with
  /// `pcmask_single_fde`).
  uint32_t max_fdes_per_function = 65536;
  /// Describe a PCMASK function with one FDE (rows repeated per block) instead of one per block.
  bool pcmask_single_fde = false;
};

/// Where one FDE is and which code it covers.
struct fde_info {
  uint64_t start = 0;   ///< first code address covered
  uint64_t size = 0;    ///< bytes of code covered
  uint32_t offset = 0;  ///< offset of the FDE's length field in the `.eh_frame` bytes
};

/// Size in bytes of an `.eh_frame_hdr` with `fde_count` table entries.
constexpr size_t eh_frame_hdr_size(size_t fde_count) {
  return 12 + 8 * fde_count;
}

/// Builds an `.eh_frame` section incrementally: the CIE first, then FDEs in the order functions
/// are appended (any order; the header table is sorted). Every FDE is padded to a multiple of
/// 8 bytes, so the section size is a multiple of 8 (plus 4 with a terminator).
class JITUNWIND_API encoder {
 public:
  /// `unsupported` for big-endian AArch64, `invalid_argument` for an unknown ABI.
  static result<encoder> create(const encoder_options& options);

  /// Validates `f` (`jitunwind::validate`) and appends its FDE(s). Nothing is appended on
  /// error. O(rows) except PCMASK functions (O(blocks × rows)).
  result<void> append(const function_desc& f);

  /// Bytes `bytes()` returns now.
  size_t size() const noexcept;
  size_t fde_count() const noexcept { return fdes_.size(); }
  /// In append order.
  std::span<const fde_info> fdes() const noexcept { return fdes_; }
  const encoder_options& options() const noexcept { return options_; }

  /// The complete section.
  std::vector<uint8_t> bytes() const;

  /// The section will live at another address: recompute PC-relative fields (O(FDEs)).
  /// `out_of_range` if some function is then out of reach; the encoder is unchanged then.
  result<void> relocate(uint64_t new_eh_frame_address);

  /// An `.eh_frame_hdr` (version 1; eh_frame_ptr pcrel|sdata4, count udata4, table
  /// datarel|sdata4 sorted by start address) for the current contents, to be placed at
  /// `hdr_address` while the section is at `eh_frame_address`. `invalid_argument` when two
  /// FDEs overlap (a binary search could not pick one), `out_of_range` when an address is
  /// beyond ±2 GiB of `hdr_address`.
  result<std::vector<uint8_t>> build_hdr(uint64_t hdr_address) const;
  /// Like `build_hdr`, appending the header to `out` (no allocation when `out` has room).
  /// On error `out` is unchanged.
  result<void> append_hdr(uint64_t hdr_address, std::vector<uint8_t>& out) const;

  /// The CIE and FDEs as `bytes()` returns them, without copying (no terminator). Valid until
  /// the next change of the encoder.
  std::span<const uint8_t> data() const noexcept { return bytes_; }

  /// Drops every FDE and places the (then empty) section at `eh_frame_address`; the CIE is
  /// kept. For writers that build many small sections (one per jitdump CODE_LOAD) with one
  /// encoder, reusing its memory.
  void clear(uint64_t eh_frame_address);

 private:
  explicit encoder(const encoder_options& options) : options_(options) {}
  /// `cached_body`: the instructions and padding to use instead of encoding f's rows.
  result<void> append_fde(uint64_t start, uint64_t size, const function_desc& f,
                          uint32_t block_size, uint32_t repeat,
                          const std::vector<uint8_t>* cached_body = nullptr);

  encoder_options options_;
  std::vector<uint8_t> bytes_;  // CIE + FDEs, no terminator
  size_t cie_size_ = 0;
  std::vector<fde_info> fdes_;
  // The rows of the last plain (non-PCMASK) function and its FDE's instructions and padding:
  // most JIT functions share their shape, and one with the same rows passes the same row
  // checks and gets the same instructions (only the FDE's header differs). Kept across clear().
  std::vector<frame_row> last_rows_;
  std::vector<uint8_t> last_body_;
  bool has_last_body_ = false;
};

/// Both sections for a set of functions.
struct sections {
  std::vector<uint8_t> eh_frame;
  std::vector<uint8_t> eh_frame_hdr;
  uint64_t eh_frame_hdr_address = 0;
};

/// One shot: encodes `functions` (sorted by address first) into `.eh_frame` at
/// `options.eh_frame_address` and builds the header at `hdr_address`, or, when not given,
/// directly after the `.eh_frame` bytes (the layout perf's jitdump injection and linkers use).
JITUNWIND_API result<sections> encode(const encoder_options& options,
                                      std::span<const function_desc> functions,
                                      std::optional<uint64_t> hdr_address = std::nullopt);

// ---------------------------------------------------------------------------------------------
// Decoding: the CFI a compiler or another JIT wrote -> the frame model

/// Which DWARF call frame section the bytes are.
enum class section_kind : uint8_t {
  eh_frame = 0,     ///< `.eh_frame` (LSB): CIE id 0, CIE pointers relative, pointer encodings
  debug_frame = 1,  ///< `.debug_frame` (DWARF 2-5): CIE id ~0, CIE pointers from the start
};

/// What `decode` keeps of an FDE, or a section, it cannot use whole.
enum class partial_input : uint8_t {
  /// An FDE with a location whose rules cannot be expressed (see `left_out_function`) is left
  /// out whole, as gas and LLVM do with `--gsframe`; an entry whose length runs past the
  /// section fails the decode. For producers of SFrame and `.eh_frame` (sframe build
  /// --from-eh-frame, the ORC plugin, the preload).
  whole_functions = 0,
  /// Keep every usable row: an FDE becomes the pieces around its locations whose rules cannot
  /// be expressed (each piece a function, with the FDE's offset in `fde_offsets`; each such
  /// range a `left_out_function` with `part` set), and an entry whose length runs past the
  /// section ends the walk with the FDEs before it (the entry listed in `left_out`; an error
  /// only when no FDE came before it). For profilers that fall back to frame pointers where
  /// rows are missing (jitwalk).
  usable_rows = 1,
};

struct decoder_options {
  /// How register numbers are read (AMD64 or little-endian AArch64; `unsupported` otherwise).
  abi target = abi::amd64;
  section_kind kind = section_kind::eh_frame;
  /// Address of the section's first byte (base of PC-relative pointers).
  uint64_t section_address = 0;
  /// Bases of DW_EH_PE_textrel and DW_EH_PE_datarel pointers; an FDE that needs a base not
  /// given is left out.
  std::optional<uint64_t> text_address;
  std::optional<uint64_t> data_address;
  /// Check that the returned rows are ones SFrame can express (and leave the others out). With
  /// false, rows are only required to fit the frame model.
  bool sframe_expressible = true;
  /// A frame pointer "saved" below the stack pointer — the slot an epilogue's `pop rbp` left,
  /// which GCC's and LLVM's CFI keep naming until the return, as gas's and LLVM's SFrame do — is
  /// taken as restored (`fp_rule::unchanged`): the register holds that value again, and the
  /// window API refuses the dead slot (a signal may overwrite it). Off: the rows are the CFI's,
  /// such a row listed in `decoded_cfi::nonconforming`.
  bool restore_popped_fp = false;
  /// What is kept of an FDE that cannot be used whole.
  partial_input partial = partial_input::whole_functions;
};

/// A function the decoder could not turn into rows, and why.
struct left_out_function {
  uint64_t start = 0;       ///< 0 when the FDE's address could not be read
  uint64_t size = 0;
  uint32_t fde_offset = 0;  ///< of the FDE's length field in the section
  /// `unsupported`: well-formed CFI the frame model or SFrame cannot express (a CFA computed by
  /// a DWARF expression, a register-based CFA other than SP/FP, ...) — the function is left
  /// out as gas and LLVM do with `--gsframe`; `malformed`: the FDE or its CIE is broken.
  errc code = errc::unsupported;
  /// What and where: "at +0x5: CFA = r10 + 0 (SFrame bases the CFA on SP or FP only)".
  std::string reason;
  /// Only [start, start + size) of the FDE's code is left out; functions with the same FDE
  /// offset hold the rest (`partial_input::usable_rows`).
  bool part = false;
};

/// A decoded function whose rows `jitunwind::validate` rejects but SFrame expresses (e.g.
/// compilers keep "FP saved at CFA-16" after the epilogue's `pop rbp`).
struct nonconforming_rows {
  size_t index = 0;  ///< into `decoded_cfi::functions`
  std::string reason;
};

struct decoded_cfi {
  /// One per FDE that converted, sorted by start address, non-overlapping; rows plus the
  /// callee-saved registers (`function_desc::saved_registers`).
  std::vector<function_desc> functions;
  /// Parallel to `functions`: offset of each function's FDE in the section.
  std::vector<uint32_t> fde_offsets;
  /// In section order.
  std::vector<left_out_function> left_out;
  std::vector<nonconforming_rows> nonconforming;
  size_t cie_count = 0;
  size_t fde_count = 0;
  /// Bytes read (up to the terminator, if any).
  size_t section_size = 0;
};

/// Decodes a whole `.eh_frame` or `.debug_frame` section: CIEs (versions 1, 3, 4; augmentations
/// z, R, P, L, S, B, G), FDEs with every DW_EH_PE pointer encoding, and the call frame
/// instructions compilers emit (advance_loc*, set_loc, def_cfa*, offset*, restore*,
/// remember/restore_state, register, same_value, undefined, val_offset*, expression,
/// val_expression, GNU_args_size, GNU_negative_offset_extended, AArch64 negate_ra_state).
/// The input is hostile: every read is bounded by its entry, the work by the section size.
///
/// A zero length ends the section (the terminator `__register_frame` sections carry). An FDE
/// whose rows cannot be expressed (see `left_out_function`; `options.partial` decides whether
/// the rows around such a location are kept), that overlaps an earlier one in address order,
/// covers no code or more than 4 GiB is listed in `left_out`, never converted wrongly. The
/// one CFA expression linkers write for a lazy `.plt` on AMD64 (every 16-byte entry: CFA =
/// rsp + 8 up to its `push`, rsp + 16 after it) becomes what binutils' ld writes for it in
/// `.sframe`: a PCMASK function of 16-byte blocks (`pcmask_rep` 16), the FDE's rows before it
/// (PLT0) a function of their own. Errors: `malformed` when the section's entries cannot be walked (a length past the
/// end: "cfi: entry at offset 0x40: length 4096 runs past the section (200 bytes)"),
/// `unsupported` for an ABI other than AMD64 and little-endian AArch64.
/// Thread-safe (no state).
JITUNWIND_API result<decoded_cfi> decode(std::span<const uint8_t> section,
                                         const decoder_options& options);

}  // namespace jitunwind::cfi
