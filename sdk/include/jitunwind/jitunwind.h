/* jitunwind/jitunwind.h — the C API of the jitunwind SDK, for runtimes not written in C++.
 *
 * Conventions (every function below follows them):
 * - Objects are opaque handles made by `jitunwind_<thing>_create` and released by
 *   `jitunwind_<thing>_destroy` (which accepts NULL). A handle is used by one thread at a time
 *   unless its section says otherwise.
 * - Fallible functions return a `jitunwind_status` (0 = success, otherwise the negated C++
 *   `errc`) and take an optional `jitunwind_error*` that receives the message. Nothing throws,
 *   nothing prints.
 * - Callbacks receive the `void* user` they were registered with.
 * - Memory returned to the caller says in its comment who frees it and how.
 */
#ifndef JITUNWIND_JITUNWIND_H
#define JITUNWIND_JITUNWIND_H

#include <jitunwind/config.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== common ============================================================================== */

typedef enum jitunwind_status {
  JITUNWIND_OK = 0,
  JITUNWIND_E_INVALID_ARGUMENT = -1,
  JITUNWIND_E_MALFORMED = -2,
  JITUNWIND_E_OUT_OF_RANGE = -3,
  JITUNWIND_E_UNSUPPORTED = -4,
  JITUNWIND_E_IO = -5,
  JITUNWIND_E_PERMISSION_DENIED = -6,
  JITUNWIND_E_NOT_FOUND = -7,
  JITUNWIND_E_ALREADY_EXISTS = -8,
  JITUNWIND_E_BAD_STATE = -9,
  JITUNWIND_E_NO_MEMORY = -10,
  JITUNWIND_E_LIMIT_EXCEEDED = -11
} jitunwind_status;

/* Receives the message of a failed call (always NUL-terminated, truncated if longer). */
typedef struct jitunwind_error {
  jitunwind_status status;
  char message[512];
} jitunwind_error;

/* Stable name of a status ("ok", "invalid_argument", ...). */
JITUNWIND_API const char* jitunwind_status_string(jitunwind_status status);

/* ==== frame (jitunwind/frame.h) =========================================================== */


/* ==== sframe (jitunwind/sframe.h) ========================================================= */


/* ==== cfi (jitunwind/cfi.h) =============================================================== */


/* ==== session, windows and publishers (jitunwind/window.h) ================================ */


/* ==== remote registry reader (jitunwind/remote.h) ========================================= */

/* A window found in another process's registry (see jitunwind/remote.h, docs/registry-abi.md). */
typedef enum jitunwind_remote_window_state {
  JITUNWIND_REMOTE_WINDOW_LIVE = 1,   /* its code may run: use its SFrame */
  JITUNWIND_REMOTE_WINDOW_RETIRED = 2 /* grace period: frames may still be on stacks */
} jitunwind_remote_window_state;

typedef struct jitunwind_remote_window {
  uint64_t window_id;
  uint64_t generation;       /* unique per published contents of the window */
  uint32_t state;            /* jitunwind_remote_window_state */
  uint32_t abi;              /* SFrame ABI id: 1 AArch64 BE, 2 AArch64 LE, 3 AMD64 */
  uint64_t text_start;
  uint64_t text_size;
  uint64_t sframe_address;   /* 0 if the window has no SFrame yet */
  uint64_t sframe_size;
  uint64_t registry_address; /* the `jitunwind_registry` object it was read from */
  uint64_t entry_address;    /* its entry, and the entry's sequence value when copied: */
  uint64_t sequence;         /*   jitunwind_remote_read_sframe re-checks them */
  uint32_t slot;
  uint32_t reserved;
} jitunwind_remote_window;

/* Reads the live and retired windows of every jitunwind registry in process `pid` (consistent
   copies, read with process_vm_readv without stopping it). On success `*windows` is a malloc'd
   array of `*count` entries (NULL if none) that the caller frees with jitunwind_remote_free.
   Thread-safe. Errors: NOT_FOUND (no such process, no registry in it), PERMISSION_DENIED,
   UNSUPPORTED (other registry version), MALFORMED, BAD_STATE (entries kept changing). */
JITUNWIND_API jitunwind_status jitunwind_remote_read_registry(int pid,
                                                             jitunwind_remote_window** windows,
                                                             size_t* count,
                                                             jitunwind_error* error);

/* Copies a window's SFrame section out of process `pid` into a malloc'd buffer (`*bytes`,
   `*size`; free with jitunwind_remote_free), then fails with BAD_STATE if the window changed
   meanwhile (read the registry again). Thread-safe. */
JITUNWIND_API jitunwind_status jitunwind_remote_read_sframe(int pid,
                                                           const jitunwind_remote_window* window,
                                                           uint8_t** bytes, size_t* size,
                                                           jitunwind_error* error);

/* Frees memory returned by the jitunwind_remote_* functions. NULL is allowed. */
JITUNWIND_API void jitunwind_remote_free(void* memory);



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
  jitunwind_usdt_location location;
  const char* directory; /* FILE only, NULL = $XDG_RUNTIME_DIR/jitunwind or /tmp/jitunwind-UID */
} jitunwind_usdt_provider_options;

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

/* Generates, places and dlopens the object; binds every handle. */
JITUNWIND_API jitunwind_status jitunwind_usdt_provider_load(jitunwind_usdt_provider* provider,
                                                            jitunwind_error* error);
/* Handles become inert, the object is dlclosed and its file removed. No other thread may be
 * inside _enabled/_fire of this provider's probes meanwhile. */
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
/* The semaphore itself, for a check without a call: `if (*sem) fire(...)`. NULL when not
 * loaded; valid only until the provider's next _unload. */
JITUNWIND_API const volatile uint16_t* jitunwind_usdt_probe_semaphore(
    const jitunwind_usdt_probe* probe);

/* Fires a probe with one or more integer/pointer arguments:
 *   JITUNWIND_USDT_FIRE(p, fn_id, (uint64_t)(uintptr_t)name); */
#define JITUNWIND_USDT_FIRE(probe, ...)                                        \
  do {                                                                         \
    const uint64_t jitunwind_usdt_args_[] = {__VA_ARGS__};                     \
    jitunwind_usdt_probe_fire((probe), jitunwind_usdt_args_,                   \
                              sizeof jitunwind_usdt_args_ / sizeof(uint64_t)); \
  } while (0)


/* ==== trampolines (jitunwind/trampolines.h) =============================================== */


#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_JITUNWIND_H */
