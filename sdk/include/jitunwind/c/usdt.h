/* jitunwind/c/usdt.h — the C API of dynamic USDT probes (optional part: jitunwind/usdt.h).
 *
 * Conventions: as jitunwind/c/embed.h.
 */
#ifndef JITUNWIND_C_USDT_H
#define JITUNWIND_C_USDT_H

#include <jitunwind/c/embed.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== dynamic USDT (jitunwind/usdt.h) ===================================================== */

/* Probes declared at run time in a generated shared object (see jitunwind/usdt.h for the
 * object, where it lives and how tracers find it). A provider is used by one thread at a time;
 * probe handles may be used from any thread. */

typedef struct jitunwind_usdt_provider jitunwind_usdt_provider;
typedef struct jitunwind_usdt_probe jitunwind_usdt_probe;

/* Same values as jitunwind::usdt::arg_type. F64 is rejected with JITUNWIND_E_UNSUPPORTED. */
typedef enum jitunwind_usdt_arg_type {
  JITUNWIND_USDT_I8 = 0,
  JITUNWIND_USDT_U8 = 1,
  JITUNWIND_USDT_I16 = 2,
  JITUNWIND_USDT_U16 = 3,
  JITUNWIND_USDT_I32 = 4,
  JITUNWIND_USDT_U32 = 5,
  JITUNWIND_USDT_I64 = 6,
  JITUNWIND_USDT_U64 = 7,
  JITUNWIND_USDT_PTR = 8,
  JITUNWIND_USDT_STR = 9,
  JITUNWIND_USDT_F64 = 10
} jitunwind_usdt_arg_type;

typedef enum jitunwind_usdt_location {
  JITUNWIND_USDT_MEMFD = 0, /* default: memfd kept open while loaded, /proc/PID/fd/N */
  JITUNWIND_USDT_FILE = 1   /* file in the private runtime directory */
} jitunwind_usdt_location;

typedef struct jitunwind_usdt_provider_options {
  uint32_t struct_size; /* sizeof(jitunwind_usdt_provider_options), set by _init */
  jitunwind_usdt_location location;
  /* FILE only; NULL or "" = $XDG_RUNTIME_DIR/jitunwind or /tmp/jitunwind-UID */
  const char* directory;
  /* Receives notes about stale files removed and fallbacks taken (NULL = none); level 0 debug
     .. 3 error, notes below log_min_level are not delivered. */
  jitunwind_log_fn log;
  void* log_user;
  int log_min_level;
  uint32_t reserved; /* 0 (keeps the struct free of padding) */
} jitunwind_usdt_provider_options;

/* The defaults: JITUNWIND_USDT_MEMFD, directory NULL, no log sink, log level 1 (info). */
JITUNWIND_API void jitunwind_usdt_provider_options_init(jitunwind_usdt_provider_options* options);

/* Creates a provider (nothing is written before _load). options may be NULL (memfd). */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_create(
    const char* name, const jitunwind_usdt_provider_options* options,
    jitunwind_usdt_provider** out, jitunwind_error* error);
/* Unloads (if loaded) and frees the provider. Probe handles stay valid and become inert. */
JITUNWIND_API void jitunwind_usdt_provider_destroy(jitunwind_usdt_provider* provider);

/* Declares a probe with `count` (<= 12) argument types and returns a new handle in *out
 * (may be NULL if not wanted), freed by jitunwind_usdt_probe_destroy; inert until _load. */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_add_probe(
    jitunwind_usdt_provider* provider, const char* name, const jitunwind_usdt_arg_type* types,
    size_t count, jitunwind_usdt_probe** out, jitunwind_error* error);
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_remove_probe(
    jitunwind_usdt_provider* provider, const char* name, jitunwind_error* error);
/* A new handle for a declared probe (JITUNWIND_E_NOT_FOUND otherwise). */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_find_probe(
    const jitunwind_usdt_provider* provider, const char* name, jitunwind_usdt_probe** out,
    jitunwind_error* error);

/* Generates, places and maps the object (not through dlopen: see jitunwind/usdt.h); binds
 * every handle. */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_load(jitunwind_usdt_provider* provider,
                                                            jitunwind_error* error);
/* Handles become inert, the object's pages are replaced by inert ones (zero semaphores, `ret`
 * stubs) and its file removed. Other threads may be inside _enabled/_fire meanwhile (they fire
 * the old probe or return); not across an _unload and the next _load. */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_unload(jitunwind_usdt_provider* provider,
                                                              jitunwind_error* error);
/* Path tracers use (/proc/PID/fd/N or the file); "" when not loaded. Owned by the provider,
 * valid until its next _load/_unload/_destroy. */
JITUNWIND_API const char* jitunwind_usdt_provider_object_path(
    const jitunwind_usdt_provider* provider);

JITUNWIND_API void jitunwind_usdt_probe_destroy(jitunwind_usdt_probe* probe);
/* 1 while a tracer is attached, else 0. Thread-safe. */
JITUNWIND_API int jitunwind_usdt_probe_enabled(const jitunwind_usdt_probe* probe);
/* Fires with `count` values (the declared number; otherwise nothing happens). Signed values
 * are passed sign-extended (a negative int converts to uint64_t that way), pointers as
 * (uint64_t)(uintptr_t)p, strings as pointers. No-op when not loaded. Thread-safe. */
JITUNWIND_API void jitunwind_usdt_probe_fire(const jitunwind_usdt_probe* probe,
                                             const uint64_t* args, size_t count);
/* The semaphore itself, for a check without a call: `if (*sem) fire(...)`. Fixed from
 * _add_probe on and readable (0 while not loaded) for as long as a handle of the probe exists,
 * across unloads and reloads. NULL only for a NULL probe. */
JITUNWIND_API const volatile uint16_t* jitunwind_usdt_probe_semaphore(
    const jitunwind_usdt_probe* probe);

/* Fires a probe with one or more integer/pointer arguments (C99 and C++: a variadic macro, so
 * it is not defined for C89, which has none; C89 code calls jitunwind_usdt_probe_fire):
 *   JITUNWIND_USDT_FIRE(p, fn_id, (uint64_t)(uintptr_t)name); */
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L)
#define JITUNWIND_USDT_FIRE(probe, ...)                                        \
  do {                                                                         \
    const uint64_t jitunwind_usdt_args_[] = {__VA_ARGS__};                     \
    jitunwind_usdt_probe_fire((probe), jitunwind_usdt_args_,                   \
                              sizeof jitunwind_usdt_args_ / sizeof(uint64_t)); \
  } while (0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_C_USDT_H */
