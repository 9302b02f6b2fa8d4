/* For the C tests of the C API (C11): EXPECT(cond, format, ...) writes the message into
   `msg` (of `len` bytes) and jumps to the function's `out:` label when `cond` is false. */
#ifndef JITUNWIND_TESTS_CAPI_EXPECT_C_H
#define JITUNWIND_TESTS_CAPI_EXPECT_C_H

#include <stdio.h>

#define EXPECT(cond, ...)              \
  do {                                 \
    if (!(cond)) {                     \
      snprintf(msg, len, __VA_ARGS__); \
      goto out;                        \
    }                                  \
  } while (0)

#endif
