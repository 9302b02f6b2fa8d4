// Software breakpoints that stop a thread right after it changed a jitunwind registry, for
// `jitunwind unwind check` on machines whose debug registers do not trap (where a watchpoint on
// the registry's change counter would do it): an int3 on each site of the SDK's probe
// jitunwind_registry:change (docs/registry-abi.md, "Being told of changes"), which the registry
// writer fires after every change whatever else the SDK publishes. An SDK from before that probe
// is caught at jitunwind:window_publish instead, whose semaphore is raised (it fires only with
// the usdt-events publisher).
#pragma once

#include "tracee.hpp"

#include <jitunwind/remote.h>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::cli::tracee {

class registry_traps {
 public:
  /// Finds the probe sites in the objects that define the reader's registries (once: again
  /// only after forget()).
  void find(pid_t pid, const remote::registry_reader& reader);
  /// Arms every site that can be: a site is armed once its page is mapped executable, a
  /// semaphore raised once writable, and both are armed again where a new mapping of the object
  /// (the loader maps each segment over the first mapping of the whole file) put the original
  /// bytes back. Only while every thread of the process is traced (the caller's business); the
  /// thread `pid` is stopped.
  void refresh(pid_t pid);
  /// Takes every site out (before a new process shares or copies the memory, before detaching).
  void disarm(pid_t pid);
  /// After exec: the patched memory and the objects are gone.
  void forget();
  bool found() const { return !sites_.empty(); }
  bool armed() const { return !breakpoints_.empty(); }
  bool ever_armed() const { return ever_armed_; }
  /// "jitunwind_registry:change" or "jitunwind:window_publish": the probe of the sites found.
  const std::string& probe() const { return probe_; }
  /// Whether the thread, stopped by SIGTRAP, hit one of the sites (armed or taken out since).
  /// It is then past the site's one-byte nop, as if it had run it, and may go on from there.
  bool hit(pid_t pid, int status) const;

 private:
  struct site {
    uint64_t pc = 0, semaphore = 0;
    bool raised = false;  // the semaphore counts us
  };

  void find_in(pid_t pid, const remote::registry_location& r);
  void raise(pid_t pid, site& s);

  std::vector<site> sites_;
  std::string probe_;
  software_breakpoints breakpoints_;
  bool ever_armed_ = false;
};

}  // namespace jitunwind::cli::tracee
