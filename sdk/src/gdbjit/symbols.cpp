// The two symbols the GDB JIT interface requires, and this library's own storage behind them.
//
// gdb looks the names up in the object files (.symtab or .dynsym) and reads the descriptor of the
// first object in load order that defines both (symbol_scan.hpp). Our own code reaches our pair
// through hidden names that symbol interposition cannot redirect (gdbjit.cpp decides whether to
// use it or the first definer's), while the public names are:
// - default visibility, so libjitunwind.so exports them although it is built with
//   -fvisibility=hidden;
// - weak, so that a static link with another JIT's strong definition (LLVM's ORC,
//   GDBRegistrationListener) keeps that one instead of failing with a duplicate symbol.
// See docs/publishers.md, "GDB descriptor policy".
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
