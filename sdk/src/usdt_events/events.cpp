// The probe sites. _SDT_HAS_SEMAPHORES makes sys/sdt.h record each semaphore's address in the
// probe's .note.stapsdt entry; the semaphores live in `.probes`, where tracers (bcc/bpftrace
// via the section header, libbpf via the note) expect them.
#define _SDT_HAS_SEMAPHORES 1
#include "usdt_events/events.hpp"

#include <sys/sdt.h>

#define JITUNWIND_SEMAPHORE(name)          \
  __attribute__((section(".probes"), used, \
                 visibility("hidden"))) volatile unsigned short jitunwind_##name##_semaphore = 0

extern "C" {
JITUNWIND_SEMAPHORE(window_publish);
JITUNWIND_SEMAPHORE(window_retire);
JITUNWIND_SEMAPHORE(window_free);
JITUNWIND_SEMAPHORE(code_add);
JITUNWIND_SEMAPHORE(code_remove);
JITUNWIND_SEMAPHORE(usdt_load);
JITUNWIND_SEMAPHORE(usdt_unload);
}

namespace jitunwind::detail::usdt_events {

// noinline: one probe site per event, whatever the callers' inlining does.
[[gnu::noinline]] void fire_window_publish(uint64_t window_id, uint64_t generation, uint64_t text,
                                           uint64_t text_len, uint64_t sframe,
                                           uint64_t sframe_len) {
  STAP_PROBE6(jitunwind, window_publish, window_id, generation, text, text_len, sframe, sframe_len);
}

[[gnu::noinline]] void fire_window_retire(uint64_t window_id, uint64_t generation) {
  STAP_PROBE2(jitunwind, window_retire, window_id, generation);
}

[[gnu::noinline]] void fire_window_free(uint64_t window_id, uint64_t generation) {
  STAP_PROBE2(jitunwind, window_free, window_id, generation);
}

[[gnu::noinline]] void fire_code_add(uint64_t address, uint64_t size, const char* name,
                                     uint64_t window_id, uint64_t generation) {
  STAP_PROBE5(jitunwind, code_add, address, size, name, window_id, generation);
}

[[gnu::noinline]] void fire_code_remove(uint64_t address, uint64_t size, uint64_t window_id,
                                        uint64_t generation) {
  STAP_PROBE4(jitunwind, code_remove, address, size, window_id, generation);
}

[[gnu::noinline]] void fire_usdt_load(const char* provider, uint64_t load_address,
                                      const char* object_path) {
  STAP_PROBE3(jitunwind, usdt_load, provider, load_address, object_path);
}

[[gnu::noinline]] void fire_usdt_unload(const char* provider, uint64_t load_address) {
  STAP_PROBE2(jitunwind, usdt_unload, provider, load_address);
}

semaphore_values semaphores() {
  return {jitunwind_window_publish_semaphore, jitunwind_window_retire_semaphore,
          jitunwind_window_free_semaphore,    jitunwind_code_add_semaphore,
          jitunwind_code_remove_semaphore,    jitunwind_usdt_load_semaphore,
          jitunwind_usdt_unload_semaphore};
}

}  // namespace jitunwind::detail::usdt_events
