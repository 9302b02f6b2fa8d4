// Private: which loaded object's __jit_debug_descriptor a debugger reads.
//
// Observed with GDB 13.1: gdb breakpoints __jit_debug_register_code in every object that
// defines both symbols, but on every hit it reads the descriptor of the FIRST such object in
// load order (the executable, then shared libraries in link-map order), whichever object's
// function was hit. Older gdbs (< 10) look both names up globally, which also finds the first.
// So registrations are only visible in that first object's list. Symbol tables are read from
// the files on disk (.symtab and .dynsym, like gdb's minimal symbols), so definitions an
// executable does not export dynamically count too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace jitunwind::detail::gdbjit {

struct jit_symbols {
  uintptr_t descriptor = 0;     ///< run-time address of __jit_debug_descriptor
  uintptr_t register_code = 0;  ///< run-time address of __jit_debug_register_code
  std::string object;           ///< path of the object defining them ("" = main program)
};

/// The first loaded object (dl_iterate_phdr order) whose symbol tables define both names.
/// Files that cannot be read or parsed are skipped. Not async-signal-safe; takes a few ms for a
/// process with many libraries.
std::optional<jit_symbols> first_jit_symbols_in_load_order();

}  // namespace jitunwind::detail::gdbjit
