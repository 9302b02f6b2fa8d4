// Toolkit: the GDB JIT interface as a process sees it (GDB manual, "JIT Interface"): the
// protocol's structures, this library's own pair of symbols, and which loaded object's
// __jit_debug_descriptor a debugger reads. The SDK's gdb publisher (sdk/src/gdbjit) registers
// through them; libjitunwind_preload reads another JIT's list through them.
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

namespace jitunwind::toolkit::gdb_jit {

// The protocol's structures.
struct jit_code_entry {
  jit_code_entry* next_entry;
  jit_code_entry* prev_entry;
  const char* symfile_addr;
  uint64_t symfile_size;
};

enum jit_action : uint32_t { jit_noaction = 0, jit_register = 1, jit_unregister = 2 };

struct jit_descriptor {
  uint32_t version;
  uint32_t action_flag;
  jit_code_entry* relevant_entry;
  jit_code_entry* first_entry;
};

/// This library's own descriptor and registration function (gdb_jit_symbols.cpp), reached
/// directly, never through symbol interposition; exported as the weak `__jit_debug_descriptor`
/// and `__jit_debug_register_code`.
jit_descriptor* own_descriptor() noexcept;
using register_code_fn = void (*)() noexcept;
register_code_fn own_register_code() noexcept;

struct jit_symbols {
  uintptr_t descriptor = 0;     ///< run-time address of __jit_debug_descriptor
  uintptr_t register_code = 0;  ///< run-time address of __jit_debug_register_code
  std::string object;           ///< path of the object defining them ("" = main program)
};

/// The first loaded object (dl_iterate_phdr order) whose symbol tables define both names.
/// Files that cannot be read or parsed are skipped. Not async-signal-safe; takes a few ms for a
/// process with many libraries.
std::optional<jit_symbols> first_jit_symbols_in_load_order();

}  // namespace jitunwind::toolkit::gdb_jit
