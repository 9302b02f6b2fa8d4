/* jitunwind/c/trampolines.h — the C API of interpreter trampolines (optional part:
 * jitunwind/trampolines.h).
 *
 * Conventions: as jitunwind/c/embed.h.
 */
#ifndef JITUNWIND_C_TRAMPOLINES_H
#define JITUNWIND_C_TRAMPOLINES_H

#include <jitunwind/c/embed.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== trampolines (jitunwind/trampolines.h) =============================================== */

/* Per-function native trampolines for interpreters: each interpreted function gets a stub of
 * its own, named PREFIX<function> in the perf map, jitdump and GDB, described for SFrame by one
 * PCMASK FDE per stub array (see jitunwind/trampolines.h). jitunwind_trampoline_pool_create
 * makes the pool a jitunwind session of its own, configured from the environment
 * (JITUNWIND_PUBLISH, JITUNWIND_DIR, JITDUMPDIR); jitunwind_trampoline_pool_create_in uses the
 * caller's. A pool may be used from any thread. */

typedef struct jitunwind_trampoline_pool jitunwind_trampoline_pool;

/* What a trampoline calls, and how it is called: entry(a, b, c, target) returns
 * target(a, b, c). */
typedef uint64_t (*jitunwind_trampoline_target)(void* a, void* b, void* c);
typedef uint64_t (*jitunwind_trampoline_entry)(void* a, void* b, void* c,
                                               jitunwind_trampoline_target target);

typedef struct jitunwind_trampoline {
  jitunwind_trampoline_entry entry;
  uint64_t address;        /* the stub's first byte */
  uint64_t return_address; /* what the stub's call leaves on the stack while target runs */
  uint32_t slot;           /* identifies the stub in its pool */
} jitunwind_trampoline;

typedef struct jitunwind_trampoline_pool_options {
  uint32_t struct_size;    /* sizeof(jitunwind_trampoline_pool_options), set by _init */
  uint32_t reserved;       /* 0 */
  size_t stubs_per_window; /* 0 = 1024 */
  const char* name_prefix; /* NULL = "" */
  uint64_t near_address;   /* place stubs near this code (e.g. the eval function); 0 = anywhere */
  /* Name of the PCMASK function covering a window's stub array (registry, FDE listings);
     NULL = "jitunwind:trampolines". */
  const char* array_name;
} jitunwind_trampoline_pool_options;

/* The defaults: 1024 stubs per window, no prefix, anywhere, array "jitunwind:trampolines". */
JITUNWIND_API void jitunwind_trampoline_pool_options_init(
    jitunwind_trampoline_pool_options* options);

/* Creates a pool (and its session). options may be NULL (defaults). */
JITUNWIND_API jitunwind_status jitunwind_trampoline_pool_create(
    const jitunwind_trampoline_pool_options* options, jitunwind_trampoline_pool** out,
    jitunwind_error* error);
/* Creates a pool in a session the caller owns (it must outlive the pool). */
JITUNWIND_API jitunwind_status jitunwind_trampoline_pool_create_in(
    jitunwind_session* session, const jitunwind_trampoline_pool_options* options,
    jitunwind_trampoline_pool** out, jitunwind_error* error);
/* Retires the stubs and frees the pool; no trampoline of it may run or be called afterwards. */
JITUNWIND_API void jitunwind_trampoline_pool_destroy(jitunwind_trampoline_pool* pool);
/* A published trampoline named PREFIX<name> (a released one is reused first). */
JITUNWIND_API jitunwind_status jitunwind_trampoline_acquire(jitunwind_trampoline_pool* pool,
                                                            const char* name,
                                                            jitunwind_trampoline* out,
                                                            jitunwind_error* error);
/* The function was unloaded and no thread is inside its trampoline: the stub may be reused. */
JITUNWIND_API jitunwind_status jitunwind_trampoline_release(jitunwind_trampoline_pool* pool,
                                                            const jitunwind_trampoline* trampoline,
                                                            jitunwind_error* error);

#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_C_TRAMPOLINES_H */
