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


/* ==== trampolines (jitunwind/trampolines.h) =============================================== */


#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_JITUNWIND_H */
