// The two symbols the GDB JIT interface requires, and this library's own storage behind them.
//
// gdb looks the names up in every object file (.symtab or .dynsym), breakpoints
// `__jit_debug_register_code` and, when it is hit, reads the `__jit_debug_descriptor` of the
// same object file. Our own code therefore reaches both through hidden names that symbol
// interposition cannot redirect, while the public names are:
// - default visibility, so libjitunwind.so exports them although it is built with
//   -fvisibility=hidden;
// - weak, so that a static link with another JIT's strong definition (LLVM's ORC,
//   GDBRegistrationListener) keeps that one instead of failing with a duplicate symbol.
// gdbjit.cpp decides which pair to use (docs/publishers.md, "GDB descriptor policy").
#include "gdbjit/gdbjit.hpp"

using jitunwind::detail::gdbjit::jit_descriptor;

extern "C" {

__attribute__((visibility("hidden"))) jit_descriptor jitunwind_gdbjit_descriptor = {
    1, jitunwind::detail::gdbjit::jit_noaction, nullptr, nullptr};

// noinline + used + an asm with a memory clobber: the call can be neither removed nor
// reordered with the stores to the descriptor, and the function keeps its own address.
__attribute__((visibility("hidden"), noinline, used)) void
jitunwind_gdbjit_register_code() noexcept {
  asm volatile("" ::: "memory");
}

extern jit_descriptor __jit_debug_descriptor
    __attribute__((weak, visibility("default"), alias("jitunwind_gdbjit_descriptor")));
void __jit_debug_register_code() noexcept
    __attribute__((weak, visibility("default"), alias("jitunwind_gdbjit_register_code")));
}
