/// jitunwind/asmjit.h — glue for JITs built on asmjit (x86-64): place a finished `CodeHolder`
/// into a code window in one call, and get frame rows for the prologue and epilogue asmjit emits
/// from a `FuncFrame`, without decoding any machine code.
///
/// Optional and header-only: it includes <asmjit/x86.h>, so only embedders that use asmjit
/// include it (and link asmjit themselves); the SDK library does not depend on asmjit. Written
/// against asmjit's 2022 API (Debian 12's libasmjit-dev 0.0~git20221210); because an asmjit
/// release may emit a different prologue, `emit_prolog` / `emit_epilog` check at run time that
/// asmjit's bytes are exactly the sequence the rows describe and refuse (`errc::unsupported`)
/// when they are not, rather than describing code they do not know.
///
/// Offsets: one function per `CodeHolder`, starting at offset 0 of its `.text` section (as with
/// asmjit's `JitRuntime::add`); the rows given to the `frame_builder` are offsets in that section.
///
/// Ownership: nothing is kept; the caller owns the `CodeHolder`, the assembler, the builder and
/// the window. Thread-safety: as asmjit's (one thread per `CodeHolder`/assembler) and the
/// window's (one thread per window at a time). Errors: `result`, never exceptions; asmjit's
/// errors come back with asmjit's own error string (`DebugUtils::errorAsString`) and the name of
/// the function or the operation.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>
#include <jitunwind/window.h>

#include <asmjit/x86.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::asmjit_glue {

namespace detail {

inline error asmjit_error(::asmjit::Error err, std::string_view what) {
  const errc code = err == ::asmjit::kErrorOutOfMemory ? errc::no_memory : errc::invalid_argument;
  return error(code, std::string(what) + ": asmjit: " + ::asmjit::DebugUtils::errorAsString(err));
}

inline error named(const error& e, std::string_view function, std::string_view what) {
  return error(e.code(),
               "placing '" + std::string(function) + "': " + std::string(what) + e.message());
}

// DWARF register number of an x86-64 general-purpose register by asmjit id (rax, rcx, rdx, rbx,
// rsp, rbp, rsi, rdi, r8..r15): DWARF orders the first eight rax, rdx, rcx, rbx, rsi, rdi, rbp,
// rsp.
inline uint16_t dwarf_gp(uint32_t id) {
  constexpr uint16_t low[8] = {0, 2, 1, 3, 7, 6, 4, 5};
  return id < 8 ? low[id] : static_cast<uint16_t>(id);
}

// What rows a sequence needs: everything `emitProlog`/`emitEpilog` can emit for an x86-64 frame
// is described here, or refused with the reason.
inline result<void> check_frame(const ::asmjit::x86::Assembler& a, const ::asmjit::FuncFrame& frame,
                                const char* what) {
  using namespace ::asmjit;
  if (a.environment().arch() != Arch::kX64) {
    return error(errc::unsupported, std::string(what) + ": only x86-64 code is described");
  }
  for (RegGroup g : {RegGroup::kVec, RegGroup::kX86_MM, RegGroup::kX86_K}) {
    if (frame.savedRegs(g) != 0) {
      return error(errc::unsupported,
                   std::string(what) +
                       ": the frame saves vector or mask registers (a Windows x64 "
                       "convention): their save slots are not described; save only GP registers");
    }
  }
  if (frame.hasDynamicAlignment() && !frame.hasPreservedFP()) {
    // The caller's SP then lives only in a stack slot at an aligned, unknown distance from the
    // CFA: CFA = *(rsp + daOffset) + pushes, which no SFrame or frame row can express.
    return error(errc::unsupported,
                 std::string(what) +
                     ": dynamic stack alignment without a preserved frame pointer cannot be "
                     "described by frame rows; call FuncFrame::setPreservedFP()");
  }
  return ok_result();
}

// A scratch assembler that re-emits asmjit's sequence one instruction at a time, recording the
// offset after each instruction (relative to `base`, the start of the real sequence).
class replay {
 public:
  replay(const ::asmjit::x86::Assembler& real) {
    code_.init(real.environment());
    code_.attach(&a_);
    a_.addEncodingOptions(real.encodingOptions());
  }
  ::asmjit::x86::Assembler& a() { return a_; }
  uint32_t at(uint32_t base) const { return base + static_cast<uint32_t>(a_.offset()); }
  bool failed(::asmjit::Error err) {
    if (err != ::asmjit::kErrorOk && error_ == ::asmjit::kErrorOk) error_ = err;
    return err != ::asmjit::kErrorOk;
  }
  // Whether the real assembler holds exactly the replayed bytes from `base` on.
  result<void> matches(const ::asmjit::x86::Assembler& real, uint32_t base,
                       const char* what) const {
    if (error_ != ::asmjit::kErrorOk) return asmjit_error(error_, what);
    const size_t n = a_.offset();
    if (real.offset() - base != n || std::memcmp(real.bufferData() + base, a_.bufferData(), n)) {
      return error(errc::unsupported,
                   std::string(what) + ": asmjit emitted " + std::to_string(real.offset() - base) +
                       " bytes that are not the sequence this glue describes (" +
                       std::to_string(n) +
                       " bytes expected): another asmjit version? No rows were added");
    }
    return ok_result();
  }

