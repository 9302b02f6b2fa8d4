/* jitunwind/config.h — export macro and version of the jitunwind SDK.
   Safe to include from C and C++ (C89 and later, C++17 and later). */
#ifndef JITUNWIND_CONFIG_H
#define JITUNWIND_CONFIG_H

/* The release the headers belong to (semantic versioning; docs/c-api.md, "Versions"). The
   top-level CMakeLists.txt must say the same (sdk/CMakeLists.txt checks). */
#define JITUNWIND_VERSION_MAJOR 0
#define JITUNWIND_VERSION_MINOR 2
#define JITUNWIND_VERSION_PATCH 0
/* One comparable number: MAJOR * 10000 + MINOR * 100 + PATCH (0.2.0 -> 200). Compare it with
   jitunwind_version(), the number of the library actually loaded. */
#define JITUNWIND_VERSION \
  (JITUNWIND_VERSION_MAJOR * 10000 + JITUNWIND_VERSION_MINOR * 100 + JITUNWIND_VERSION_PATCH)
#define JITUNWIND_VERSION_STRING "0.2.0"

/* The C ABI generation: the N of the shared library's SONAME libjitunwind.so.N. It changes
   only when the C ABI breaks (a symbol removed or changed, a struct layout changed); growing
   the C API keeps it (new symbols get a new symbol version). docs/c-api.md, "ABI". */
#define JITUNWIND_SOVERSION 1

/* The library is built with -fvisibility=hidden; only declarations marked JITUNWIND_API are
   exported from libjitunwind.so. */
#if defined(JITUNWIND_BUILDING)
#define JITUNWIND_API __attribute__((visibility("default")))
#else
#define JITUNWIND_API
#endif

/* Marks C functions kept under an old name for callers of an earlier release. */
#if defined(__GNUC__) || defined(__clang__)
#define JITUNWIND_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define JITUNWIND_DEPRECATED(msg)
#endif

#endif
