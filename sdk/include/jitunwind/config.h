/// jitunwind/config.h — export macro and version of the jitunwind SDK.
/// Safe to include from C and C++.
#ifndef JITUNWIND_CONFIG_H
#define JITUNWIND_CONFIG_H

#define JITUNWIND_VERSION_MAJOR 0
#define JITUNWIND_VERSION_MINOR 1
#define JITUNWIND_VERSION_PATCH 0

/* The library is built with -fvisibility=hidden; only declarations marked JITUNWIND_API are
   exported from libjitunwind.so. */
#if defined(JITUNWIND_BUILDING)
#define JITUNWIND_API __attribute__((visibility("default")))
#else
#define JITUNWIND_API
#endif

#endif