 private:
  ::asmjit::CodeHolder code_;
  ::asmjit::x86::Assembler a_;
  ::asmjit::Error error_ = ::asmjit::kErrorOk;
};

// A frame-rows directive recorded while replaying, applied to the caller's builder only once
// the bytes are known to match (so a refused sequence leaves the builder untouched).
struct step {
  enum kind : uint8_t { push_fp, set_fp, alloc, free, save, restore_reg, pop_fp, remember, resume };
  kind k;
  uint32_t at;
  int32_t value = 0;   // bytes for alloc/free, CFA offset for save
  uint32_t gp_id = 0;  // asmjit GP id for save/restore_reg
};

inline void apply(const std::vector<step>& steps, frame_builder& rows) {
  uint32_t after_push = 0;
  for (const step& s : steps) {
    switch (s.k) {
      case step::push_fp:
        after_push = s.at;
        break;
      case step::set_fp:
        rows.push_frame_pointer(after_push, s.at);
        break;
      case step::alloc:
        rows.stack_alloc(s.at, s.value);
        break;
      case step::free:
        rows.stack_free(s.at, s.value);
        break;
      case step::save:
        // rbp saved as an ordinary callee-saved register (no preserved frame pointer).
        if (s.gp_id == ::asmjit::x86::Gp::kIdBp) {
          rows.offset(s.at, reg::fp, s.value);
        } else {
          rows.save_register(s.at, dwarf_gp(s.gp_id), s.value);
        }
        break;
      case step::restore_reg:
        if (s.gp_id == ::asmjit::x86::Gp::kIdBp) {
          rows.restore(s.at, reg::fp);
        } else {
          rows.restore_register(s.at, dwarf_gp(s.gp_id));
        }
        break;
      case step::pop_fp:
        rows.pop_frame_pointer(s.at);
        break;
      case step::remember:
        rows.remember_state();
        break;
      case step::resume:
        rows.restore_state(s.at);
        break;
    }
  }
}

inline uint32_t gp_saved_without_fp(const ::asmjit::FuncFrame& frame) {
  uint32_t gp = frame.savedRegs(::asmjit::RegGroup::kGp);
  if (frame.hasPreservedFP()) gp &= ~(1u << ::asmjit::x86::Gp::kIdBp);
  return gp;
}

}  // namespace detail

/// Emits asmjit's prologue for `frame` (`a.emitProlog(frame)`, a finalized `FuncFrame`) and
/// adds its rows to `rows`: `push rbp; mov rbp, rsp` (preserved frame pointer), one `push` per
/// saved general-purpose register (each recorded as saved: `save_register`, or `offset(fp)` for
/// rbp saved without being the frame pointer), `and rsp, -align` (dynamic alignment, only with
/// the frame pointer), `sub rsp, N`. Offsets are the assembler's offsets in its section (see the
/// top of this file).
///
/// Errors (the assembler then holds whatever asmjit emitted; `rows` is unchanged):
/// `errc::unsupported` for frames rows cannot describe (dynamic alignment without a preserved
/// frame pointer, saved vector/mask registers, non-x86-64 code) — checked before anything is
/// emitted — and when asmjit's bytes differ from the sequence described here (another asmjit
/// version); asmjit's own errors as `invalid_argument` (`no_memory`) with asmjit's message.
inline result<void> emit_prolog(::asmjit::x86::Assembler& a, const ::asmjit::FuncFrame& frame,
                                frame_builder& rows) {
  using namespace ::asmjit;
  constexpr const char* what = "asmjit prologue";
  JITUNWIND_TRY(detail::check_frame(a, frame, what));
  const auto base = static_cast<uint32_t>(a.offset());
  if (Error err = a.emitProlog(frame); err != kErrorOk) return detail::asmjit_error(err, what);

  // The same sequence one instruction at a time (asmjit's x86 EmitHelper::emitProlog order).
  detail::replay r(a);
  x86::Assembler& s = r.a();
  std::vector<detail::step> steps;
  const bool fp = frame.hasPreservedFP();
  if (fp) {
    r.failed(s.push(x86::rbp));
    steps.push_back({detail::step::push_fp, r.at(base)});
    r.failed(s.mov(x86::rbp, x86::rsp));
    steps.push_back({detail::step::set_fp, r.at(base)});
  }
  // Slot of the k-th push below the return address (and the saved rbp).
  int32_t cfa_offset = fp ? -16 : -8;
  const uint32_t gp = detail::gp_saved_without_fp(frame);
  for (uint32_t id = 0; id < 16; ++id) {
    if ((gp & (1u << id)) == 0) continue;
    r.failed(s.push(x86::gpq(id)));
    cfa_offset -= 8;
    steps.push_back({detail::step::alloc, r.at(base), 8});
    steps.push_back({detail::step::save, r.at(base), cfa_offset, id});
  }
  const uint32_t sa = frame.saRegId();
  if (sa != BaseReg::kIdBad && sa != x86::Gp::kIdSp) {
    if (!fp) {
      r.failed(s.mov(x86::gpq(sa), x86::rsp));
    } else if (sa != x86::Gp::kIdBp) {
      r.failed(s.mov(x86::gpq(sa), x86::rbp));
    }
  }
  // With the frame pointer (required above) the CFA is rbp-based: `and` changes no row.
  if (frame.hasDynamicAlignment()) {
    r.failed(s.and_(x86::rsp, -static_cast<int32_t>(frame.finalStackAlignment())));
  }
  if (frame.hasStackAdjustment()) {
    r.failed(s.sub(x86::rsp, frame.stackAdjustment()));
    steps.push_back(
        {detail::step::alloc, r.at(base), static_cast<int32_t>(frame.stackAdjustment())});
  }
  if (frame.hasDynamicAlignment() && frame.hasDAOffset()) {
    r.failed(s.mov(x86::ptr(x86::rsp, static_cast<int32_t>(frame.daOffset())), x86::gpq(sa)));
  }
  JITUNWIND_TRY(r.matches(a, base, what));
  detail::apply(steps, rows);
  return ok_result();
}

