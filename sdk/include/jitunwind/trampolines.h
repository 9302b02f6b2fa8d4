/// jitunwind/trampolines.h — per-function native trampolines that make interpreted frames
/// visible on the native stack.
///
/// The native stack of an interpreter shows only its eval loop: every interpreted function runs
/// in the same native function. A trampoline pool hands out one tiny native stub per interpreted
/// function; the interpreter calls the function's eval through its stub, so each interpreted
/// call leaves a distinct return address on the stack, which profilers and debuggers name
/// (`toy:fib`) through the perf map, jitdump and the GDB JIT interface. This is the technique
/// CPython uses for `-X perf`; here the stubs are also described for unwinders that do not use
/// frame pointers: the whole stub array of a window is ONE SFrame FDE of type PCMASK (every stub
/// has the same rows), and each stub handed out is named and described (for jitdump and GDB's
/// .eh_frame) on its own.
///
/// Every stub is the same 16 bytes of code (x86-64), one every `stub_stride` bytes:
///
///     0: push rbp          CFA = rsp+8 before, rsp+16 after; caller's rbp at CFA-16
///     1: mov  rbp, rsp     CFA = rbp+16
///     4: call rcx          calls target(a, b, c): rdi, rsi, rdx pass through untouched
///     6: pop  rbp          (return_offset = 6: the address the call leaves on the stack)
///     7: ret               CFA = rsp+8
///     8: int3 ...          padding up to the next stub, `stub_stride` bytes further
///
/// It keeps a frame-pointer frame so that frame-pointer walkers (perf -g, the kernel) also walk
/// through it, and the rows say the same for SFrame/DWARF walkers.
///
/// Ownership: the pool belongs to the caller. It maps the stub memory itself (near the
/// interpreter's code if asked, see `near_address`) and describes it to the session it was
/// created with as code windows (the session must outlive the pool). Destroying the pool
/// retires its windows and unmaps the stubs: no trampoline of it may be running or called
/// afterwards.
///
/// Thread-safety: `acquire`/`release` are serialized internally and may be called from any
/// thread; calling a trampoline is thread-safe and lock-free.
///
/// Errors: `invalid_argument` (empty name, foreign or double-released trampoline),
/// `unsupported` (a target other than x86-64), errors of the window API (`no_memory`,
/// `limit_exceeded`) when a new window cannot be created.
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/result.h>
#include <jitunwind/window.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind {

/// What a trampoline calls: the interpreter's eval entry, with the three pointer arguments the
/// interpreter passed to the trampoline.
using trampoline_target = uint64_t (*)(void* a, void* b, void* c);

/// A trampoline's calling convention: `entry(a, b, c, target)` returns `target(a, b, c)`.
using trampoline_entry = uint64_t (*)(void* a, void* b, void* c, trampoline_target target);

/// One trampoline handed out by a pool. Plain value; valid until released.
struct trampoline {
  trampoline_entry entry = nullptr;
  /// The stub's first byte.
  uint64_t address = 0;
  /// The return address the stub's call leaves on the stack while `target` runs
  /// (address + return_offset): what a correct unwind finds for this interpreted frame.
  uint64_t return_address = 0;
  /// Identifies the stub inside its pool (for `release`).
  uint32_t slot = 0;
};

struct trampoline_pool_options {
  /// Stubs per code window; the pool opens another window when one is full.
  size_t stubs_per_window = 1024;
  /// Place the stubs near this address if possible (within a few hundred MiB), typically the
  /// interpreter's eval function: on some CPUs calls and returns between code that lies far
  /// apart (e.g. a PIE binary and an anonymous mapping near the libraries) are several times
  /// slower than near ones. 0: wherever mmap puts them.
  uint64_t near_address = 0;
  /// Prepended to every name: "toy:" names the stub of `fib` "toy:fib".
  std::string name_prefix;
  /// Name of the PCMASK function that covers a window's whole stub array (appears in the
  /// registry and in tools that list FDEs; stubs not handed out carry no other name).
  std::string array_name = "jitunwind:trampolines";
};

class JITUNWIND_API trampoline_pool {
 public:
  /// Bytes of one stub's code (what is named and described).
  static constexpr uint32_t stub_size = 16;
  /// Distance between stubs; the gap is `int3`. perf inject --jit maps each jitdump CODE_LOAD
  /// as its code followed by its .eh_frame, so stubs closer than code + .eh_frame (~100 bytes
  /// for a stub) would overlap and perf would drop the earlier stubs' unwinding data.
  static constexpr uint32_t stub_stride = 128;
  static constexpr uint32_t return_offset = 6;

  /// Validates the options (`stubs_per_window` 1..1<<20, abi amd64). Creates no window yet.
  static result<std::unique_ptr<trampoline_pool>> create(session& s,
                                                         const trampoline_pool_options& options);
  ~trampoline_pool();
  trampoline_pool(const trampoline_pool&) = delete;
  trampoline_pool& operator=(const trampoline_pool&) = delete;

  /// A trampoline named `name_prefix + name`, published (callable and named in every active
  /// publisher) before this returns. A released stub is reused first; jitdump then records a
  /// new CODE_LOAD for the same address, so samples are attributed by time. Otherwise the next
  /// fresh stub; a full window is sealed and a new one opened.
  result<trampoline> acquire(std::string_view name);

  /// The interpreted function was unloaded: its stub may be handed out again, unless the
  /// session never reuses addresses (`session::recycles_addresses()`; then the stub stays
  /// unused). The caller guarantees that no thread is inside this trampoline and none will call
  /// it again.
  result<void> release(const trampoline& t);

  /// Stubs handed out and not released.
  size_t in_use() const;
  /// Windows the pool has opened, in order (owned by the session). For tools and tests that
  /// read a window's published SFrame or range.
  std::vector<const window*> windows() const;

 private:
  struct impl;
  explicit trampoline_pool(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace jitunwind
