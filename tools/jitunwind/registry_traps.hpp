// Software breakpoints that stop a thread right after it changed a jitunwind registry, for
// `jitunwind unwind check` on machines whose debug registers do not trap (where a watchpoint on
// the registry's change counter would do it): an int3 on each site of the SDK's probe
// jitunwind_registry:change (docs/registry-abi.md, "Being told of changes"), which the registry
// writer fires after every change whatever else the SDK publishes (a one-byte nop, no semaphore).
#pragma once

#include "tracee.hpp"

#include <jitunwind/remote.h>

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace jitunwind::cli::tracee {

class registry_traps {
 public:
  /// Finds the probe sites in the objects that define the reader's registries (once: again
  /// only after forget()).
  void find(pid_t pid, const remote::registry_reader& reader);
  /// Arms every site that can be: a site is armed once its page is mapped executable, and
  /// again where a new mapping of the object (the loader maps each segment over its first
  /// mapping of the whole file) put the original byte back. Only while every thread of the process
  /// is traced (the caller's business); the thread `pid` is stopped.
  void refresh(pid_t pid);
  /// Takes every site out (before a new process shares or copies the memory, before detaching).
  void disarm(pid_t pid);
  /// After exec: the patched memory and the objects are gone.
  void forget();
  bool armed() const { return !breakpoints_.empty(); }
  /// Whether the thread, stopped by SIGTRAP, hit one of the sites (armed or taken out since).
  /// It is then past the site's one-byte nop, as if it had run it, and may go on from there.
  bool hit(pid_t pid, int status) const;

 private:
  void find_in(pid_t pid, const remote::registry_location& r);

  std::vector<uint64_t> sites_;
  software_breakpoints breakpoints_;
};

}  // namespace jitunwind::cli::tracee
