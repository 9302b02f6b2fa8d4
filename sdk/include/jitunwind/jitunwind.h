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


/* ==== dynamic USDT (jitunwind/usdt.h) ===================================================== */


/* ==== trampolines (jitunwind/trampolines.h) =============================================== */


#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_JITUNWIND_H */