/// Emits asmjit's epilogue for `frame` (`a.emitEpilog(frame)`, ending in `ret`) and adds its
/// rows to `rows`: `mov rsp, rbp` / `lea rsp, [rbp - n]` or `add rsp, N`, one `pop` per saved
/// register (restored), `pop rbp`, `ret`. The epilogue is bracketed by `remember_state` and a
/// `restore_state` after the `ret`, so code after it (another path of the body, cold code) keeps
/// the body's rules; at the end of the function that last row describes no code and is dropped
/// by `frame_builder::finish`. Errors: as `emit_prolog`.
inline result<void> emit_epilog(::asmjit::x86::Assembler& a, const ::asmjit::FuncFrame& frame,
                                frame_builder& rows) {
  using namespace ::asmjit;
  constexpr const char* what = "asmjit epilogue";
  JITUNWIND_TRY(detail::check_frame(a, frame, what));
  const auto base = static_cast<uint32_t>(a.offset());
  if (Error err = a.emitEpilog(frame); err != kErrorOk) return detail::asmjit_error(err, what);

  detail::replay r(a);
  x86::Assembler& s = r.a();
  std::vector<detail::step> steps;
  steps.push_back({detail::step::remember, base});
  const bool fp = frame.hasPreservedFP();
  if (frame.hasMmxCleanup()) r.failed(s.emms());
  if (frame.hasAvxCleanup()) r.failed(s.vzeroupper());
  if (fp) {
    // The CFA is rbp-based until `pop rbp`: moving rsp back changes no row.
    const auto below_fp = static_cast<int32_t>(frame.pushPopSaveSize()) - 8;
    r.failed(below_fp == 0 ? s.mov(x86::rsp, x86::rbp)
                           : s.lea(x86::rsp, x86::ptr(x86::rbp, -below_fp)));
  } else if (frame.hasStackAdjustment()) {
    r.failed(s.add(x86::rsp, static_cast<int32_t>(frame.stackAdjustment())));
    steps.push_back(
        {detail::step::free, r.at(base), static_cast<int32_t>(frame.stackAdjustment())});
  }
  const uint32_t gp = detail::gp_saved_without_fp(frame);
  for (uint32_t id = 16; id-- > 0;) {
    if ((gp & (1u << id)) == 0) continue;
    r.failed(s.pop(x86::gpq(id)));
    steps.push_back({detail::step::free, r.at(base), 8});
    steps.push_back({detail::step::restore_reg, r.at(base), 0, id});
  }
  if (fp) {
    r.failed(s.pop(x86::rbp));
    steps.push_back({detail::step::pop_fp, r.at(base)});
  }
  if (frame.hasCalleeStackCleanup()) {
    r.failed(s.emit(x86::Inst::kIdRet, static_cast<int>(frame.calleeStackCleanup())));
  } else {
    r.failed(s.emit(x86::Inst::kIdRet));
  }
  steps.push_back({detail::step::resume, r.at(base)});
  JITUNWIND_TRY(r.matches(a, base, what));
  detail::apply(steps, rows);
  return ok_result();
}

