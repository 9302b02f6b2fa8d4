// Static USDT probes of the SDK (provider `jitunwind`): the live feed for tracers and the eBPF
// walker (docs/usdt-events.md). Compiled in with sys/sdt.h and semaphores: each probe has an
// `unsigned short` counter in the `.probes` section that the kernel increments while a uprobe is
// attached (uprobe ref_ctr_offset), so an untraced event costs one load and one branch, and the
// arguments (strings included) are only computed when someone listens.
//
// Where the probes are: in libjitunwind.so when the SDK is used as a shared library, in the
// executable when it is linked statically. Thread-safe; never fails.
#pragma once

#include <cstdint>

extern "C" {
// Defined in events.cpp, in `.probes`; written only by the kernel (hence volatile).
extern volatile unsigned short jitunwind_window_publish_semaphore;
extern volatile unsigned short jitunwind_window_retire_semaphore;
extern volatile unsigned short jitunwind_window_free_semaphore;
extern volatile unsigned short jitunwind_code_add_semaphore;
extern volatile unsigned short jitunwind_code_remove_semaphore;
extern volatile unsigned short jitunwind_usdt_load_semaphore;
extern volatile unsigned short jitunwind_usdt_unload_semaphore;
}

namespace jitunwind::detail::usdt_events {

// The probe sites (out of line, so that every event has exactly one site).
void fire_window_publish(uint64_t window_id, uint64_t generation, uint64_t text, uint64_t text_len,
                         uint64_t sframe, uint64_t sframe_len);
void fire_window_retire(uint64_t window_id, uint64_t generation);
void fire_window_free(uint64_t window_id, uint64_t generation);
void fire_code_add(uint64_t address, uint64_t size, const char* name, uint64_t window_id,
                   uint64_t generation);
void fire_code_remove(uint64_t address, uint64_t size, uint64_t window_id, uint64_t generation);
void fire_usdt_load(const char* provider, uint64_t load_address, const char* object_path);
void fire_usdt_unload(const char* provider, uint64_t load_address);

/// A window's contents were published (new window, or new generation of a window: more code,
/// extended SFrame, reuse). A consumer replaces everything it knew for `window_id`.
inline void window_publish(uint64_t window_id, uint64_t generation, uint64_t text,
                           uint64_t text_len, uint64_t sframe, uint64_t sframe_len) {
  if (__builtin_expect(jitunwind_window_publish_semaphore != 0, 0)) {
    fire_window_publish(window_id, generation, text, text_len, sframe, sframe_len);
  }
}

/// The window's code will not be entered again; frames may still be on stacks (grace period).
inline void window_retire(uint64_t window_id, uint64_t generation) {
  if (__builtin_expect(jitunwind_window_retire_semaphore != 0, 0)) {
    fire_window_retire(window_id, generation);
  }
}

/// The window's memory (code and SFrame) is about to be reused or unmapped: drop its rows.
inline void window_free(uint64_t window_id, uint64_t generation) {
  if (__builtin_expect(jitunwind_window_free_semaphore != 0, 0)) {
    fire_window_free(window_id, generation);
  }
}

/// A function was added to a window, visible from the publication `generation` on (the
/// window_publish that follows carries it; 0: not known). `name` is only read when traced; pass
/// a callable returning the name through code_add_lazy when building the name costs something.
inline void code_add(uint64_t address, uint64_t size, const char* name, uint64_t window_id,
                     uint64_t generation = 0) {
  if (__builtin_expect(jitunwind_code_add_semaphore != 0, 0)) {
    fire_code_add(address, size, name, window_id, generation);
  }
}

/// Like code_add, but `make_name()` (returning something with `.c_str()` or a `const char*`) is
/// called only while the probe is traced.
template <class NameFn>
inline void code_add_lazy(uint64_t address, uint64_t size, NameFn&& make_name, uint64_t window_id,
                          uint64_t generation = 0) {
  if (__builtin_expect(jitunwind_code_add_semaphore != 0, 0)) {
    const auto& name = make_name();
    if constexpr (requires { name.c_str(); }) {
      fire_code_add(address, size, name.c_str(), window_id, generation);
    } else {
      fire_code_add(address, size, name, window_id, generation);
    }
  }
}

/// A single function was taken out of a live window (window::retire_function) by the
/// publication `generation`: its rows are gone from that generation on; its code stays until
/// the window is freed.
inline void code_remove(uint64_t address, uint64_t size, uint64_t window_id,
                        uint64_t generation = 0) {
  if (__builtin_expect(jitunwind_code_remove_semaphore != 0, 0)) {
    fire_code_remove(address, size, window_id, generation);
  }
}

/// A dynamic USDT provider's object was mapped (the SDK maps it itself, not through the dynamic
/// linker, so tools that watch ld.so for new objects learn about it here). Fired after the
/// object is in place and before `provider::load()` returns, so a tracer that stops the process
/// on this event can attach to the new probes before any of them fires.
inline void usdt_load(const char* provider, uint64_t load_address, const char* object_path) {
  if (__builtin_expect(jitunwind_usdt_load_semaphore != 0, 0)) {
    fire_usdt_load(provider, load_address, object_path);
  }
}

/// A dynamic USDT provider's object was replaced by inert pages (`provider::unload()`).
inline void usdt_unload(const char* provider, uint64_t load_address) {
  if (__builtin_expect(jitunwind_usdt_unload_semaphore != 0, 0)) {
    fire_usdt_unload(provider, load_address);
  }
}

/// Current semaphore values, for tests and diagnostics.
struct semaphore_values {
  unsigned short window_publish, window_retire, window_free, code_add, code_remove, usdt_load,
      usdt_unload;
};
semaphore_values semaphores();

}  // namespace jitunwind::detail::usdt_events
