// The one process-wide registry object that external tools look up by name. This is the SDK's
// only mutable global besides the GDB JIT descriptor: its address and layout are the ABI.
#include "registry/registry_writer.hpp"

#include <jitunwind/config.h>

extern "C" {
// Constant-initialized, so the header is valid (and a reader finds an empty registry) from the
// moment the object is mapped, before any constructor runs.
[[gnu::used]] alignas(64) JITUNWIND_API jitunwind_registry_header jitunwind_registry = {
    {'J', 'I', 'T', 'U', 'N', 'W', 'R', 'G'},
    JITUNWIND_REGISTRY_VERSION,
    sizeof(jitunwind_registry_header),
    sizeof(jitunwind_registry_entry),
    jitunwind::detail::registry_writer::default_capacity,
    0,
    0,
    0,
    0,
    0,
};
}

namespace jitunwind::detail {

jitunwind_registry_header& registry_header() {
  return jitunwind_registry;
}

registry_writer& registry() {
  // Leaked on purpose: windows may be published or retired from other threads and from static
  // destructors until the process is gone.
  static registry_writer* const writer =
      new registry_writer(jitunwind_registry, registry_writer::default_capacity);
  return *writer;
}

}  // namespace jitunwind::detail