/// Bytes `code` needs once placed (all sections, flattened), after resolving the links asmjit
/// can resolve. Call it before reserving memory; `copy_code` may need fewer (an address table
/// shrinks when relocation finds its targets in reach). Errors: asmjit's, and
/// `invalid_argument` for a label that is used but never bound; `name` names the function.
inline result<size_t> code_size(::asmjit::CodeHolder& code, std::string_view name) {
  using namespace ::asmjit;
  const std::string what = "placing '" + std::string(name) + "'";
  if (Error err = code.flatten(); err != kErrorOk) return detail::asmjit_error(err, what);
  if (Error err = code.resolveUnresolvedLinks(); err != kErrorOk) {
    return detail::asmjit_error(err, what);
  }
  if (code.hasUnresolvedLinks()) {
    return error(errc::invalid_argument, what + ": " + std::to_string(code.unresolvedLinkCount()) +
                                             " use(s) of a label that is never bound (asmjit: " +
                                             DebugUtils::errorAsString(kErrorInvalidLabel) + ")");
  }
  if (code.codeSize() == 0) return detail::asmjit_error(kErrorNoCodeGenerated, what);
  return code.codeSize();
}

/// Relocates `code` to run at `address` and copies it (all sections, flattened, padding zeroed)
/// into `writable`, the memory that will be executed at `address` (or a writable view of it).
/// Returns the size of the function: its `.text` section (sections after it, such as constant
/// pools and asmjit's address table, are copied but not part of the function's range).
/// Errors: those of `code_size`; `limit_exceeded` when `writable` is too small; asmjit's
/// relocation and copy errors with asmjit's message. `name` names the function in messages.
inline result<uint32_t> copy_code(::asmjit::CodeHolder& code, uint64_t address,
                                  span<uint8_t> writable, std::string_view name) {
  using namespace ::asmjit;
  JITUNWIND_TRY(code_size(code, name));
  const std::string what = "placing '" + std::string(name) + "'";
  if (Error err = code.relocateToBase(address); err != kErrorOk) {
    return detail::asmjit_error(err, what);
  }
  const size_t size = code.codeSize();
  if (writable.size() < size) {
    return error(errc::limit_exceeded, what + ": " + std::to_string(size) +
                                           " bytes of code, room for " +
                                           std::to_string(writable.size()));
  }
  if (Error err =
          code.copyFlattenedData(writable.data(), size, CopySectionFlags::kPadSectionBuffer);
      err != kErrorOk) {
    return detail::asmjit_error(err, what);
  }
  const size_t text = code.textSection()->bufferSize();
  if (text == 0 || text > UINT32_MAX) {
    return error(errc::invalid_argument, what + ": .text is " + std::to_string(text) + " bytes");
  }
  return static_cast<uint32_t>(text);
}

struct place_options {
  size_t alignment = 16;    ///< of the function's start in the window
  uint64_t moved_from = 0;  ///< != 0: the code was moved from there (see `window::append`)
};

/// Places `code` into the owned window `w` in one call: reserves room (`window::allocate`),
/// relocates and copies the code there (`copy_code`), finishes `rows` (offsets from the start
/// of `.text`) at the placed address and appends the function under `name`. Returns what was
/// appended; it is visible at the window's next `publish`. The builder is not changed.
/// Errors, each naming the function: those of `code_size` / `copy_code` (asmjit's message),
/// the window's (`limit_exceeded` when it is full, `bad_state` unless open, `invalid_argument`
/// for a described window), the rows' (`frame_builder::finish`). Nothing is appended on error;
/// room reserved before a failed copy stays unused.
inline result<function_desc> place(window& w, std::string_view name, ::asmjit::CodeHolder& code,
                                   const frame_builder& rows, const place_options& options = {}) {
  JITUNWIND_TRY_ASSIGN(const size_t size, code_size(code, name));
  auto space = w.allocate(size, options.alignment);
  if (!space) {
    return detail::named(
        space.error(), name,
        "window " + std::to_string(w.id()) + ": " + std::to_string(size) + " bytes: ");
  }
  JITUNWIND_TRY_ASSIGN(const uint32_t text, copy_code(code, space->address, space->writable, name));
  auto desc = rows.finish(space->address, text);
  if (!desc) return detail::named(desc.error(), name, "rows: ");
  if (auto r = w.append(name, *desc, options.moved_from); !r) {
    return detail::named(r.error(), name, "window " + std::to_string(w.id()) + ": ");
  }
  return desc;
}

}  // namespace jitunwind::asmjit_glue
