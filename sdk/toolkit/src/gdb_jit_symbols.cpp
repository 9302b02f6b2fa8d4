// The two symbols the GDB JIT interface requires, and this library's own storage behind them.
//
// gdb looks the names up in the object files (.symtab or .dynsym) and reads the descriptor of the
// first object in load order that defines both (gdb_jit_scan.cpp). Our own code reaches our pair
// through hidden names that symbol interposition cannot redirect (sdk/src/gdbjit/gdbjit.cpp decides whether to
// use it or the first definer's), while the public names are:
// - default visibility, so libjitunwind.so exports them although it is built with
//   -fvisibility=hidden;
// - weak, so that a static link with another JIT's strong definition (LLVM's ORC,
//   GDBRegistrationListener) keeps that one instead of failing with a duplicate symbol.
// See docs/publishers.md, "GDB descriptor policy".
#include <jitunwind/toolkit/gdb_jit.hpp>

using jitunwind::toolkit::gdb_jit::jit_descriptor;

extern "C" {

__attribute__((visibility("hidden"))) jit_descriptor jitunwind_gdbjit_descriptor = {
    1, jitunwind::toolkit::gdb_jit::jit_noaction, nullptr, nullptr};

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

namespace jitunwind::toolkit::gdb_jit {

jit_descriptor* own_descriptor() noexcept {
  return &jitunwind_gdbjit_descriptor;
}

register_code_fn own_register_code() noexcept {
  return &jitunwind_gdbjit_register_code;
}

}  // namespace jitunwind::toolkit::gdb_jit
