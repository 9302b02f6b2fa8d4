// Names of JIT functions from the GDB JIT interface: the in-memory ELF objects a runtime lists
// in its `__jit_debug_descriptor` (LLVM ORC with debugger support, MCJIT's GDB listener, any
// runtime that supports `gdb`). The preload reads them because the `.eh_frame` a runtime
// registers with `__register_frame` carries addresses, not names.
//
// Why read the list rather than interpose `__jit_debug_register_code`: the runtimes that define
// it call it directly (libLLVM-22 calls its own definition with a direct `call`, and a program
// that defines it calls it within its executable), so an LD_PRELOAD definition is never reached.
//
// The host's memory is read with process_vm_readv on this process, never dereferenced: an entry
// unlinked and freed by another thread meanwhile gives a failed read (that object is skipped),
// never a fault in the host. The one exception is the descriptor itself, read directly once the
// object that defines it is pinned in memory (RTLD_NODELETE). Objects are parsed by the toolkit's
// hostile-safe ELF reader.
//
// Thread-safety: none; the preload calls it under its mutex.
#pragma once

#include <jitunwind/toolkit/gdb_jit.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace jitunwind_preload {

class gdb_names {
 public:
  /// Reads the objects listed now that were not read before; forgets the ones no longer
  /// listed. Returns false when the process has no readable descriptor.
  bool refresh();
  /// The name of the function that starts at `start` in some listed object, or null.
  const std::string* find(uint64_t start) const;
  /// Forgets the names of functions starting in [begin, end) (their code was deregistered);
  /// the next refresh reads every listed object again (a new one may sit where a freed one was).
  void forget(uint64_t begin, uint64_t end);
  /// Objects in the descriptor's list at the last refresh.
  size_t listed() const noexcept { return seen_.size(); }

  static constexpr size_t max_entries = size_t{1} << 16;      // walked per refresh
  static constexpr uint64_t max_object = uint64_t{64} << 20;  // bytes of one object
  static constexpr size_t max_names = size_t{1} << 20;        // kept in all

 private:
  bool find_descriptor();
  bool read_descriptor(jitunwind::toolkit::gdb_jit::jit_descriptor& out) const;
  void read_object(uint64_t address, uint64_t size);

  bool looked_up_ = false;
  bool pinned_ = false;  // the object defining the descriptor cannot be unloaded
  uint64_t descriptor_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> seen_;  // (symfile address, size) of read objects
  std::map<uint64_t, std::string> names_;         // function start -> name
};

}  // namespace jitunwind_preload
