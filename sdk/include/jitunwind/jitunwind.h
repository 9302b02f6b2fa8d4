/* jitunwind/jitunwind.h — the whole C API of the jitunwind SDK, for runtimes and tools not
 * written in C++. It includes the C headers, split by audience:
 *
 * - jitunwind/c/embed.h: what a runtime embeds (errors, versions, frame rows, the on-ramp,
 *   sessions, windows, publishers);
 * - jitunwind/c/tooling.h: the SFrame codec and unwinder, the remote registry reader;
 * - jitunwind/c/usdt.h, jitunwind/c/trampolines.h: the optional parts.
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
 * - Options structs start with `uint32_t struct_size`: fill one with its `_init` function
 *   (which sets struct_size and the documented defaults), then change what you need. NULL
 *   means the defaults; a struct whose struct_size is 0 (zeroed, never initialised) is refused
 *   with JITUNWIND_E_INVALID_ARGUMENT naming the `_init` function. A library newer than the
 *   caller gives the fields the caller's struct_size does not cover their defaults
 *   (docs/c-api.md, "Options structs").
 */
#ifndef JITUNWIND_JITUNWIND_H
#define JITUNWIND_JITUNWIND_H

#include <jitunwind/c/embed.h>
#include <jitunwind/c/tooling.h>
#include <jitunwind/c/trampolines.h>
#include <jitunwind/c/usdt.h>

#endif /* JITUNWIND_JITUNWIND_H */
